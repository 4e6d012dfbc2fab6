"""Configuration of the engine as frozen dataclasses.

The defaults are the real k2-fsa/OmniVoice checkpoint's, hard-coded so that building the model
never touches the network. On load, `ModelConfig.from_checkpoint` re-reads the values that would
silently break parity from the checkpoint's config files: sizes are adopted, and a value the
engine cannot honour is a `CheckpointError`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Callable

from ..checkpoint.finetune import CheckpointOwn, read_own
from ..errors import CheckpointError, InvalidRequest

SAMPLE_RATE = 24_000  # Hz: the codec's, so every audio in and out (ModelConfig.sample_rate reads a checkpoint's)
MAX_TARGET_SECONDS = 30.0  # longest single generation (a longer text is cut into pieces)
MAX_NUM_STEP = 64  # most diffusion steps a request may ask for


@dataclass(frozen=True)
class BackboneConfig:
    """The Qwen3 body, used bidirectionally."""

    hidden_size: int = 1024  # width of the residual stream
    num_hidden_layers: int = 28  # decoder layers
    num_attention_heads: int = 16  # query heads
    num_key_value_heads: int = 8  # key/value heads (GQA)
    head_dim: int = 128  # per-head width (heads * head_dim != hidden_size)
    intermediate_size: int = 3072  # MLP width
    vocab_size: int = 151676  # text vocabulary (embed_tokens rows)
    rms_norm_eps: float = 1e-6  # RMSNorm epsilon
    rope_theta: float = 1e6  # RoPE base
    max_position_embeddings: int = 40960  # longest canvas the rotary table is meant for
    tie_word_embeddings: bool = True  # no separate lm_head (unused by OmniVoice anyway)


@dataclass(frozen=True)
class CodecConfig:
    """The Higgs-Audio-v2 codec (decode path and encode path)."""

    sample_rate: int = SAMPLE_RATE  # codec input/output rate
    hop_length: int = 960  # samples per frame (product of the ratios)
    num_quantizers: int = 8  # RVQ levels used (= num_audio_codebook)
    codebook_size: int = 1024  # entries per RVQ level
    codebook_dim: int = 64  # RVQ code-vector width
    acoustic_hidden_size: int = 256  # DAC latent width (fc2 output)
    semantic_hidden_size: int = 768  # HuBERT width
    decoder_hidden_size: int = 1024  # DAC decoder conv1 output channels
    encoder_hidden_size: int = 64  # DAC encoder conv1 output channels
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2, 3)  # decoder block strides, in order
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2, 3)  # encoder block strides, in order
    semantic_sample_rate: int = 16000  # HuBERT input rate
    downsample_factor: int = 320  # HuBERT hop at 16 kHz


@dataclass(frozen=True)
class ModelConfig:
    """The OmniVoice model around the body."""

    backbone: BackboneConfig = field(default_factory=BackboneConfig)  # the Qwen3 body
    codec: CodecConfig = field(default_factory=CodecConfig)  # the audio codec
    num_audio_codebook: int = 8  # codebook rows per canvas position
    audio_vocab_size: int = 1025  # 1024 codes + the mask id
    audio_mask_id: int = 1024  # id of a not-yet-revealed audio token
    sample_rate: int = SAMPLE_RATE  # output audio rate
    frame_rate: float = 25.0  # audio frames per second
    max_target_seconds: float = MAX_TARGET_SECONDS  # longest single generation (longer text is chunked)
    max_request_seconds: float = 4 * 3600.0  # longest audio of one request, pauses included (estimated)
    max_pieces: int = 5000  # generations (chunks, parts between pauses) of one request
    max_ref_seconds: float = 60.0  # longest voice reference (prepared recording, or a voice's codes)
    max_batch_size: int = 16  # requests per packed forward
    max_packed_tokens: int = 24576  # canvas positions per packed forward
    load_dtype: str = "float16"  # body dtype on GPU when --dtype auto
    checkpoint_dtype: str | None = None  # dtype found on disk (set on load)
    own: CheckpointOwn = field(default_factory=CheckpointOwn)  # a fine-tune's own items, languages, voices

    @property
    def audio_embedding_rows(self) -> int:
        """Rows of the audio embedding / head tables: one block of audio_vocab_size per codebook."""
        return self.num_audio_codebook * self.audio_vocab_size

    def target_tokens_for_seconds(self, seconds: float) -> int:
        """Frames for a fixed duration, as the reference computes it."""
        return max(1, int(seconds * self.frame_rate))

    def seconds_for_target_tokens(self, tokens: int) -> float:
        return tokens / self.frame_rate

    @classmethod
    def from_checkpoint(cls, root: Path) -> "ModelConfig":
        """Read `config.json` and `audio_tokenizer/config.json` and check them against the engine:
        every number is checked against sane bounds (`_int`, `_num`) before anything is built."""
        where = root / "config.json"
        cfg = _read_json(where)
        codec_cfg = _read_json(root / "audio_tokenizer" / "config.json")
        if cfg.get("model_type") != "omnivoice":
            raise CheckpointError(f"{where}: model_type is {cfg.get('model_type')!r}, expected 'omnivoice'")
        backbone = _backbone_from_config(cfg.get("llm_config"), where)
        codec = codec_from_config(codec_cfg, root / "audio_tokenizer" / "config.json")
        n_cb = _int(cfg, "num_audio_codebook", where, 1, 64, 8)
        vocab = _int(cfg, "audio_vocab_size", where, 2, 1 << 20, 1025)
        mask_id = _int(cfg, "audio_mask_id", where, 1, 1 << 20, 1024)
        if mask_id != vocab - 1:
            raise CheckpointError(f"{where}: audio_mask_id {mask_id} must be audio_vocab_size - 1 ({vocab - 1})")
        if vocab - 1 != codec.codebook_size:
            raise CheckpointError(
                f"{where}: audio_vocab_size {vocab} does not match the codec's codebook_size {codec.codebook_size} + 1"
            )
        if n_cb != codec.num_quantizers:
            raise CheckpointError(
                f"{where}: num_audio_codebook {n_cb} but the codec uses {codec.num_quantizers} quantizers"
            )
        frame_rate = codec.sample_rate / codec.hop_length
        if frame_rate != 25.0:
            raise CheckpointError(
                f"{root / 'audio_tokenizer' / 'config.json'}: frame rate {frame_rate} (sample_rate / hop); "
                "the engine supports 25 frames/s"
            )
        dtype = cfg.get("dtype", cfg.get("torch_dtype"))
        return cls(
            backbone=backbone,
            codec=codec,
            num_audio_codebook=n_cb,
            audio_vocab_size=vocab,
            audio_mask_id=mask_id,
            sample_rate=codec.sample_rate,
            frame_rate=frame_rate,
            checkpoint_dtype=str(dtype)[:40] if dtype else None,
            own=read_own(root, cfg),
        )


_MISSING = object()


def _int(d: dict, key: str, where: object, low: int, high: int, default=_MISSING) -> int:
    """d[key] as an integer in low..high (an integral float such as 8.0 is taken); CheckpointError
    naming the file and the key otherwise. `default` when the key is absent (or null)."""
    value = d.get(key)
    if value is None:
        if default is _MISSING:
            raise CheckpointError(f"{where}: {key} is missing")
        return default
    ok = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value == int(value))
    if isinstance(value, bool) or not ok or not low <= int(value) <= high:
        raise CheckpointError(f"{where}: {key} is {str(value)[:40]}; the engine takes an integer in {low}..{high}")
    return int(value)


def _num(d: dict, key: str, where: object, low: float, high: float, default: float) -> float:
    """d[key] as a finite number in (low, high]; CheckpointError naming the file and the key otherwise."""
    value = d.get(key)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low < value <= high
    ):
        raise CheckpointError(f"{where}: {key} is {str(value)[:40]}; the engine takes a number in ({low:g}, {high:g}]")
    return float(value)


def _dict(value, where: object, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: {key} must be a JSON object, got {type(value).__name__}")
    return value


def _backbone_from_config(llm, where: Path) -> BackboneConfig:
    """The body's sizes from config.json's llm_config, each checked against sane bounds."""
    if not isinstance(llm, dict) or llm.get("model_type") != "qwen3":
        raise CheckpointError(f"{where}: llm_config must describe a 'qwen3' model")
    rope = _dict(llm.get("rope_parameters"), where, "llm_config.rope_parameters")
    if rope.get("rope_type", "default") != "default" or llm.get("rope_scaling"):
        raise CheckpointError(f"{where}: only the default RoPE is supported, got {rope or llm.get('rope_scaling')}")
    layer_types = llm.get("layer_types") or []
    if (
        llm.get("use_sliding_window")
        or not isinstance(layer_types, list)
        or any(t != "full_attention" for t in layer_types)
    ):
        raise CheckpointError(f"{where}: every layer must use full attention (no sliding window)")
    if llm.get("attention_bias"):
        raise CheckpointError(f"{where}: attention_bias is true; the engine supports Qwen3 without biases")
    if llm.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{where}: hidden_act {str(llm.get('hidden_act'))[:40]!r} is not supported (silu only)")
    w = f"{where}: llm_config"
    hidden = _int(llm, "hidden_size", w, 1, 1 << 16)
    heads = _int(llm, "num_attention_heads", w, 1, 1024)
    kv_heads = _int(llm, "num_key_value_heads", w, 1, heads, heads)
    if heads % kv_heads:
        raise CheckpointError(f"{where}: num_attention_heads must be a multiple of num_key_value_heads")
    theta = rope.get("rope_theta", llm.get("rope_theta"))
    return BackboneConfig(
        hidden_size=hidden,
        num_hidden_layers=_int(llm, "num_hidden_layers", w, 1, 512),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=_int(llm, "head_dim", w, 1, 4096, hidden // heads) or hidden // heads,
        intermediate_size=_int(llm, "intermediate_size", w, 1, 1 << 20),
        vocab_size=_int(llm, "vocab_size", w, 1, 1 << 22),
        rms_norm_eps=_num(llm, "rms_norm_eps", w, 0.0, 1.0, BackboneConfig.rms_norm_eps),
        rope_theta=_num({"rope_theta": theta}, "rope_theta", w, 0.0, 1e12, BackboneConfig.rope_theta),
        max_position_embeddings=_int(llm, "max_position_embeddings", w, 1, 1 << 24, 40960),
        tie_word_embeddings=bool(llm.get("tie_word_embeddings", True)),
    )


def _ratios(ac: dict, key: str, where: object, default: tuple[int, ...]) -> tuple[int, ...]:
    value = ac.get(key, default)
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 16:
        raise CheckpointError(f"{where}: acoustic_model_config.{key} must be a list of 1 to 16 integers")
    return tuple(_int({key: r}, key, where, 1, 64) for r in value)


def codec_from_config(c: dict, where: Path) -> CodecConfig:
    """The codec's sizes from audio_tokenizer/config.json, each checked against sane bounds."""
    if c.get("model_type") != "higgs_audio_v2_tokenizer":
        raise CheckpointError(f"{where}: model_type is {c.get('model_type')!r}, expected 'higgs_audio_v2_tokenizer'")
    ac = _dict(c.get("acoustic_model_config"), where, "acoustic_model_config")
    sc = _dict(c.get("semantic_model_config"), where, "semantic_model_config")
    up = _ratios(ac, "upsampling_ratios", where, CodecConfig.upsampling_ratios)
    down = _ratios(ac, "downsampling_ratios", where, CodecConfig.downsampling_ratios)
    sample_rate = _int(c, "sample_rate", where, 1000, 384_000, SAMPLE_RATE)
    hop = math.prod(up)
    bandwidths = c.get("target_bandwidths", [0.5, 1, 1.5, 2])
    if not isinstance(bandwidths, list) or not bandwidths:
        raise CheckpointError(f"{where}: target_bandwidths must be a non-empty list of numbers")
    top = _num({"target_bandwidths": bandwidths[-1]}, "target_bandwidths", where, 0.0, 1e4, 2.0)
    codebook_size = _int(c, "codebook_size", where, 2, 1 << 20, 1024)
    frame_rate = math.ceil(sample_rate / hop)
    n_q = int(1000 * top // (frame_rate * int(math.log2(codebook_size))))
    if not 1 <= n_q <= 64:
        raise CheckpointError(f"{where}: target_bandwidths give {n_q} quantizers; the engine takes 1..64")
    codec = CodecConfig(
        sample_rate=sample_rate,
        hop_length=hop,
        num_quantizers=n_q,
        codebook_size=codebook_size,
        codebook_dim=_int(c, "codebook_dim", where, 1, 4096, 64),
        acoustic_hidden_size=_int(ac, "hidden_size", where, 1, 1 << 16, 256),
        semantic_hidden_size=_int(sc, "hidden_size", where, 1, 1 << 16, 768),
        decoder_hidden_size=_int(ac, "decoder_hidden_size", where, 1, 1 << 16, 1024),
        encoder_hidden_size=_int(ac, "encoder_hidden_size", where, 1, 1 << 16, 64),
        upsampling_ratios=up,
        downsampling_ratios=down,
        semantic_sample_rate=_int(c, "semantic_sample_rate", where, 1000, 384_000, 16000),
        downsample_factor=_int(c, "downsample_factor", where, 1, 100_000, 320),
    )
    if math.prod(down) != hop:
        raise CheckpointError(f"{where}: downsampling ratios {down} and upsampling ratios {up} give different hops")
    return codec


MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few kB


def _read_json(path: Path) -> dict:
    """A config file's JSON object; CheckpointError when missing, too large, not JSON or not an object."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise CheckpointError(f"{path} is over {MAX_CONFIG_BYTES >> 20} MiB: not a model configuration")
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file missing: {path}") from None
    except (OSError, ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CheckpointError(f"cannot read {path}: {str(e)[:200] or type(e).__name__}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object (got {type(data).__name__}): not a model configuration")
    return data


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding settings of one request (names are the reference's)."""

    num_step: int = 32  # diffusion steps
    guidance_scale: float = 2.0  # classifier-free guidance weight (0 = no unconditional row)
    t_shift: float = 0.1  # time-step shift of the reveal schedule
    layer_penalty_factor: float = 5.0  # score penalty per codebook index (earlier rows first)
    position_temperature: float = 5.0  # Gumbel noise on position scores (0 = greedy)
    class_temperature: float = 0.0  # Gumbel noise on token choice (0 = argmax)
    denoise: bool = True  # put <|denoise|> in the canvas when there is a reference
    postprocess_output: bool = True  # silence removal on the output
    pad_duration: float = 0.1  # seconds of silence padded on each side
    fade_duration: float = 0.1  # seconds of fade in / out
    audio_chunk_duration: float = 15.0  # seconds of speech per chunk of a long text
    audio_chunk_threshold: float = 30.0  # texts estimated longer than this are chunked
    max_num_step: int = MAX_NUM_STEP  # upper bound accepted for num_step
    # the step cache (engine/model/generation.py, StepCache): an approximation, off by default (exact path)
    step_cache: bool = False  # reuse the prompt's keys/values and the unconditional log-probs between refreshes
    step_cache_prompt_every: int = 8  # with step_cache: the prompt's keys/values recomputed every n steps
    step_cache_uncond_every: int = 3  # with step_cache: the unconditional row run every k steps, reused between

    def __post_init__(self) -> None:
        validate_generation(self)

    def replace(self, **changes) -> "GenerationConfig":
        return replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class ValueRule:
    """What one of the engine's values accepts: a number (an integer when `integer`) from `low`
    (`low` itself too when `closed`) to `high`. `allowed` says it in the words every message
    uses, the settings schema's included (which reuses these rules: `value_rule`)."""

    low: float
    high: float = math.inf
    closed: bool = True  # low itself is allowed (>= rather than >)
    integer: bool = False
    unit: str = "a number"  # how the words name the value: "a number", "seconds"
    note: str = ""  # said after the range, e.g. " (1.0 is normal)"

    @property
    def allowed(self) -> str:
        """'an integer in 1..64', 'a number >= 0', 'seconds in (0, 30]', ..."""
        if self.integer:
            return f"an integer in {self.low:g}..{self.high:g}{self.note}"
        if self.high == math.inf:
            return f"{self.unit} {'>=' if self.closed else '>'} {self.low:g}{self.note}"
        return f"{self.unit} in {'[' if self.closed else '('}{self.low:g}, {self.high:g}]{self.note}"

    def ok(self, value: float) -> bool:
        """Within the rule (the value's type is checked first: a number, an int for an integer)."""
        return (self.low <= value if self.closed else self.low < value) and value <= self.high


# The rules of the values a request gives (GenerationConfig's fields, and Request's speed and
# duration), by their engine names. No torch: the settings schema imports them.
INT8_NEEDS = "the CPU, float32 and no compile"  # what the int8 body runs on (engine/fast/linears.py)


def int8_clash(device: str | None, dtype: str | None, compile: bool) -> str | None:
    """The hardware setting int8 cannot go with ("compile", "device" or "dtype"), or None: the
    one rule, torch-free, that the settings check before loading and the loader at loading use.
    device: as named ("auto" passes here; the loader checks the device it resolves to)."""
    if compile:
        return "compile"
    if device not in (None, "auto", "cpu"):
        return "device"
    if dtype not in (None, "auto", "float32"):
        return "dtype"
    return None


def int8_problem(clash: str, shown: str, name: Callable[[str], str] = lambda key: key) -> str:
    """Why int8 is refused with `clash` (shown: its value as the message gives it), the settings
    named by `name` (the command line: as flags)."""
    q = f"{name('quantize')} int8"
    if clash == "compile":
        return f"{q} and {name('compile')} cannot be combined: choose one"
    if clash == "device":
        return f"{q} runs on the CPU only, not on {shown}: use {name('device')} cpu"
    return f"{q} starts from float32 weights, not {shown}: leave {name('dtype')} at auto"


VALUE_RULES: dict[str, ValueRule] = {
    "num_step": ValueRule(1, MAX_NUM_STEP, integer=True),
    "guidance_scale": ValueRule(0),
    "t_shift": ValueRule(0, closed=False),
    "layer_penalty_factor": ValueRule(0),
    "position_temperature": ValueRule(0),
    "class_temperature": ValueRule(0),
    "pad_duration": ValueRule(0),
    "fade_duration": ValueRule(0),
    "audio_chunk_duration": ValueRule(0, closed=False, unit="seconds"),
    "audio_chunk_threshold": ValueRule(0, MAX_TARGET_SECONDS, closed=False, unit="seconds"),
    "step_cache_prompt_every": ValueRule(1, MAX_NUM_STEP, integer=True, note=" (1 = every step)"),
    "step_cache_uncond_every": ValueRule(1, MAX_NUM_STEP, integer=True, note=" (1 = every step)"),
    "speed": ValueRule(0, closed=False, note=" (1.0 is normal)"),
    "duration": ValueRule(0, MAX_TARGET_SECONDS, closed=False, unit="seconds"),
}


def value_rule(name: str) -> ValueRule:
    """The rule of one of the engine's values (VALUE_RULES; KeyError for another name)."""
    return VALUE_RULES[name]


def is_number(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def validate_generation(g: GenerationConfig) -> None:
    """Raise InvalidRequest naming the bad value and what is allowed (VALUE_RULES; num_step up to
    this config's max_num_step)."""
    steps = replace(VALUE_RULES["num_step"], high=g.max_num_step)
    if isinstance(g.num_step, bool) or not isinstance(g.num_step, int):
        raise InvalidRequest(f"num_step must be an integer, got {g.num_step!r}")
    if not steps.ok(g.num_step):
        raise InvalidRequest(f"num_step {g.num_step} is out of range: allowed {steps.low:g}..{steps.high:g}")
    for name in GenerationConfig.field_names():
        rule = VALUE_RULES.get(name) if name != "num_step" else None
        value = getattr(g, name)
        if rule is not None and not (
            is_number(value) and rule.ok(value) and not (rule.integer and isinstance(value, float))
        ):
            raise InvalidRequest(f"{name} {value!r} is not allowed: use {rule.allowed}")
    if not isinstance(g.step_cache, bool):
        raise InvalidRequest(f"step_cache must be true or false, got {g.step_cache!r}")
