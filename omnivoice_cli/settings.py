"""Where the settings of one run (or one batch line) come from, and presets.

Four layers, later ones win (`resolve_settings`, the one place that merges them):

    built-in defaults  <  a preset  <  the command-line flags  <  the fields of a JSON line

A layer leaves a setting alone by not naming it or by giving None. Presets are TOML files:
built-in ones ship in `omnivoice_cli/presets/`; user ones live in `user_preset_dir()`
(`$OMNIVOICE_HOME/presets` when OMNIVOICE_HOME is set, else the platform config folder, e.g.
`$XDG_CONFIG_HOME/omnivoice/presets` or `~/.config/omnivoice/presets`) and shadow a built-in
preset of the same name. `--preset NAME` looks a name up; `--preset path.toml` reads a file.

This module imports nothing heavy (no torch, not even the engine package), so that building the
command line and `--help` stay fast. The defaults below are the engine's own (`GenerationConfig`,
`weights.DEFAULT_MODEL`); tests/test_cli.py checks that they agree.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

DEFAULT_MODEL = "k2-fsa/OmniVoice"  # hub id used when neither --model nor $OMNIVOICE_MODEL is given
DEFAULT_OUTPUT_STEM = "omnivoice"  # `say` writes omnivoice.<format> in the current folder by default
DEFAULT_OUTPUT = DEFAULT_OUTPUT_STEM + ".wav"

# Decoding settings, passed to GenerationConfig (same names).
GENERATION_DEFAULTS: dict[str, Any] = {
    "num_step": 32,
    "guidance_scale": 2.0,
    "t_shift": 0.1,
    "layer_penalty_factor": 5.0,
    "position_temperature": 5.0,
    "class_temperature": 0.0,
    "denoise": True,
}

# Long texts: GenerationConfig.audio_chunk_duration / audio_chunk_threshold, under shorter names.
CHUNK_DEFAULTS: dict[str, Any] = {
    "chunk_duration": 15.0,  # seconds of speech per chunk of a long text
    "chunk_threshold": 30.0,  # texts estimated longer than this (seconds, at most 30) are chunked
}
CHUNK_FIELDS = {"chunk_duration": "audio_chunk_duration", "chunk_threshold": "audio_chunk_threshold"}

# How the model is loaded (Engine.load): one engine per run.
ENGINE_DEFAULTS: dict[str, Any] = {
    "threads": None,  # torch CPU threads; None = torch's default
    "quantize": "none",  # none | int8 (dynamic int8 body, CPU only)
    "compile": False,  # torch.compile the per-step forward
}

# Everything a run can be told, with its built-in default.
DEFAULTS: dict[str, Any] = {
    "model": DEFAULT_MODEL,  # hub id or local checkpoint folder
    "device": "auto",  # auto | cpu | cuda | cuda:N | mps
    "dtype": "auto",  # auto | float32 | float16 | bfloat16
    "format": "wav",  # audio file format when the output name does not say: wav | flac | ogg
    "lang": None,  # language code or name; None = language-agnostic
    "instruct": None,  # voice-design items; None = auto voice
    "voice": None,  # a saved voice file to clone; None = auto voice / voice design
    "speed": None,  # speaking-rate factor; None = 1.0
    "duration": None,  # fixed length in seconds; None = estimated from the text
    "seed": None,  # None = a fresh random seed (printed, so the run can be repeated)
    **GENERATION_DEFAULTS,
    **CHUNK_DEFAULTS,
    **ENGINE_DEFAULTS,
}

DEVICES = ("auto", "cpu", "cuda", "mps")  # plus cuda:N
DTYPES = ("auto", "float32", "float16", "bfloat16")
FORMATS = ("wav", "flac", "ogg")
QUANTIZE = ("none", "int8")
MAX_NUM_STEP = 64
MAX_DURATION = 30.0
MAX_SEED = 2**63 - 1

# The settings a preset may set: every generation setting plus the chunk settings, lang,
# instruct, voice, device, dtype, format, threads, quantize and compile. Not model (a preset
# describes how to speak, not what to load) nor seed.
PRESET_KEYS: tuple[str, ...] = (
    *GENERATION_DEFAULTS,
    "speed",
    "duration",
    *CHUNK_DEFAULTS,
    "lang",
    "instruct",
    "voice",
    "device",
    "dtype",
    "format",
    *ENGINE_DEFAULTS,
)
PRESET_META_KEYS = ("description",)  # allowed in a preset file, not a setting

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|mps|cuda:\d+)$")


class SettingsError(ValueError):
    """A preset or setting is unknown, of the wrong type or out of range (a usage error)."""


# --------------------------------------------------------------------------------------------
# One setting: its type and allowed values
# --------------------------------------------------------------------------------------------

_INT, _FLOAT, _BOOL, _STR = "int", "float", "bool", "str"

# key -> (kind, what is allowed (for messages), value check)
_SCHEMA: dict[str, tuple[str, str, Any]] = {
    "num_step": (_INT, f"an integer in 1..{MAX_NUM_STEP}", lambda v: 1 <= v <= MAX_NUM_STEP),
    "guidance_scale": (_FLOAT, "a number >= 0", lambda v: v >= 0),
    "t_shift": (_FLOAT, "a number > 0", lambda v: v > 0),
    "layer_penalty_factor": (_FLOAT, "a number >= 0", lambda v: v >= 0),
    "position_temperature": (_FLOAT, "a number >= 0", lambda v: v >= 0),
    "class_temperature": (_FLOAT, "a number >= 0", lambda v: v >= 0),
    "denoise": (_BOOL, "true or false", None),
    "speed": (_FLOAT, "a number > 0 (1.0 is normal)", lambda v: v > 0),
    "duration": (_FLOAT, f"seconds in (0, {MAX_DURATION:g}]", lambda v: 0 < v <= MAX_DURATION),
    "seed": (_INT, f"an integer in 0..{MAX_SEED}", lambda v: 0 <= v <= MAX_SEED),
    "model": (_STR, "a hub id or a checkpoint folder", lambda v: bool(v.strip())),
    "device": (_STR, "auto, cpu, cuda, cuda:N or mps", lambda v: bool(_DEVICE_RE.match(v))),
    "dtype": (_STR, ", ".join(DTYPES), lambda v: v in DTYPES),
    "format": (_STR, ", ".join(FORMATS), lambda v: v in FORMATS),
    "lang": (_STR, "a language code or name", None),
    "instruct": (_STR, 'voice-design items, e.g. "female, low pitch"', None),
    "voice": (_STR, "a saved voice name or the path of a voice file", lambda v: bool(v.strip())),
    "chunk_duration": (_FLOAT, "seconds > 0", lambda v: v > 0),
    "chunk_threshold": (_FLOAT, f"seconds in (0, {MAX_DURATION:g}]", lambda v: 0 < v <= MAX_DURATION),
    "threads": (_INT, "an integer >= 1", lambda v: v >= 1),
    "quantize": (_STR, "int8 or none", lambda v: v in QUANTIZE),
    "compile": (_BOOL, "true or false", None),
}


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table/object"
    return type(value).__name__


def allowed(key: str) -> str:
    """What a setting accepts, in words: 'an integer in 1..64'."""
    return _SCHEMA[key][1]


def check_setting(key: str, value: Any) -> Any:
    """Check one setting's type and value; return it (an int becomes a float where a number is due).

    Raises SettingsError with a message that does not name where the value came from, e.g.
    "must be an integer in 1..64, got 0" (callers add "file: key 'num_step': " or "line 3: ...").
    """
    kind, allowed, ok = _SCHEMA[key]
    bad_type = (
        (kind == _INT and (isinstance(value, bool) or not isinstance(value, int)))
        or (kind == _FLOAT and (isinstance(value, bool) or not isinstance(value, (int, float))))
        or (kind == _BOOL and not isinstance(value, bool))
        or (kind == _STR and not isinstance(value, str))
    )
    if bad_type:
        raise SettingsError(f"must be {allowed}, got {value!r} ({_type_name(value)})")
    if kind == _FLOAT:
        value = float(value)
        if not math.isfinite(value):
            raise SettingsError(f"must be {allowed}, got {value!r}")
    if ok is not None and not ok(value):
        raise SettingsError(f"must be {allowed}, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# The layers
# --------------------------------------------------------------------------------------------


def resolve_settings(
    defaults: Mapping[str, Any],
    preset: Mapping[str, Any] | None,
    flags: Mapping[str, Any],
    line: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge the layers: defaults < preset < flags < line. None in a layer means "not given there".

    Every key of `preset`, `flags` and `line` must be a key of `defaults` (SettingsError
    otherwise), so a typo is reported rather than ignored. Values are not checked here: presets
    and JSON lines are checked where they are read (`load_preset`, the batch reader).
    """
    merged = dict(defaults)
    for where, layer in (("preset", preset), ("flags", flags), ("line", line)):
        for key, value in (layer or {}).items():
            if key not in defaults:
                allowed = ", ".join(sorted(defaults))
                raise SettingsError(f"{where}: unknown setting {key!r}; known settings: {allowed}")
            if value is not None:
                merged[key] = value
    return merged


def generation_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The part of resolved settings that goes to GenerationConfig(**kwargs)."""
    kwargs = {k: settings[k] for k in GENERATION_DEFAULTS if k in settings}
    kwargs.update({CHUNK_FIELDS[k]: settings[k] for k in CHUNK_FIELDS if settings.get(k) is not None})
    return kwargs


def engine_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of Engine.load for quantize, compile and threads; only those asked for
    (so the defaults leave Engine.load's own defaults alone)."""
    kwargs: dict[str, Any] = {}
    if settings.get("quantize") not in (None, "none"):
        kwargs["quantize"] = settings["quantize"]
    if settings.get("compile"):
        kwargs["compile"] = True
    if settings.get("threads") is not None:
        kwargs["threads"] = settings["threads"]
    return kwargs


def check_engine_options(settings: Mapping[str, Any]) -> None:
    """Refuse combinations Engine.load would refuse, before the model is loaded (SettingsError,
    in flag names). quantize int8 wants the CPU, float32 weights and no compile."""
    if settings.get("quantize") != "int8":
        return
    if settings.get("compile"):
        raise SettingsError("--quantize int8 and --compile cannot be combined: choose one")
    if settings.get("device") not in (None, "auto", "cpu"):
        raise SettingsError(
            f"--quantize int8 runs on the CPU only, not on {settings['device']!r}: use --device cpu"
        )
    if settings.get("dtype") not in (None, "auto", "float32"):
        raise SettingsError(
            f"--quantize int8 starts from float32 weights, not {settings['dtype']}: leave --dtype at auto"
        )


_LINE_BREAK_RE = re.compile(r"[ \t]*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])+[ \t]*")


def join_lines(text: str) -> str:
    """Line breaks (and the spaces around them) become one space; the ends are stripped.

    The engine, like the reference, deletes line breaks without a space, which would glue the
    last word of a line to the first word of the next: every text goes through this first."""
    if not isinstance(text, str):
        return text
    return _LINE_BREAK_RE.sub(" ", text).strip()


def flag_name(setting: str) -> str:
    """The command-line spelling of a setting: 'num_step' -> '--num-step'."""
    return "--" + setting.replace("_", "-")


def did_you_mean(word: str, choices) -> str:
    """" (did you mean 'x'?)" or ""."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """A preset file, read and checked."""

    name: str  # the file name without .toml
    path: Path  # where it was read from
    source: str  # "built-in", "user" or "file"
    settings: dict[str, Any] = field(default_factory=dict)  # only the keys it sets
    description: str = ""


def builtin_preset_dir() -> Path:
    """The presets packaged with omnivoice_cli (omnivoice_cli/presets/*.toml)."""
    return Path(__file__).resolve().parent / "presets"


def user_preset_dir() -> Path:
    """$OMNIVOICE_HOME/presets when set; else $XDG_CONFIG_HOME (or ~/.config)/omnivoice/presets."""
    home = os.environ.get("OMNIVOICE_HOME")
    if home:
        return Path(home).expanduser() / "presets"
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"  # as weights.user_home() for data
    return Path(base).expanduser() / "omnivoice" / "presets"


def load_preset(path: Path, name: str | None = None, source: str = "file") -> Preset:
    """Read and check one preset file. Errors (SettingsError) name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(f"preset file '{path}' does not exist") from None
    except IsADirectoryError:
        raise SettingsError(f"preset '{path}' is a folder, not a .toml file") from None
    except UnicodeDecodeError:
        raise SettingsError(f"preset file '{path}' is not UTF-8 text") from None
    except OSError as e:
        raise SettingsError(f"cannot read preset file '{path}': {e.strerror or e}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"preset file '{path}': TOML syntax error: {e}") from None  # "(at line L, column C)"
    settings: dict[str, Any] = {}
    description = ""
    for key, value in data.items():
        if key in PRESET_META_KEYS:
            if not isinstance(value, str):
                raise SettingsError(f"preset file '{path}': key {key!r} must be a string, got {_type_name(value)}")
            description = value
            continue
        if key not in PRESET_KEYS:
            known = (*PRESET_KEYS, *PRESET_META_KEYS)
            hint = did_you_mean(key, known)
            if key in ("model", "seed"):
                hint = f" ({key} cannot be set by a preset: give {flag_name(key)})"
            raise SettingsError(
                f"preset file '{path}': unknown key {key!r}{hint}; allowed keys: {', '.join(known)}"
            )
        try:
            settings[key] = check_setting(key, value)
        except SettingsError as e:
            raise SettingsError(f"preset file '{path}': key {key!r} {e}") from None
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
    out = []
    for name, (path, source) in preset_index().items():
        if source == "user" and name in builtin:
            source = "user, overrides built-in"
        try:
            out.append((name, path, source, load_preset(path, name, source), None))
        except SettingsError as e:
            out.append((name, path, source, None, str(e)))
    return out
