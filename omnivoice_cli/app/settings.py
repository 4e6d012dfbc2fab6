"""The one schema of settings, where the settings of one run (or one request) come from, and presets:
the face of `schema`, `values`, `layers` and `presets` (app/), whose names it re-exports.

Every setting a person can give is described once, in `SCHEMA`: its name (the reference's field
name), type, allowed values, default, one-line help, help panel and the ways in that accept it
(command-line flag, preset key, JSON-line field, HTTP field). From it come the typer options of
every command (`options.py`), the checks of flags, presets, JSON lines and server requests, `presets
show` and the settings table of docs/settings.md (a test keeps the two in step).

A bad value gives the same words wherever it came from, after a prefix naming the source:

    --num-step must be an integer in 1..64, got 100
    preset file 'fast.toml': key 'num_step' must be an integer in 1..64, got 100
    line 7: field 'num_step' must be an integer in 1..64, got 100

Four layers, later ones win (`resolve`, the one place that merges them):

    built-in defaults  <  a preset  <  the command-line flags  <  the fields of a JSON line / request

An environment variable named by a setting (`envvar`: OMNIVOICE_MODEL for `model`) is read here
too, as that setting's default: a preset and a flag still win over it.

A layer leaves a setting alone by not naming it or by giving None. Presets are TOML files:
built-in ones ship in `omnivoice_cli/presets/`; user ones live in `user_preset_dir()` and shadow
a built-in preset of the same name. `--preset NAME` looks a name up; `--preset path.toml` reads a file.

These modules import nothing heavy (no torch), so that building the command line and `--help` stay
fast. Defaults come from the engine's config dataclasses (engine/config.py imports no torch).
"""

from __future__ import annotations

from .layers import (
    DEFAULT_SOURCE,
    FLAG_SOURCE,
    Resolved,
    Source,
    check_engine_options,
    check_layer,
    engine_options,
    environment_defaults,
    generation_kwargs,
    resolve,
    resolve_settings,
)
from .presets import (
    MAX_PRESET_BYTES,
    Preset,
    builtin_preset_dir,
    find_preset,
    is_preset_path,
    list_presets,
    load_preset,
    preset_index,
    user_preset_dir,
)
from .schema import (
    CHUNK_DEFAULTS,
    CHUNK_FIELDS,
    DEFAULT_ASR_MODEL,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT,
    DEFAULT_OUTPUT_STEM,
    DEFAULTS,
    DTYPES,
    FORMATS,
    GENERATION_DEFAULTS,
    GENERATION_KEYS,
    HTTP_SETTINGS,
    LINE_SETTINGS,
    LOUDNESS_RULE,
    MAX_DURATION,
    MAX_NUM_STEP,
    MAX_SEED,
    MAX_THREADS,
    PRESET_KEYS,
    PRESET_META_KEYS,
    QUANTIZE,
    RUN_WIDE,
    SCHEMA,
)
from .setting import (
    EVERYWHERE,
    FLAG,
    HTTP,
    LINE,
    PANELS,
    PRESET,
    Setting,
    SettingsError,
    Value,
    flag_name,
)
from .values import (
    allowed,
    check_setting,
    did_you_mean,
    join_lines,
    or_list,
    parse_text,
    shown_value,
    type_name,
)

__all__ = [
    "CHUNK_DEFAULTS",
    "CHUNK_FIELDS",
    "DEFAULT_ASR_MODEL",
    "DEFAULT_MODEL",
    "DEFAULT_OUTPUT",
    "DEFAULT_OUTPUT_STEM",
    "DEFAULTS",
    "DTYPES",
    "EVERYWHERE",
    "FLAG",
    "FORMATS",
    "GENERATION_DEFAULTS",
    "GENERATION_KEYS",
    "HTTP",
    "HTTP_SETTINGS",
    "LINE",
    "LINE_SETTINGS",
    "LOUDNESS_RULE",
    "MAX_DURATION",
    "MAX_NUM_STEP",
    "MAX_SEED",
    "MAX_THREADS",
    "PANELS",
    "PRESET",
    "PRESET_KEYS",
    "PRESET_META_KEYS",
    "QUANTIZE",
    "RUN_WIDE",
    "SCHEMA",
    "flag_name",
    "Setting",
    "SettingsError",
    "Value",
    "allowed",
    "check_setting",
    "did_you_mean",
    "join_lines",
    "or_list",
    "parse_text",
    "shown_value",
    "type_name",
    "DEFAULT_SOURCE",
    "FLAG_SOURCE",
    "check_engine_options",
    "check_layer",
    "engine_options",
    "environment_defaults",
    "generation_kwargs",
    "resolve",
    "resolve_settings",
    "Resolved",
    "Source",
    "MAX_PRESET_BYTES",
    "builtin_preset_dir",
    "find_preset",
    "is_preset_path",
    "list_presets",
    "load_preset",
    "Preset",
    "preset_index",
    "user_preset_dir",
]
