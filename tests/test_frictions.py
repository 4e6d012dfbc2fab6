"""Small frictions a newcomer hit (issue 23): stdin without `-`, a recording given to --voice, where
the model comes from (OMNIVOICE_MODEL, presets, the offline message), help examples at 80 columns,
and references outside 3-10 s. The cents of `--normalize` are in test_normalize.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import typer.main
from conftest import ROOT, TINY_CKPT

from omnivoice_cli.app import settings as st
from omnivoice_cli.ui.helpfmt import wrap_example

MAIN = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]  # the `omnivoice` script
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("OMNIVOICE_MODEL", None)
SR = 24000


def run_main(args, cwd, **kw):
    return subprocess.run(
        MAIN + [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        env=kw.pop("env", ENV),
        timeout=120,
        **kw,
    )


def error_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def tone(path, seconds: float, sr: int = SR):
    t = np.arange(int(seconds * sr)) / sr
    sf.write(str(path), (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), sr)
    return path


# ------------------------------------------------------------------------------------ 1. stdin


def test_piped_stdin_is_the_text_without_a_dash(tmp_path):
    r = run_main(["say", "-o", "x.wav", "--dry-run", "--json"], tmp_path, input="Text from a pipe\nand more.\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "Text from a pipe and more."


def test_an_empty_stdin_is_still_the_missing_text_error(tmp_path):
    r = run_main(["say", "-o", "x.wav"], tmp_path, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert error_line(r).startswith("Error: Missing argument 'TEXT': give the text to speak, - to read stdin")
    r = run_main(["say", "-o", "x.wav"], tmp_path, input="  \n\n")  # only blanks: no text either
    assert r.returncode == 2 and "Missing argument 'TEXT'" in r.stderr
    r = run_main(["say"], tmp_path, stdin=subprocess.DEVNULL)  # no arguments and nothing piped: the help
    assert r.returncode == 2 and "Usage: omnivoice say" in r.stdout + r.stderr and "Error" not in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_piped_stdin_reaches_the_engine(invoke, fake_engine, tmp_path):
    r = invoke("say", "-o", tmp_path / "x.wav", input="Hello from stdin")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].text == "Hello from stdin"
    r = invoke("say", "Words", "-o", tmp_path / "y.wav", input="ignored")  # TEXT given: stdin is not read
    assert r.exit_code == 0 and fake_engine.requests[1].text == "Words"


@pytest.mark.slow
def test_piped_stdin_is_spoken_into_the_file(tmp_path):
    r = run_main(
        ["say", "-o", "x.wav", "--model", TINY_CKPT, "--num-step", "2", "--seed", "1"],
        tmp_path,
        input="Hello from a pipe.",
    )
    assert r.returncode == 0, r.stderr
    audio, sr = sf.read(tmp_path / "x.wav")
    assert sr == SR and len(audio) > SR // 2


# ------------------------------------------------------------------------------------ 2. --voice RECORDING


@pytest.mark.parametrize(
    "name, spec",
    [
        ("alice.flac", "alice.flac"),  # no '/': would be looked up as a saved voice's name
        ("alice.flac", "./alice.flac"),  # a path: read as a voice file, a header-length error before
        ("take 2.wav", "take 2.wav"),
        ("bob", "./bob"),  # no extension: known by how the file begins (RIFF)
    ],
)
def test_a_recording_given_to_voice_says_how_to_clone_it(invoke, fake_engine, tmp_path, monkeypatch, name, spec):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    sf.write(name, np.zeros(SR, np.float32), SR, format="FLAC" if name.endswith(".flac") else "WAV")
    r = invoke("say", "Hi", "--voice", spec, "-o", "out.wav")
    assert r.exit_code == 2
    quoted = f"'{spec}'" if " " in spec else spec
    assert error_line(r) == (
        f"Error: --voice: '{spec}' is a recording, not a saved voice or voice file: clone it with --ref {quoted} "
        f"(or save it as a voice once: omnivoice voice add NAME --ref {quoted})"
    )
    assert fake_engine.loads == []


def test_a_saved_voice_file_is_still_a_voice(invoke, fake_engine, tmp_path, monkeypatch):
    import torch

    from omnivoice_cli.engine.voice import VoicePrompt, save_voice

    monkeypatch.chdir(tmp_path)
    save_voice(tmp_path / "v.safetensors", VoicePrompt(torch.zeros(8, 10, dtype=torch.int64), "Hello.", 0.1))
    r = invoke("say", "Hi", "--voice", "./v.safetensors", "-o", "out.wav")
    assert r.exit_code == 0, r.stderr


# ------------------------------------------------------------------------------------ 3. the model


def test_help_names_omnivoice_model(runner):
    from omnivoice_cli.cli import app

    for command in (["say"], ["batch"], ["dub"], ["serve"], ["voice", "add"], ["download"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0
        shown = " ".join(r.stdout.replace("│", " ").split())
        assert "Default: $OMNIVOICE_MODEL" in shown and "else k2-fsa/OmniVoice." in shown, command


def test_model_precedence_default_env_preset_flag(invoke, fake_engine, tmp_path):
    preset = tmp_path / "mine.toml"
    preset.write_text("model = 'preset/model'\n")
    for extra in ([], ["--preset", preset], ["--preset", preset, "--model", "flag/model"]):
        r = invoke("say", "Hi", "-o", tmp_path / "x.wav", *extra, env={"OMNIVOICE_MODEL": "env/model"})
        assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")  # nothing set: the default
    assert [ld["model"] for ld in fake_engine.loads] == ["env/model", "preset/model", "flag/model", st.DEFAULT_MODEL]


def test_dry_run_says_the_model_came_from_the_environment(invoke, tmp_path):
    r = invoke("say", "Hi", "--dry-run", "--json", env={"OMNIVOICE_MODEL": "env/model"})
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["settings"]["model"]["value"] == "env/model", report["settings"]["model"]
    assert report["settings"]["model"]["from"] == "env OMNIVOICE_MODEL"


def test_a_preset_model_folder_is_relative_to_the_preset(tmp_path):
    (tmp_path / "ckpt").mkdir()
    preset = tmp_path / "local.toml"
    preset.write_text("model = 'ckpt'\n")
    assert st.find_preset(str(preset)).settings["model"] == str(tmp_path / "ckpt")
    preset.write_text("model = 'owner/name'\n")  # no such folder beside it: a hub id, as given
    assert st.find_preset(str(preset)).settings["model"] == "owner/name"


def _offline_error(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from omnivoice_cli.engine import hub
    from omnivoice_cli.engine.errors import ModelUnavailable

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelUnavailable) as e:
        hub.download(st.DEFAULT_MODEL)
    return e.value


def test_the_offline_error_of_say_names_model_and_omnivoice_model(invoke, fake_engine, tmp_path, monkeypatch):
    fake_engine.load_error = _offline_error(tmp_path, monkeypatch)
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 1
    assert error_line(r) == (
        "Error: k2-fsa/OmniVoice (about 3.2 GB) is not in the Hugging Face cache and cannot be downloaded "
        "(offline: HF_HUB_OFFLINE is set). Connect once to fetch it (`omnivoice download`), or use a local "
        "checkpoint folder: --model DIR, or OMNIVOICE_MODEL=DIR."
    )


def test_download_offline_has_its_own_advice(invoke, tmp_path, monkeypatch):
    _offline_error(tmp_path, monkeypatch)  # the same offline setting
    r = invoke("download")
    assert r.exit_code == 1
    line = error_line(r)
    assert "(offline: HF_HUB_OFFLINE is set). Unset HF_HUB_OFFLINE and run `omnivoice download` again" in line
    assert "--model" not in line and "OMNIVOICE_MODEL" not in line


def test_download_defaults_to_omnivoice_model(invoke, tmp_path, monkeypatch):
    _offline_error(tmp_path, monkeypatch)
    r = invoke("download", env={"OMNIVOICE_MODEL": "me/finetune"})
    assert r.exit_code == 1 and error_line(r).startswith("Error: me/finetune is not in the Hugging Face cache")
    r = invoke("download", env={"OMNIVOICE_MODEL": str(TINY_CKPT)})  # a local folder: nothing to fetch
    assert r.exit_code == 0, r.stderr
    assert "a local checkpoint folder (OMNIVOICE_MODEL), nothing to download" in r.stderr


# ------------------------------------------------------------------------------------ 4. help at 80 columns


def _command_paths(cmd, path=()):
    yield list(path)
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def test_no_help_is_cut_at_80_columns(runner):
    from omnivoice_cli.cli import app

    paths = list(_command_paths(typer.main.get_command(app)))
    assert ["say"] in paths and ["voice", "add"] in paths and len(paths) >= 15
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0, (path, r.stderr)
        assert "…" not in r.stdout, (path, [ln for ln in r.stdout.splitlines() if "…" in ln])
        assert max(len(ln) for ln in r.stdout.splitlines()) <= 80, path


def test_the_examples_of_say_are_whole_at_80_columns(runner):
    from omnivoice_cli.cli import app
    from omnivoice_cli.commands.say import EXAMPLES

    r = runner.invoke(app, ["say", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    shown = " ".join(r.stdout.split("Examples", 1)[1].replace("│", " ").replace("\\", " ").split())
    for example in EXAMPLES.strip().splitlines():
        assert " ".join(example.split()) in shown


@pytest.mark.parametrize(
    "line",
    [
        "omnivoice say -f chapter.txt --voice alice --stream -o - | ffplay -nodisp -i -",
        'omnivoice dub episode.srt --cast "NARRATOR=instruct:male, low pitch" --seed 7 --json',
        '  -d \'{"model":"omnivoice","input":"Hello there.","voice":"alloy"}\' -o hello.mp3',
        "omnivoice voice add alice --ref alice.flac   # alice.txt holds its transcript",
    ],
)
def test_wrap_example_keeps_the_command_whole(line):
    out = wrap_example(line, 72)
    assert len(out) > 1 and all(len(ln) <= 72 for ln in out)
    code = [ln for ln in out if not ln.lstrip().startswith("#")]
    assert all(ln.endswith(" \\") for ln in code[:-1]) and not code[-1].endswith("\\")
    words = " ".join(ln.removesuffix(" \\") for ln in code).split()
    assert words == line.split("#")[0].split() if "#" in line else words == line.split()
    for quoted in ('"NARRATOR=instruct:male, low pitch"', '"input":"Hello there."'):
        if quoted in line:
            assert any(quoted in ln for ln in out)  # never broken inside quotes
    assert not any(ln.rstrip(" \\").endswith((" -o", " --seed")) for ln in out)  # an option keeps its value
    if "#" in line:
        assert out[0] == "# alice.txt holds its transcript"
    assert wrap_example("omnivoice say Hi", 72) == ["omnivoice say Hi"]


# ------------------------------------------------------------------------------------ 5. reference length


def _prepare(seconds, transcript="Some words."):
    from omnivoice_cli.engine.voice import prepare_reference

    t = np.arange(int(seconds * SR)) / SR
    return prepare_reference(
        (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), transcript, source="reference audio me.wav"
    )


def test_a_short_reference_is_warned_about_and_why():
    [warning] = _prepare(2.0).warnings
    assert warning.startswith("reference audio me.wav is only 2.0 s long: under 3 s the voice is poorly captured")
    assert "3-10 s" in warning


def test_a_long_reference_is_warned_about_and_why():
    [warning] = _prepare(14.0).warnings
    assert warning.startswith("reference audio me.wav holds 14.0 s of sound once its silences are removed: over 10 s")
    assert "slower" in warning and "memory" in warning and "trim it to 3-10 s" in warning


def test_no_length_warning_inside_3_to_10_s_and_one_warning_over_20_s():
    assert _prepare(3.0).warnings == () and _prepare(9.5).warnings == ()
    [over] = _prepare(25.0).warnings  # with a transcript: the reference's own warning only
    assert over.startswith("reference audio me.wav is 25.0s long (>20s). This may cause slower generation")
    [trimmed] = _prepare(25.0, None).warnings  # without one: trimmed, and that warning says so
    assert "has no transcript: trimmed to" in trimmed


def test_say_shows_the_short_reference_warning(invoke, fake_engine, tmp_path):
    ref = tone(tmp_path / "me.wav", 2.0)
    r = invoke("say", "Hi", "--ref", ref, "--ref-text", "Hello there.", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert f"Warning: reference audio {ref} is only 2.0 s long: under 3 s the voice is poorly captured" in r.stderr
