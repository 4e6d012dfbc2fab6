"""The one schema of settings: every setting a person can give, described once in `SCHEMA` (its
name, the reference's field name; type, allowed values, default, one-line help, help panel and the
ways in that accept it), and the key lists derived from it (what one setting is: setting.py).

This module imports nothing heavy (no torch), so that building the command line and `--help` stay
fast. Defaults come from the engine's config dataclasses (engine/model/config.py imports no torch).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ...engine.model.config import GenerationConfig, ModelConfig, value_rule
from ...media.formats import AUDIO_FORMATS
from ...media.loudness import TARGET_RULE as LOUDNESS_RULE
from ...media.rates import SAMPLE_RATES
from . import setting as panels
from .marksettings import MARK_SETTINGS
from .setting import FLAG, HTTP, LINE, PRESET, Setting, Value

DEFAULT_MODEL = "k2-fsa/OmniVoice"  # hub id used when neither --model nor $OMNIVOICE_MODEL is given
# The speech recogniser (the `asr` extra, listen.py): whisper-large-v3-turbo, the reference's, as
# faster-whisper names it ("large-v3-turbo"): 99 languages at near large-v3 accuracy, 8x faster.
DEFAULT_ASR_MODEL = "mobiuslabsgmbh/faster-whisper-large-v3-turbo"
# `book`'s loudness when the setting is not given (elsewhere it is off): LUFS, integrated, over each
# whole output; here, not in the book's modules, so that `book --help` says it without importing them
BOOK_LOUDNESS = -18.0

_GEN = GenerationConfig()
_MODEL = ModelConfig()
MAX_NUM_STEP = _GEN.max_num_step
MAX_DURATION = _MODEL.max_target_seconds
MAX_SEED = 2**63 - 1
MAX_THREADS = 256  # more threads than this only thrash (and torch crashes on absurd counts)
DTYPES = ("auto", "float32", "float16", "bfloat16")
QUANTIZE = ("none", "int8", "auto")  # auto: the fastest path measured on this CPU's class (engine/fast/cpu.py)
FORMATS = (*AUDIO_FORMATS, "pcm")  # audio formats a file name or --format may ask for (pcm = raw)
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|mps|cuda:\d{1,3})$")


def _engine(name: str) -> tuple[str, Callable[[Any], bool]]:
    """(allowed, ok) of a value the engine checks: its own rule (engine.config.VALUE_RULES)."""
    rule = value_rule(name)
    return rule.allowed, rule.ok


_HW = frozenset({FLAG, PRESET})  # run-wide: a preset or a flag, not a line or a request

SCHEMA: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "num_step",
            int,
            _GEN.num_step,
            "Diffusion steps: fewer is faster, rougher.",
            "Generation",
            *_engine("num_step"),
            metavar="N",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "guidance_scale",
            float,
            _GEN.guidance_scale,
            "Classifier-free guidance (0 skips it).",
            "Generation",
            *_engine("guidance_scale"),
            high=100.0,
            metavar="G",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "t_shift",
            float,
            _GEN.t_shift,
            "Time-step shift of the reveal schedule.",
            "Generation",
            *_engine("t_shift"),
            high=100.0,
            metavar="S",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "layer_penalty_factor",
            float,
            _GEN.layer_penalty_factor,
            "Penalty per codebook layer.",
            "Generation",
            *_engine("layer_penalty_factor"),
            high=1000.0,
            metavar="F",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "position_temperature",
            float,
            _GEN.position_temperature,
            "Noise on which positions are revealed (0 = greedy).",
            "Generation",
            *_engine("position_temperature"),
            high=1000.0,
            metavar="T",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "class_temperature",
            float,
            _GEN.class_temperature,
            "Noise on the token choice (0 = argmax).",
            "Generation",
            *_engine("class_temperature"),
            high=1000.0,
            metavar="T",
            advanced=panels.SAMPLING,
        ),
        Setting(
            "denoise",
            bool,
            _GEN.denoise,
            "The denoise token when cloning a voice.",
            "Generation",
            "true or false",
            advanced=panels.SAMPLING,
        ),
        # the step cache (engine/model/generation.py): ~1.5-2x faster steps, an approximation (docs/speed.md)
        Setting(
            "step_cache",
            bool,
            _GEN.step_cache,
            "Reuse the prompt's keys/values and the unguided log-probs between refreshes (faster; approximate).",
            "Generation",
            "true or false",
            advanced=panels.STEP_CACHE,
        ),
        Setting(
            "step_cache_prompt_every",
            int,
            _GEN.step_cache_prompt_every,
            "With --step-cache: the prompt's keys/values recomputed every N steps.",
            "Generation",
            *_engine("step_cache_prompt_every"),
            metavar="N",
            advanced=panels.STEP_CACHE,
        ),
        Setting(
            "step_cache_uncond_every",
            int,
            _GEN.step_cache_uncond_every,
            "With --step-cache: the unguided row run every N steps, its log-probs reused between.",
            "Generation",
            *_engine("step_cache_uncond_every"),
            metavar="N",
            advanced=panels.STEP_CACHE,
        ),
        Setting(
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
        Setting(
            "duration",
            float,
            None,
            f"Length in seconds, up to {MAX_DURATION:g}; overrides --speed.",
            "Voice",
            *_engine("duration"),
            metavar="SECONDS",
            default_help="from the text",
        ),
        Setting(
            "chunk_duration",
            float,
            _GEN.audio_chunk_duration,
            "Seconds of speech per chunk of a long text.",
            "Input",
            *_engine("audio_chunk_duration"),
            high=MAX_DURATION,
            metavar="SECONDS",
            advanced=panels.LONG_TEXT,
        ),
        Setting(
            "chunk_threshold",
            float,
            _GEN.audio_chunk_threshold,
            "Texts estimated longer are spoken in chunks.",
            "Input",
            *_engine("audio_chunk_threshold"),
            metavar="SECONDS",
            advanced=panels.LONG_TEXT,
        ),
        Setting(
            "normalize",
            bool,
            False,
            "Numbers, dates, currency and units in words (the normalize extra).",
            "Input",
            "true or false",
        ),
        Setting(
            "markdown",
            bool,
            False,
            "Read the text as Markdown: emphasis, links, lists spoken as words.",
            "Input",
            "true or false",
        ),
        Setting(
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
            advanced=panels.LONG_TEXT,
        ),
        Setting(
            "lang",
            str,
            None,
            "A language: en, de-AT, English (`omnivoice languages`).",
            "Input",
            "a language code or name",
            metavar="LANG",
            default_help="none (any language)",
        ),
        Setting(
            "instruct",
            str,
            None,
            'Design a voice, e.g. "female, low pitch" (`omnivoice instructs`).',
            "Voice",
            'voice-design items, e.g. "female, low pitch"',
            metavar="ITEMS",
            default_help="auto voice",
        ),
        Setting(
            "instruct_text",
            str,
            None,
            "An instruct given verbatim, e.g. a fine-tune's speaker name.",
            "Voice",
            "one line of at most 500 characters",
            metavar="TEXT",
            default_help="none",
            advanced=panels.VOICE_DETAILS,
        ),
        Setting(
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
        Setting(
            "ref",
            str,
            None,
            "Clone the voice of this recording (3-10 s is best).",
            "Voice",
            "a string",
            metavar="AUDIO",
            where=frozenset({FLAG, LINE}),
        ),
        Setting(
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
        Setting(
            "seed",
            int,
            None,
            "Random seed (printed, so a run can be repeated).",
            "Generation",
            f"an integer in 0..{MAX_SEED}",
            lambda v: 0 <= v <= MAX_SEED,
            metavar="N",
            where=frozenset({FLAG, PRESET, LINE, HTTP}),  # a preset's: its designed voice the same every run
            default_help="random",
        ),
        Setting(
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
        Setting(
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
            advanced=panels.OUTPUT_DETAILS,
        ),
        Setting(
            "loudness",
            float,
            None,
            "Loudness in LUFS, peaks at most -1 dBTP (needs the loudness extra).",
            "Output",
            LOUDNESS_RULE.allowed,
            LOUDNESS_RULE.ok,
            metavar="LUFS",
            default_help="off",
        ),
        Setting(
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
            advanced=panels.MACHINE,
        ),
        Setting(
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
            advanced=panels.MACHINE,
        ),
        Setting(
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
            advanced=panels.MACHINE,
        ),
        Setting(
            "quantize",
            str,
            "none",
            "int8: faster on a CPU, the audio differs slightly; auto: what `omnivoice info` says.",
            "Hardware",
            "int8, auto or none",
            lambda v: v in QUANTIZE,
            choices=QUANTIZE,
            metavar="int8|auto|none",
            where=_HW,
            run_wide=True,
            advanced=panels.MACHINE,
        ),
        Setting(
            "compile",
            bool,
            False,
            "torch.compile the layers (slow start; on CPU the default is faster).",
            "Hardware",
            "true or false",
            where=_HW,
            run_wide=True,
            advanced=panels.MACHINE,
        ),
        Setting(
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
        Setting(
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
            advanced=panels.LISTENING,
        ),
        Setting(
            "verify",
            bool,
            False,
            "Transcribe each piece and retake the ones that do not say their text (needs the asr extra).",
            "Generation",
            "true or false",
            advanced=panels.LISTENING,
        ),
        Setting(
            "verify_retries",
            int,
            2,
            "Retakes at most per piece with --verify (another seed each).",
            "Generation",
            "an integer in 0..10",
            lambda v: 0 <= v <= 10,
            metavar="N",
            advanced=panels.LISTENING,
        ),
        Setting(
            "verify_max_error",
            float,
            0.25,
            "A piece is retaken when its word error rate is above this (character error rate for zh, ja, ko, th).",
            "Generation",
            "a number in 0..1",
            lambda v: 0.0 <= v <= 1.0,
            metavar="X",
            advanced=panels.LISTENING,
        ),
        *MARK_SETTINGS,
    ]
}

DEFAULTS: dict[str, Value] = {name: s.default for name, s in SCHEMA.items()}
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
GENERATION_DEFAULTS: dict[str, Value] = {k: DEFAULTS[k] for k in GENERATION_KEYS}
CHUNK_DEFAULTS: dict[str, Value] = {k: DEFAULTS[k] for k in ("chunk_duration", "chunk_threshold")}
CHUNK_FIELDS = {"chunk_duration": "audio_chunk_duration", "chunk_threshold": "audio_chunk_threshold"}
RUN_WIDE: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if s.run_wide)
PRESET_KEYS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if PRESET in s.where)
LINE_SETTINGS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if LINE in s.where)
HTTP_SETTINGS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if HTTP in s.where)
PRESET_META_KEYS = ("description",)  # allowed in a preset file, not a setting
