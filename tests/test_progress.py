"""Progress on stderr: live bars on a terminal, plain lines in a log (progress.py)."""

from __future__ import annotations

import pytest
from conftest import TINY_CKPT

from omnivoice_cli.ui import progress
from omnivoice_cli.ui.progress import BatchProgress, DownloadProgress, StepProgress


def test_steps_add_up_across_forward_loops():
    p = StepProgress(enabled=False)
    for i in range(1, 33):
        p(i, 32)
    assert (p.completed, p.total) == (32, 32)
    for i in range(1, 17):
        p(i, 16)
    assert (p.completed, p.total) == (48, 48)
    p(1, 1)
    p(1, 1)
    assert (p.completed, p.total) == (50, 50)


def test_plain_lines_for_a_log_one_per_quarter():
    lines: list[str] = []
    with StepProgress(enabled=True, live=False, echo=lines.append) as p:
        for i in range(1, 33):
            p(i, 32)
    assert [ln.split(",")[0] for ln in lines] == [f"generating: {n}/32 steps" for n in (8, 16, 24, 32)]


def test_nothing_when_disabled_or_live_without_plain_lines():
    lines: list[str] = []
    with StepProgress(enabled=False, live=False, echo=lines.append) as p:
        p(1, 1)
    assert lines == []


def test_batch_plain_line_per_finished_line():
    lines: list[str] = []
    with BatchProgress(3, enabled=True, live=False, echo=lines.append) as p:
        p.line("done")
        p.line("skipped")  # nothing was spoken: no line in the log
        p.line("failed")
    assert [ln.split(" (")[0] for ln in lines] == ["[1/3] done", "[3/3] failed"]
    assert (p.done, p.skipped, p.failed) == (1, 1, 1)


def test_status_prints_one_line_when_not_a_terminal():
    lines: list[str] = []
    with progress.status("loading the model (x) ...", enabled=True, live=False, echo=lines.append):
        pass
    with progress.status("loading the model (x) ...", enabled=False, live=False, echo=lines.append):
        pass
    assert lines == ["loading the model (x) ..."]


def test_download_progress_tenths():
    lines: list[str] = []
    with DownloadProgress("m", enabled=True, live=False, echo=lines.append) as p:
        for done in range(0, 101, 5):
            p(done * 10**6, 100 * 10**6)
    assert len(lines) == 10 and lines[-1] == "downloading m: 100 of 100 MB"


def test_say_feeds_every_step_to_the_bar(invoke, fake_engine, tmp_path, monkeypatch):
    seen: list[tuple[int, int]] = []
    orig = StepProgress.__call__

    def spy(self, done, total):
        seen.append((done, total))
        return orig(self, done, total)

    monkeypatch.setattr(StepProgress, "__call__", spy)
    r = invoke("say", "Hello", "-o", tmp_path / "x.wav", "--num-step", "12")
    assert r.exit_code == 0, r.stderr
    assert seen == [(i, 12) for i in range(1, 13)]
    assert "loading the model (k2-fsa/OmniVoice) ..." in r.stderr  # CliRunner's stderr is no terminal
    assert "generating: 12/12 steps" in r.stderr


# -------------------------------------------------------------- issue 23: totals, live bars, timings


def test_a_fixed_total_never_changes():
    """The engine's totals move (a long text's later chunks are estimated, then queued); a total
    known before the run is the bar's from the first step to the last."""
    lines: list[str] = []
    with StepProgress(enabled=True, live=False, echo=lines.append, total=8) as p:
        for done, total in [(1, 20), (2, 20), (3, 7), (4, 7), (5, 8), (6, 8), (7, 8), (8, 8)]:
            p(done, total)
    assert p.totals == [8] and (p.completed, p.total) == (8, 8)
    assert [ln.split(",")[0] for ln in lines] == [f"generating: {n}/8 steps" for n in (2, 4, 6, 8)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "limits",
    [
        {},
        pytest.param({"max_batch_size": 2}, marks=pytest.mark.slow),
        pytest.param({"max_batch_size": 3, "max_packed_tokens": 200}, marks=pytest.mark.slow),
    ],
    ids=["default", "batch2", "tokens200"],
)
def test_the_bar_counts_the_plans_steps_to_exactly_its_total(engine, monkeypatch, limits):
    """Engine.generate's on_step counts every piece's job steps against the plans' total
    (Plan.steps, known before generate runs, no simulation of the step loop): the total never
    changes and the last call reaches it exactly; one piece, a long text without a voice (its
    first chunk, then the others packed), with a voice (all at once), and several requests
    sharing forwards, under batch and token limits that cut the packing into waves."""
    import dataclasses

    import torch

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request, plan_request
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    monkeypatch.setattr(engine, "cfg", dataclasses.replace(engine.cfg, **limits))
    monkeypatch.setattr(engine, "_finish", lambda plan, warnings: None)  # no decoding: it runs no forward
    g = GenerationConfig(num_step=2, audio_chunk_threshold=1, audio_chunk_duration=1)
    text = "One here. Then two. [pause 0.2s] And three, then four."
    ref = VoicePrompt(torch.randint(0, 1024, (8, 30), generator=torch.Generator().manual_seed(1)), "A reference.", 0.05)
    cases = [
        [Request("Hello.", generation=g)],
        [Request(text, generation=g)],
        [Request(text, ref=ref, generation=g)],
        [
            Request(text, generation=g),
            Request("Hi there.", generation=dataclasses.replace(g, num_step=3)),
            Request(text, ref=ref, generation=g),
        ],
    ]
    for requests in cases:
        calls: list[tuple[int, int]] = []
        expected = sum(plan_request(r, engine.cfg).steps for r in requests)
        engine.generate(requests, on_step=lambda d, t, calls=calls: calls.append((d, t)))
        assert {t for _, t in calls} == {expected} and calls[-1] == (expected, expected)
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)  # never backwards
    assert expected > len(calls)  # several jobs a forward: steps, not forwards


@pytest.mark.slow
def test_say_bar_total_is_known_from_the_start(invoke, tmp_path):
    """A multi-piece `say` prints its progress with one total, reached at the end (the engine's
    own totals would change when the first chunk is done)."""
    r = invoke(
        "say",
        "The first sentence. The second one follows it. And a third one to end.",
        "-o",
        tmp_path / "a.wav",
        "--model",
        TINY_CKPT,
        "--num-step",
        4,
        "--chunk-threshold",
        1,
        "--chunk-duration",
        1,
        "--seed",
        1,
    )
    assert r.exit_code == 0, r.stderr
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("generating 3 pieces: ")]
    counts = [tuple(map(int, ln.split(": ")[1].split(" ")[0].split("/"))) for ln in steps]
    # 3 pieces of 4 steps (the plan's total: the first alone, then two packed in 4 forwards)
    assert len(counts) == 4 and {t for _, t in counts} == {12} and counts[-1] == (12, 12)


class _Recorder:
    """Stands in for the rich bars (progress._bar): records when they start and what they count."""

    def __init__(self, events: list):
        self.events = events
        self.console = self

    def print(self, msg, **kw):
        self.events.append(("above", msg))

    def start(self):
        self.events.append("bar")

    def stop(self):
        self.events.append("bar stopped")

    def add_task(self, description, **kw):
        self.events.append(("task", description))
        return description

    def update(self, *a, **kw):
        pass


@pytest.fixture
def live_bars(monkeypatch, fake_engine):
    """stderr as a terminal, the bars recorded, and the model's loading among the events."""
    events: list = []
    monkeypatch.setattr(progress, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(progress, "_bar", lambda *columns: _Recorder(events))
    real = fake_engine.load.__func__

    def load(cls, *a, **k):
        events.append(("load", len(progress._LIVE)))  # the loading spinner's console only
        return real(cls, *a, **k)

    monkeypatch.setattr(fake_engine, "load", classmethod(load))
    return events


def test_batch_bars_start_after_the_model_is_loaded(invoke, live_bars, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    assert invoke("batch", src, "-o", tmp_path / "out", "--num-step", 2).exit_code == 0
    assert live_bars[0] == ("load", 1) and live_bars[1:4] == ["bar", ("task", "lines"), ("task", "steps")]
    assert live_bars[-1] == "bar stopped" and progress._LIVE == []
    live_bars.clear()
    again = invoke("batch", src, "-o", tmp_path / "out", "--num-step", 2)  # the same command: every line kept
    assert again.exit_code == 0 and live_bars == []  # no bar at all


def test_dub_bars_count_cues(invoke, live_bars, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:00,000 --> 00:00:01,000\nHi.\n\n2\n00:00:01,000 --> 00:00:02,000\nHello.\n")
    r = invoke("dub", src, "-o", tmp_path / "a.wav")
    assert r.exit_code == 0, r.stderr
    assert live_bars[0] == ("load", 1) and live_bars[1:3] == ["bar", ("task", "cues")]


def test_messages_go_above_a_live_bar(live_bars):
    """While a bar is shown, a message (and a status, which would be a second live display) is
    printed through the bar's console, above it, not written across it."""
    from omnivoice_cli.ui.messages import echo

    with BatchProgress(2, enabled=True) as p:
        p.line("skipped")
        assert progress._LIVE == []  # no bar yet: the model may load here under its own spinner
        p.step(1, 4)
        echo("Warning: something")
        with progress.status("loading x ...", enabled=True):
            pass
    assert live_bars[-3:] == [("above", "Warning: something"), ("above", "loading x ..."), "bar stopped"]
    assert progress._LIVE == []


def test_model_load_time_is_the_same_measure_with_a_voice(invoke, fake_engine, tmp_path, monkeypatch):
    """ "model loaded in" is the model's load alone, with or without a recording to clone; the
    encoder and the recording's encoding are "voice prepared in", and not generation time."""
    import json
    import shutil
    import time as time_module

    from conftest import GOLDEN

    clock = [0.0]
    monkeypatch.setattr(time_module, "perf_counter", lambda: clock[0])
    real_load, real_encoder, real_voice = (
        fake_engine.load.__func__,
        fake_engine.load_encoder,
        fake_engine.voice_from_audio,
    )

    def advance(seconds, fn):
        def wrapped(*a, **k):
            clock[0] += seconds
            return fn(*a, **k)

        return wrapped

    monkeypatch.setattr(fake_engine, "load", classmethod(advance(1.0, real_load)))
    monkeypatch.setattr(fake_engine, "load_encoder", advance(10.0, real_encoder))
    monkeypatch.setattr(fake_engine, "voice_from_audio", advance(100.0, real_voice))
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    shutil.copy(GOLDEN / "ref_24k.wav", tmp_path / "me.wav")
    plain = json.loads(invoke("say", "Hi", "-o", tmp_path / "a.wav", "--json").stdout)
    r = invoke("say", "Hi", "-o", tmp_path / "b.wav", "--json", "--ref", tmp_path / "me.wav", "--ref-text", "Hello.")
    cloned = json.loads(r.stdout)
    assert (plain["load_seconds"], plain["voice_seconds"]) == (1.0, None)
    assert (cloned["load_seconds"], cloned["voice_seconds"], cloned["seconds"]) == (1.0, 110.0, 0.0)
    r = invoke("say", "Hi", "-o", tmp_path / "c.wav", "--ref", tmp_path / "me.wav", "--ref-text", "Hello.")
    assert "model loaded in 1.0 s, voice prepared in 110.0 s)" in r.stderr


@pytest.mark.slow
def test_compile_is_part_of_loading(monkeypatch):
    """torch.compile compiles on the first call: Engine.load(Hardware(compile=True)) makes that call."""
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.pipeline import Engine

    warmed: list[bool] = []
    monkeypatch.setattr(Engine, "warm_up", lambda self: warmed.append(True))
    Engine.load(str(TINY_CKPT), Hardware(device="cpu"))
    assert warmed == []
    Engine.load(str(TINY_CKPT), Hardware(device="cpu", compile=True))
    assert warmed == [True]


@pytest.mark.slow
def test_a_compiled_engine_compiles_nothing_while_generating():
    from torch._dynamo.utils import counters

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    engine = Engine.load(str(TINY_CKPT), Hardware(device="cpu", compile=True))
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > 0  # compiled while loading
    g = GenerationConfig(num_step=2)
    engine.generate([Request("Hello there, a longer text to say.", generation=g), Request("Hi.", generation=g)])
    assert counters["stats"]["unique_graphs"] == graphs
