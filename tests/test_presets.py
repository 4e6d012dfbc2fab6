"""Presets: the built-in ones, user ones, lookup, `omnivoice presets`, `say --preset`, bad files."""

from __future__ import annotations

import sys
import zipfile

import pytest
from conftest import ROOT, error_line, files_in

from omnivoice_cli.app.settings.layers import resolve_settings
from omnivoice_cli.app.settings.presets import builtin_preset_dir, find_preset, list_presets, user_preset_dir
from omnivoice_cli.app.settings.schema import DEFAULT_MODEL, DEFAULTS, GENERATION_DEFAULTS
from omnivoice_cli.app.settings.setting import SettingsError


@pytest.fixture
def presets_home(home):
    """conftest's empty OMNIVOICE_HOME with its presets folder made (user presets go in home/presets)."""
    (home / "presets").mkdir(parents=True)
    return home


# ------------------------------------------------------------------------------------ built-in


def test_builtin_presets(presets_home):
    names = {name: (path, source) for name, path, source, *_ in list_presets()}
    assert {"fast", "balanced", "quality"} <= set(names)
    assert all(source == "built-in" for _, source in names.values())
    fast, balanced, quality = (find_preset(n) for n in ("fast", "balanced", "quality"))
    assert fast.settings["num_step"] == 16
    assert resolve_settings(DEFAULTS, balanced.settings, {}) == DEFAULTS  # balanced = the defaults
    assert quality.settings["num_step"] > DEFAULTS["num_step"]
    for p in (fast, balanced, quality):
        assert p.description and p.source == "built-in"
        # complete recipes: no leaks between presets (fast also takes the fastest CPU path measured)
        assert set(p.settings) - {"quantize"} == set(GENERATION_DEFAULTS)
    assert fast.settings["quantize"] == "auto" and "quantize" not in balanced.settings


def test_builtin_presets_agree_with_the_engine():
    from omnivoice_cli.engine.model.config import GenerationConfig

    for name in ("fast", "balanced", "quality"):
        settings = find_preset(name).settings
        GenerationConfig(**{k: v for k, v in settings.items() if k in GENERATION_DEFAULTS})  # accepted values


def test_presets_are_package_data():
    """pyproject ships presets/*.toml with the package, and they sit inside the package folder."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '"presets/*.toml"' in text
    folder = builtin_preset_dir()
    assert folder == ROOT / "omnivoice_cli" / "presets"
    assert {p.name for p in folder.glob("*.toml")} >= {"fast.toml", "balanced.toml", "quality.toml"}


@pytest.mark.slow
def test_presets_are_in_the_wheel(tmp_path):
    pytest.importorskip("setuptools")
    import shutil
    import subprocess

    src = tmp_path / "src"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(ROOT / "omnivoice_cli", src / "omnivoice_cli", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    if out.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {out.stderr.strip()[-200:]}")
    [wheel] = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("fast", "balanced", "quality"):
        assert f"omnivoice_cli/presets/{name}.toml" in names


# ------------------------------------------------------------------------------------ user presets


def test_user_preset_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "h"))
    assert user_preset_dir() == tmp_path / "h" / "presets"
    monkeypatch.delenv("OMNIVOICE_HOME")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert user_preset_dir() == tmp_path / "cfg" / "omnivoice" / "presets"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert user_preset_dir() == tmp_path / "me" / ".config" / "omnivoice" / "presets"


def test_user_presets_are_found_and_shadow_builtin_ones(presets_home):
    (presets_home / "presets" / "mine.toml").write_text('description = "my voice"\nnum_step = 8\ninstruct = "female"\n')
    (presets_home / "presets" / "fast.toml").write_text("num_step = 4\n")
    assert find_preset("mine").settings == {"num_step": 8, "instruct": "female"}
    assert find_preset("mine").source == "user"
    assert find_preset("fast").settings == {"num_step": 4}
    rows = {name: source for name, _, source, *_ in list_presets()}
    assert rows["mine"] == "user" and rows["fast"] == "user, overrides built-in" and rows["quality"] == "built-in"


def test_preset_by_path(presets_home, tmp_path, monkeypatch):
    f = tmp_path / "my preset.toml"
    f.write_text("num_step = 12\n")
    assert find_preset(str(f)).settings == {"num_step": 12}
    assert find_preset(str(f)).source == "file"
    monkeypatch.chdir(tmp_path)
    assert find_preset("my preset.toml").name == "my preset"


BAD_PRESETS = [
    # (file content, message fragment after "preset file '<path>': ")
    ("num_step = 8\nguidance_scale = \n", "TOML syntax error: Invalid value (at line 2, column 18)"),
    ("num_step = 8\n[section\n", "TOML syntax error"),
    ("num_steps = 8\n", "unknown key 'num_steps' (did you mean 'num_step'?); allowed keys: num_step"),
    ("model = ''\n", "key 'model' must be a hub id or a checkpoint folder, got ''"),
    ("ref = 'me.wav'\n", "unknown key 'ref' (ref cannot be set by a preset: give --ref)"),
    ("seed = -1\n", "key 'seed' must be an integer in 0..9223372036854775807, got -1"),
    ("[generation]\nnum_step = 8\n", "unknown key 'generation'"),
    ("num_step = '8'\n", "key 'num_step' must be an integer in 1..64, got '8' (a string)"),
    ("num_step = 8.0\n", "key 'num_step' must be an integer in 1..64, got 8.0 (a number)"),
    ("num_step = 0\n", "key 'num_step' must be an integer in 1..64, got 0"),
    ("guidance_scale = -1\n", "key 'guidance_scale' must be a number >= 0, got -1.0"),
    ("denoise = 'no'\n", "key 'denoise' must be true or false, got 'no' (a string)"),
    ("device = 'tpu'\n", "key 'device' must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    ("format = 'mp4'\n", "key 'format' must be wav, flac, ogg, opus, mp3, raw, aac, m4a, mulaw, alaw, pcm, got 'mp4'"),
    ("description = 3\n", "key 'description' must be a string, got an integer"),
    ("threads = 0\n", "key 'threads' must be an integer >= 1, got 0"),
    ("quantize = 'int4'\n", "key 'quantize' must be int8, auto or none, got 'int4'"),
    ("compile = 1\n", "key 'compile' must be true or false, got 1 (an integer)"),
    ("chunk_threshold = 45\n", "key 'chunk_threshold' must be seconds in (0, 30], got 45.0"),
    ("chunk_duration = 0\n", "key 'chunk_duration' must be seconds > 0, got 0.0"),
]


@pytest.mark.parametrize("content,message", BAD_PRESETS, ids=[m for _, m in BAD_PRESETS])
def test_bad_preset_files(invoke, fake_engine, presets_home, tmp_path, content, message):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(SettingsError) as e:
        find_preset(str(f))
    assert f"preset file '{f}': {message}" in str(e.value)
    # through the command line: exit 2, one line, before the model
    r = invoke("say", "Hello", "--preset", f, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2, r.stderr
    assert f"preset file '{f}': {message}" in error_line(r)
    assert fake_engine.loads == [] and not (tmp_path / "x.wav").exists()


def test_missing_preset_file(presets_home, tmp_path):
    with pytest.raises(SettingsError, match="preset file '.*nope.toml' does not exist"):
        find_preset(str(tmp_path / "nope.toml"))


def test_unknown_preset_name_lists_the_known_ones(invoke, fake_engine, presets_home):
    (presets_home / "presets" / "mine.toml").write_text("num_step = 8\n")
    r = invoke("say", "Hello", "--preset", "fats")
    assert r.exit_code == 2
    line = error_line(r)
    assert "unknown preset 'fats' (did you mean 'fast'?); known presets: balanced, fast, mine, quality" in line
    assert str(presets_home / "presets") in line
    assert fake_engine.loads == []


def test_a_preset_model_folder_is_relative_to_the_preset(tmp_path):
    (tmp_path / "ckpt").mkdir()
    preset = tmp_path / "local.toml"
    preset.write_text("model = 'ckpt'\n")
    assert find_preset(str(preset)).settings["model"] == str(tmp_path / "ckpt")
    preset.write_text("model = 'owner/name'\n")  # no such folder beside it: a hub id, as given
    assert find_preset(str(preset)).settings["model"] == "owner/name"


# ------------------------------------------------------------------------------------ say --preset


def test_say_with_a_preset(invoke, fake_engine, presets_home, tmp_path):
    r = invoke("say", "Quick draft", "--preset", "fast", "-o", tmp_path / "d.wav", "--json")
    assert r.exit_code == 0, r.stderr
    [req] = fake_engine.requests
    assert req.generation.num_step == 16
    import json

    assert json.loads(r.stdout)["settings"]["num_step"] == 16


def test_say_flags_beat_the_preset(invoke, fake_engine, presets_home, tmp_path):
    (presets_home / "presets" / "mine.toml").write_text(
        'num_step = 8\nguidance_scale = 1.0\nlang = "de"\ndevice = "cpu"\ndtype = "bfloat16"\n'
    )
    r = invoke("say", "Hi", "--preset", "mine", "--num-step", "12", "--dtype", "float32", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    [req] = fake_engine.requests
    assert (req.generation.num_step, req.generation.guidance_scale, req.lang) == (12, 1.0, "de")
    assert fake_engine.loads == [{"model": DEFAULT_MODEL, "device": "cpu", "dtype": "float32"}]


def test_say_preset_engine_and_chunk_settings(invoke, fake_engine, presets_home, tmp_path):
    (presets_home / "presets" / "cpu8.toml").write_text(
        'threads = 2\nquantize = "int8"\ndevice = "cpu"\nchunk_duration = 10\nchunk_threshold = 20.0\n'
    )
    r = invoke("say", "Hi", "--preset", "cpu8", "-o", tmp_path / "x.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads[-1] == {
        "model": DEFAULT_MODEL,
        "device": "cpu",
        "dtype": "auto",
        "threads": 2,
        "quantize": "int8",
    }
    g = fake_engine.requests[-1].generation
    assert (g.audio_chunk_duration, g.audio_chunk_threshold) == (10.0, 20.0)
    # flags beat the preset: int8 off, compile on, other chunk values
    r = invoke(
        "say",
        "Hi",
        "--preset",
        "cpu8",
        "--quantize",
        "none",
        "--compile",
        "--threads",
        "1",
        "--chunk-duration",
        "12",
        "-o",
        tmp_path / "y.wav",
        "-q",
    )
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads[-1] == {
        "model": DEFAULT_MODEL,
        "device": "cpu",
        "dtype": "auto",
        "threads": 1,
        "compile": True,
    }
    assert fake_engine.requests[-1].generation.audio_chunk_duration == 12.0
    # a preset's int8 meeting --compile (or another device or dtype) is left out, with a warning
    r = invoke("say", "Hi", "--preset", "cpu8", "--compile", "-o", tmp_path / "z.wav")
    assert r.exit_code == 0, r.stderr
    assert "Warning: preset cpu8 runs the body in int8" in r.stderr and "(compile True)" in r.stderr
    assert "quantize" not in fake_engine.loads[-1] and fake_engine.loads[-1]["compile"] is True
    r = invoke("say", "Hi", "--preset", "cpu8", "--device", "cuda", "-o", tmp_path / "z.wav", "-q")
    assert r.exit_code == 0 and "quantize" not in fake_engine.loads[-1] and "(device cuda)" in r.stderr
    # the flag itself is still refused
    r = invoke("say", "Hi", "--quantize", "int8", "--compile", "-o", tmp_path / "z.wav")
    assert r.exit_code == 2
    assert "--quantize int8 and --compile cannot be combined" in error_line(r)
    assert len(fake_engine.loads) == 4


def test_say_preset_format_sets_the_format_of_stdout(invoke, fake_engine, presets_home, tmp_path, monkeypatch):
    (presets_home / "presets" / "flac.toml").write_text('format = "flac"\n')
    monkeypatch.chdir(tmp_path)
    r = invoke("say", "Hi", "--preset", "flac", "-o", "-", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes[:4] == b"fLaC"
    r = invoke("say", "Hi", "--preset", "flac", "-o", "given.wav", "-q")  # a file's extension wins over a preset
    assert r.exit_code == 0, r.stderr
    assert "given.wav" in files_in(tmp_path) and not any(f.endswith(".flac") for f in files_in(tmp_path))


def test_say_preset_voice_is_looked_up(invoke, fake_engine, presets_home, tmp_path):
    """A preset's voice: a saved voice's name, or a file relative to the preset's folder."""
    import torch

    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    (presets_home / "presets" / "alice.toml").write_text('voice = "alice"\n')
    r = invoke("say", "Hi", "--preset", "alice", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "alice.toml': key 'voice': unknown voice 'alice'; known voices: none yet" in error_line(r)
    codes = torch.arange(80).reshape(8, 10)
    (presets_home / "voices").mkdir()
    save_voice(presets_home / "voices" / "alice.safetensors", VoicePrompt(codes, "Hello there.", 0.05))
    save_voice(presets_home / "presets" / "bob.safetensors", VoicePrompt(codes + 1, "Bob here.", 0.05))
    (presets_home / "presets" / "bob.toml").write_text('voice = "bob.safetensors"\n')
    for preset, expected in (("alice", codes), ("bob", codes + 1)):
        r = invoke("say", "Hi", "--preset", preset, "-o", tmp_path / f"{preset}.wav", "-q")
        assert r.exit_code == 0, r.stderr
        assert torch.equal(fake_engine.requests[-1].ref.codes, expected)


# ------------------------------------------------------------------------------------ omnivoice presets


def test_presets_command_lists(invoke, presets_home):
    (presets_home / "presets" / "mine.toml").write_text('description = "my own"\nnum_step = 8\n')
    (presets_home / "presets" / "broken.toml").write_text("num_step = \n")
    r = invoke("presets")
    assert r.exit_code == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()]
    names = [row[0] for row in rows]
    assert names == ["balanced", "broken", "fast", "mine", "quality"]
    assert rows[names.index("fast")][1] == "built-in" and "16" in r.stdout.splitlines()[names.index("fast")]
    assert rows[names.index("mine")][1:3] == ["user", "my"]
    assert "(broken: preset file" in r.stdout
    assert "Warning: preset file" in r.stderr and "TOML syntax error" in r.stderr
    assert f"user presets: {presets_home / 'presets'}" in r.stderr


def test_presets_show_prints_the_resolved_settings(invoke, presets_home, tmp_path):
    r = invoke("presets", "show", "quality")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert out.startswith("# preset 'quality' (built-in): ")
    assert "num_step = 64  # preset" in out
    assert 'device = "auto"  # default' in out and 'format = "wav"  # default' in out
    assert "# lang is not set (default)" in out
    # the listing is itself a valid preset file that resolves to the same settings
    copy = tmp_path / "copy.toml"
    copy.write_text(out)
    again = find_preset(str(copy))
    assert resolve_settings(DEFAULTS, again.settings, {}) == resolve_settings(
        DEFAULTS, find_preset("quality").settings, {}
    )


def test_presets_show_a_file_and_errors(invoke, presets_home, tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('instruct = "female, low pitch"\nspeed = 1.1\n')
    r = invoke("presets", "show", f)
    assert r.exit_code == 0, r.stderr
    assert 'instruct = "female, low pitch"  # preset' in r.stdout and "speed = 1.1  # preset" in r.stdout
    assert "num_step = 32  # default" in r.stdout
    r = invoke("presets", "show", "nope")
    assert r.exit_code == 2
    assert "unknown preset 'nope'" in error_line(r)
    assert r.stdout == ""


# ------------------------------------------------------------------------ fast: quantize "auto"


def _force_cpu(monkeypatch, flags, machine="x86_64"):
    from omnivoice_cli.engine.fast import cpu

    monkeypatch.setattr(cpu, "_INFO", cpu.detect(flags, machine, env={}))


ZEN3 = {"sse4_2", "avx", "avx2", "fma", "f16c"}


def test_fast_passes_auto_to_the_engine(invoke, fake_engine, presets_home, tmp_path, monkeypatch):
    """The engine resolves auto (it knows the device); the settings pass it through on the CPU."""
    _force_cpu(monkeypatch, ZEN3)
    r = invoke("say", "Hi", "--preset", "fast", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads[-1]["quantize"] == "auto" and r.stderr == ""
    r = invoke("say", "Hi", "--preset", "fast", "--quantize", "none", "-o", tmp_path / "b.wav", "-q")
    assert "quantize" not in fake_engine.loads[-1]  # a flag turns it off


def test_fasts_auto_meeting_compile_or_bf16_is_left_out_with_a_warning(
    invoke, fake_engine, presets_home, tmp_path, monkeypatch
):
    _force_cpu(monkeypatch, ZEN3)  # auto is int8 there
    r = invoke("say", "Hi", "--preset", "fast", "--compile", "-o", tmp_path / "a.wav")
    assert r.exit_code == 0, r.stderr
    assert (
        "Warning: preset fast (quantize auto) runs the body in int8 on this CPU (avx2), which needs float32 "
        "and no compile: without it here (compile True)"
    ) in " ".join(r.stderr.split())
    assert "quantize" not in fake_engine.loads[-1] and fake_engine.loads[-1]["compile"] is True
    r = invoke("say", "Hi", "--preset", "fast", "--dtype", "bfloat16", "-o", tmp_path / "b.wav")
    assert r.exit_code == 0 and "(dtype bfloat16)" in r.stderr and "quantize" not in fake_engine.loads[-1]
    # the flag too: auto is the fastest path that fits, never an error
    r = invoke("say", "Hi", "--quantize", "auto", "--compile", "-o", tmp_path / "c.wav")
    assert r.exit_code == 0 and "--quantize auto runs the body in int8" in r.stderr
    # a GPU named: auto is nothing there, and nothing is said
    r = invoke("say", "Hi", "--preset", "fast", "--device", "cuda", "-o", tmp_path / "d.wav")
    assert r.exit_code == 0 and "Warning" not in r.stderr and "quantize" not in fake_engine.loads[-1]


def test_fasts_auto_where_it_is_the_exact_path(invoke, fake_engine, presets_home, tmp_path, monkeypatch):
    _force_cpu(monkeypatch, {"fp", "asimd"}, "aarch64")  # no row: auto keeps float32, so nothing clashes
    r = invoke("say", "Hi", "--preset", "fast", "--compile", "-o", tmp_path / "a.wav")
    assert r.exit_code == 0 and "Warning" not in r.stderr
    assert fake_engine.loads[-1]["quantize"] == "auto" and fake_engine.loads[-1]["compile"] is True


def test_fasts_auto_at_one_thread_on_amx_is_bf16_with_nothing_to_drop(
    invoke, fake_engine, presets_home, tmp_path, monkeypatch
):
    amx = {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "amx_tile", "amx_bf16"}
    _force_cpu(monkeypatch, amx | {"avx512_bf16", "avx512_vnni", "amx_int8"})
    r = invoke("say", "Hi", "--preset", "fast", "--threads", "1", "--dtype", "bfloat16", "-o", tmp_path / "a.wav")
    assert r.exit_code == 0 and "Warning" not in r.stderr  # bf16 is what auto runs at 1 thread there
    assert fake_engine.loads[-1]["quantize"] == "auto" and fake_engine.loads[-1]["dtype"] == "bfloat16"
    r = invoke("say", "Hi", "--preset", "fast", "--threads", "2", "--dtype", "bfloat16", "-o", tmp_path / "b.wav")
    assert r.exit_code == 0 and "(dtype bfloat16)" in r.stderr and "quantize" not in fake_engine.loads[-1]
