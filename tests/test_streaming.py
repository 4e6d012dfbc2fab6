"""Streamed rendering (engine/stream/): cutting, wave sizing, and the render on the tiny checkpoint."""

import itertools
import threading

import numpy as np
import pytest
import torch

from omnivoice_cli.engine.cancel import Cancelled
from omnivoice_cli.engine.model import generation
from omnivoice_cli.engine.model.admission import forward_model
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request
from omnivoice_cli.engine.sound.voice import VoicePrompt
from omnivoice_cli.engine.stream.cut import (
    Segment,
    StreamConfig,
    cut_segments,
    estimated_seconds,
    group_units,
    text_units,
)
from omnivoice_cli.engine.stream.render import stream
from omnivoice_cli.engine.stream.run import StreamRun
from omnivoice_cli.engine.stream.waves import WavePlanner

G4 = GenerationConfig(num_step=4)
GREEDY4 = GenerationConfig(num_step=4, position_temperature=0.0, class_temperature=0.0)
LONG = (
    "Good morning. The train to the city leaves at seven in the evening, so there is time for tea. "
    "[pause 0.4s] She packed her bags. She checked the tickets twice, and then she called a taxi. "
    "It was raining. Nobody dared to leave the cafe."
)
TEXT = "Good morning. The train leaves at seven, so we have time. [pause 0.4s] She packed her bags. Nobody left."
CFG = StreamConfig(
    first_seconds=1.5, piece_seconds=2.5, sentence_seconds=2.5
)  # TEXT in four short pieces (decoding is what costs)


# --- cutting ------------------------------------------------------------------------------------


def spoken(segments):
    return [s.text for s in segments if s.text is not None]


def test_units_cover_the_text_and_mark_sentence_ends():
    part = 'He said "stop." Then, slowly, Mr. Smith left; nobody followed!  End'
    spans = text_units(part)
    assert [part[s:e] for s, e, _ in spans] == [
        'He said "stop."',
        "Then,",
        "slowly,",
        "Mr. Smith left;",
        "nobody followed!",
        "End",
    ]
    assert [end for _, _, end in spans] == [True, False, False, False, True, False]


def test_first_piece_is_one_sentence_and_pauses_are_exact():
    segs = cut_segments(LONG, first_seconds=4.0, piece_seconds=10.0)
    texts = spoken(segs)
    assert texts[0] == "Good morning. "  # the first piece: the first sentence alone (the next one would pass 4 s)
    assert "".join(s.text or "[pause 0.4s]" for s in segs) == LONG  # the pieces are the text, cut
    assert [s.pause for s in segs if s.text is None] == [0.4]
    for t in texts[1:]:
        assert estimated_seconds(t) <= 10.0 or len(text_units(t)) == 1


def test_short_sentences_join_the_first_piece():
    segs = cut_segments("Hi. Yes. The rest of this text is a much longer sentence that goes on.", 2.0, 10.0)
    assert spoken(segs)[0] == "Hi. Yes. "


def test_a_long_first_sentence_gives_a_clause():
    text = (
        "When the old clockmaker opened the shutters of his tiny shop, the sun came in, and every clock began to shine."
    )
    segs = cut_segments(text, first_seconds=3.0, piece_seconds=10.0)
    assert spoken(segs) == [
        "When the old clockmaker opened the shutters of his tiny shop, ",
        "the sun came in, and every clock began to shine.",
    ]


def test_leading_and_trailing_pauses_and_whole():
    segs = cut_segments("[pause 0.25s]One. Two three four five six. [pause 1s]", 0.5, 10.0)
    assert segs[0] == Segment(None, 0.25) and segs[-1] == Segment(None, 1.0)
    assert spoken(segs) == ["One. ", "Two three four five six. "]
    assert spoken(cut_segments("One. Two. Three.", 0.1, 0.1, whole=True)) == ["One. Two. Three."]


@pytest.mark.parametrize(
    "seconds, ends, first, limit, sizes",
    [
        ([1, 1, 1, 1], [True, True, True, True], 1.5, 2.5, [1, 2, 1]),  # whole sentences up to each limit
        ([1, 1, 1, 1], [False, False, False, True], 2.5, 10, [2, 2]),  # one long sentence: clauses first
        ([5, 1], [True, True], 2, 2, [1, 1]),  # a unit over the limit still makes a piece
        ([1, 1, 1], [True, False, True], None, 10, [3]),
    ],
)
def test_group_units(seconds, ends, first, limit, sizes):
    assert group_units(seconds, ends, first, limit) == sizes


# --- wave sizing --------------------------------------------------------------------------------


def test_forward_model():
    f = forward_model([(100, 1.0)])
    assert f(300) == pytest.approx(3.0)  # one point: proportional
    f = forward_model([(100, 1.0), (300, 1.2)])
    assert f(500) == pytest.approx(1.4) and f(0) == pytest.approx(0.9)  # a line through both
    f = forward_model([(100, 1.0), (300, 0.5)])
    assert f(1000) == pytest.approx(0.75)  # never cheaper for more tokens: flat at the mean
    with pytest.raises(ValueError):
        forward_model([])


def planner(**kw):
    p = WavePlanner(num_step=8, max_batch_size=16, max_packed_tokens=24576, margin=0.8, **kw)
    p.measure_wave(100, 0.1)  # 1 ms per token per forward
    return p


def test_waves_fill_the_queued_audio():
    p = planner()
    lens, secs = [100] * 10, [5.0] * 10
    assert p.size(lens, secs, queued=10.0) == 10  # 8 * 1.0 s for all ten fits in 0.8 * 10 s
    assert p.size(lens, secs, queued=5.0) == 5  # 8 * 0.5 s = 4 s
    assert not p.behind


def test_waves_respect_the_packing_limits():
    p = planner()
    assert p.size([100] * 20, [5.0] * 20, queued=1e6) == 16  # max_batch_size
    p.max_packed_tokens = 350
    assert p.size([100] * 20, [5.0] * 20, queued=1e6) == 3


def test_slower_than_real_time_doubles_the_waves():
    p = planner()
    sizes = [p.size([1000] * 20, [1.0] * 20, queued=1.0) for _ in range(5)]  # 8 s per wave of one, 0.8 s allowed
    assert p.behind and sizes == [2, 4, 8, 16, 16]


# --- the render on the tiny checkpoint ----------------------------------------------------------


def fake_clock(dt):
    """A clock that advances dt seconds each time it is read: a device as fast or slow as wished."""
    counter = itertools.count()
    return lambda: next(counter) * dt


def record(engine, monkeypatch):
    """Events in order: ("job", k, seed, job) as each piece's job is made, ("step", k) when it
    first enters a forward, and the stream's ("piece", StreamPiece)."""
    events, jobs = [], {}
    real_prepare, real_advance = engine.prepare, generation.advance

    def prepare(req, piece=None, ref=None, seed=None):
        job = real_prepare(req, piece, ref=ref, seed=seed)
        events.append(("job", piece.chunk, seed, job))
        jobs[id(job)] = piece.chunk
        return job

    def advance(job, *args):
        if job.step == 0:
            events.append(("step", jobs[id(job)]))
        return real_advance(job, *args)

    monkeypatch.setattr(engine, "prepare", prepare)
    monkeypatch.setattr(generation, "advance", advance)
    return events


@pytest.mark.slow
@pytest.mark.parametrize("with_ref", [False, True], ids=["auto", "ref"])
def test_a_single_piece_renders_exactly_as_generate(engine, ref_voice, with_ref):
    req = Request(text="I can speak in the same voice.", seed=11, generation=G4, ref=ref_voice if with_ref else None)
    [plain] = engine.generate([req])
    pieces = []
    summary = stream(engine, req, pieces.append)
    assert len(pieces) == 1 and summary.pieces == 1 and summary.waves == []
    assert pieces[0].audio.dtype == np.float32
    assert pieces[0].audio.tobytes() == plain.audio.tobytes()  # byte for byte
    assert (pieces[0].index, pieces[0].start, pieces[0].seed) == (0, 0, 11)


@pytest.mark.slow
def test_pieces_come_in_order_with_their_starts(engine, monkeypatch):
    events = record(engine, monkeypatch)
    req = Request(text=TEXT, seed=5, generation=G4)
    summary = stream(engine, req, lambda p: events.append(("piece", p)), clock=fake_clock(1e-6), config=CFG)
    pieces = [e[1] for e in events if e[0] == "piece"]
    segs = cut_segments(TEXT, CFG.first_seconds, CFG.piece_seconds)
    assert len(segs) == 5
    assert [p.index for p in pieces] == list(range(len(segs)))
    assert [p.text for p in pieces] == [s.text or "" for s in segs]
    assert [p.start for p in pieces] == list(np.cumsum([0] + [len(p.audio) for p in pieces])[:-1])
    assert summary.samples == sum(len(p.audio) for p in pieces)
    pause = next(p for p in pieces if p.seed is None)
    assert len(pause.audio) == round(0.4 * engine.sample_rate) and not pause.audio.any()
    # a fast device: after piece 0, every other piece in one wave
    assert summary.kept_up and summary.waves == [summary.pieces - 1]


@pytest.mark.slow
def test_first_piece_is_out_before_the_last_piece_starts(engine, monkeypatch):
    events = record(engine, monkeypatch)
    summary = stream(
        engine, Request(text=TEXT, seed=5, generation=G4), lambda p: events.append(("piece", p)), config=CFG
    )
    last = summary.pieces - 1
    first_out = next(i for i, e in enumerate(events) if e[0] == "piece" and e[1].seed is not None)
    last_starts = events.index(("step", last))
    assert first_out < last_starts


@pytest.mark.slow
def test_seeds_and_voice_of_every_piece_without_a_reference(engine, monkeypatch):
    events = record(engine, monkeypatch)
    pieces = []
    stream(engine, Request(text=TEXT, seed=40, generation=G4), pieces.append, clock=fake_clock(1e-6), config=CFG)
    jobs = [e for e in events if e[0] == "job"]
    spoken_pieces = [p for p in pieces if p.seed is not None]
    assert [p.seed for p in spoken_pieces] == [40 + k for k in range(len(spoken_pieces))]
    made = {k: (seed, job) for _, k, seed, job in jobs}  # the last job made for each piece is the one run
    assert [made[k][0] for k in range(len(spoken_pieces))] == [40 + k for k in range(len(spoken_pieces))]
    tokens0 = made[0][1].tokens
    for k in range(1, len(spoken_pieces)):  # piece 0's codes are the reference of every later piece
        c = made[k][1].canvas
        assert torch.equal(c.input_ids[:, c.target_start - c.ref_len : c.target_start], tokens0)
    # and each later piece is rendered exactly as a whole request of its text in that voice
    voice = VoicePrompt(tokens0, spoken_pieces[0].text.strip(), None)
    k = 2
    [alone] = engine.generate([Request(text=spoken_pieces[k].text, seed=40 + k, generation=G4, ref=voice)])
    assert alone.audio.tobytes() == spoken_pieces[k].audio.tobytes()


@pytest.mark.slow
def test_with_a_reference_every_piece_uses_it(engine, ref_voice, monkeypatch):
    events = record(engine, monkeypatch)
    pieces = []
    req = Request(text=TEXT, seed=3, generation=G4, ref=ref_voice)
    stream(engine, req, pieces.append, clock=fake_clock(1e-6), config=CFG)
    spoken_pieces = [p for p in pieces if p.seed is not None]
    jobs = {k: job for _, k, _, job in (e for e in events if e[0] == "job")}
    assert len(jobs) == len(spoken_pieces) > 2
    for job in jobs.values():
        c = job.canvas
        assert c.ref_len == ref_voice.codes.shape[1]
        assert torch.equal(c.input_ids[:, c.target_start - c.ref_len : c.target_start], ref_voice.codes)
    for k in (0, len(spoken_pieces) - 1):  # each piece: exactly the whole request of its text
        [alone] = engine.generate([Request(text=spoken_pieces[k].text, seed=3 + k, generation=G4, ref=ref_voice)])
        assert alone.audio.tobytes() == spoken_pieces[k].audio.tobytes()


@pytest.mark.slow
def test_same_seed_same_stream_other_seed_other_stream(engine):
    def run(seed):
        out = []
        stream(
            engine,
            Request(text="One sentence here. And another one there.", seed=seed, generation=G4),
            out.append,
            config=StreamConfig(first_seconds=1.0),
        )
        return out

    a, b, c = run(1), run(1), run(2)
    assert len(a) == 2
    assert all(x.audio.tobytes() == y.audio.tobytes() for x, y in zip(a, b))
    assert a[1].audio.tobytes() != c[1].audio.tobytes()


@pytest.mark.slow
def test_slow_device_warns_once_and_still_emits_everything(engine):
    warnings, pieces, steps = [], [], []
    text = " ".join(f"Line {n}." for n in range(8))
    summary = stream(
        engine,
        Request(text=text, seed=5, generation=G4),
        pieces.append,
        on_warning=warnings.append,
        on_step=lambda d, t: steps.append((d, t)),
        clock=fake_clock(10.0),
        config=StreamConfig(first_seconds=0.5, piece_seconds=0.5),  # one sentence a piece
    )
    assert not summary.kept_up and summary.pieces == 8
    assert len(warnings) == 1 and "slower than real time" in warnings[0]
    assert summary.waves == [2, 4, 1]  # doubling after piece 0
    assert [p.seed for p in pieces] == list(range(5, 13))
    assert [d for d, _ in steps] == list(range(1, len(steps) + 1))
    assert steps[-1][0] == steps[-1][1]  # the last step: all done
    assert steps[-1][0] > 4 * (1 + len(summary.waves))  # a wave's pieces staggered: more, smaller forwards
    assert all(t >= d for d, t in steps)


@pytest.mark.slow
def test_cancel_stops_at_the_next_forward(engine):
    cancel, pieces = threading.Event(), []

    def on_piece(p):
        pieces.append(p)
        cancel.set()

    with pytest.raises(Cancelled):
        stream(engine, Request(text=TEXT, seed=5, generation=G4), on_piece, cancel=cancel, config=CFG)
    assert len(pieces) == 1


@pytest.mark.slow
def test_stream_run_iterates_in_the_callers_thread(engine):
    req = Request(text=TEXT, seed=9, generation=G4)
    direct = []
    stream(engine, req, direct.append, config=CFG)
    threads = set()
    with StreamRun(engine, req, on_step=lambda d, t: threads.add(threading.get_ident()), config=CFG) as run:
        got = list(run)
    assert threads == {threading.get_ident()}
    assert [p.audio.tobytes() for p in got] == [p.audio.tobytes() for p in direct]
    assert run.summary is not None and run.summary.samples == sum(len(p.audio) for p in got)
    assert run.wait(120)


@pytest.mark.slow
def test_engine_stream_is_the_stream_run(engine):
    """Engine.stream, the engine's one face for streaming: the pieces of the streamed render, in
    order, each with its text, start, seed and audio, and its summary."""
    req = Request(text=TEXT, seed=9, generation=G4)
    direct = []
    summary = stream(engine, req, direct.append, config=CFG)
    progress = []
    with engine.stream(req, config=CFG, on_progress=lambda d, t: progress.append((d, t))) as run:
        got = list(run)
    assert [(p.index, p.text, p.start, p.seed) for p in got] == [(p.index, p.text, p.start, p.seed) for p in direct]
    assert [p.audio.tobytes() for p in got] == [p.audio.tobytes() for p in direct]
    assert run.summary is not None and (run.summary.pieces, run.summary.samples) == (summary.pieces, summary.samples)
    assert progress and progress[-1][0] == progress[-1][1]


@pytest.mark.slow
def test_stream_run_raises_the_workers_error(engine):
    with pytest.raises(Exception, match="text is empty"):
        with StreamRun(engine, Request(text="  ", generation=G4)) as run:
            list(run)


@pytest.fixture
def held_after_first_piece(engine, monkeypatch):
    """The worker's first forward after its first piece is rendered waits (in a layer hook) until
    its render is cancelled, then goes on to the render's own check: a caller late to leave the
    block (a loaded machine) cannot see the run end first (one in time cancels it sooner)."""
    from server_util import wait_for

    from omnivoice_cli.engine.cancel import check

    real, rendered = engine.render, []

    def render(*args, **kwargs):
        out = real(*args, **kwargs)
        rendered.append(1)
        return out

    def cancelled() -> bool:
        try:
            check()  # this thread's render's cancel
        except Cancelled:
            return True
        return False

    def hold(module, args):
        if rendered:
            wait_for(cancelled, what="the caller's cancel")

    monkeypatch.setattr(engine, "render", render)
    handle = engine.model.llm.layers[0].input_layernorm.register_forward_pre_hook(hold)
    yield
    handle.remove()


@pytest.mark.slow
@pytest.mark.usefixtures("held_after_first_piece")
def test_stream_run_left_early_cancels(engine):
    with StreamRun(engine, Request(text=TEXT, seed=9, generation=G4), config=CFG) as run:
        first = next(iter(run))
    assert first.index == 0
    assert run.wait(60) and isinstance(run.error, Cancelled)  # stopped at its next forward, not at the end


# --- stopping: cancelled between layers, the worker joined (issue 23) ---------------------------


class LayerSpy:
    """Records which decoder layers run (a hook on each layer's first norm, a module call); sets
    `cancel` when layer `at` of forward `forward` starts."""

    def __init__(self, engine, cancel, at=0, forward=2):
        self.cancel, self.at, self.forward, self.calls, self.after = cancel, at, forward, [], []
        layers = engine.model.llm.layers
        self.handles = [layer.input_layernorm.register_forward_pre_hook(self.hook(i)) for i, layer in enumerate(layers)]

    def hook(self, i):
        def pre(module, args):
            if self.cancel.is_set():
                self.after.append(i)
            self.calls.append(i)
            if i == self.at and self.calls.count(self.at) == self.forward:
                self.cancel.set()

        return pre

    def remove(self):
        for h in self.handles:
            h.remove()


@pytest.mark.slow
def test_cancel_stops_the_forward_between_its_layers(engine):
    """Set while layer 0 of the second forward runs: layer 1 of that forward never runs."""
    assert len(engine.model.llm.layers) >= 2
    cancel = threading.Event()
    spy = LayerSpy(engine, cancel, at=0, forward=2)
    try:
        with pytest.raises(Cancelled):
            stream(engine, Request(text=TEXT, seed=5, generation=G4), lambda p: None, cancel=cancel, config=CFG)
    finally:
        spy.remove()
    assert spy.calls == [0, 1, 0] and spy.after == []


def test_check_outside_a_cancellable_block_is_a_no_op():
    from omnivoice_cli.engine.cancel import cancellable, check

    event = threading.Event()
    event.set()
    check()  # no event for this thread
    with pytest.raises(Cancelled):
        with cancellable(event):
            check()
    check()  # the block's event is gone again
    other = []
    with cancellable(event):
        t = threading.Thread(target=lambda: other.append(check()))  # another thread: not cancelled
        t.start()
        t.join()
    assert other == [None]


@pytest.mark.slow
@pytest.mark.usefixtures("held_after_first_piece")
def test_leaving_the_block_waits_for_the_worker(engine):
    """An exception in the block (Ctrl-C, a reader gone) cancels the render and joins its thread:
    none is left running torch as the interpreter exits (that aborted the process)."""
    with pytest.raises(RuntimeError, match="reader gone"):
        with StreamRun(engine, Request(text=LONG, seed=9, generation=G4), config=CFG) as run:
            next(iter(run))
            raise RuntimeError("reader gone")
    assert run.wait(0) and isinstance(run.error, Cancelled)


@pytest.mark.slow
def test_a_keyboard_interrupt_while_joining_still_joins(engine, monkeypatch):
    """A second Ctrl-C while the worker is being waited for does not leave it running."""
    run = StreamRun(engine, Request(text=LONG, seed=9, generation=G4), config=CFG)
    real_join, calls = run._thread.join, []

    def join(timeout=None):
        calls.append(timeout)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real_join(timeout)

    monkeypatch.setattr(run._thread, "join", join)
    with pytest.raises(KeyboardInterrupt):
        run.close()  # cancels, is interrupted once, waits again, then raises the interrupt
    assert len(calls) == 2 and run.wait(0) and isinstance(run.error, Cancelled)


@pytest.mark.slow
def test_on_idle_ends_the_iteration_while_waiting(engine):
    """What on_idle raises (a player that quit) ends the run while the next piece is being made."""
    seen = []

    def idle():
        seen.append(1)
        raise RuntimeError("the player quit")

    with pytest.raises(RuntimeError, match="the player quit"):
        with StreamRun(
            engine, Request(text=LONG, seed=9, generation=G4), config=CFG, on_idle=idle, idle_seconds=0.001
        ) as run:
            list(run)
    assert seen == [1] and run.wait(0) and run.summary is None


def test_a_cuda_graph_capture_is_not_cut_by_a_cancel():
    """A cancel set while a layout's graph is captured is seen after the capture, not inside it
    (a CUDA stream must not be left half captured)."""
    import types

    from omnivoice_cli.engine.cancel import cancellable, check
    from omnivoice_cli.engine.fast.graphs import GraphedForward

    def capture(model, batch):
        check()  # the model's layers check: must not raise here
        return types.SimpleNamespace(run=lambda b: "replayed")

    event = threading.Event()
    event.set()
    forward = GraphedForward(lambda batch: "eager", capture=capture)
    batch = types.SimpleNamespace(layout=((5, 1),))
    with cancellable(event):
        assert forward(batch) == "eager"  # a layout's first forward runs eagerly
        assert forward(batch) == "replayed"  # its second is captured (checks suspended), then replayed
        assert forward.captures == 1 and forward.disabled is None
        with pytest.raises(Cancelled):
            check()


@pytest.mark.slow
def test_progress_over_all_pieces_has_one_total_from_the_first_forward(engine):
    """The streamed bar's measure (say --play / --stream): steps over every piece, a total that
    never changes while the waves are sized as they come (the forwards' total grows)."""
    progress, steps = [], []
    text = " ".join(f"Line {n}." for n in range(8))
    summary = stream(
        engine,
        Request(text=text, seed=5, generation=G4),
        lambda p: None,
        on_step=lambda d, t: steps.append(t),
        on_progress=lambda d, t: progress.append((d, t)),
        clock=fake_clock(10.0),
        config=StreamConfig(first_seconds=0.5, piece_seconds=0.5),
    )
    assert summary.pieces == 8 and len(set(steps)) > 1  # the forwards' total did change
    assert {t for _, t in progress} == {8 * 4}  # 8 pieces x 4 steps, from the first call on
    done = [d for d, _ in progress]
    # piece 0 alone, then a wave of 2, staggered: its second piece joins when the first has done half its steps
    assert done == sorted(done) and done[:7] == [1, 2, 3, 4, 5, 6, 8] and done[-1] == 8 * 4
