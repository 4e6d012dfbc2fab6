"""The runs under `say` (speak.py, speakplain.py, speakstream.py, speakdialogue.py) without the command line, and resolved settings that stay as
they were resolved: each later decision is a new layer (issue 24)."""

from __future__ import annotations

import ast
import dataclasses
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import soundfile as sf
from conftest import ROOT

from omnivoice_cli.app.request import References, Voices, build_request
from omnivoice_cli.app.say import speak, speakdialogue, speakrun, speakstream
from omnivoice_cli.app.session import Session, hardware_from_settings
from omnivoice_cli.app.settings.layers import DEFAULT_SOURCE, FLAG_SOURCE, Source, engine_options, resolve
from omnivoice_cli.app.settings.presets import Preset

PACKAGE = ROOT / "omnivoice_cli"


# ------------------------------------------------------------------ resolved settings, immutable


def test_resolved_settings_cannot_be_changed():
    r = resolve((FLAG_SOURCE, {"num_step": 8}))
    with pytest.raises(TypeError):
        r.values["num_step"] = 4  # type: ignore[index]
    with pytest.raises(TypeError):
        r.sources["num_step"] = DEFAULT_SOURCE  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.values = {}  # type: ignore[misc]
    assert r["num_step"] == 8 and r.name("num_step") == "--num-step"


def test_a_later_decision_is_a_new_layer():
    r = resolve((FLAG_SOURCE, {"num_step": 8, "voice": "alice"}))
    seeded = r.with_values({"seed": 7}, Source("random"))
    assert (seeded["seed"], seeded.source("seed").kind) == (7, "random")
    assert r["seed"] is None and r.source("seed").kind == "default"  # the one it came from is as it was
    kept = r.with_values({"voice": None})  # without a source: each keeps its own (messages still say --voice)
    assert kept["voice"] is None and kept.name("voice") == "--voice" and r["voice"] == "alice"
    with pytest.raises(KeyError):
        r.with_values({"num_steps": 4})


def test_building_a_request_leaves_its_settings_alone(home):
    settings = resolve((FLAG_SOURCE, {"voice": "alloy"}))  # a built-in voice: its instruct items
    built = build_request("Hello there.", settings, refs=References(), voices=Voices())
    assert (settings["seed"], settings["voice"], settings["instruct"]) == (None, "alloy", None)
    assert built.settings["seed"] == built.request.seed and built.settings.source("seed").kind == "random"
    assert built.settings["voice"] is None and built.settings["instruct"] == built.request.instruct
    assert built.request.instruct and built.settings.name("instruct") == "instruct"  # not given: no flag to name


def test_a_presets_int8_dropped_is_a_new_layer():
    preset = Preset("int8", Path("int8.toml"), "file", {"quantize": "int8"})  # fast's quantize is "auto" now
    r = resolve((preset.origin, preset.settings), (FLAG_SOURCE, {"device": "cuda"}))
    dropped, notice = engine_options(r)
    assert r["quantize"] == "int8" and dropped["quantize"] == "none"
    assert dropped.source("quantize") == preset.origin and "int8" in notice
    same, none = engine_options(resolve((FLAG_SOURCE, {"device": "cpu"})))
    assert none is None and same["quantize"] == "none"


# ------------------------------------------------------------------ the runs, on FakeEngine


class Held:
    """A stand-in for signals.HoldSignals: counts the writes it protects."""

    def __init__(self) -> None:
        self.protected = 0

    @contextmanager
    def protect(self):
        self.protected += 1
        yield


class Seen:
    """Hooks that record what a run shows."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.statuses: list[str] = []
        self.bars: list[tuple[str, int | None]] = []
        self.steps = 0

    def hooks(self) -> Session:
        @contextmanager
        def status(message):
            self.statuses.append(message)
            yield

        @contextmanager
        def progress(label, total):
            self.bars.append((label, total))
            yield self.step

        return Session(warn=self.warnings.append, status=status, steps=progress)

    def step(self, done, total):
        self.steps += 1


def _speech(tmp_path, text="Hello there. How are you today?", output="out.wav", **kw) -> speakrun.Speech:
    settings = resolve((FLAG_SOURCE, {"num_step": 4, "model": "fake", "seed": 11}))
    built = build_request(text, settings, refs=References(), voices=Voices())
    target = speak.output_target(str(tmp_path / output), settings, lambda: False) if output else None
    return speakrun.Speech(built, References(), target, hardware_from_settings(settings.values), **kw)


def test_the_plain_run_gives_a_typed_report(fake_engine, tmp_path):
    seen, held = Seen(), Held()
    report = speak.speech_run(_speech(tmp_path, output="out.flac"), seen.hooks(), None).run(held)
    assert isinstance(report, speakrun.SpeechReport) and report.where == str(tmp_path / "out.flac")
    assert (report.seed, report.pieces, report.played, report.sample_rate) == (11, 1, False, 24000)
    assert report.audio_seconds == sf.info(str(tmp_path / "out.flac")).duration == 1.0
    assert report.rtf == report.seconds / report.audio_seconds and report.voice_seconds is None
    assert report.settings["format"] == "flac" and report.settings["num_step"] == 4  # the output's format
    assert held.protected == 1 and seen.bars == [("generating", 4)] and seen.steps == 4  # the plan's total
    assert seen.statuses == ["loading the model (fake) ..."]
    assert fake_engine.loads == [{"model": "fake", "device": "auto", "dtype": "auto"}]


@pytest.mark.slow
def test_the_streamed_run_writes_its_file_at_the_end(engine, tmp_path, monkeypatch):
    from omnivoice_cli.engine import pipeline

    monkeypatch.setattr(pipeline, "Engine", type("Loaded", (), {"load": classmethod(lambda cls, *a, **k: engine)}))
    seen = Seen()
    speech = _speech(
        tmp_path, text="The first sentence is short. The second one is a little longer. Third.", stream=True
    )
    run = speak.speech_run(speech, seen.hooks(), None)
    assert isinstance(run, speakstream.StreamedRun)
    report = run.run(Held())
    assert report.first_audio_seconds is not None and report.pieces >= 1 and report.seed == 11
    assert sf.info(str(tmp_path / "out.wav")).frames == round(report.audio_seconds * 24000)
    assert seen.bars == [("streaming", None)]


def test_a_stop_while_generating_is_stopped_and_nothing_written(fake_engine, tmp_path, monkeypatch):
    from omnivoice_cli.app.signals import Stop

    def stopped(self, requests, **kw):
        raise Stop(signal.SIGTERM)

    monkeypatch.setattr(fake_engine, "generate", stopped)
    with pytest.raises(speakrun.StoppedBySignal) as e:
        speak.speech_run(_speech(tmp_path), Session(), None).run(Held())
    assert (e.value.exit_code, e.value.failed) == (143, True)
    assert e.value.message == "stopped by signal 15; nothing was written"
    assert not (tmp_path / "out.wav").exists()


def test_the_dialogue_run_gives_each_line_its_place(fake_engine, tmp_path):
    from omnivoice_cli.app.say.dialogue import plan_script

    flags = {"num_step": 2, "model": "fake", "seed": 5}
    script = plan_script("A: Hello there.\nB: Hi.\n", "the text", ["A=auto", "B=instruct:male"], None, flags)
    hw = hardware_from_settings(resolve((FLAG_SOURCE, flags)).values)
    target = speak.output_target(str(tmp_path / "d.wav"), resolve(), lambda: False)
    report = speakdialogue.DialogueRun(script, target, hw, model="fake", gap=0.5).run(Held())
    assert isinstance(report, speakdialogue.DialogueReport) and report.seed == 5
    assert [(ln.speaker, ln.seed, ln.start, ln.end) for ln in report.lines] == [
        ("A", 5, 0, 24000),
        ("B", 6, 36000, 60000),
    ]
    assert report.audio_seconds == 2.5 == sf.info(str(tmp_path / "d.wav")).duration


def test_a_dialogue_loads_the_model_as_the_run_settings_say(invoke, fake_engine, tmp_path):
    """A preset's int8 that meets --device cuda is dropped (with its notice) for a dialogue too:
    the engine was loaded from line 0's settings, where the int8 was still there."""
    preset = tmp_path / "int8.toml"  # (fast's quantize is "auto": nothing to drop or say on a GPU)
    preset.write_text('quantize = "int8"\n')
    r = invoke("say", "A: Hello.", "--cast", "A=auto", "--preset", preset, "--device", "cuda", "-o", tmp_path / "a.wav")
    assert r.exit_code == 0, r.stderr
    assert "without it here (device cuda)" in r.stderr
    assert [load.get("quantize") for load in fake_engine.loads] == [None]


# ------------------------------------------------------------------ the shape


@pytest.mark.slow
def test_the_runs_import_no_typer_or_rich():
    code = (
        "import sys, omnivoice_cli.app.say.speak, omnivoice_cli.app.say.speakdialogue, omnivoice_cli.app.say.dialogue; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('typer', 'rich', 'click') or m.startswith('omnivoice_cli.commands')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _command_imports(path: Path) -> list[tuple[str, str]]:
    """(command module, name) of every `from .x import name` in a command file, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_command_files_share_nothing_private_and_import_one_way():
    commands = PACKAGE / "commands"
    edges = {p.stem: {m for m, _ in _command_imports(p) if m != "common"} for p in commands.glob("*.py")}
    private = [(p.name, m, n) for p in commands.glob("*.py") for m, n in _command_imports(p) if n.startswith("_")]
    assert private == []
    assert all(p.stem not in edges.get(other, set()) for p in commands.glob("*.py") for other in edges[p.stem])
