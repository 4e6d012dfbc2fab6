"""One schema of settings: every way in gives the same words for a bad value; help and docs/settings.md follow it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from omnivoice_cli.app.settings.schema import (
    CHUNK_FIELDS,
    DEFAULTS,
    GENERATION_KEYS,
    MAX_DURATION,
    MAX_NUM_STEP,
    SCHEMA,
)
from omnivoice_cli.app.settings.setting import FLAG, LINE, PANELS, PRESET, SettingsError, flag_name
from omnivoice_cli.app.settings.values import check_setting
from omnivoice_cli.ui.options import settings_table

# One bad value per setting, the same in every way in (a flag gets it as text). Settings with no
# bad value of the same type in every way (lang takes any text) or given only one way are left out.
BAD = {
    "num_step": 0,
    "guidance_scale": -1,
    "t_shift": 0,
    "layer_penalty_factor": 2000,
    "position_temperature": -1,
    "class_temperature": 1e9,
    "speed": 0,
    "duration": 31,
    "chunk_duration": 0,
    "chunk_threshold": 31,
    "instruct": "robot voice",
    "voice": "nobody-here",
    "seed": -1,
    "format": "aiff",
    "device": "tpu",
    "dtype": "float64",
    "threads": 0,
    "quantize": "int4",
}
BOOLEAN_BAD = {"denoise": "yes", "compile": "yes"}  # a switch on the command line cannot be bad


def _toml(value) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _body(message: str, prefix: str) -> str:
    assert message.startswith(prefix), (message, prefix)
    return message[len(prefix) :].lstrip(": ")


def _flag_error(invoke, key, value, tmp_path):
    r = invoke("say", "Hello", flag_name(key), str(value), "-o", tmp_path / "x.wav")
    return r.exit_code, [ln[7:] for ln in r.stderr.splitlines() if ln.startswith("Error: ")]


def _preset_error(invoke, key, value, tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text(f"{key} = {_toml(value)}\n")
    r = invoke("say", "Hello", "--preset", preset, "-o", tmp_path / "x.wav")
    return r.exit_code, [ln[7:] for ln in r.stderr.splitlines() if ln.startswith("Error: ")], preset


def _line_error(invoke, key, value, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text(json.dumps({"text": "Hello", key: value}) + "\n" + json.dumps({"text": "Fine."}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out")
    records = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    return r.exit_code, records


@pytest.mark.parametrize("key", sorted(BAD))
def test_a_bad_value_reads_the_same_from_every_way_in(invoke, fake_engine, tmp_path, monkeypatch, key):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    value, s = BAD[key], SCHEMA[key]
    bodies = {}
    if FLAG in s.where:
        code, errors = _flag_error(invoke, key, value, tmp_path)
        assert code == 2 and len(errors) == 1, errors
        bodies["flag"] = _body(errors[0], flag_name(key))
    if PRESET in s.where:
        code, errors, preset = _preset_error(invoke, key, value, tmp_path)
        assert code == 2 and len(errors) == 1, errors
        bodies["preset"] = _body(errors[0], f"preset file '{preset}': key {key!r}")
    if LINE in s.where:
        code, records = _line_error(invoke, key, value, tmp_path)
        assert code == 1  # the bad line fails alone (and the batch says a line failed); the other is spoken
        assert [r["status"] for r in records] == ["failed", "done"]
        bodies["line"] = _body(records[0]["error"], f"line 1: field {key!r}")
    assert len(bodies) >= 2 and len(set(bodies.values())) == 1, bodies
    assert fake_engine.loads == [] or "line" in bodies  # flags and presets fail before the model


@pytest.mark.parametrize("key", sorted(BOOLEAN_BAD))
def test_a_bad_switch_reads_the_same_in_a_preset_and_a_line(invoke, fake_engine, tmp_path, key):
    s = SCHEMA[key]
    bodies = {}
    _, errors, preset = _preset_error(invoke, key, BOOLEAN_BAD[key], tmp_path)
    bodies["preset"] = _body(errors[0], f"preset file '{preset}': key {key!r}")
    if LINE in s.where:
        _, records = _line_error(invoke, key, BOOLEAN_BAD[key], tmp_path)
        bodies["line"] = _body(records[0]["error"], f"line 1: field {key!r}")
    assert set(bodies.values()) == {"must be true or false, got 'yes' (a string)"}


def test_every_setting_is_complete():
    for key, s in SCHEMA.items():
        assert s.help and s.panel in PANELS and s.allowed and s.where, key
        assert s.kind in (int, float, bool, str), key
        if s.default is not None:
            assert check_setting(key, s.default) == s.default, key


def test_defaults_come_from_the_engine():
    from omnivoice_cli.engine.model.config import GenerationConfig, ModelConfig

    g = GenerationConfig()
    for key in GENERATION_KEYS:
        assert DEFAULTS[key] == getattr(g, key), key
    assert (DEFAULTS["chunk_duration"], DEFAULTS["chunk_threshold"]) == (
        g.audio_chunk_duration,
        g.audio_chunk_threshold,
    )
    assert MAX_NUM_STEP == g.max_num_step and MAX_DURATION == ModelConfig().max_target_seconds


def test_the_docs_settings_table_is_the_schema():
    readme = (ROOT / "docs" / "settings.md").read_text()
    m = re.search(r"<!-- settings-table -->\n(.*?)<!-- /settings-table -->", readme, re.S)
    assert m, "docs/settings.md lacks the settings table markers"
    assert m.group(1).strip() == settings_table().strip(), "run python tools/docs_settings.py"


def _help(args, columns=80, flag="--help") -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "TERM": "dumb"}
    out = subprocess.run(
        [sys.executable, "-c", "from omnivoice_cli.cli import main; main()", *args, flag],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", [["say"], ["batch"], ["voice", "add"]])
def test_help_at_80_columns_shows_every_flag_whole(command):
    import typer.main

    from omnivoice_cli.cli import app

    text = _help(command, flag="--help-all")  # --help leaves the Advanced panel out
    assert max(len(line) for line in text.splitlines()) <= 80
    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.get_command(None, name) if hasattr(cmd, "get_command") else cmd
    flags = [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    words = set(re.findall(r"--[a-z][a-z0-9-]*", text))
    assert set(flags) <= words, set(flags) - words
    assert not re.search(r"<(bool|str|int|float|list\[str\])>", text)
    for panel in ("Input", "Voice", "Generation", "Output", "Hardware", "Examples"):
        if command == ["say"]:
            assert f"─ {panel} " in text, panel


@pytest.mark.slow
def test_examples_end_each_main_command_help():
    for command in (["say"], ["batch"]):
        text = _help(command)
        assert "Examples" in text and f"omnivoice {command[0]} " in text.split("Examples", 1)[1]


def test_the_schema_checks_the_engines_values_by_the_engines_rules():
    """A generation value the schema accepts the engine accepts, and one the engine refuses the
    schema refuses in the engine's own words (the schema may add sane bounds of its own)."""
    from omnivoice_cli.engine.errors import InvalidRequest
    from omnivoice_cli.engine.model.config import GenerationConfig, value_rule

    fields = {**{k: k for k in GENERATION_KEYS if k != "denoise"}, **CHUNK_FIELDS}
    probes = [-1, 0, 1e-3, 0.5, 1, 2, 29.5, 30, 30.5, 64, 65, 2000]
    for key, name in fields.items():
        kind = SCHEMA[key].kind
        for value in [v for v in probes if kind is float or float(v).is_integer()]:
            value = kind(value)
            try:
                GenerationConfig(**{name: value})
                engine_ok = True
            except InvalidRequest:
                engine_ok = False
            try:
                check_setting(key, value)
                schema_ok = True
            except SettingsError as e:
                schema_ok = False
                if not engine_ok:
                    assert str(e).startswith(f"must be {value_rule(name).allowed}, got"), (key, value, str(e))
            assert engine_ok or not schema_ok, (key, value)
