"""Where the settings of one `omnivoice say` run come from.

Three layers, later ones win: the built-in defaults < a preset (a later issue; None for now) <
the command-line flags (and their environment variables). A layer leaves a setting alone by not
naming it or by giving None.

This module imports nothing heavy (no torch, not even the engine package), so that building the
command line and `--help` stay fast. The defaults below are the engine's own (`GenerationConfig`,
`weights.DEFAULT_MODEL`); tests/test_cli.py checks that they agree.
"""

from __future__ import annotations

from typing import Any, Mapping

DEFAULT_MODEL = "k2-fsa/OmniVoice"  # hub id used when neither --model nor $OMNIVOICE_MODEL is given
DEFAULT_OUTPUT = "omnivoice.wav"  # in the current folder

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

# Everything a run can be told, with its built-in default.
DEFAULTS: dict[str, Any] = {
    "model": DEFAULT_MODEL,  # hub id or local checkpoint folder
    "device": "auto",  # auto | cpu | cuda | cuda:N | mps
    "dtype": "auto",  # auto | float32 | float16 | bfloat16
    "lang": None,  # language code or name; None = language-agnostic
    "instruct": None,  # voice-design items; None = auto voice
    "speed": None,  # speaking-rate factor; None = 1.0
    "duration": None,  # fixed length in seconds; None = estimated from the text
    "seed": None,  # None = a fresh random seed (printed, so the run can be repeated)
    **GENERATION_DEFAULTS,
}

DEVICES = ("auto", "cpu", "cuda", "mps")  # plus cuda:N
DTYPES = ("auto", "float32", "float16", "bfloat16")


class SettingsError(ValueError):
    """A preset names a setting that does not exist (a usage error)."""


def resolve_settings(
    defaults: Mapping[str, Any], preset: Mapping[str, Any] | None, flags: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge the layers: defaults < preset < flags. None in a layer means "not given there".

    Every key of `preset` and `flags` must be a key of `defaults` (SettingsError otherwise),
    so a typo in a preset file is reported rather than ignored.
    """
    merged = dict(defaults)
    for where, layer in (("preset", preset), ("flags", flags)):
        for key, value in (layer or {}).items():
            if key not in defaults:
                allowed = ", ".join(sorted(defaults))
                raise SettingsError(f"{where}: unknown setting {key!r}; known settings: {allowed}")
            if value is not None:
                merged[key] = value
    return merged


def generation_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The part of resolved settings that goes to GenerationConfig(**kwargs)."""
    return {k: settings[k] for k in GENERATION_DEFAULTS if k in settings}


def flag_name(setting: str) -> str:
    """The command-line spelling of a setting: 'num_step' -> '--num-step'."""
    return "--" + setting.replace("_", "-")
