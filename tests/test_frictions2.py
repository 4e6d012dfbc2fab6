"""Issue 23 (small frictions): `say --json` reports the speed it used."""

from __future__ import annotations

import json

import pytest


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
