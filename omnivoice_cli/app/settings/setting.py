"""What one setting is (`Setting`: its name, kind, default, help, panel, checks and the ways in
that accept it), what it holds once checked (`Value`), the ways in (a flag, a preset, a batch
line, a server request), the help panels, and the error of a bad one (`SettingsError`). The
settings themselves are schema.py's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

# What a setting holds once checked: a value of its kind (bool, int, float or str), or None (not set).
Value = Union[bool, int, float, str, None]

# Help panels, in the order `--help` shows them.
PANELS = ("Input", "Voice", "Generation", "Output", "Hardware")
# The expert knobs' panels, by purpose, shown only by `--help-all` after the everyday ones: a
# setting's `advanced` names its own (a command's expert options use them too).
SAMPLING = "Sampling"  # the sampler's internals
STEP_CACHE = "Step cache"  # what --step-cache reuses and how often it refreshes
LONG_TEXT = "Long texts and words"  # chunking, the lexicon
VOICE_DETAILS = "Voice details"  # a verbatim instruct, a dialogue's gaps
OUTPUT_DETAILS = "Output details"  # the sample rate
LISTENING = "Listening back"  # the speech recogniser: --verify, word timings
MACHINE = "Machine"  # precision, threads, compiling, another machine's server
EXPERT_PANELS = (SAMPLING, STEP_CACHE, LONG_TEXT, VOICE_DETAILS, OUTPUT_DETAILS, LISTENING, MACHINE)

# The ways in: a command-line flag, a key of a preset file, a field of a batch JSON line, a field
# of a server request.
FLAG, PRESET, LINE, HTTP = "flag", "preset", "line", "http"
EVERYWHERE = frozenset({FLAG, PRESET, LINE, HTTP})


class SettingsError(ValueError):
    """A setting or preset is unknown, of the wrong type or out of range (a usage error)."""


@dataclass(frozen=True)
class Setting:
    """One setting: what it is, what it accepts and where it can be given."""

    name: str  # the reference's field name, also the preset key / JSON field / HTTP field
    kind: type  # int, float, bool or str
    default: Value  # built-in default (None: not set, e.g. a random seed)
    help: str  # one line for --help
    panel: str  # help panel (see PANELS)
    allowed: str = ""  # what is allowed, in words: "an integer in 1..64"
    ok: Callable[[Any], bool] | None = None  # the value check, given a value of `kind` (after the type check)
    low: float | None = None  # a sane lower bound beyond `ok` ("must be at least ...")
    high: float | None = None  # a sane upper bound beyond `ok` ("must be at most ...")
    choices: tuple[str, ...] = ()  # for str settings with a fixed set of values
    metavar: str = ""  # shown after the flag in --help
    where: frozenset = EVERYWHERE  # the ways in that accept it
    run_wide: bool = False  # one engine per run: a batch line may not change it
    default_help: str = ""  # how --help words the default when str(default) will not do
    envvar: str | None = None  # an environment variable that sets the default (`environment_defaults`)
    advanced: str = ""  # an expert knob: its panel of EXPERT_PANELS, shown only by --help-all ("" = everyday)

    @property
    def flag(self) -> str:
        return flag_name(self.name)

    @property
    def help_panel(self) -> str:
        """The panel --help shows its flag in: an expert knob's panel of EXPERT_PANELS, else its own."""
        return self.advanced or self.panel


def flag_name(setting: str) -> str:
    """The command-line spelling of a setting: 'num_step' -> '--num-step'."""
    return "--" + setting.replace("_", "-")
