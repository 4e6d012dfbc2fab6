"""session.py: the app layer's shared rules (hardware record, seeds, warn-once, the run's session)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from omnivoice_cli.app.session import NoProgress, Session, WarnOnce, check_seed_range, hardware_from_settings, seed_for
from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve
from omnivoice_cli.app.settings.presets import find_preset
from omnivoice_cli.app.settings.schema import DEFAULTS, MAX_SEED
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.hardware import Hardware


def test_the_hardware_record_is_built_from_the_settings_flags():
    """hardware_from_settings: the engine's one record (engine/hardware.py) from resolved settings;
    the defaults give the record's defaults, quantize "none" is no quantisation."""
    assert hardware_from_settings(resolve().values) == Hardware()
    flags = {"device": "cpu", "dtype": "float32", "quantize": "int8", "threads": 3, "compile": False}
    assert hardware_from_settings(resolve((FLAG_SOURCE, flags)).values) == Hardware(
        device="cpu", dtype="float32", quantize="int8", threads=3
    )
    compiled = resolve((FLAG_SOURCE, {"compile": True, "device": "cuda", "dtype": "bfloat16"})).values
    assert hardware_from_settings(compiled) == Hardware(device="cuda", dtype="bfloat16", compile=True)
    assert hardware_from_settings({**DEFAULTS, "quantize": "none"}).quantize is None


def test_the_hardware_record_takes_a_preset_under_the_flags():
    """The fast preset's `quantize = "auto"` reaches the record; a flag over it wins."""
    fast = find_preset("fast")
    preset = (fast.origin, fast.settings)
    assert hardware_from_settings(resolve(preset, (FLAG_SOURCE, {"threads": 2})).values) == Hardware(
        quantize="auto", threads=2
    )
    flagged = resolve(preset, (FLAG_SOURCE, {"quantize": "int8"})).values
    assert hardware_from_settings(flagged).quantize == "int8"


def test_the_loaded_hardware_comes_from_env_preset_and_flags(invoke, fake_engine, tmp_path, monkeypatch):
    """say: the model from the environment, quantize from the preset, threads and device from the
    flags, in one record handed to Engine.load."""
    monkeypatch.setenv("OMNIVOICE_MODEL", "env/model")
    out = tmp_path / "a.wav"
    r = invoke("say", "Hello.", "-o", out, "--preset", "fast", "--threads", "1", "--device", "cpu", "--seed", "1")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [
        {"model": "env/model", "device": "cpu", "dtype": "auto", "quantize": "auto", "threads": 1}
    ]


def test_seed_for_checks_the_last_seed_of_a_run():
    assert seed_for(10, 3) == 13
    assert seed_for(MAX_SEED - 2, 2) == MAX_SEED
    with pytest.raises(InvalidRequest, match=rf"seed {MAX_SEED - 2} \+ 3 is more than {MAX_SEED}"):
        seed_for(MAX_SEED - 2, 3)
    check_seed_range(MAX_SEED, 1)
    with pytest.raises(InvalidRequest):
        check_seed_range(MAX_SEED, 2)


def test_warn_once_shows_each_text_once_and_new_only_reports():
    shown: list[str] = []
    once = WarnOnce(shown.append)
    once(["a", "b", "a"])
    once(["b", "c"])
    assert shown == ["a", "b", "c"] and once.shown == ["a", "b", "c"]
    assert once.new(["c", "d", "d"]) == ["d"] and shown == ["a", "b", "c"]  # new() shows nothing


def test_a_session_loads_through_its_status_line_and_notices(fake_engine):
    seen: list[str] = []

    @contextmanager
    def status(message: str):
        seen.append(message)
        yield

    session = Session(echo=seen.append, status=status, notice=seen.append)
    engine, seconds = session.load_engine("x", Hardware(threads=2), encoder=True)
    assert seconds >= 0 and fake_engine.encoder_loads == 1
    assert seen == [
        "loading the model (x) ...",
        "fake notice: weights are for testing only",
        "loading the voice encoder ...",
    ]
    assert fake_engine.loads == [{"model": "x", "device": "auto", "dtype": "auto", "threads": 2}]


def test_no_progress_is_a_progress_that_shows_nothing():
    with NoProgress(3) as p:
        p.line("done")
        p.step(1, 2)
    assert p.shows_steps is False
