"""The engine's three drivers (Engine.generate, the streamed render, the service) give the audio
the docs promise for the same text, seed and settings, by the one piece policy (engine/pieces.py).

They cut a text differently by design (Engine.generate in chunks like the reference; the streamed
render and the service at pauses and sentences), so what is promised is:
- a text of one piece: the same samples from all three (docs/say.md "Hear it now", docs/server.md);
- a text of many pieces: the streamed render and the service hand out the same pieces (text,
  start, seed, samples), and each spoken piece k is exactly Engine.generate on its text, in its
  voice (the reference, or without one piece 0's codes and text), with seed + k.
"""

from __future__ import annotations

import queue

import numpy as np
import pytest

from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.pieces import Piece, RequestPieces
from omnivoice_cli.engine.planning import Request
from omnivoice_cli.engine.service import Service
from omnivoice_cli.engine.sound.voice import VoicePrompt
from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request
from omnivoice_cli.engine.stream.run import StreamRun

G4 = GenerationConfig(num_step=4)
CFG = StreamConfig(first_seconds=1.5, piece_seconds=2.5, sentence_seconds=2.5)
ONE = "I can speak in the same voice."  # one piece under CFG
MANY = "Good morning. The train leaves at seven, so we have time. [pause 0.4s] She packed her bags. Nobody left."


@pytest.fixture(scope="module")
def service(engine):
    s = Service(engine, max_queue=8, config=CFG).start()
    yield s
    s.stop()


def served(service, req):
    """The service's pieces of one request, in the order handed out."""
    events: queue.Queue = queue.Queue()
    service.submit(req, events.put)
    pieces = []
    while True:
        event = events.get(timeout=120)
        if event.kind != "piece":
            assert event.kind == "done", event.error
            return pieces
        pieces.append(event.piece)


def streamed(engine, req):
    with StreamRun(engine, req, config=CFG) as run:
        return list(run)


def same(a, b) -> bool:
    return a.dtype == b.dtype == np.float32 and a.tobytes() == b.tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("with_ref", [False, True], ids=["auto", "ref"])
def test_a_text_of_one_piece_is_the_same_from_every_driver(engine, service, ref_voice, with_ref):
    req = Request(text=ONE, seed=11, generation=G4, ref=ref_voice if with_ref else None)
    assert len(cut_request(req, CFG)) == 1
    [generated] = engine.generate([req])
    [from_stream] = streamed(engine, req)
    [from_service] = served(service, req)
    assert same(from_stream.audio, generated.audio) and same(from_service.audio, generated.audio)
    assert from_stream.seed == from_service.seed == generated.seed == 11


@pytest.mark.slow
@pytest.mark.parametrize("with_ref", [False, True], ids=["auto", "ref"])
def test_a_text_of_many_pieces_streamed_and_served_alike_each_piece_as_generate(engine, service, ref_voice, with_ref):
    req = Request(text=MANY, seed=40, generation=G4, ref=ref_voice if with_ref else None)
    from_stream, from_service = streamed(engine, req), served(service, req)
    assert len(from_stream) == len(from_service) == len(cut_request(req, CFG)) == 5
    for a, b in zip(from_stream, from_service):
        assert (a.index, a.text, a.start, a.seed) == (b.index, b.text, b.start, b.seed)
        assert same(a.audio, b.audio)
    spoken = [p for p in from_stream if p.seed is not None]
    assert [p.seed for p in spoken] == [40 + k for k in range(4)]
    pause = next(p for p in from_stream if p.seed is None)
    assert len(pause.audio) == round(0.4 * engine.sample_rate) and not pause.audio.any()

    [first] = engine.generate([Request(text=spoken[0].text, seed=40, generation=G4, ref=req.ref)])
    assert same(spoken[0].audio, first.audio)
    voice = req.ref or VoicePrompt(first.tokens, spoken[0].text.strip(), None)  # piece 0 speaks for the rest
    later = engine.generate([Request(text=p.text, seed=p.seed, generation=G4, ref=voice) for p in spoken[1:]])
    for piece, alone in zip(spoken[1:], later):
        assert same(piece.audio, alone.audio), piece.text
    if not with_ref:  # piece 0's voice is what makes the others: another voice gives other audio
        other = engine.generate([Request(text=spoken[1].text, seed=41, generation=G4)])[0]
        assert not same(spoken[1].audio, other.audio)


# --- the policy alone ------------------------------------------------------------------------------


def policy(n: int, ref=None) -> tuple[RequestPieces, list]:
    made = []

    class Kept(RequestPieces):
        def accept(self, k, job):
            made.append(("accept", k))

    pieces = [Piece(0, k, f"piece {k}.", None) for k in range(n)]
    return Kept(
        pieces,
        ref=ref,
        seed=100,
        voice_text="piece 0.",
        prepare=lambda piece, voice, seed: made.append((piece.chunk, voice, seed)) or object(),
    ), made


class _Job:
    tokens = "codes of piece 0"


def test_the_policy_without_a_reference_piece_0_voices_the_rest():
    pieces, made = policy(3)
    assert pieces.first() == [0] and pieces.waiting() == 2 and not pieces.ready(1)
    with pytest.raises(RuntimeError, match="waits for piece 0"):
        pieces.job(1)
    pieces.job(0)
    assert made == [(0, None, 100)]
    assert pieces.done(0, _Job()) == [1, 2] and pieces.waiting() == 0 and ("accept", 0) in made
    pieces.job(2)
    voice = made[-1][1]
    assert made[-1][::2] == (2, 102) and (voice.codes, voice.text) == ("codes of piece 0", "piece 0.")
    assert pieces.done(2, _Job()) == [] and not pieces.complete


def test_the_policy_with_a_reference_or_one_piece_runs_all_at_once():
    ref = object()
    pieces, made = policy(3, ref=ref)
    assert pieces.first() == [0, 1, 2] and pieces.waiting() == 0 and pieces.unlocks(0) == []
    for k in pieces.first():
        pieces.job(k)
    assert made == [(0, ref, 100), (1, ref, 101), (2, ref, 102)]
    single, _ = policy(1)
    assert single.first() == [0] and single.unlocks(0) == [] and single.waiting() == 0
