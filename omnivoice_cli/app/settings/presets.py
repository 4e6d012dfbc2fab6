"""Presets: TOML files of settings. Built-in ones ship in `omnivoice_cli/presets/`; user ones live
in `user_preset_dir()` and shadow a built-in preset of the same name. `--preset NAME` looks a name
up; `--preset path.toml` reads a file. Unknown keys are errors naming the allowed ones."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .layers import Source, check_layer
from .schema import PRESET_KEYS, PRESET_META_KEYS, SCHEMA
from .setting import PRESET, SettingsError, Value, flag_name
from .values import did_you_mean, type_name

MAX_PRESET_BYTES = 64 * 1024  # a preset is a few lines; reading stops here


@dataclass(frozen=True)
class Preset:
    """A preset file, read and checked."""

    name: str  # the file name without .toml
    path: Path  # where it was read from
    source: str  # "built-in", "user" or "file"
    settings: dict[str, Value] = field(default_factory=dict)  # only the keys it sets
    description: str = ""

    @property
    def origin(self) -> Source:
        return Source("preset", str(self.path), self.name)


def builtin_preset_dir() -> Path:
    """The presets packaged with omnivoice_cli (omnivoice_cli/presets/*.toml)."""
    return Path(__file__).resolve().parents[2] / "presets"


def user_preset_dir() -> Path:
    """$OMNIVOICE_HOME/presets when set; else $XDG_CONFIG_HOME (or ~/.config)/omnivoice/presets."""
    home = os.environ.get("OMNIVOICE_HOME")
    if home:
        return Path(home).expanduser() / "presets"
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base).expanduser() / "omnivoice" / "presets"


def _read_preset_text(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PRESET_BYTES + 1)
    except FileNotFoundError:
        raise SettingsError(f"preset file '{path}' does not exist") from None
    except IsADirectoryError:
        raise SettingsError(f"preset '{path}' is a folder, not a .toml file") from None
    except OSError as e:
        raise SettingsError(f"cannot read preset file '{path}': {e.strerror or e}") from None
    if len(data) > MAX_PRESET_BYTES:
        raise SettingsError(f"preset file '{path}' is over {MAX_PRESET_BYTES // 1024} KiB: a preset is a few lines")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"preset file '{path}' is not UTF-8 text") from None


def load_preset(path: Path, name: str | None = None, source: str = "file") -> Preset:
    """Read and check one preset file. Errors (SettingsError) name the file and the key."""
    path = Path(path)
    text = _read_preset_text(path)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"preset file '{path}': TOML syntax error: {e}") from None  # "(at line L, column C)"
    except RecursionError:
        raise SettingsError(f"preset file '{path}': nested too deeply") from None
    description = data.pop("description", "")
    if not isinstance(description, str):
        raise SettingsError(f"preset file '{path}': key 'description' must be a string, got {type_name(description)}")
    for key in data:
        if key not in PRESET_KEYS:
            known = (*PRESET_KEYS, *PRESET_META_KEYS)
            hint = did_you_mean(key, known)
            if key in SCHEMA:
                hint = f" ({key} cannot be set by a preset: give {flag_name(key)})"
            raise SettingsError(f"preset file '{path}': unknown key {key!r}{hint}; allowed keys: {', '.join(known)}")
    settings = check_layer(data, Source("preset", str(path)), PRESET)
    if "lexicon" in settings:  # a lexicon file: a relative path is relative to the preset's folder
        settings["lexicon"] = str((path.parent / Path(str(settings["lexicon"])).expanduser()).absolute())
    if "model" in settings:  # a checkpoint folder beside the preset, as its voice path is
        model = Path(str(settings["model"])).expanduser()
        beside = path.parent / model
        if not model.is_absolute() and beside.is_dir():
            settings["model"] = str(beside)
    return Preset(name or path.stem, path, source, settings, description)


def _preset_files(folder: Path) -> dict[str, Path]:
    try:
        return {p.stem: p for p in sorted(folder.glob("*.toml")) if p.is_file()}
    except OSError:
        return {}


def preset_index() -> dict[str, tuple[Path, str]]:
    """name -> (path, source) of every known preset; a user preset shadows a built-in one."""
    index = {name: (path, "built-in") for name, path in _preset_files(builtin_preset_dir()).items()}
    index.update({name: (path, "user") for name, path in _preset_files(user_preset_dir()).items()})
    return dict(sorted(index.items()))


def is_preset_path(spec: str) -> bool:
    """`--preset` names a file (rather than a preset) when it ends in .toml or has a folder in it."""
    return spec.lower().endswith(".toml") or "/" in spec or os.sep in spec


def find_preset(spec: str) -> Preset:
    """`--preset NAME` (user presets, then built-in ones) or `--preset path.toml`."""
    if not isinstance(spec, str) or not spec.strip():
        raise SettingsError("preset name is empty: give a preset name (see `omnivoice presets`) or a .toml file")
    if is_preset_path(spec):
        return load_preset(Path(spec).expanduser(), source="file")
    index = preset_index()
    if spec not in index:
        known = ", ".join(index) or "none"
        raise SettingsError(
            f"unknown preset {spec!r}{did_you_mean(spec, index)}; known presets: {known} "
            f"(user presets go in {user_preset_dir()})"
        )
    path, source = index[spec]
    return load_preset(path, spec, source)


def list_presets() -> list[tuple[str, Path, str, Preset | None, str | None]]:
    """(name, path, source, preset or None, error or None) for every known preset, by name."""
    builtin = _preset_files(builtin_preset_dir())
    out: list[tuple[str, Path, str, Preset | None, str | None]] = []
    for name, (path, source) in preset_index().items():
        if source == "user" and name in builtin:
            source = "user, overrides built-in"
        try:
            out.append((name, path, source, load_preset(path, name, source), None))
        except SettingsError as e:
            out.append((name, path, source, None, str(e)))
    return out
