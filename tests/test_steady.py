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
from conftest import TINY_CKPT

from omnivoice_cli.app.manifest import MANIFEST
from omnivoice_cli.engine.stream.waves import Stagger

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
    from omnivoice_cli.engine.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Request

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

    from omnivoice_cli.engine.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Request
    from omnivoice_cli.engine.service import Service
    from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request

    config = StreamConfig(first_seconds=1.0, piece_seconds=1.0)  # a piece a sentence
    req = Request(text=REPLY, seed=3, generation=GenerationConfig(num_step=8), ref=ref_voice if with_ref else None)
    log: list[tuple[str, int]] = []  # ("forward", forwards so far) and ("piece", index), in the loop's order
    done: queue.Queue = queue.Queue()
    service = Service(tiny_engine, config=config)
    service.on_forward = lambda slots: log.append(("forward", service.forwards))

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
    """The streamed render (say --stream) on a fast device puts every piece after the first in
    one wave: its pieces are staggered in, so they are handed out one by one, in order, each in
    a forward of its own (not the whole wave at its end)."""
    import itertools

    from omnivoice_cli.engine.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Request
    from omnivoice_cli.engine.stream.cut import StreamConfig
    from omnivoice_cli.engine.stream.render import stream

    log: list[tuple[str, int]] = []
    counter = itertools.count()
    summary = stream(
        tiny_engine,
        Request(text=REPLY, seed=3, generation=GenerationConfig(num_step=8)),
        lambda piece: log.append(("piece", piece.index)),
        on_step=lambda done, planned: log.append(("forward", done)),
        clock=lambda: next(counter) * 1e-6,  # a device far faster than real time
        config=StreamConfig(first_seconds=1.0, piece_seconds=1.0),
    )
    assert summary.kept_up and summary.waves == [summary.pieces - 1] and summary.pieces >= 10
    pieces = [i for kind, i in log if kind == "piece"]
    assert pieces == list(range(summary.pieces))
    at = [sum(kind == "forward" for kind, _ in log[: log.index(("piece", i))]) for i in pieces]
    assert len(set(at)) == len(at), at  # each piece left in a forward of its own
