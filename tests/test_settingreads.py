"""app/settings/settingreads.py: the typed reads of resolved settings, generated from the schema by
tools/settings_types.py. The file is what the schema makes now, and the types it gives are the
types the settings hold at run time."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest

from omnivoice_cli.app.settings import settingreads
from omnivoice_cli.app.settings.layers import resolve
from omnivoice_cli.app.settings.schema import SCHEMA
from omnivoice_cli.app.settings.values import check_setting

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("settings_types", ROOT / "tools" / "settings_types.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _typed() -> dict[str, tuple[type, bool]]:
    """key -> (its kind, whether it may be None), read from the generated file's aliases."""
    out = {}
    for name, kind in {"Int": int, "Float": float, "Bool": bool, "Str": str}.items():
        for unset in (False, True):
            alias = getattr(settingreads, ("Opt" if unset else "") + name + "Key", None)
            for key in typing.get_args(alias) if alias is not None else ():
                assert key not in out, f"{key} typed twice"
                out[key] = (kind, unset)
    return out


def test_the_generated_reads_are_the_schemas():
    text = (ROOT / "omnivoice_cli" / "app" / "settings" / "settingreads.py").read_text()
    assert text == _tool().render(), "run python tools/settings_types.py"


def test_every_setting_is_typed_once_by_its_kind():
    typed = _typed()
    assert set(typed) == set(SCHEMA)
    for key, (kind, unset) in typed.items():
        assert kind is SCHEMA[key].kind, key
        assert unset == (SCHEMA[key].default is None), key


@pytest.mark.parametrize("key", sorted(SCHEMA))
def test_a_read_holds_the_type_it_is_given(key, monkeypatch):
    for s in SCHEMA.values():
        if s.envvar:
            monkeypatch.delenv(s.envvar, raising=False)
    kind, unset = _typed()[key]
    value = resolve()[key]
    if value is None:
        assert unset
    else:
        assert type(value) is kind
        assert type(check_setting(key, value)) is kind  # what a layer gives is checked to the same kind
