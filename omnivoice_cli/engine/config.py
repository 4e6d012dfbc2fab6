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

from .errors import CheckpointError, InvalidRequest


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

    sample_rate: int = 24000  # codec input/output rate
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
    sample_rate: int = 24000  # output audio rate
    frame_rate: float = 25.0  # audio frames per second
    max_target_seconds: float = 30.0  # longest single generation (longer text is chunked)
    max_request_seconds: float = 4 * 3600.0  # longest audio of one request, pauses included (estimated)
    max_pieces: int = 5000  # generations (chunks, parts between pauses) of one request
    max_ref_seconds: float = 60.0  # longest voice reference (prepared recording, or a voice's codes)
    max_batch_size: int = 16  # requests per packed forward
    max_packed_tokens: int = 24576  # canvas positions per packed forward
    load_dtype: str = "float16"  # body dtype on GPU when --dtype auto
    checkpoint_dtype: str | None = None  # dtype found on disk (set on load)

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
        """Read `config.json` and `audio_tokenizer/config.json` and check them against the engine."""
        cfg = _read_json(root / "config.json")
        codec_cfg = _read_json(root / "audio_tokenizer" / "config.json")
        where = root / "config.json"
        if cfg.get("model_type") != "omnivoice":
            raise CheckpointError(f"{where}: model_type is {cfg.get('model_type')!r}, expected 'omnivoice'")
        llm = cfg.get("llm_config")
        if not isinstance(llm, dict) or llm.get("model_type") != "qwen3":
            raise CheckpointError(f"{where}: llm_config must describe a 'qwen3' model")
        rope = llm.get("rope_parameters") or {}
        theta = rope.get("rope_theta", llm.get("rope_theta", BackboneConfig.rope_theta))
        if rope.get("rope_type", "default") != "default" or llm.get("rope_scaling"):
            raise CheckpointError(f"{where}: only the default RoPE is supported, got {rope or llm.get('rope_scaling')}")
        if llm.get("use_sliding_window") or any(t != "full_attention" for t in llm.get("layer_types") or []):
            raise CheckpointError(f"{where}: every layer must use full attention (no sliding window)")
        if llm.get("attention_bias"):
            raise CheckpointError(f"{where}: attention_bias is true; the engine supports Qwen3 without biases")
        if llm.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"{where}: hidden_act {llm.get('hidden_act')!r} is not supported (silu only)")
        try:
            backbone = BackboneConfig(
                hidden_size=int(llm["hidden_size"]),
                num_hidden_layers=int(llm["num_hidden_layers"]),
                num_attention_heads=int(llm["num_attention_heads"]),
                num_key_value_heads=int(llm.get("num_key_value_heads", llm["num_attention_heads"])),
                head_dim=int(llm.get("head_dim") or llm["hidden_size"] // llm["num_attention_heads"]),
                intermediate_size=int(llm["intermediate_size"]),
                vocab_size=int(llm["vocab_size"]),
                rms_norm_eps=float(llm.get("rms_norm_eps", BackboneConfig.rms_norm_eps)),
                rope_theta=float(theta),
                max_position_embeddings=int(llm.get("max_position_embeddings", 40960)),
                tie_word_embeddings=bool(llm.get("tie_word_embeddings", True)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{where}: llm_config is missing or has a bad value for {e}") from None
        if backbone.num_attention_heads % backbone.num_key_value_heads:
            raise CheckpointError(f"{where}: num_attention_heads must be a multiple of num_key_value_heads")

        codec = _codec_from_config(codec_cfg, root / "audio_tokenizer" / "config.json")
        n_cb = int(cfg.get("num_audio_codebook", 8))
        vocab = int(cfg.get("audio_vocab_size", 1025))
        mask_id = int(cfg.get("audio_mask_id", 1024))
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
            checkpoint_dtype=str(dtype) if dtype else None,
        )


def _codec_from_config(c: dict, where: Path) -> CodecConfig:
    if c.get("model_type") != "higgs_audio_v2_tokenizer":
        raise CheckpointError(f"{where}: model_type is {c.get('model_type')!r}, expected 'higgs_audio_v2_tokenizer'")
    ac = c.get("acoustic_model_config") or {}
    sc = c.get("semantic_model_config") or {}
    try:
        up = tuple(int(r) for r in ac.get("upsampling_ratios", CodecConfig.upsampling_ratios))
        down = tuple(int(r) for r in ac.get("downsampling_ratios", CodecConfig.downsampling_ratios))
        sample_rate = int(c.get("sample_rate", 24000))
        hop = math.prod(up)
        bandwidths = c.get("target_bandwidths", [0.5, 1, 1.5, 2])
        codebook_size = int(c.get("codebook_size", 1024))
        frame_rate = math.ceil(sample_rate / hop)
        bits = int(math.log2(codebook_size))
        n_q = int(1000 * float(bandwidths[-1]) // (frame_rate * bits))
        codec = CodecConfig(
            sample_rate=sample_rate,
            hop_length=hop,
            num_quantizers=n_q,
            codebook_size=codebook_size,
            codebook_dim=int(c.get("codebook_dim", 64)),
            acoustic_hidden_size=int(ac.get("hidden_size", 256)),
            semantic_hidden_size=int(sc.get("hidden_size", 768)),
            decoder_hidden_size=int(ac.get("decoder_hidden_size", 1024)),
            encoder_hidden_size=int(ac.get("encoder_hidden_size", 64)),
            upsampling_ratios=up,
            downsampling_ratios=down,
            semantic_sample_rate=int(c.get("semantic_sample_rate", 16000)),
            downsample_factor=int(c.get("downsample_factor", 320)),
        )
    except (TypeError, ValueError, IndexError) as e:
        raise CheckpointError(f"{where}: bad codec configuration ({e})") from None
    if math.prod(down) != hop:
        raise CheckpointError(f"{where}: downsampling ratios {down} and upsampling ratios {up} give different hops")
    return codec


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file missing: {path}") from None
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from None


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
    max_num_step: int = 64  # upper bound accepted for num_step

    def __post_init__(self) -> None:
        validate_generation(self)

    def replace(self, **changes) -> "GenerationConfig":
        return replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def validate_generation(g: GenerationConfig) -> None:
    """Raise InvalidRequest naming the bad value and what is allowed."""
    if isinstance(g.num_step, bool) or not isinstance(g.num_step, int):
        raise InvalidRequest(f"num_step must be an integer, got {g.num_step!r}")
    if not 1 <= g.num_step <= g.max_num_step:
        raise InvalidRequest(f"num_step {g.num_step} is out of range: allowed 1..{g.max_num_step}")
    checks = [
        ("guidance_scale", g.guidance_scale, "a number >= 0", lambda v: v >= 0),
        ("t_shift", g.t_shift, "a number > 0", lambda v: v > 0),
        ("layer_penalty_factor", g.layer_penalty_factor, "a number >= 0", lambda v: v >= 0),
        ("position_temperature", g.position_temperature, "a number >= 0", lambda v: v >= 0),
        ("class_temperature", g.class_temperature, "a number >= 0", lambda v: v >= 0),
        ("pad_duration", g.pad_duration, "a number >= 0", lambda v: v >= 0),
        ("fade_duration", g.fade_duration, "a number >= 0", lambda v: v >= 0),
        ("audio_chunk_duration", g.audio_chunk_duration, "seconds > 0", lambda v: v > 0),
        ("audio_chunk_threshold", g.audio_chunk_threshold, "seconds > 0, at most 30", lambda v: 0 < v <= 30),
    ]
    for name, value, allowed, ok in checks:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise InvalidRequest(f"{name} {value!r} is not allowed: use {allowed}")
