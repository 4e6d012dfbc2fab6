"""The `omnivoice` command line.

Fast tests run `omnivoice say` against FakeEngine (conftest.py): option mapping, streams, exit
codes, bad input. Tests marked slow run the real engine on the tiny checkpoint
(tests/fixtures/tiny/ckpt): golden audio, seeds, stdout, and checkpoint errors from the real loader.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from conftest import GOLDEN, ROOT, TINY_CKPT, error_line, files_in
from safetensors.numpy import load_file

import omnivoice_cli.media.output as omnivoice_output
from omnivoice_cli.app.settings.layers import resolve_settings
from omnivoice_cli.app.settings.schema import DEFAULT_MODEL, GENERATION_DEFAULTS
from omnivoice_cli.app.settings.setting import SettingsError

TEXT = "Hello world, this is a small test of the speech oracle."
MAIN = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]  # the `omnivoice` script
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # subprocesses import this checkout, installed or not
ENV.pop("OMNIVOICE_MODEL", None)


SR = 24000


def run_main(args, cwd, **kw):
    """`omnivoice ARGS` in a fresh process (stdin as given: `input=` or `stdin=`)."""
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


def seed_of(stderr: str) -> int:
    m = re.search(r"seed (\d+)", stderr)
    assert m, stderr
    return int(m.group(1))


# ------------------------------------------------------------------------------------ no torch


@pytest.mark.slow
def test_help_does_not_import_torch():
    code = (
        "import sys\n"
        "import typer.main\n"
        "import omnivoice_cli.cli as cli\n"
        "cmd = typer.main.get_command(cli.app)\n"
        "for args in (['--help'], ['say', '--help'], ['say', '--help-all'], ['languages', '--help'], [], ['say'],\n"
        "             ['instructs', '--help'], ['batch', '--help-all'],\n"
        "             ['voice', '--help'], ['voice'], ['voice', 'add', '--help'], ['voice', 'import', '--help']):\n"
        "    try:\n"
        "        cmd.main(args, prog_name='omnivoice', standalone_mode=False)\n"
        "    except (SystemExit, Exception):\n"
        "        pass  # no arguments: NoArgsIsHelpError after printing the help\n"
        "heavy = [m for m in ('torch', 'numpy', 'soundfile', 'safetensors') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )  # ['say'] would read a piped stdin
    assert out.returncode == 0, out.stderr
    assert "omnivoice say" in out.stdout and "--num-step" in out.stdout
    assert "HEAVY []" in out.stdout, out.stdout


@pytest.mark.slow
def test_listings_do_not_import_torch():
    code = (
        "import sys\n"
        "import typer.main\n"
        "import omnivoice_cli.cli as cli\n"
        "cmd = typer.main.get_command(cli.app)\n"
        "for args in (['languages'], ['instructs']):\n"
        "    cmd.main(args, prog_name='omnivoice', standalone_mode=False)\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "TORCH False" in out.stdout


# ------------------------------------------------------------------------------------ settings


def test_defaults_match_the_engine():
    from omnivoice_cli.engine.model.config import GenerationConfig

    g = GenerationConfig()
    for key, value in GENERATION_DEFAULTS.items():
        assert getattr(g, key) == value, key
    assert set(GENERATION_DEFAULTS) <= set(GenerationConfig.field_names())


def test_default_model_matches_the_engine():
    hub = pytest.importorskip("omnivoice_cli.engine.checkpoint.hub")
    assert DEFAULT_MODEL == hub.DEFAULT_MODEL


def test_resolve_settings_layers():
    defaults = {"a": 1, "b": 2, "c": 3, "d": None}
    s = resolve_settings(defaults, {"b": 20, "c": 30}, {"c": 300, "a": None, "d": "x"})
    assert s == {"a": 1, "b": 20, "c": 300, "d": "x"}
    assert resolve_settings(defaults, None, {}) == defaults
    with pytest.raises(SettingsError, match="unknown setting 'bogus'"):
        resolve_settings(defaults, {"bogus": 1}, {})


# ------------------------------------------------------------------------------------ say (fake engine)


def test_say_writes_a_24k_mono_wav(invoke, fake_engine, tmp_path):
    out = tmp_path / "hello.wav"
    r = invoke("say", "Hello world", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # stdout is for data only
    info = sf.info(str(out))
    assert (info.samplerate, info.channels, info.subtype) == (24000, 1, "PCM_16")
    assert files_in(tmp_path) == ["hello.wav"]
    # one summary line: path, audio length, time (and per second of audio), seed; the engine's notice passed through
    assert "fake notice" in r.stderr
    summary = r.stderr.strip().splitlines()[-1]
    assert str(out) in summary and "1.00 s of audio" in summary and " s per second of audio" in summary
    assert seed_of(summary) == fake_engine.requests[0].seed


@pytest.mark.parametrize("ext,fmt", [("flac", "FLAC"), ("ogg", "OGG")])
def test_say_other_formats(invoke, fake_engine, tmp_path, ext, fmt):
    out = tmp_path / f"x.{ext}"
    r = invoke("say", "Hello", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert sf.info(str(out)).format == fmt


def test_defaults_map_to_request(invoke, fake_engine, tmp_path):
    from omnivoice_cli.engine.model.config import GenerationConfig

    r = invoke("say", "Hello", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [{"model": DEFAULT_MODEL, "device": "auto", "dtype": "auto"}]
    [req] = fake_engine.requests
    assert (req.text, req.lang, req.instruct, req.speed, req.duration) == ("Hello", None, None, None, None)
    assert req.generation == GenerationConfig()
    assert 0 <= req.seed < 2**31


def test_options_map_to_request(invoke, fake_engine, tmp_path):
    from omnivoice_cli.engine.model.config import GenerationConfig

    r = invoke(
        "say",
        "Good evening.",
        "-o",
        tmp_path / "x.flac",
        "--model",
        "some/model",
        "--lang",
        "en",
        "--instruct",
        "female, low pitch, british accent",
        "--num-step",
        "16",
        "--guidance-scale",
        "1.5",
        "--t-shift",
        "0.2",
        "--layer-penalty-factor",
        "4",
        "--position-temperature",
        "0",
        "--class-temperature",
        "0.5",
        "--no-denoise",
        "--speed",
        "1.25",
        "--seed",
        "1234",
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
    )
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [{"model": "some/model", "device": "cpu", "dtype": "bfloat16"}]
    [req] = fake_engine.requests
    assert req.text == "Good evening."
    assert (req.lang, req.instruct, req.speed, req.duration, req.seed) == (
        "en",
        "female, low pitch, british accent",
        1.25,
        None,
        1234,
    )
    assert req.generation == GenerationConfig(
        num_step=16,
        guidance_scale=1.5,
        t_shift=0.2,
        layer_penalty_factor=4.0,
        position_temperature=0.0,
        class_temperature=0.5,
        denoise=False,
    )
    assert "seed 1234" in r.stderr


def test_duration_overrides_speed(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello", "-o", tmp_path / "x.wav", "--duration", "2", "--speed", "1.5")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].duration == 2.0
    assert "Warning: --duration sets the length, so --speed is ignored" in r.stderr
    assert "2.00 s of audio" in r.stderr


def test_model_from_environment(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi", "-o", tmp_path / "a.wav", env={"OMNIVOICE_MODEL": "env/model"})
    assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hi", "-o", tmp_path / "b.wav", "--model", "flag/model", env={"OMNIVOICE_MODEL": "env/model"})
    assert r.exit_code == 0, r.stderr
    assert [ld["model"] for ld in fake_engine.loads] == ["env/model", "flag/model"]


def test_random_seed_is_printed_and_repeats(invoke, fake_engine, tmp_path):
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    r = invoke("say", "Hello", "-o", a)
    assert r.exit_code == 0, r.stderr
    seed = seed_of(r.stderr)
    r = invoke("say", "Hello", "-o", b, "--seed", seed)
    assert r.exit_code == 0, r.stderr
    assert a.read_bytes() == b.read_bytes()


def test_text_from_stdin(invoke, fake_engine, tmp_path):
    r = invoke("say", "-", "-o", tmp_path / "x.wav", input="Text from a pipe\nand its second line\n")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].text == "Text from a pipe and its second line"  # line breaks are spaces


def test_text_file(invoke, fake_engine, tmp_path):
    """-f reads a whole UTF-8 file as one text; line breaks become spaces (never glued words)."""
    src = tmp_path / "chapter1.txt"
    src.write_bytes("\ufeffIt was a dark\r\nand stormy night.\n\nThe end. [pause 1.5s]\nReally.\n".encode())
    out = tmp_path / "chapter1.flac"
    r = invoke("say", "-f", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].text == "It was a dark and stormy night. The end. [pause 1.5s] Really."
    assert sf.info(str(out)).format == "FLAC"
    r = invoke("say", "--text-file", "-", "-o", tmp_path / "stdin.wav", "-q", input="From\nstdin\n")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[1].text == "From stdin"


def test_text_argument_line_breaks_become_spaces(invoke, fake_engine, tmp_path):
    r = invoke("say", "Two\nlines", "-o", tmp_path / "x.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].text == "Two lines"


def test_text_file_not_utf8(invoke, fake_engine, tmp_path):
    src = tmp_path / "latin1.txt"
    src.write_bytes("caf\xe9".encode("latin-1"))
    r = invoke("say", "-f", src, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert f"text file '{src}' is not UTF-8 text (bad byte at offset 3)" in error_line(r)
    assert fake_engine.loads == [] and not (tmp_path / "x.wav").exists()


def test_long_text_is_not_refused(invoke, fake_engine, tmp_path):
    """Far more than 30 s of speech: the engine chunks it; the CLI does not refuse it."""
    text = "A sentence that goes on and on, and then on some more. " * 80
    r = invoke("say", text, "-o", tmp_path / "x.wav", "-q", "--chunk-duration", "10", "--chunk-threshold", "20")
    assert r.exit_code == 0, r.stderr
    g = fake_engine.requests[0].generation
    assert (g.audio_chunk_duration, g.audio_chunk_threshold) == (10.0, 20.0)


def test_speed_flags_reach_the_loader(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi", "-o", tmp_path / "a.wav", "-q", "--threads", "3", "--quantize", "INT8", "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hi", "-o", tmp_path / "b.wav", "-q", "--compile")
    assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hi", "-o", tmp_path / "c.wav", "-q", "--quantize", "none", "--no-compile", "--json")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [
        {"model": DEFAULT_MODEL, "device": "cpu", "dtype": "auto", "threads": 3, "quantize": "int8"},
        {"model": DEFAULT_MODEL, "device": "auto", "dtype": "auto", "compile": True},
        {"model": DEFAULT_MODEL, "device": "auto", "dtype": "auto"},
    ]
    settings = json.loads(r.stdout)["settings"]
    assert (settings["quantize"], settings["compile"], settings["threads"]) == ("none", False, None)
    assert (settings["chunk_duration"], settings["chunk_threshold"]) == (15.0, 30.0)


def test_ctrl_c_while_generating_writes_nothing(invoke, fake_engine, tmp_path, monkeypatch):
    def interrupted(self, requests, on_step=None, on_result=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake_engine, "generate", interrupted)
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 130, (r.exit_code, r.stderr)
    assert error_line(r) == "Error: stopped by Ctrl-C; nothing was written"
    assert files_in(tmp_path) == []


def test_sigterm_while_generating(invoke, fake_engine, tmp_path, monkeypatch):
    import signal

    def killed(self, requests, on_step=None, on_result=None):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM should have stopped the run")

    monkeypatch.setattr(fake_engine, "generate", killed)
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 143, (r.exit_code, r.stderr)
    assert error_line(r) == "Error: stopped by signal 15; nothing was written"
    assert files_in(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers restored


@pytest.mark.parametrize("to_stdout", [False, True], ids=["file", "stdout"])
def test_ctrl_c_while_writing_finishes_the_file(invoke, fake_engine, tmp_path, monkeypatch, to_stdout):
    """A Ctrl-C that lands inside the write waits until the file (or the whole WAV on stdout) is out."""
    import signal

    real_write = omnivoice_output._write_blocks

    def write_then_interrupted(file, data, samplerate, *args):
        os.kill(os.getpid(), signal.SIGINT)  # held until the write is done
        return real_write(file, data, samplerate, *args)

    monkeypatch.setattr(omnivoice_output, "_write_blocks", write_then_interrupted)
    out = tmp_path / "x.wav"
    r = invoke("say", "Hi", "-o", "-" if to_stdout else out, "--seed", "2")
    assert r.exit_code == 0, (r.exit_code, r.stderr)  # the stop came while the whole audio was written: complete
    assert "Traceback" not in r.stderr
    if to_stdout:
        data = r.stdout_bytes
        assert "Warning: stopped by Ctrl-C after writing -" in r.stderr
    else:
        data = out.read_bytes()
        assert f"Warning: stopped by Ctrl-C after writing {out}" in r.stderr
        assert files_in(tmp_path) == ["x.wav"]  # no temporary file left
    audio, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == 24000 and len(audio) == 24000  # complete


def test_audio_to_stdout(invoke, fake_engine, tmp_path):
    r = invoke("say", "-", "-o", "-", "--seed", "3", input="Text from a pipe")
    assert r.exit_code == 0, r.stderr
    data = r.stdout_bytes
    assert data[:4] == b"RIFF" and int.from_bytes(data[4:8], "little") + 8 == len(data)
    audio, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == 24000 and audio.ndim == 1 and len(audio) == 24000
    assert "stdout: 1.00 s of audio" in r.stderr
    assert files_in(tmp_path) == []


def test_json_report_on_stdout(invoke, fake_engine, tmp_path):
    out = tmp_path / "x.wav"
    r = invoke("say", "Hello", "-o", out, "--json", "--seed", "5", "--num-step", "8")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["path"] == str(out)
    assert report["audio_seconds"] == 1.0 and report["seed"] == 5 and report["sample_rate"] == 24000
    assert report["seconds"] >= 0 and report["rtf"] >= 0
    assert report["settings"]["num_step"] == 8 and report["settings"]["seed"] == 5
    assert report["settings"]["model"] == DEFAULT_MODEL
    assert "per second of audio" not in r.stderr  # the report replaces the summary line


def test_json_report_on_stderr_when_audio_on_stdout(invoke, fake_engine):
    r = invoke("say", "Hello", "-o", "-", "--json", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes[:4] == b"RIFF"
    report = json.loads(r.stderr.strip().splitlines()[-1])
    assert report["path"] == "-"


def test_quiet(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello", "-o", tmp_path / "x.wav", "--quiet")
    assert r.exit_code == 0
    assert r.stderr == "" and r.stdout == ""


def test_an_unknown_language_is_refused_before_the_model(invoke, fake_engine, tmp_path):
    """The reference warns and speaks language-agnostic; the tool refuses (test_languages.py has
    every way in): nothing is loaded, nothing written."""
    out = tmp_path / "x.wav"
    r = invoke("say", "Hello", "-o", out, "--lang", "klingon", "--quiet")
    assert r.exit_code == 2 and "unknown language 'klingon'" in error_line(r)
    assert not out.exists() and fake_engine.loads == []


def test_engine_warnings_are_shown_once(invoke, fake_engine, tmp_path):
    from omnivoice_cli.engine.text.textcheck import wordless_warning

    fake_engine.result_warnings = [wordless_warning("?!"), "engine says something"]
    r = invoke("say", "?!", "-o", tmp_path / "x.wav", "--quiet")  # warned when built and by the engine
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("no letters or digits") == 1
    assert "Warning: engine says something" in r.stderr


# ------------------------------------------------------------------------------------ text piped on stdin


@pytest.mark.slow
def test_piped_stdin_is_the_text_without_a_dash(tmp_path):
    r = run_main(["say", "-o", "x.wav", "--dry-run", "--json"], tmp_path, input="Text from a pipe\nand more.\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "Text from a pipe and more."


@pytest.mark.slow
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


# ------------------------------------------------------------------------------------ say --json: the speed used


@pytest.mark.parametrize("args, speed", [([], 1.0), (["--speed", "1.3"], 1.3), (["--duration", "2"], None)])
def test_say_json_reports_the_speed_used(invoke, fake_engine, home, tmp_path, args, speed):
    """1.0 (the normal rate, what the engine uses) when none is given; none when --duration fixes
    the length (the speed is then ignored)."""
    r = invoke("say", "Hello", "-o", tmp_path / "a.wav", "--json", *args)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["settings"]["speed"] == speed
    assert fake_engine.requests[-1].speed == (None if speed == 1.0 else speed)  # the request itself is unchanged


def test_say_json_speed_from_a_preset(invoke, fake_engine, home, tmp_path):
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "quick.toml").write_text("speed = 1.2\n")
    r = invoke("say", "Hello", "-o", tmp_path / "a.wav", "--json", "--preset", "quick")
    assert json.loads(r.stdout)["settings"]["speed"] == 1.2


# ------------------------------------------------------------------------------------ bad input

BAD_INPUT = [
    # (args after TEXT, text, stdin, message fragment)
    ([], "", None, "text is empty"),
    ([], "   \n\t", None, "text is empty"),
    ([], "-", "  \n", "text is empty"),
    ([], "-", b"\xff\xfe\x00binary", "the text on stdin is not UTF-8 text (bad byte at offset 0)"),
    (["--num-step", "0"], "Hi", None, "--num-step must be an integer in 1..64, got 0"),
    (["--num-step", "65"], "Hi", None, "--num-step must be an integer in 1..64, got 65"),
    (["--guidance-scale", "-1"], "Hi", None, "--guidance-scale must be a number >= 0, got -1.0"),
    (["--t-shift", "0"], "Hi", None, "--t-shift must be a number > 0, got 0.0"),
    (["--position-temperature", "-0.5"], "Hi", None, "--position-temperature must be a number >= 0, got -0.5"),
    (["--class-temperature", "nan"], "Hi", None, "--class-temperature must be a number >= 0, got nan"),
    (["--speed", "0"], "Hi", None, "--speed must be a number > 0 (1.0 is normal), got 0.0"),
    (["--speed", "-2"], "Hi", None, "--speed must be a number > 0 (1.0 is normal), got -2.0"),
    (["--duration", "0"], "Hi", None, "--duration must be seconds in (0, 30], got 0.0"),
    (["--duration", "-1"], "Hi", None, "--duration must be seconds in (0, 30], got -1.0"),
    (["--duration", "30.5"], "Hi", None, "--duration must be seconds in (0, 30], got 30.5"),
    (["--instruct", "female, lowpitch"], "Hi", None, "'lowpitch' (did you mean 'low pitch'?)"),
    (["--instruct", "robot voice"], "Hi", None, "unsupported instruct item"),
    (["--seed", "-1"], "Hi", None, "--seed must be an integer in 0..9223372036854775807, got -1"),
    (["--seed", "1.5"], "Hi", None, "--seed must be an integer in 0..9223372036854775807, got '1.5'"),
    (["--num-step", "abc"], "Hi", None, "--num-step must be an integer in 1..64, got 'abc'"),
    (["--speed", "fast"], "Hi", None, "--speed must be a number > 0 (1.0 is normal), got 'fast'"),
    (["--dtype", "float64"], "Hi", None, "--dtype must be auto, float32, float16, bfloat16, got 'float64'"),
    (["--device", "tpu"], "Hi", None, "--device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    (
        ["-o", "{tmp}/x.mp4"],
        "Hi",
        None,
        "'.mp4': use a file ending in .wav, .flac, .ogg, .opus, .mp3, .raw, .pcm, .aac, .m4a, .ulaw, .mulaw or .alaw",
    ),
    (["-o", "{tmp}/noext"], "Hi", None, "has no extension"),
    (["-o", "{tmp}/missing/x.wav"], "Hi", None, "does not exist"),
    ([], "Before [pause 2 sec] after.", None, "malformed pause tag '[pause 2 sec]'"),
    (
        ["--duration", "3"],
        "Before [pause] after.",
        None,
        "--duration: a fixed duration cannot be combined with [pause] tags",
    ),
    (["--chunk-duration", "0"], "Hi", None, "--chunk-duration must be seconds > 0, got 0.0"),
    (["--chunk-duration", "soon"], "Hi", None, "--chunk-duration must be seconds > 0, got 'soon'"),
    (["--chunk-threshold", "31"], "Hi", None, "--chunk-threshold must be seconds in (0, 30], got 31.0"),
    (["--chunk-threshold", "-1"], "Hi", None, "--chunk-threshold must be seconds in (0, 30], got -1.0"),
    (["--threads", "0"], "Hi", None, "--threads must be an integer >= 1, got 0"),
    (["--threads", "two"], "Hi", None, "--threads must be an integer >= 1, got 'two'"),
    (["--threads", "1.5"], "Hi", None, "--threads must be an integer >= 1, got '1.5'"),
    (["--quantize", "int4"], "Hi", None, "--quantize must be int8, auto or none, got 'int4'"),
    (["--quantize", "int8", "--compile"], "Hi", None, "--quantize int8 and --compile cannot be combined"),
    (["--quantize", "int8", "--device", "cuda"], "Hi", None, "--quantize int8 runs on the CPU only, not on 'cuda'"),
    (["--quantize", "int8", "--dtype", "bfloat16"], "Hi", None, "--quantize int8 starts from float32 weights"),
    (["-f", "{tmp}/missing.txt"], None, None, "text file '{tmp}/missing.txt' does not exist"),
    (["-f", "{tmp}"], None, None, "is a folder"),
    (["-f", "-"], None, "  \n\n ", "text is empty"),
    (["-f", "-"], None, b"\xff\xfebinary", "the text on stdin is not UTF-8 text (bad byte at offset 0)"),
]


@pytest.mark.parametrize("args,text,stdin,message", BAD_INPUT, ids=[m for *_, m in BAD_INPUT])
def test_bad_input(invoke, fake_engine, tmp_path, args, text, stdin, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "out.wav")]
    r = invoke("say", *([] if text is None else [text]), *args, input=stdin)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert message.replace("{tmp}", str(tmp_path)) in error_line(r)
    assert r.stdout == ""
    assert fake_engine.loads == []  # failed before loading the model
    assert files_in(tmp_path) == []


CLICK_USAGE = [
    (["say", "-o", "x.wav"], "Missing argument 'TEXT'"),
    (["say", "Hi", "-f", "t.txt"], "give the text either as TEXT or with -f/--text-file, not both"),
    (["say", "Hi", "--compile=yes"], "--compile"),
    (["say", "Hi", "--bogus"], "No such option: --bogus"),
    (["say", "Hi", "--num-step"], "--num-step"),
    (["shout", "Hi"], "No such command 'shout'"),
]


@pytest.mark.parametrize("args,message", CLICK_USAGE, ids=[m for _, m in CLICK_USAGE])
def test_click_usage_errors(invoke, fake_engine, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    r = invoke(*args)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert fake_engine.loads == []
    assert files_in(tmp_path) == []


def test_usage_errors_in_say_are_one_line(invoke, fake_engine):
    r = invoke("say", "Hi", "--bogus")
    line = error_line(r)
    assert "--bogus" in line and "--help" in line
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "error,code",
    [
        ("CheckpointError", 1),
        ("ModelUnavailable", 1),
        ("OmniVoiceError", 1),
        ("InvalidRequest", 2),  # e.g. --device cuda on a machine without a GPU
    ],
)
def test_load_errors_map_to_exit_codes(invoke, fake_engine, tmp_path, error, code):
    from omnivoice_cli.engine import errors

    fake_engine.load_error = getattr(errors, error)(f"{error} happened: details")
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == code, r.stderr
    assert error_line(r) == f"Error: {error} happened: details"
    assert files_in(tmp_path) == []


def test_write_failure_is_exit_1_and_leaves_nothing(invoke, fake_engine, tmp_path, monkeypatch):
    def full_disk(file, data, samplerate, *args):
        file.write(b"RIFF....")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(omnivoice_output, "_write_blocks", full_disk)
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 1
    assert error_line(r) == f"Error: cannot write {tmp_path / 'x.wav'}: No space left on device"
    assert files_in(tmp_path) == []


def test_unexpected_errors_keep_their_traceback(invoke, fake_engine, tmp_path):
    fake_engine.load_error = RuntimeError("a bug")
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 1
    assert isinstance(r.exception, RuntimeError)  # not swallowed into a neat message


# ------------------------------------------------------------------------------------ listings


def test_languages(invoke):
    r = invoke("languages")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "en\tEnglish" in lines and "zh\tChinese" in lines
    assert all(len(ln.split("\t")) == 2 for ln in lines)
    assert r.stderr == ""


def test_instructs(invoke):
    r = invoke("instructs")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    for item in ("gender:", "  female (女)", "  low pitch (低音调)", "  british accent", "  四川话"):
        assert item in out
    assert r.stderr == ""


@pytest.mark.slow
def test_main_exit_codes_in_a_subprocess(tmp_path):
    """The installed entry point: exit codes and one-line messages, without CliRunner."""
    run = MAIN
    out = subprocess.run(
        run + ["say", "Hi", "--num-step", "0", "-o", str(tmp_path / "x.wav")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "Error: --num-step must be an integer in 1..64, got 0"
    assert out.stdout == ""
    # stdin=DEVNULL: without TEXT a piped stdin would be read (test_piped_stdin_is_the_text_without_a_dash),
    # and the test's own stdin may be a pipe that never ends
    out = subprocess.run(
        run + ["say", "-o", "x.wav"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=ENV,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and out.stderr.startswith("Error: Missing argument 'TEXT'")
    out = subprocess.run(
        run + ["say"], capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=120, stdin=subprocess.DEVNULL
    )
    assert out.returncode == 2 and "Usage" in out.stdout + out.stderr  # no arguments: the help
    assert files_in(tmp_path) == []


# ------------------------------------------------------------------------------------ real engine (slow)

slow = pytest.mark.slow


@slow
def test_golden_auto_en(invoke, tmp_path):
    out = tmp_path / "x.wav"
    r = invoke("say", TEXT, "--model", TINY_CKPT, "--position-temperature", "0", "-o", out)
    assert r.exit_code == 0, r.stderr
    audio, sr = sf.read(str(out), dtype="float32", always_2d=True)
    assert sr == 24000 and audio.shape[1] == 1
    golden = load_file(str(GOLDEN / "auto_en.safetensors"))["item0.audio"]
    assert audio.shape[0] == golden.shape[0]
    assert np.abs(audio[:, 0] - golden).max() < 1e-3


@slow
def test_real_seeds(invoke, tmp_path):
    paths = [tmp_path / f"{i}.wav" for i in range(3)]
    for path, seed in zip(paths, (11, 11, 12)):
        r = invoke("say", "Hello there.", "--model", TINY_CKPT, "--seed", seed, "-o", path, "--quiet")
        assert r.exit_code == 0, r.stderr
    a, b, c = (p.read_bytes() for p in paths)
    assert a == b
    assert a != c


@slow
def test_real_stdout_pipe(tmp_path):
    cmd = MAIN + ["say", "-", "-o", "-", "--model", str(TINY_CKPT), "--seed", "1"]
    out = subprocess.run(cmd, input=b"Text from a pipe\n", capture_output=True, cwd=tmp_path, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    data = out.stdout
    assert data[:4] == b"RIFF" and int.from_bytes(data[4:8], "little") + 8 == len(data)  # nothing else
    audio, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == 24000 and audio.ndim == 1 and len(audio) > 0
    assert "seed 1" in out.stderr.decode()
    assert files_in(tmp_path) == []


@slow
def test_real_json(invoke, tmp_path):
    out = tmp_path / "x.flac"
    r = invoke("say", "Hello there.", "--model", TINY_CKPT, "--seed", 4, "--num-step", 8, "-o", out, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    info = sf.info(str(out))
    assert (info.format, info.samplerate, info.channels) == ("FLAC", 24000, 1)
    assert report["path"] == str(out) and report["seed"] == 4
    assert abs(report["audio_seconds"] - info.frames / 24000) < 1e-3
    assert report["settings"]["num_step"] == 8 and report["settings"]["model"] == str(TINY_CKPT)


@slow
def test_the_summary_and_the_json_name_the_path_preset_fast_took(invoke, tmp_path):
    """`--preset fast` asks for `quantize = "auto"`: the summary says, in words, what it came to on
    this x86 CPU (int8, 16 steps, the step cache), and the time per second of audio (not "RTF");
    --json names the same resolved path beside the setting as asked."""
    out = tmp_path / "x.wav"
    args = ["say", "Hello there.", "--model", TINY_CKPT, "--preset", "fast", "--seed", 4, "-o", out]
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    summary = r.stderr.strip().splitlines()[-1]
    assert summary.endswith("seed 4; int8 on cpu, 16 steps with the step cache"), summary
    assert re.search(r"\(\d+\.\d\d s per second of audio;", summary) and "RTF" not in summary
    report = json.loads(invoke(*args, "--json").stdout)
    assert report["settings"]["quantize"] == "auto"
    assert report["ran"] == {
        "device": "cpu",
        "dtype": "float32",
        "quantize": "int8",
        "num_step": 16,
        "step_cache": True,
    }


@slow
def test_real_long_text_in_chunks(invoke, tmp_path):
    """A text far over 30 s is spoken in chunks (no error), with a pause tag; JSON counts the pieces."""
    text = "This sentence is repeated to make a long text for chunking. " * 12 + "[pause 0.5s] The end."
    out = tmp_path / "long.wav"
    r = invoke("say", text, "--model", TINY_CKPT, "--num-step", 2, "--seed", 1, "-o", out, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["pieces"] > 2 and report["audio_seconds"] > 30
    assert sf.info(str(out)).frames / 24000 == pytest.approx(report["audio_seconds"], abs=1e-3)


@slow
@pytest.mark.parametrize("flag", ["--quantize=int8", "--compile"])
def test_real_speed_flags_give_valid_audio(invoke, tmp_path, flag):
    out = tmp_path / "x.wav"
    r = invoke(
        "say",
        "Hello there.",
        "--model",
        TINY_CKPT,
        "--num-step",
        4,
        "--seed",
        3,
        "-o",
        out,
        "-q",
        "--threads",
        1,
        flag,
        "--device",
        "cpu",
    )
    assert r.exit_code == 0, r.stderr
    audio, sr = sf.read(str(out), dtype="float32")
    assert sr == 24000 and audio.ndim == 1 and len(audio) > 0.5 * sr
    assert np.isfinite(audio).all() and np.abs(audio).max() > 0


@slow
def test_real_ogg(invoke, tmp_path):
    out = tmp_path / "x.ogg"
    r = invoke("say", "Hello there.", "--model", TINY_CKPT, "--num-step", 4, "-o", out, "--quiet")
    assert r.exit_code == 0, r.stderr
    info = sf.info(str(out))
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("OGG", "VORBIS", 24000, 1)


def _edit_config(ckpt, edit):
    path = ckpt / "config.json"
    cfg = json.loads(path.read_text())
    edit(cfg)
    path.write_text(json.dumps(cfg))


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_header(path):
    data = bytearray(path.read_bytes())
    data[8:40] = b"\xff" * 32  # the JSON header is now garbage
    path.write_bytes(bytes(data))


BROKEN_CHECKPOINTS = {
    "missing tokenizer.json": (lambda c: (c / "tokenizer.json").unlink(), "tokenizer.json"),
    "missing codec weights": (lambda c: (c / "audio_tokenizer" / "model.safetensors").unlink(), "model.safetensors"),
    "truncated model": (lambda c: _truncate(c / "model.safetensors"), "model.safetensors"),
    "truncated codec": (lambda c: _truncate(c / "audio_tokenizer" / "model.safetensors"), "model.safetensors"),
    "corrupt model header": (lambda c: _corrupt_header(c / "model.safetensors"), "model.safetensors"),
    "audio_mask_id 1000": (lambda c: _edit_config(c, lambda d: d.update(audio_mask_id=1000)), "audio_mask_id"),
    "rope yarn": (
        lambda c: _edit_config(c, lambda d: d["llm_config"]["rope_parameters"].update(rope_type="yarn")),
        "RoPE",
    ),
    "config not json": (lambda c: (c / "config.json").write_text("{not json"), "config.json"),
}


@slow
@pytest.mark.parametrize("case", list(BROKEN_CHECKPOINTS))
def test_broken_checkpoint(invoke, ckpt_copy, tmp_path, case):
    breaks, fragment = BROKEN_CHECKPOINTS[case]
    breaks(ckpt_copy)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = invoke("say", "Hello", "--model", ckpt_copy, "-o", out_dir / "x.wav")
    assert r.exit_code == 1, (r.exit_code, r.stderr, r.exception)
    assert fragment in error_line(r)
    assert files_in(out_dir) == []


@slow
def test_model_not_downloadable_offline(invoke, tmp_path):
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMNIVOICE_HOME": str(tmp_path / "home")}
    r = invoke("say", "Hello", "--model", "nobody/no-such-omnivoice-model", "-o", tmp_path / "x.wav", env=env)
    assert r.exit_code == 1, (r.stderr, r.exception)
    assert "nobody/no-such-omnivoice-model" in error_line(r)
    assert not (tmp_path / "x.wav").exists()


@slow
def test_missing_checkpoint_folder(invoke, tmp_path):
    r = invoke("say", "Hello", "--model", tmp_path / "no-such-ckpt", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2, r.stderr  # a usage error, before anything loads (test_usage_hints.py)
    assert "no-such-ckpt" in error_line(r)
    assert files_in(tmp_path) == []


# ------------------------------------------------------------------------------------ basics people expect


def test_version(invoke):
    from importlib.metadata import version

    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"omnivoice {version('omnivoice-cli')}"


def test_shell_completion_script(invoke, monkeypatch):
    import typer.completion

    # with shellingham installed the flag takes no value and detects the shell from the parent
    # processes, which a detached test run may not have: say it is bash
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    r = invoke("--show-completion", "bash")
    assert r.exit_code == 0, r.stderr
    assert "_omnivoice_completion" in r.stdout and "complete" in r.stdout


def test_unquoted_words_are_one_text(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello", "big", "world", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["Hello big world"]


def test_text_that_names_a_file_warns_and_suggests_f(invoke, fake_engine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chapter.txt").write_text("The real text.")
    r = invoke("say", "chapter.txt", "-o", "x.wav")
    assert r.exit_code == 0, r.stderr
    assert (
        "Warning: 'chapter.txt' is the name of a file: speaking the name itself (to speak the file's text, give -f chapter.txt)"
        in r.stderr
    )
    assert [q.text for q in fake_engine.requests] == ["chapter.txt"]
    r = invoke("say", "-f", "chapter.txt", "-o", "y.wav")
    assert r.exit_code == 0 and "Warning" not in r.stderr
    assert fake_engine.requests[-1].text == "The real text."


def test_text_over_the_limit_is_refused(invoke, fake_engine, tmp_path, monkeypatch):
    from omnivoice_cli.commands import say

    monkeypatch.setattr(say, "MAX_TEXT_BYTES", 100)
    (tmp_path / "big.txt").write_text("word " * 100)
    r = invoke("say", "-f", tmp_path / "big.txt", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "is over" in error_line(r) and fake_engine.loads == []
