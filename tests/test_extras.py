"""Each command that needs an extra, run where the extra's packages do not import: one line on
stderr with the pip command of the extra, the exit code, no traceback, nothing written.

The packages are hidden from a subprocess (without uninstalling them) by a sitecustomize first on
PYTHONPATH that puts a finder in front of sys.meta_path: importing a blocked name raises
ModuleNotFoundError, as it does where the package is not installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, TINY_CKPT
from helpers.extras import omnivoice, one_line

from omnivoice_cli.engine.errors import MissingExtra, install_hint


@pytest.mark.slow
def test_the_blocker_hides_a_package(blocker, tmp_path):
    """The simulation itself: a blocked package does not import in the subprocess, others do."""
    env = {**os.environ, "PYTHONPATH": str(blocker), "OMNIVOICE_TEST_BLOCK": "json"}
    proc = subprocess.run([sys.executable, "-c", "import csv\nimport json"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "ModuleNotFoundError: No module named 'json'" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "blocked, package",
    [("starlette", "starlette"), ("uvicorn", "uvicorn"), ("python_multipart,multipart", "python-multipart")],
)
def test_serve_without_the_serve_extra(blocker, tmp_path, blocked, package):
    proc = omnivoice(blocker, blocked, "serve", "--model", TINY_CKPT, "--port", "0", cwd=tmp_path)
    line = one_line(proc, "serve")
    assert line == f"Error: omnivoice serve needs {package}, which is not installed: {install_hint('serve')}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "blocked, args", [("kaldifst", ["I have 5 apples."]), ("num2words", ["Ich habe 5 Äpfel.", "--lang", "de"])]
)
def test_say_normalize_without_the_normalize_extra(blocker, tmp_path, blocked, args):
    proc = omnivoice(blocker, blocked, "say", *args, "--normalize", "-o", "out.wav", "--model", TINY_CKPT, cwd=tmp_path)
    line = one_line(proc, "normalize")
    assert line == f"Error: text normalisation needs {blocked}, which is not installed: {install_hint('normalize')}"
    assert not (tmp_path / "out.wav").exists()


def test_batch_normalize_without_the_extra_stops_the_run_in_one_line(blocker, tmp_path):
    """Not one failure per line: the installation is missing a part, so nothing runs (exit 2)."""
    (tmp_path / "lines.txt").write_text("I have 5 apples.\nAnd 7 pears.\n")
    proc = omnivoice(
        blocker, "kaldifst", "batch", "lines.txt", "--normalize", "-o", "out", "--model", TINY_CKPT, cwd=tmp_path
    )
    one_line(proc, "normalize")
    assert not (tmp_path / "out").exists()


def test_batch_line_asking_for_normalize_without_the_extra(blocker, tmp_path):
    (tmp_path / "lines.jsonl").write_text('{"text": "Plain."}\n{"text": "I have 5 apples.", "normalize": true}\n')
    proc = omnivoice(blocker, "kaldifst", "batch", "lines.jsonl", "-o", "out", "--model", TINY_CKPT, cwd=tmp_path)
    one_line(proc, "normalize")
    assert not (tmp_path / "out").exists()


def test_dub_normalize_without_the_normalize_extra(blocker, tmp_path):
    (tmp_path / "cues.srt").write_text("1\n00:00:00,000 --> 00:00:02,000\nI have 5 apples.\n")
    proc = omnivoice(
        blocker, "kaldifst", "dub", "cues.srt", "--normalize", "-o", "dub.wav", "--model", TINY_CKPT, cwd=tmp_path
    )
    one_line(proc, "normalize")
    assert not (tmp_path / "dub.wav").exists()


LOUDNESS_LINE = (
    f"Error: loudness normalisation (--loudness) needs pyloudnorm, which is not installed: {install_hint('loudness')}"
)


def test_say_loudness_without_the_loudness_extra(blocker, tmp_path):
    proc = omnivoice(
        blocker, "pyloudnorm", "say", "Hello.", "--loudness", "-18", "-o", "out.wav", "--model", TINY_CKPT, cwd=tmp_path
    )
    assert one_line(proc, "loudness") == LOUDNESS_LINE
    assert not (tmp_path / "out.wav").exists()


def test_batch_line_asking_for_loudness_without_the_extra(blocker, tmp_path):
    """Found while the lines are planned: nothing runs, nothing is written (exit 2)."""
    (tmp_path / "lines.jsonl").write_text('{"text": "Plain."}\n{"text": "Level me.", "loudness": -20}\n')
    proc = omnivoice(blocker, "pyloudnorm", "batch", "lines.jsonl", "-o", "out", "--model", TINY_CKPT, cwd=tmp_path)
    assert one_line(proc, "loudness") == LOUDNESS_LINE
    assert not (tmp_path / "out").exists()


def test_batch_ray_without_the_ray_extra(blocker, tmp_path):
    (tmp_path / "lines.txt").write_text("Hello there.\n")
    proc = omnivoice(
        blocker, "ray", "batch", "lines.txt", "--ray", "local", "-o", "out", "--model", TINY_CKPT, cwd=tmp_path
    )
    assert one_line(proc, "ray") == f"Error: --ray needs Ray, which is not installed: {install_hint('ray')}"
    assert not (tmp_path / "out").exists()


def test_say_without_the_play_extra_nor_a_player(blocker, tmp_path):
    """sounddevice is optional (a player command does as well), so only no way to play at all is
    an error: one line naming the play extra among what was tried, exit 1 (the README's code for
    'nothing can play here')."""
    proc = omnivoice(
        blocker, "sounddevice", "say", "Hello there.", "--model", TINY_CKPT, cwd=tmp_path, path=str(tmp_path / "no-bin")
    )
    line = one_line(proc, "play", code=1)
    assert line.startswith("Error: no way to play audio here: tried sounddevice (not installed: ")


def test_a_missing_extra_keeps_its_words_under_a_setting_name():
    """request.named leaves the pip line as it is (no "--normalize:" in front) but notes the setting."""
    from omnivoice_cli.app.request import named
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve

    e = MissingExtra("text normalisation", "kaldifst", "normalize")
    out = named(resolve((FLAG_SOURCE, {"normalize": True})), e, "normalize")
    assert out is e and out.setting == "normalize" and str(out).startswith("text normalisation needs kaldifst")


@pytest.mark.slow
@pytest.mark.parametrize("command, package", [("wyoming", "wyoming"), ("mcp", "mcp (2.x)")])
def test_wyoming_and_mcp_without_their_extras(blocker, tmp_path, command, package):
    where = ["--root", tmp_path / "speech"] if command == "mcp" else ["--uri", "tcp://127.0.0.1:0"]
    proc = omnivoice(blocker, command, command, *where, "--model", TINY_CKPT, cwd=tmp_path)
    line = one_line(proc, command)
    assert line == f"Error: omnivoice {command} needs {package}, which is not installed: {install_hint(command)}"
    assert not (tmp_path / "speech").exists()


@pytest.mark.slow
def test_help_and_the_core_path_import_neither_wyoming_nor_mcp(tmp_path):
    """`--help`, `say --help`, the new commands' help and a plain `say` leave both SDKs unimported."""
    say = ["say", "Hello.", "-o", str(tmp_path / "out.wav"), "--model", str(TINY_CKPT), "--num-step", "2", "-q"]
    code = f"""
import sys
from typer.testing import CliRunner
from omnivoice_cli.cli import app
for args in (["--help"], ["say", "--help"], ["wyoming", "--help"], ["mcp", "--help"], {say!r}):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("wyoming", "mcp", "mcp_types")))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNIVOICE_HOME": str(tmp_path / "home")}
    env.pop("OMNIVOICE_MODEL", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]" and (tmp_path / "out.wav").is_file()


@pytest.mark.slow
def test_say_ref_without_transcript_without_the_asr_extra(blocker, tmp_path):
    import shutil

    ref = tmp_path / "me.wav"
    shutil.copy(ROOT / "tests" / "fixtures" / "golden" / "ref_24k.wav", ref)
    proc = omnivoice(
        blocker,
        "faster_whisper,ctranslate2",
        "say",
        "Hi.",
        "--ref",
        ref,
        "--model",
        TINY_CKPT,
        "-o",
        tmp_path / "o.wav",
        cwd=tmp_path,
    )
    line = one_line(proc, "asr")
    assert "no transcript for the reference audio" in line and "--ref-text" in line  # one sentence: how to give
    assert "install a speech recogniser to hear them" in line  # the words, or the recogniser that hears them
    assert not (tmp_path / "o.wav").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, what",
    [
        (["say", "Hi.", "--verify", "-o", "o.wav"], "--verify needs faster-whisper"),
        (
            ["say", "Hi.", "--words", "o.words.json", "-o", "o.wav"],
            "--words / --subtitle-level word needs faster-whisper",
        ),
        (["dub", "ep.srt", "--words", "o.words.json", "-o", "o.wav"], "--words needs faster-whisper"),
    ],
    ids=["say-verify", "say-words", "dub-words"],
)
def test_listening_without_the_asr_extra(blocker, tmp_path, args, what):
    """--verify, --words (say, dub) without faster-whisper: one line with the pip command, exit 2,
    no audio and no words written."""
    (tmp_path / "ep.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello there.\n", encoding="utf-8")
    proc = omnivoice(
        blocker, "faster_whisper,ctranslate2", *args, "--model", TINY_CKPT, "--num-step", "2", "-q", cwd=tmp_path
    )
    line = one_line(proc, "asr")
    assert what in line and "which is not installed" in line
    assert not (tmp_path / "o.wav").exists() and not (tmp_path / "o.words.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, what",
    [
        (["say", "Hi.", "--verify", "-o", "o.wav"], "--verify needs faster-whisper"),
        (["say", "Hi.", "--words", "o.words.json", "-o", "o.wav"], "--words / --subtitle-level word needs"),
        (["dub", "ep.srt", "--words", "o.words.json", "-o", "o.wav"], "--words needs faster-whisper"),
        (["batch", "lines.txt", "--words", "-o", "out"], "--words needs faster-whisper"),
        (["batch", "lines.txt", "--verify", "-o", "out"], "--verify needs faster-whisper"),
    ],
    ids=["say-verify", "say-words", "dub-words", "batch-words", "batch-verify"],
)
def test_a_missing_recogniser_is_reported_before_the_model_loads(blocker, tmp_path, args, what):
    """Before: `say --words` without the asr extra ran all its steps and then discarded the
    audio; `--verify` loaded the TTS model first. Now the one line comes before "loading the
    model" is ever said (not -q: the load would be shown), nothing generated or written."""
    (tmp_path / "ep.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello there.\n", encoding="utf-8")
    (tmp_path / "lines.txt").write_text("Hello there.\n", encoding="utf-8")
    proc = omnivoice(
        blocker, "faster_whisper,ctranslate2", *args, "--model", TINY_CKPT, "--num-step", "2", cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert "loading the model" not in proc.stderr and "step" not in proc.stderr.lower(), proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error: ")]
    assert what in line and install_hint("asr") in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["ep.srt", "lines.txt"]


def test_an_offline_recogniser_not_in_the_cache_is_reported_before_the_model_loads(
    invoke, fake_engine, tmp_path, monkeypatch
):
    pytest.importorskip("faster_whisper")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    r = invoke(
        "say", "Hi.", "--verify", "--asr-model", "someone/whisper-x", "--model", "owner/x", "-o", tmp_path / "o.wav"
    )
    assert r.exit_code == 1 and "someone/whisper-x is not in the Hugging Face cache" in r.stderr, r.stderr
    assert fake_engine.loads == [] and not (tmp_path / "o.wav").exists()
