"""Work leaves the engine in a steady stream, not a whole group at the end of one packed run.

A batch (and a book, which runs on it) admits its lines staggered (waves.Stagger), so they finish
one by one: a stop halfway keeps the lines already finished, and the rerun speaks only the rest.
The service admits a request's pieces after the first staggered too, so a long reply's sentences
leave one by one. Each line's or piece's tokens are those of a run without staggering.
"""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pytest
from conftest import AGENT_REPLY, TINY_CKPT
from helpers.service import Forwards

from omnivoice_cli.app.batch.manifest import MANIFEST
from omnivoice_cli.engine.model.admission import Stagger

slow = pytest.mark.slow


def _sim(n_jobs: int, steps: int, stagger: Stagger) -> list[int]:
    """The forward at which each job leaves, admitted as run_jobs admits them (a model of it)."""
    waiting = [SimpleNamespace(schedule=[1] * steps, step=0, k=k) for k in range(n_jobs)]
    active: list = []
    left = [0] * n_jobs
    forward = 0
    while waiting or active:
        while waiting and (not active or stagger(active, waiting[0])):
            active.append(waiting.pop(0))
        forward += 1
        for job in active:
            job.step += 1
        for job in [j for j in active if j.step >= steps]:
            active.remove(job)
            left[job.k] = forward
    return left


def test_a_stagger_lets_jobs_leave_one_by_one():
    stagger = Stagger.steady(24, max_batch_size=16)
    assert stagger.cap == 5  # a fifth of the run in flight
    left = _sim(24, 16, stagger)
    assert left == sorted(left) and len(set(left)) == 24  # in order, never two in one forward
    assert max(b - a for a, b in zip(left, left[1:])) <= stagger.gap(SimpleNamespace(schedule=[1] * 16))
    assert Stagger.steady(3, 16).cap == 1 and Stagger.steady(1000, 16).cap == 16


def test_generate_steady_gives_the_same_tokens_one_by_one(tiny_engine):
    """Engine.generate(steady=True): each request's tokens are those of the plain run, and the
    requests finish one at a time (each in a later forward than the one before)."""
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request

    gen = GenerationConfig(num_step=6)
    reqs = [Request(text=f"Line number {i} of a steady run.", seed=i, generation=gen) for i in range(8)]
    plain = tiny_engine.generate(reqs)
    finished: list[tuple[int, int]] = []  # (request, steps done then)
    steps = {"done": 0}

    def on_step(done, total):
        steps["done"] = done

    steady = tiny_engine.generate(
        reqs, on_step=on_step, on_result=lambda i, r: finished.append((i, steps["done"])), steady=True
    )
    for a, b in zip(plain, steady):
        assert a.tokens.equal(b.tokens)
    marks = [done for _, done in finished]
    assert len(set(marks)) == len(reqs), finished  # never two in one forward


@slow
def test_a_batch_stopped_halfway_keeps_its_finished_lines(invoke, loaded, tiny_engine, tmp_path, home, monkeypatch):
    """24 lines, Ctrl-C once half of the run's steps are done: at least 40% of the lines are
    written and recorded as done; the rerun speaks only the others."""
    lines = [f"This is line number {i} of a long first batch." for i in range(24)]
    src = tmp_path / "lines.txt"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    real = tiny_engine.generate
    spoken: list[int] = []
    stop = {"armed": True}

    def generate(requests, on_step=None, on_result=None, **kw):
        def step(done, total):
            if stop["armed"] and 2 * done >= total:
                stop["armed"] = False
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, halfway through the run's steps
            if on_step:
                on_step(done, total)

        spoken.append(len(requests))
        return real(requests, on_step=step, on_result=on_result, **kw)

    monkeypatch.setattr(tiny_engine, "generate", generate)
    args = ["batch", src, "-o", out, "--model", TINY_CKPT, "--num-step", "8", "--seed", "1", "-q"]
    r = invoke(*args)
    assert r.exit_code == 130, r.stderr
    written = sorted(p.name for p in out.glob("*.wav"))
    records = [json.loads(x) for x in (out / MANIFEST).read_text().splitlines()]
    done = sorted(rec["output"] for rec in records if rec["status"] == "done")
    assert done == written and len(written) >= 0.4 * len(lines), (len(written), r.stderr)

    stop["armed"] = False
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    assert spoken == [24, 24 - len(written)]  # the rerun spoke only the rest
    assert len(list(out.glob("*.wav"))) == 24


REPLY = " ".join(
    f"Sentence number {word} of the agent's reply is here."
    for word in ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
)


@slow
@pytest.mark.parametrize("with_ref", [False, True], ids=["auto", "ref"])
def test_a_long_reply_leaves_the_service_piece_by_piece(tiny_engine, ref_voice, with_ref):
    """A 12-sentence reply (as /tts/ws, Wyoming and the SSE reply submit it): its pieces are
    handed out in order, each in a forward of its own, never a wave of them together at the end;
    the audio is that of the streamed render."""
    import queue

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.service import Service
    from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request

    config = StreamConfig(first_seconds=1.0, piece_seconds=1.0)  # a piece a sentence
    req = Request(text=REPLY, seed=3, generation=GenerationConfig(num_step=8), ref=ref_voice if with_ref else None)
    log: list[tuple[str, int]] = []  # ("forward", forwards so far) and ("piece", index), in the loop's order
    done: queue.Queue = queue.Queue()
    service = Service(tiny_engine, config=config)
    service.observe(Forwards(lambda slots: log.append(("forward", service.forwards))))

    def on_event(event):
        if event.kind == "piece":
            log.append(("piece", event.piece.index))
        else:
            done.put(event)

    service.start()
    try:
        service.submit(req, on_event)
        assert done.get(timeout=300).kind == "done"
    finally:
        service.stop()
    pieces = [i for kind, i in log if kind == "piece"]
    assert pieces == list(range(len(pieces))) and len(pieces) >= 10  # all, in order
    at = [sum(kind == "forward" for kind, _ in log[: log.index(("piece", i))]) for i in pieces]
    assert len(set(at)) == len(at), at  # each piece left in a forward of its own
    assert len(cut_request(req, config)) == len(pieces)  # as the streamed render cuts it


@slow
def test_say_stream_hands_a_wave_out_piece_by_piece(tiny_engine):
    """The streamed render (say --stream) cuts a reply a sentence a piece by default and, on a fast
    device, puts every piece after the first in one wave: its pieces are staggered in, so they
    are handed out one by one, in order, each in a forward of its own (not the whole wave at its
    end)."""
    import itertools

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.stream.render import stream

    log: list[tuple[str, int]] = []
    texts: list[str] = []
    counter = itertools.count()
    summary = stream(
        tiny_engine,
        Request(text=REPLY, seed=3, generation=GenerationConfig(num_step=8)),
        lambda piece: (log.append(("piece", piece.index)), texts.append(piece.text)),
        on_step=lambda done, planned: log.append(("forward", done)),
        clock=lambda: next(counter) * 1e-6,  # a device far faster than real time
    )
    assert summary.kept_up and summary.waves == [summary.pieces - 1] and summary.pieces >= 10
    assert [t.strip() for t in texts] == sentences(REPLY)  # the default cut: a sentence a piece
    pieces = [i for kind, i in log if kind == "piece"]
    assert pieces == list(range(summary.pieces))
    at = [sum(kind == "forward" for kind, _ in log[: log.index(("piece", i))]) for i in pieces]
    assert len(set(at)) == len(at), at  # each piece left in a forward of its own


def sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


THIRTEEN = AGENT_REPLY  # an agent's reply, sentences of 2-4 s


def test_the_later_pieces_of_a_reply_are_a_sentence_each():
    """The default cut (say --stream, the service): the first piece short, every later one a
    sentence (short ones joined up to piece_seconds), a later sentence over that kept whole up to
    sentence_seconds, beyond it cut at clauses; the same text always cut the same way."""
    from omnivoice_cli.engine.stream.cut import StreamConfig, cut_segments, estimated_seconds

    config = StreamConfig()
    cut = [
        s.text.strip()
        for s in cut_segments(
            THIRTEEN, config.first_seconds, config.piece_seconds, sentence_seconds=config.sentence_seconds
        )
    ]
    assert cut == sentences(THIRTEEN)
    short = "Yes. I can. " + THIRTEEN
    assert [s.text for s in cut_segments(short, 4.0, 4.0, sentence_seconds=10.0)][1].strip() == sentences(THIRTEEN)[0]
    joined = cut_segments("One sentence here. Yes. No. Maybe so.", 1.0, 4.0, sentence_seconds=10.0)
    assert [s.text.strip() for s in joined] == ["One sentence here.", "Yes. No. Maybe so."]  # short ones joined
    long = "It was raining so hard that the streets turned into small rivers within minutes, and nobody dared to leave."
    assert 4.0 < estimated_seconds(long) < 10.0
    assert [s.text.strip() for s in cut_segments("Hello there. " + long, 1.0, 4.0, sentence_seconds=10.0)] == [
        "Hello there.",
        long,
    ]  # a later sentence over piece_seconds: whole
    longer = " ".join([long[:-1] + ","] * 3)
    pieces = cut_segments("Hello there. " + longer, 1.0, 4.0, sentence_seconds=10.0)[1:]
    assert len(pieces) > 1 and all(estimated_seconds(p.text or "") <= 10.0 for p in pieces)  # its clauses


def test_the_server_keeps_a_short_text_whole_and_cuts_a_long_one_by_sentence():
    """The server's cut: a text up to its piece_seconds (10 s) is one piece (what `say` makes of
    it); a longer one's later pieces a sentence each; a continued request (a socket's or
    Wyoming's next part) a sentence a piece from its first."""
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.stream.cut import cut_request, estimated_seconds
    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.speech import serve_speaker_options

    config = serve_speaker_options(ServeOptions()).stream_config()
    two = " ".join(sentences(THIRTEEN)[:2])
    assert estimated_seconds(two) < 10.0
    gen = GenerationConfig(num_step=8)
    assert len(cut_request(Request(text=two, generation=gen), config)) == 1
    cut = [s.text.strip() for s in cut_request(Request(text=THIRTEEN, generation=gen), config)]
    assert len(sentences(cut[0])) >= 2 and cut[1:] == sentences(THIRTEEN)[len(sentences(cut[0])) :]
    continued = [s.text.strip() for s in cut_request(Request(text=THIRTEEN, generation=gen), config, continued=True)]
    assert continued == sentences(THIRTEEN)


@slow
def test_a_socket_reply_leaves_the_service_sentence_by_sentence(tiny_engine):
    """The 13-sentence reply as /tts/ws hands it to the engine (its first sentence alone, then the
    rest as one request in its voice, continued) on the server's cut: every sentence is a piece of
    its own, handed out in order, each in a forward of its own."""
    import queue

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.service import Service
    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.speech import serve_speaker_options

    first, rest = sentences(THIRTEEN)[0], " ".join(sentences(THIRTEEN)[1:])
    gen = GenerationConfig(num_step=8)
    log: list[tuple[str, object]] = []  # ("forward", n) and ("piece", text), in the loop's order
    service = Service(tiny_engine, config=serve_speaker_options(ServeOptions()).stream_config())
    service.observe(Forwards(lambda slots: log.append(("forward", service.forwards))))
    service.start()
    try:
        voice = None
        for k, text in enumerate([first, rest]):
            done: queue.Queue = queue.Queue()

            def on_event(event, done=done):
                if event.kind == "piece":
                    log.append(("piece", event.piece.text.strip()))
                else:
                    done.put(event)

            req = Request(text=text, seed=3 + k, generation=gen, ref=voice)
            ticket = service.submit(req, on_event, continued=k > 0)
            assert done.get(timeout=300).kind == "done"
            voice = voice or ticket.voice
    finally:
        service.stop()
    spoken = [text for kind, text in log if kind == "piece"]
    assert spoken == sentences(THIRTEEN)  # a sentence a piece, in order
    at = [sum(kind == "forward" for kind, _ in log[: log.index(("piece", t))]) for t in spoken]
    assert len(set(at)) == len(at), at  # each sentence left in a forward of its own
