"""The one schema of settings, where the settings of one run (or one request) come from, and presets.

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

This module imports nothing heavy (no torch), so that building the command line and `--help` stay
fast. Defaults come from the engine's config dataclasses (engine/config.py imports no torch).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from ..engine.config import GenerationConfig, ModelConfig, value_rule
from ..media.loudness import TARGET_RULE as LOUDNESS_RULE
from ..media.output import AUDIO_FORMATS
from ..media.rates import SAMPLE_RATES

DEFAULT_MODEL = "k2-fsa/OmniVoice"  # hub id used when neither --model nor $OMNIVOICE_MODEL is given
# The speech recogniser (the `asr` extra, listen.py): whisper-large-v3-turbo, the reference's, as
# faster-whisper names it ("large-v3-turbo"): 99 languages at near large-v3 accuracy, 8x faster.
DEFAULT_ASR_MODEL = "mobiuslabsgmbh/faster-whisper-large-v3-turbo"
DEFAULT_OUTPUT_STEM = "omnivoice"  # `say` writes omnivoice.<format> in the current folder by default
DEFAULT_OUTPUT = DEFAULT_OUTPUT_STEM + ".wav"

_GEN = GenerationConfig()
_MODEL = ModelConfig()
MAX_NUM_STEP = _GEN.max_num_step
MAX_DURATION = _MODEL.max_target_seconds
MAX_SEED = 2**63 - 1
MAX_THREADS = 256  # more threads than this only thrash (and torch crashes on absurd counts)
DTYPES = ("auto", "float32", "float16", "bfloat16")
QUANTIZE = ("none", "int8", "auto")  # auto: the fastest path measured on this CPU's class (engine/cpu.py)
FORMATS = (*AUDIO_FORMATS, "pcm")  # audio formats a file name or --format may ask for (pcm = raw)
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|mps|cuda:\d{1,3})$")

# Help panels, in the order `--help` shows them.
PANELS = ("Input", "Voice", "Generation", "Output", "Hardware")

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
    default: Any  # built-in default (None: not set, e.g. a random seed)
    help: str  # one line for --help
    panel: str  # help panel (see PANELS)
    allowed: str = ""  # what is allowed, in words: "an integer in 1..64"
    ok: Callable[[Any], bool] | None = None  # the value check (after the type check)
    low: float | None = None  # a sane lower bound beyond `ok` ("must be at least ...")
    high: float | None = None  # a sane upper bound beyond `ok` ("must be at most ...")
    choices: tuple[str, ...] = ()  # for str settings with a fixed set of values
    metavar: str = ""  # shown after the flag in --help
    where: frozenset = EVERYWHERE  # the ways in that accept it
    run_wide: bool = False  # one engine per run: a batch line may not change it
    default_help: str = ""  # how --help words the default when str(default) will not do
    envvar: str | None = None  # an environment variable that sets the default (`environment_defaults`)

    @property
    def flag(self) -> str:
        return flag_name(self.name)


def _setting(name, kind, default, help, panel, allowed="", ok=None, **kw) -> Setting:
    return Setting(name, kind, default, help, panel, allowed, ok, **kw)


def _engine(name: str) -> tuple[str, Callable[[Any], bool]]:
    """(allowed, ok) of a value the engine checks: its own rule (engine.config.VALUE_RULES)."""
    rule = value_rule(name)
    return rule.allowed, rule.ok


_ANY_NUMBER = "a number"
_HW = frozenset({FLAG, PRESET})  # run-wide: a preset or a flag, not a line or a request

SCHEMA: dict[str, Setting] = {
    s.name: s
    for s in [
        _setting(
            "num_step",
            int,
            _GEN.num_step,
            "Diffusion steps: fewer is faster, rougher.",
            "Generation",
            *_engine("num_step"),
            metavar="N",
        ),
        _setting(
            "guidance_scale",
            float,
            _GEN.guidance_scale,
            "Classifier-free guidance (0 skips it).",
            "Generation",
            *_engine("guidance_scale"),
            high=100.0,
            metavar="G",
        ),
        _setting(
            "t_shift",
            float,
            _GEN.t_shift,
            "Time-step shift of the reveal schedule.",
            "Generation",
            *_engine("t_shift"),
            high=100.0,
            metavar="S",
        ),
        _setting(
            "layer_penalty_factor",
            float,
            _GEN.layer_penalty_factor,
            "Penalty per codebook layer.",
            "Generation",
            *_engine("layer_penalty_factor"),
            high=1000.0,
            metavar="F",
        ),
        _setting(
            "position_temperature",
            float,
            _GEN.position_temperature,
            "Noise on which positions are revealed (0 = greedy).",
            "Generation",
            *_engine("position_temperature"),
            high=1000.0,
            metavar="T",
        ),
        _setting(
            "class_temperature",
            float,
            _GEN.class_temperature,
            "Noise on the token choice (0 = argmax).",
            "Generation",
            *_engine("class_temperature"),
            high=1000.0,
            metavar="T",
        ),
        _setting(
            "denoise", bool, _GEN.denoise, "The denoise token when cloning a voice.", "Generation", "true or false"
        ),
        # the step cache (engine/generation.py): ~1.5-2x faster steps, an approximation (docs/speed.md)
        _setting(
            "step_cache",
            bool,
            _GEN.step_cache,
            "Reuse the prompt's keys/values and the unguided log-probs between refreshes (faster; approximate).",
            "Generation",
            "true or false",
        ),
        _setting(
            "step_cache_prompt_every",
            int,
            _GEN.step_cache_prompt_every,
            "With --step-cache: the prompt's keys/values recomputed every N steps.",
            "Generation",
            *_engine("step_cache_prompt_every"),
            metavar="N",
        ),
        _setting(
            "step_cache_uncond_every",
            int,
            _GEN.step_cache_uncond_every,
            "With --step-cache: the unguided row run every N steps, its log-probs reused between.",
            "Generation",
            *_engine("step_cache_uncond_every"),
            metavar="N",
        ),
        _setting(
            "speed",
            float,
            None,
            "Speaking rate (1.2 = faster).",
            "Voice",
            *_engine("speed"),
            low=0.1,
            high=10.0,
            metavar="X",
            default_help="1.0",
        ),
        _setting(
            "duration",
            float,
            None,
            f"Length in seconds, up to {MAX_DURATION:g}; overrides --speed.",
            "Voice",
            *_engine("duration"),
            metavar="SECONDS",
            default_help="from the text",
        ),
        _setting(
            "chunk_duration",
            float,
            _GEN.audio_chunk_duration,
            "Seconds of speech per chunk of a long text.",
            "Input",
            *_engine("audio_chunk_duration"),
            high=MAX_DURATION,
            metavar="SECONDS",
        ),
        _setting(
            "chunk_threshold",
            float,
            _GEN.audio_chunk_threshold,
            "Texts estimated longer are spoken in chunks.",
            "Input",
            *_engine("audio_chunk_threshold"),
            metavar="SECONDS",
        ),
        _setting(
            "normalize",
            bool,
            False,
            "Numbers, currency, dates, times and units in words (needs the normalize extra).",
            "Input",
            "true or false",
        ),
        _setting(
            "markdown",
            bool,
            False,
            "Read the text as Markdown: emphasis, links, lists spoken as words.",
            "Input",
            "true or false",
        ),
        _setting(
            "lexicon",
            str,
            None,
            "Whole-word replacements from this TOML file, before normalisation (docs/settings.md#lexicon).",
            "Input",
            "the path of a lexicon file (.toml)",
            lambda v: bool(v.strip()),
            metavar="FILE",
            where=_HW,  # a file on this machine: never a line's or a request's (the server's is `serve --lexicon`)
            run_wide=True,
        ),
        _setting(
            "lang",
            str,
            None,
            "Language code or name, e.g. en, de-AT, English (`omnivoice languages`).",
            "Input",
            "a language code or name",
            metavar="LANG",
            default_help="none (any language)",
        ),
        _setting(
            "instruct",
            str,
            None,
            'Design a voice, e.g. "female, low pitch" (`omnivoice instructs`).',
            "Voice",
            'voice-design items, e.g. "female, low pitch"',
            metavar="ITEMS",
            default_help="auto voice",
        ),
        _setting(
            "voice",
            str,
            None,
            "A saved voice (`omnivoice voice list`) or a voice file.",
            "Voice",
            "a saved voice name or the path of a voice file",
            lambda v: bool(v.strip()),
            metavar="NAME|FILE",
            where=frozenset({FLAG, PRESET, LINE}),
            default_help="auto voice",
        ),
        _setting(
            "ref",
            str,
            None,
            "Clone the voice of this recording (3-10 s is best).",
            "Voice",
            "a string",
            metavar="AUDIO",
            where=frozenset({FLAG, LINE}),
        ),
        _setting(
            "ref_text",
            str,
            None,
            "The words spoken in --ref.",
            "Voice",
            "a string",
            metavar="TEXT",
            default_help="the .txt file beside the recording",
            where=frozenset({FLAG, LINE}),
        ),
        _setting(
            "seed",
            int,
            None,
            "Random seed (printed, so a run can be repeated).",
            "Generation",
            f"an integer in 0..{MAX_SEED}",
            lambda v: 0 <= v <= MAX_SEED,
            metavar="N",
            where=frozenset({FLAG, LINE, HTTP}),
            default_help="random",
        ),
        _setting(
            "format",
            str,
            "wav",
            "Audio format when the output name does not say.",
            "Output",
            ", ".join(FORMATS),
            lambda v: v in FORMATS,
            choices=FORMATS,
            metavar="FMT",
            where=frozenset({FLAG, PRESET}),
        ),
        _setting(
            "sample_rate",
            int,
            None,
            "Sample rate of the output in Hz (8000 for telephony), resampled once at the end.",
            "Output",
            "one of " + ", ".join(map(str, SAMPLE_RATES)),
            lambda v: v in SAMPLE_RATES,
            metavar="HZ",
            default_help="the model's (24000)",
            where=frozenset({FLAG, PRESET, HTTP}),  # `say` (and --cast), the server's requests; not batch lines
        ),
        _setting(
            "loudness",
            float,
            None,
            "Loudness of each output in LUFS (ITU-R BS.1770), true peak at most -1 dBTP; needs the loudness extra.",
            "Output",
            LOUDNESS_RULE.allowed,
            LOUDNESS_RULE.ok,
            metavar="LUFS",
            default_help="off",
        ),
        _setting(
            "device",
            str,
            "auto",
            "Where to run (cuda:N picks a GPU).",
            "Hardware",
            "auto, cpu, cuda, cuda:N or mps",
            lambda v: bool(_DEVICE_RE.match(v)),
            metavar="DEV",
            where=_HW,
            run_wide=True,
        ),
        _setting(
            "dtype",
            str,
            "auto",
            "Precision of the model body (auto: float32 on CPU, float16 on GPU).",
            "Hardware",
            ", ".join(DTYPES),
            lambda v: v in DTYPES,
            choices=DTYPES,
            metavar="TYPE",
            where=_HW,
            run_wide=True,
        ),
        _setting(
            "threads",
            int,
            None,
            "Torch CPU threads.",
            "Hardware",
            "an integer >= 1",
            lambda v: v >= 1,
            high=MAX_THREADS,
            metavar="N",
            where=_HW,
            run_wide=True,
            default_help="the CPU cores",
        ),
        _setting(
            "quantize",
            str,
            "none",
            "int8: int8 body weights (CPU; the audio differs slightly); "
            "auto: the fastest path measured on this CPU (omnivoice info shows it).",
            "Hardware",
            "int8, auto or none",
            lambda v: v in QUANTIZE,
            choices=QUANTIZE,
            metavar="int8|auto|none",
            where=_HW,
            run_wide=True,
        ),
        _setting(
            "compile",
            bool,
            False,
            "torch.compile the layers (slow start; on CPU the default is faster).",
            "Hardware",
            "true or false",
            where=_HW,
            run_wide=True,
        ),
        _setting(
            "model",
            str,
            DEFAULT_MODEL,
            "Hub id or local checkpoint folder.",
            "Hardware",
            "a hub id or a checkpoint folder",
            lambda v: bool(v.strip()),
            metavar="ID|DIR",
            where=_HW,
            run_wide=True,
            envvar="OMNIVOICE_MODEL",
            default_help=f"$OMNIVOICE_MODEL, else {DEFAULT_MODEL}",
        ),
        # -- listening back (the asr extra, listen.py) --
        _setting(
            "asr_model",
            str,
            DEFAULT_ASR_MODEL,
            "Speech recogniser: a faster-whisper hub id, name or folder (transcripts of --ref, --verify).",
            "Hardware",
            "a hub id, a faster-whisper model name or a folder",
            lambda v: bool(v.strip()),
            metavar="ID|DIR",
            where=_HW,
            run_wide=True,
            envvar="OMNIVOICE_ASR_MODEL",
            default_help=f"$OMNIVOICE_ASR_MODEL, else {DEFAULT_ASR_MODEL}",
        ),
        _setting(
            "verify",
            bool,
            False,
            "Transcribe each piece and retake the ones that do not say their text (needs the asr extra).",
            "Generation",
            "true or false",
        ),
        _setting(
            "verify_retries",
            int,
            2,
            "Retakes at most per piece with --verify (another seed each).",
            "Generation",
            "an integer in 0..10",
            lambda v: 0 <= v <= 10,
            metavar="N",
        ),
        _setting(
            "verify_max_error",
            float,
            0.25,
            "A piece is retaken when its word error rate is above this (character error rate for zh, ja, ko, th).",
            "Generation",
            "a number in 0..1",
            lambda v: 0.0 <= v <= 1.0,
            metavar="X",
        ),
    ]
}

DEFAULTS: dict[str, Any] = {name: s.default for name, s in SCHEMA.items()}
GENERATION_KEYS = (
    "num_step",
    "guidance_scale",
    "t_shift",
    "layer_penalty_factor",
    "position_temperature",
    "class_temperature",
    "denoise",
    "step_cache",
    "step_cache_prompt_every",
    "step_cache_uncond_every",
)
GENERATION_DEFAULTS: dict[str, Any] = {k: DEFAULTS[k] for k in GENERATION_KEYS}
CHUNK_DEFAULTS: dict[str, Any] = {k: DEFAULTS[k] for k in ("chunk_duration", "chunk_threshold")}
CHUNK_FIELDS = {"chunk_duration": "audio_chunk_duration", "chunk_threshold": "audio_chunk_threshold"}
RUN_WIDE: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if s.run_wide)
PRESET_KEYS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if PRESET in s.where)
LINE_SETTINGS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if LINE in s.where)
HTTP_SETTINGS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if HTTP in s.where)
PRESET_META_KEYS = ("description",)  # allowed in a preset file, not a setting


def _check_schema_against_engine() -> None:
    """The generation settings are GenerationConfig's fields, with its defaults."""
    names = {f.name for f in fields(GenerationConfig)}
    assert set(GENERATION_KEYS) <= names and all(CHUNK_FIELDS[k] in names for k in CHUNK_FIELDS)


_check_schema_against_engine()


# --------------------------------------------------------------------------------------------
# One value
# --------------------------------------------------------------------------------------------


def type_name(value: Any) -> str:
    """'an integer', 'a string', ... for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return _ANY_NUMBER
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table/object"
    return type(value).__name__


def allowed(key: str) -> str:
    """What a setting accepts, in words: 'an integer in 1..64'."""
    return SCHEMA[key].allowed


def shown_value(value: Any) -> str:
    """A value as a message shows it: repr, cut to 80 characters; a huge integer by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value)))} digits"  # never print a 5,000-digit number
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _bad_type(kind: type, value: Any) -> bool:
    if kind is int:
        return isinstance(value, bool) or not isinstance(value, int)
    if kind is float:
        return isinstance(value, bool) or not isinstance(value, (int, float))
    return not isinstance(value, kind)


def check_setting(key: str, value: Any) -> Any:
    """Check one setting's type and value; return it (an int becomes a float where a number is due).

    Raises SettingsError with a message that does not name where the value came from, e.g.
    "must be an integer in 1..64, got 0": callers add the source ("--num-step", "line 3: field
    'num_step'", ...) in front.
    """
    s = SCHEMA[key]
    if _bad_type(s.kind, value):
        raise SettingsError(f"must be {s.allowed}, got {shown_value(value)} ({type_name(value)})")
    if s.kind is float:
        try:
            value = float(value)
        except OverflowError:
            raise SettingsError(f"must be {s.allowed}, got {shown_value(value)}") from None
        if not math.isfinite(value):
            raise SettingsError(f"must be {s.allowed}, got {value!r}")
    if s.ok is not None and not s.ok(value):
        raise SettingsError(f"must be {s.allowed}, got {shown_value(value)}")
    if s.low is not None and value < s.low:
        raise SettingsError(f"must be at least {s.low:g}, got {shown_value(value)}")
    if s.high is not None and value > s.high:
        raise SettingsError(f"must be at most {s.high:g}, got {shown_value(value)}")
    return value


def parse_text(key: str, raw: str) -> Any:
    """A value typed on the command line (a string) -> the setting's value, checked.

    Numbers are parsed here rather than by click, so that a bad one gets the same words as in a
    preset or a JSON line: "must be an integer in 1..64, got 'abc'"."""
    s = SCHEMA[key]
    text = raw.strip()
    if s.kind is int:
        try:
            value: Any = int(text) if len(text) <= 40 else None
        except ValueError:
            value = None
    elif s.kind is float:
        try:
            value = float(text) if len(text) <= 40 else None
        except ValueError:
            value = None
    elif s.choices:
        value = text.lower()
    else:
        value = raw
    if value is None:
        raise SettingsError(f"must be {s.allowed}, got {shown_value(raw)}")
    return check_setting(key, value)


def flag_name(setting: str) -> str:
    """The command-line spelling of a setting: 'num_step' -> '--num-step'."""
    return "--" + setting.replace("_", "-")


def or_list(items: Iterable[str]) -> str:
    """'a, b or c'."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean 'x'?)" or ""."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# Where a value came from
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One layer of settings: where its values came from, for messages and for `--dry-run`."""

    kind: str  # "default", "env", "preset", "flag", "line", "request" or "random" (a seed drawn for the run)
    where: str = ""  # the preset file, the line number, ...
    label: str = ""  # how `--dry-run` shows it, when not `where` (a preset's name)

    def name(self, key: str) -> str:
        """The prefix of a message about `key` given here: '--num-step', "line 3: field 'num_step'"."""
        if self.kind == "flag":
            return flag_name(key)
        if self.kind == "env":
            return f"environment variable {self.where}"
        if self.kind == "preset":
            return f"preset file '{self.where}': key {key!r}"
        if self.kind == "line":
            return f"line {self.where}: field {key!r}"
        if self.kind == "request":
            return f"field {key!r}"
        return key

    def short(self, key: str) -> str:
        """How a message names another setting of the same source: '--ref', "'ref'"."""
        return flag_name(key) if self.kind == "flag" else repr(key)

    def describe(self) -> str:
        """'default', 'preset fast', 'flag', 'line 3' (for `--dry-run`)."""
        return f"{self.kind} {self.label or self.where}".strip()


DEFAULT_SOURCE = Source("default")
FLAG_SOURCE = Source("flag")


def check_layer(values: Mapping[str, Any], source: Source, way: str) -> dict[str, Any]:
    """Check every value of one layer (None = not given). Unknown keys and keys this way in does not
    accept are errors naming the known ones; a bad value's message starts with its source."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        s = SCHEMA.get(key)
        if s is None or way not in s.where:
            known = [k for k, v in SCHEMA.items() if way in v.where]
            hint = did_you_mean(key, known)
            if s is not None and FLAG in s.where:  # e.g. a request's 'lexicon': the command's own
                hint = f" (it is set when the command starts: {flag_name(key)})"
            raise SettingsError(f"{source.name(key)} is not a known setting{hint}; known: {', '.join(known)}")
        try:
            out[key] = check_setting(key, value)
        except SettingsError as e:
            raise SettingsError(f"{source.name(key)} {e}") from None
    return out


@dataclass(frozen=True)
class Resolved:
    """Settings after merging the layers: the values, and the source of each, read-only. A
    decision taken later (a seed drawn, the format of `-o`, a recording over a voice) is a new
    layer on top: `with_values` gives a new Resolved and leaves this one as it was."""

    values: Mapping[str, Any]
    sources: Mapping[str, Source] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def with_values(self, changes: Mapping[str, Any], source: Source | None = None) -> "Resolved":
        """These values on top (None too: a setting taken away), given by `source`; without a
        source each keeps the one it had (a value derived from it, e.g. a format from `-o`)."""
        unknown = [key for key in changes if key not in self.values]
        if unknown:
            raise KeyError(f"unknown settings {unknown}")
        sources = {**self.sources, **(dict.fromkeys(changes, source) if source is not None else {})}
        return Resolved({**self.values, **changes}, sources)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def source(self, key: str) -> Source:
        return self.sources.get(key, DEFAULT_SOURCE)

    def name(self, key: str) -> str:
        """How a message names this setting: by the source it came from ('--instruct', ...)."""
        return self.source(key).name(key)


def environment_defaults() -> dict[str, tuple[Any, Source]]:
    """key -> (value, source) of the settings whose environment variable is set (and not empty),
    read now and checked: SettingsError "environment variable OMNIVOICE_MODEL must be ..."."""
    out: dict[str, tuple[Any, Source]] = {}
    for key, s in SCHEMA.items():
        raw = os.environ.get(s.envvar, "") if s.envvar else ""
        if raw.strip():
            source = Source("env", s.envvar or "")
            try:
                out[key] = (parse_text(key, raw), source)
            except SettingsError as e:
                raise SettingsError(f"{source.name(key)} {e}") from None
    return out


def resolve(*layers: tuple[Source, Mapping[str, Any] | None], defaults: Mapping[str, Any] = DEFAULTS) -> Resolved:
    """Merge checked layers in order (later wins; None = not given) over the defaults, which the
    environment may set (`environment_defaults`)."""
    values, sources = dict(defaults), {}
    for key, (value, source) in environment_defaults().items():
        if key in values:
            values[key], sources[key] = value, source
    for source, layer in layers:
        for key, value in (layer or {}).items():
            if key not in values:
                raise SettingsError(
                    f"{source.describe()}: unknown setting {key!r}; known settings: {', '.join(sorted(values))}"
                )
            if value is not None:
                values[key], sources[key] = value, source
    return Resolved(values, sources)


def resolve_settings(
    defaults: Mapping[str, Any],
    preset: Mapping[str, Any] | None,
    flags: Mapping[str, Any],
    line: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The merged values of defaults < preset < flags < line (see `resolve`)."""
    layers = ((Source("preset"), preset), (FLAG_SOURCE, flags), (Source("line"), line))
    return resolve(*layers, defaults=defaults).values


def generation_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The part of resolved settings that goes to GenerationConfig(**kwargs)."""
    kwargs = {k: settings[k] for k in GENERATION_KEYS if k in settings}
    kwargs.update({CHUNK_FIELDS[k]: settings[k] for k in CHUNK_FIELDS if settings.get(k) is not None})
    return kwargs


def check_engine_options(settings: dict[str, Any], sources: Mapping[str, Source] | None = None) -> str | None:
    """Refuse combinations Engine.load would refuse, before the model is loaded (SettingsError,
    in flag names). quantize int8 wants the CPU, float32 weights and no compile. A preset's int8
    (the `fast` preset's) that meets another device, dtype or compile given elsewhere is dropped
    instead: `settings["quantize"]` becomes "none" and the notice saying so is returned. So is
    "auto" (from anywhere) where it means int8 on this CPU (engine/cpu.py) and meets them: auto is
    the fastest path that fits; with a GPU named it is nothing (the table is the CPU's)."""
    if settings.get("quantize") == "auto":
        return _check_auto(settings, sources or {})
    from ..engine.config import INT8_NEEDS, int8_clash, int8_problem

    if settings.get("quantize") != "int8":
        return None
    clash = int8_clash(settings.get("device"), settings.get("dtype"), bool(settings.get("compile")))
    if clash is None:
        return None
    sources = sources or {}
    origin = sources.get("quantize", DEFAULT_SOURCE)
    if origin.kind == "preset" and sources.get(clash) != origin:
        settings["quantize"] = "none"
        return (
            f"{origin.describe()} runs the body in int8, which needs {INT8_NEEDS}: "
            f"without it here ({clash} {settings[clash]})"
        )
    shown = repr(settings[clash]) if clash == "device" else str(settings[clash])
    raise SettingsError(int8_problem(clash, shown, lambda key: f"--{key}"))


def engine_options(resolved: Resolved) -> tuple[Resolved, str | None]:
    """`check_engine_options` on resolved settings: the settings it leaves (a preset's int8
    dropped, as a new layer that keeps the sources) and its notice (None: nothing dropped)."""
    values = dict(resolved.values)  # TODO(lead): check_engine_options edits the dict it is given
    notice = check_engine_options(values, resolved.sources)
    changed = {k: v for k, v in values.items() if v != resolved.values[k]}
    return (resolved.with_values(changed) if changed else resolved), notice


def _check_auto(settings: dict[str, Any], sources: Mapping[str, Source]) -> str | None:
    from ..engine import cpu
    from ..engine.config import int8_clash

    if int8_clash(settings.get("device"), None, False) == "device":
        settings["quantize"] = "none"  # a GPU runs its own dtype: nothing to say
        return None
    chosen = cpu.choice()
    if chosen.quantize != "int8":
        return None
    clash = int8_clash(None, settings.get("dtype"), bool(settings.get("compile")))
    if clash is None:
        return None
    settings["quantize"] = "none"
    origin = sources.get("quantize", DEFAULT_SOURCE)
    who = "--quantize auto" if origin.kind == "flag" else f"{origin.describe()} (quantize auto)"
    return (
        f"{who} runs the body in int8 on this CPU ({cpu.cpu_class()}), which needs float32 and no "
        f"compile: without it here ({clash} {settings[clash]})"
    )


_LINE_BREAK_RE = re.compile(r"[ \t]*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])+[ \t]*")


def join_lines(text: str) -> str:
    """Line breaks (and the spaces around them) become one space; the ends are stripped.

    The engine, like the reference, deletes line breaks without a space, which would glue the
    last word of a line to the first word of the next: every text goes through this first."""
    if not isinstance(text, str):
        return text
    return _LINE_BREAK_RE.sub(" ", text).strip()


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------

MAX_PRESET_BYTES = 64 * 1024  # a preset is a few lines; reading stops here


@dataclass(frozen=True)
class Preset:
    """A preset file, read and checked."""

    name: str  # the file name without .toml
    path: Path  # where it was read from
    source: str  # "built-in", "user" or "file"
    settings: dict[str, Any] = field(default_factory=dict)  # only the keys it sets
    description: str = ""

    @property
    def origin(self) -> Source:
        return Source("preset", str(self.path), self.name)


def builtin_preset_dir() -> Path:
    """The presets packaged with omnivoice_cli (omnivoice_cli/presets/*.toml)."""
    return Path(__file__).resolve().parent.parent / "presets"


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
        settings["lexicon"] = str((path.parent / Path(settings["lexicon"]).expanduser()).absolute())
    if "model" in settings:  # a checkpoint folder beside the preset, as its voice path is
        beside = path.parent / Path(settings["model"]).expanduser()
        if not Path(settings["model"]).expanduser().is_absolute() and beside.is_dir():
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
    out = []
    for name, (path, source) in preset_index().items():
        if source == "user" and name in builtin:
            source = "user, overrides built-in"
        try:
            out.append((name, path, source, load_preset(path, name, source), None))
        except SettingsError as e:
            out.append((name, path, source, None, str(e)))
    return out
