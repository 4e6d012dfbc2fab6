"""Encode path of the Higgs-Audio-v2 codec: waveform [B, 1, N] at 24 kHz -> RVQ codes [B, Q, T].

Plain PyTorch, always float32, for voice cloning (the reference recording becomes [8, T_ref] codes).
The module tree mirrors the checkpoint's key names (`semantic_model.*` = HuBERT,
`encoder_semantic.*`, `acoustic_encoder.*`, `fc`, `quantizer.quantizers.{q}.{codebook.embed,
project_in, project_out}`), so exactly the encode subset of `audio_tokenizer/model.safetensors`
(375 tensors for the real checkpoint) loads with a strict `load_state_dict`; decoder and
training-only tensors in the same file are never read. HuBERT (`semantic_model.*`) is hubert.py's.

Data flow (real widths; the tiny test checkpoint is narrower), N a multiple of the hop (960):
  semantic: resample 24k -> 16k (resample.py, torchaudio's defaults) [B, 2N/3]
            -> zero-pad downsample_factor/2 (160) each side -> HuBERT, all hidden states
            (the embedding output after pos-conv + LayerNorm, then each layer's: 13)
            -> plain mean of them [B, 2T, 768] -> keep frames 0, 2, 4, ... [B, T, 768]
            -> semantic encoder (conv k3; 2 blocks of 2 ELU residual units + conv k3) [B, 768, T]
  acoustic: DAC encoder (conv k7; 5 blocks of 3 Snake residual units, Snake, strided conv;
            Snake; conv k3) [B, 256, T]  (re-run on input padded by hop/2 each side if its frame
            count differs from the semantic one, as the reference does; never for N = k * hop)
  fuse:     concat [acoustic | semantic] [B, 1024, T] -> fc (Linear over channels)
  RVQ:      per level q: z = project_in_q(residual) [B, T, 64]; idx = nearest embed_q row by
            squared distance; residual -= project_out_q(embed_q[idx]); codes [B, Q, T]
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoint.tensorfile import SafetensorsFile, check_tensors
from ..errors import CheckpointError
from ..sound.resample import resample_tensor
from .codec import RES_UNIT_DILATIONS, Codebook, ResidualUnit, Snake
from .config import CodecConfig, codec_from_config
from .hubert import LEGACY_POS_CONV, HubertConfig, HubertModel

# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncoderConfig:
    """Everything the encode path needs: the shared codec sizes plus the encoder-only fields."""

    codec: CodecConfig = field(default_factory=CodecConfig)
    hubert: HubertConfig = field(default_factory=HubertConfig)
    kernel_size: int = 3  # semantic encoder first conv
    unit_kernel_size: int = 3  # semantic residual-unit conv
    strides: tuple[int, ...] = (1, 1)  # semantic encoder blocks
    channel_ratios: tuple[float, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)  # residual units per semantic block

    @property
    def rvq_dim(self) -> int:
        return self.codec.acoustic_hidden_size + self.codec.semantic_hidden_size

    @property
    def semantic_downsample_factor(self) -> int:
        """HuBERT frames per codec frame (2 for the real codec: keep every 2nd frame)."""
        c = self.codec
        return int(c.hop_length / (c.sample_rate / c.semantic_sample_rate) / c.downsample_factor)

    @property
    def semantic_pad(self) -> int:
        """Zero samples added on each side at the semantic rate before HuBERT (160)."""
        return self.codec.downsample_factor // 2

    @classmethod
    def from_dict(cls, d: dict, where: object = "audio_tokenizer/config.json") -> "EncoderConfig":
        codec = codec_from_config(d, Path(str(where)))
        hubert = HubertConfig.from_dict(d.get("semantic_model_config") or {}, f"{where}: semantic_model_config")
        try:
            cfg = cls(
                codec=codec,
                hubert=hubert,
                kernel_size=int(d.get("kernel_size", 3)),
                unit_kernel_size=int(d.get("unit_kernel_size", 3)),
                strides=tuple(int(s) for s in d.get("strides", (1, 1))),
                channel_ratios=tuple(float(r) for r in d.get("channel_ratios", (1, 1))),
                block_dilations=tuple(int(x) for x in d.get("block_dilations", (1, 1))),
            )
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{where}: bad semantic encoder configuration ({e})") from None
        problems = []
        if hubert.hidden_size != codec.semantic_hidden_size:
            problems.append(f"HuBERT hidden_size {hubert.hidden_size} != semantic width {codec.semantic_hidden_size}")
        if len(cfg.strides) != len(cfg.channel_ratios) or not cfg.strides:
            problems.append("strides and channel_ratios must have the same, non-zero length")
        elif int(codec.semantic_hidden_size * cfg.channel_ratios[-1]) != codec.semantic_hidden_size:
            problems.append("the last channel_ratio must keep the semantic width (the fc input is fixed)")
        if any(s != 1 for s in cfg.strides):
            problems.append(f"semantic encoder strides {cfg.strides}: only stride 1 keeps the frame rate")
        if cfg.semantic_downsample_factor < 1:
            problems.append("hop_length / (sample_rate / semantic_sample_rate) / downsample_factor is < 1")
        if problems:
            raise CheckpointError(f"{where}: " + "; ".join(problems))
        return cfg

    @classmethod
    def from_dir(cls, audio_tokenizer_dir: Path) -> "EncoderConfig":
        path = Path(audio_tokenizer_dir) / "config.json"
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint file missing: {path}") from None
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(f"cannot read {path}: {e}") from None
        return cls.from_dict(d, path)


# ---------------------------------------------------------------------------------------------
# Semantic encoder, acoustic (DAC) encoder, RVQ (names = the checkpoint's)
# ---------------------------------------------------------------------------------------------


class SemanticResidualUnit(nn.Module):
    """x + conv2(ELU(conv1(ELU(x)))), no biases; [B, C, T] -> [B, C, T]."""

    def __init__(self, channels: int, kernel: int, dilation: int):
        super().__init__()
        self.conv1 = nn.Conv1d(
            channels, channels, kernel, padding=((kernel - 1) // 2) * dilation, dilation=dilation, bias=False
        )
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class SemanticEncoderBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, unit_kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.res_units = nn.ModuleList(SemanticResidualUnit(c_in, unit_kernel, d) for d in dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(c_in, c_out, kernel_size=kernel, stride=stride, padding=(kernel - 1) // 2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        width = cfg.codec.semantic_hidden_size
        self.conv = nn.Conv1d(width, width, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)
        blocks = []
        c_in = width
        for stride, ratio in zip(cfg.strides, cfg.channel_ratios):
            c_out = int(width * ratio)
            blocks.append(SemanticEncoderBlock(c_in, c_out, stride, cfg.unit_kernel_size, cfg.block_dilations))
            c_in = c_out
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class EncoderBlock(nn.Module):
    """3 residual units (dilation 1, 3, 9) -> Snake -> Conv1d(C -> 2C, k 2s, stride s)."""

    def __init__(self, channels: int, stride: int):
        super().__init__()
        self.res_unit1 = ResidualUnit(channels, RES_UNIT_DILATIONS[0])
        self.res_unit2 = ResidualUnit(channels, RES_UNIT_DILATIONS[1])
        self.res_unit3 = ResidualUnit(channels, RES_UNIT_DILATIONS[2])
        self.snake1 = Snake(channels)
        self.conv1 = nn.Conv1d(
            channels, 2 * channels, kernel_size=2 * stride, stride=stride, padding=math.ceil(stride / 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res_unit3(self.res_unit2(self.res_unit1(x)))
        return self.conv1(self.snake1(x))


class AcousticEncoder(nn.Module):
    """DAC encoder: [B, 1, N] -> [B, latent, ~N / prod(ratios)]."""

    def __init__(self, hidden: int, latent: int, ratios: tuple[int, ...]):
        super().__init__()
        self.conv1 = nn.Conv1d(1, hidden, kernel_size=7, padding=3)
        widths = [hidden * 2**i for i in range(len(ratios) + 1)]
        self.block = nn.ModuleList(EncoderBlock(widths[i], s) for i, s in enumerate(ratios))
        self.snake1 = Snake(widths[-1])
        self.conv2 = nn.Conv1d(widths[-1], latent, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for blk in self.block:
            x = blk(x)
        return self.conv2(self.snake1(x))

    def output_length(self, n: int) -> int:
        """Frames out of n samples: every Conv1d's length formula, in module order (as transformers)."""
        for m in self.modules():
            if isinstance(m, nn.Conv1d):
                pad = cast(int, m.padding[0])  # never "same" here
                n = (n + 2 * pad - m.dilation[0] * (m.kernel_size[0] - 1) - 1) // m.stride[0] + 1
        return n


class EncoderVectorQuantizer(nn.Module):
    def __init__(self, size: int, dim: int, hidden: int):
        super().__init__()
        self.codebook = Codebook(size, dim)  # embed [K, d]
        self.project_in = nn.Linear(hidden, dim)  # [d, D]
        self.project_out = nn.Linear(dim, hidden)  # [D, d]

    def encode(self, residual: torch.Tensor) -> torch.Tensor:
        """residual [B, D, T] -> nearest codebook indices [B, T] (squared Euclidean distance).

        Written as the reference writes it (argmax of -(|z|^2 - 2 z.e + |e|^2)), so rounding and
        tie-breaking are the same.
        """
        z = self.project_in(residual.permute(0, 2, 1))  # [B, T, d]
        flat = z.reshape(-1, z.shape[-1])
        embed_t = self.codebook.embed.t()  # [d, K]
        dist = -(flat.pow(2).sum(1, keepdim=True) - 2 * flat @ embed_t + embed_t.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices.view(*z.shape[:-1])

    def decode(self, idx: torch.Tensor) -> torch.Tensor:
        """indices [B, T] -> project_out(embed[idx]) [B, D, T]"""
        return self.project_out(F.embedding(idx, self.codebook.embed)).permute(0, 2, 1)


def _as_quantizer(m: nn.Module) -> EncoderVectorQuantizer:
    """An EncoderRVQ's level as its type (nn.ModuleList holds plain modules)."""
    return cast(EncoderVectorQuantizer, m)


class EncoderRVQ(nn.Module):
    def __init__(self, n_q: int, size: int, dim: int, hidden: int):
        super().__init__()
        self.quantizers = nn.ModuleList(EncoderVectorQuantizer(size, dim, hidden) for _ in range(n_q))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, D, T] -> codes [B, Q, T] int64"""
        residual = x
        codes = []
        for q in map(_as_quantizer, self.quantizers):
            idx = q.encode(residual)
            residual = residual - q.decode(idx)
            codes.append(idx)
        return torch.stack(codes).transpose(0, 1)


# ---------------------------------------------------------------------------------------------
# The whole encoder
# ---------------------------------------------------------------------------------------------


class HiggsEncoder(nn.Module):
    """Waveform [B, 1, N] float at the codec rate -> codes [B, Q, ~N / hop] int64."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        c = cfg.codec
        self.semantic_model = HubertModel(cfg.hubert)
        self.encoder_semantic = SemanticEncoder(cfg)
        self.acoustic_encoder = AcousticEncoder(
            c.encoder_hidden_size, c.acoustic_hidden_size, tuple(c.downsampling_ratios)
        )
        self.fc = nn.Linear(cfg.rvq_dim, cfg.rvq_dim)
        self.quantizer = EncoderRVQ(c.num_quantizers, c.codebook_size, c.codebook_dim, cfg.rvq_dim)

    @property
    def hop_length(self) -> int:
        return self.cfg.codec.hop_length

    @property
    def sample_rate(self) -> int:
        return self.cfg.codec.sample_rate

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    def semantic_features(self, wav: torch.Tensor) -> torch.Tensor:
        """wav [B, 1, N] -> HuBERT features [B, T, hidden]: mean of all hidden states, every k-th frame."""
        c = self.cfg.codec
        x = resample_tensor(wav, c.sample_rate, c.semantic_sample_rate)[:, 0, :]
        x = F.pad(x, (self.cfg.semantic_pad, self.cfg.semantic_pad))
        states = self.semantic_model(x)
        feats = torch.stack(states, dim=1).mean(dim=1)
        k = self.cfg.semantic_downsample_factor
        return feats[:, ::k, :] if k > 1 else feats

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        semantic = self.encoder_semantic(self.semantic_features(wav).transpose(1, 2))  # [B, S, T]
        frames = semantic.shape[2]
        if self.acoustic_encoder.output_length(wav.shape[2]) != frames:
            pad = self.hop_length // 2
            wav = F.pad(wav, (pad, pad))
        acoustic = self.acoustic_encoder(wav)  # [B, A, T]
        if acoustic.shape[2] != frames:
            raise ValueError(
                f"acoustic ({acoustic.shape[2]}) and semantic ({frames}) frame counts differ for "
                f"{wav.shape[2]} input samples"
            )
        fused = torch.cat([acoustic, semantic], dim=1)
        fused = self.fc(fused.transpose(1, 2)).transpose(1, 2)  # [B, D, T]
        return self.quantizer(fused)

    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        """wav: float tensor [B, 1, N] (mono; N >= hop, ideally a multiple of hop) at the codec
        rate -> LongTensor codes [B, Q, T] (T = N / hop for N a multiple of hop)."""
        if not torch.is_tensor(wav) or not wav.is_floating_point():
            raise ValueError("the waveform to encode must be a floating-point tensor")
        if wav.dim() != 3 or wav.shape[1] != 1:
            raise ValueError(f"the waveform to encode must have shape [B, 1, N] (mono), got {list(wav.shape)}")
        if wav.shape[2] < self.hop_length:
            raise ValueError(f"the waveform to encode is shorter than one frame ({wav.shape[2]} < {self.hop_length})")
        wav = wav.to(device=self.device, dtype=torch.float32)
        with torch.inference_mode():
            return self.forward(wav)


# ---------------------------------------------------------------------------------------------
# Building and loading
# ---------------------------------------------------------------------------------------------


def build_encoder(cfg: EncoderConfig) -> HiggsEncoder:
    """Build the encoder (works under `torch.device("meta")`); weights are placeholders."""
    return HiggsEncoder(cfg)


def encoder_tensor_shapes(cfg: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> shape of every tensor the encode path needs."""
    with torch.device("meta"):
        model = build_encoder(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def _file_names(file: SafetensorsFile, expected: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """Module key -> key in the file (the pos-conv weight norm may use the legacy weight_g/_v)."""
    names = {}
    for key in expected:
        name = key
        if key not in file.entries:
            for new, old in LEGACY_POS_CONV.items():
                if key.endswith(new):
                    legacy = key[: -len(new)] + old
                    if legacy in file.entries:
                        name = legacy
        names[key] = name
    return names


def load_codec_encoder(audio_tokenizer_dir: Path, cfg: EncoderConfig | None = None, device="cpu") -> HiggsEncoder:
    """Read only the encode tensors of `<dir>/model.safetensors` (mmap, each once) into a float32
    HiggsEncoder. `cfg` defaults to `<dir>/config.json`.

    Raises CheckpointError for a missing/corrupt file, or one listing every missing / mis-shaped
    tensor. Other keys (decoder, training state, masked_spec_embed) are ignored and never read.
    """
    audio_tokenizer_dir = Path(audio_tokenizer_dir)
    cfg = cfg or EncoderConfig.from_dir(audio_tokenizer_dir)
    path = audio_tokenizer_dir / "model.safetensors"
    file = SafetensorsFile(path)
    expected = encoder_tensor_shapes(cfg)
    names = _file_names(file, expected)
    shapes = {names[k]: s for k, s in expected.items()}
    check_tensors(path, file, shapes, allow_extra=True, floating=True, what="the codec encoder")
    device = torch.device(device)
    state = {key: file.get(names[key]).to(device=device, dtype=torch.float32) for key in expected}
    with torch.device("meta"):
        model = build_encoder(cfg)
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    model.requires_grad_(False)
    return model
