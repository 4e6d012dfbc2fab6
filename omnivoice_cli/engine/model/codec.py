"""Decode path of the Higgs-Audio-v2 codec: RVQ codes [B, Q, T] -> waveform [B, 1, T * hop].

Plain PyTorch, always float32 (weights stored in fp16 are widened on loading, and a decoder cast
to half is widened again before it decodes: `HiggsDecoder.keep_float32`). The module tree mirrors
the checkpoint's key names (`quantizer.quantizers.{q}.codebook.embed`, `fc2`, `acoustic_decoder.*`)
so the decode subset of `audio_tokenizer/model.safetensors` loads with a strict `load_state_dict`.
`forward` runs that module tree as it is (the reference path); `decode` runs it too, or the plan
a loader put in the decoder's one seam for a faster decode (`HiggsDecoder.planner`; engine/loading.py
installs one, equal to the module tree to float rounding).

Data flow (widths for the real checkpoint; the tiny test checkpoint is narrower):
  codes [B, 8, T]
  -> per level q: embed_q[codes[:, q]] [B, T, 64] -> project_out_q [B, T, 1024]; summed over q
  -> fc2 [B, T, 256] -> transpose [B, 256, T]
  -> conv1 (k7) [B, 1024, T]
  -> 5 blocks (stride s = 8, 5, 4, 2, 3): Snake, ConvTranspose (k 2s, x s, channels halve),
     3 residual units (dilation 1, 3, 9)             [B, 32, T * 960]
  -> Snake -> conv2 (k7) [B, 1, T * 960]   (no tanh: the output is unbounded)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoint.tensorfile import read_floats
from ..errors import CheckpointError
from ..torchprivate import version
from .config import CodecConfig

RES_UNIT_DILATIONS = (1, 3, 9)
SNAKE_EPS = 1e-9


# ---------------------------------------------------------------------------------------------
# Pure functions
# ---------------------------------------------------------------------------------------------


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """DAC Snake: x + (alpha + 1e-9)^-1 * sin(alpha * x)^2, alpha used raw (not exp'd).

    x: [B, C, L], alpha: [1, C, 1] -> [B, C, L]
    """
    # one temporary, worked in place (memory stays low); the last pass adds x and the scaled square
    t = (alpha * x).sin_().square_()
    return torch.addcmul(x, t, (alpha + SNAKE_EPS).reciprocal(), out=t)


def rvq_decode(
    codes: torch.Tensor,
    embeds: list[torch.Tensor],
    out_weights: list[torch.Tensor],
    out_biases: list[torch.Tensor],
) -> torch.Tensor:
    """Residual-VQ decode: sum over levels of project_out_q(embed_q[codes[:, q]]).

    codes: [B, Q, T] int64; embeds[q]: [K, d]; out_weights[q]: [D, d]; out_biases[q]: [D]
    -> [B, D, T]. Levels are summed in order 0..Q-1 (the biases are summed too).
    """
    total = None
    for q in range(codes.shape[1]):
        vec = F.embedding(codes[:, q], embeds[q])  # [B, T, d]
        vec = F.linear(vec, out_weights[q], out_biases[q])  # [B, T, D]
        vec = vec.permute(0, 2, 1)  # [B, D, T]
        total = vec if total is None else total + vec
    if total is None:
        raise ValueError("codes [B, Q, T] need at least one codebook (Q >= 1)")
    return total


def polyphase_weight(weight: torch.Tensor, bias: torch.Tensor | None, stride: int):
    """A ConvTranspose1d's weight [C_in, C_out, 2s] (kernel twice the stride) as that of a plain
    two-tap conv1d with C_out * s outputs [C_out * s, C_in, 2] (output channel c * s + r is phase r
    of channel c; tap 0 reads the previous input frame, tap 1 the current), and its bias [C_out * s]."""
    c_in, c_out, k = weight.shape
    assert k == 2 * stride, (k, stride)
    w = weight.view(c_in, c_out, 2, stride).permute(1, 3, 0, 2)  # [C_out, s, C_in, half]; half 1 = taps s..2s-1
    w = w.flip(-1).reshape(c_out * stride, c_in, 2).contiguous()  # tap 0 = the later half (previous frame)
    return w, None if bias is None else bias.repeat_interleave(stride)


def polyphase_upsample(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int
) -> torch.Tensor:
    """ConvTranspose1d with kernel 2s, stride s, L * s samples out (padding p and output padding
    s % 2, as upsample_conv_params), computed as one two-tap conv1d and an interleave:
    the full transposed output z[m * s + r] = W_r^T x[m] + W_{r+s}^T x[m-1] (m = 0..L, x zero
    outside), cropped to z[p : p + L * s]. oneDNN runs the dense convolution far faster than the
    transposed one, most of all with few channels (benchmarks/speed-log.md).

    x [B, C_in, L], weight and bias from polyphase_weight -> [B, C_out, L * s] (a strided view)."""
    b, _, n = x.shape
    y = F.conv1d(F.pad(x, (1, 1)), weight, bias)  # [B, C_out * s, L + 1]
    z = y.view(b, -1, stride, n + 1).transpose(2, 3).reshape(b, -1, (n + 1) * stride)  # interleaved
    return z[..., padding : padding + n * stride]


class Upsample(nn.ConvTranspose1d):
    """The blocks' ConvTranspose1d (its weight and bias, the checkpoint's keys), computed by
    polyphase_upsample on a weight rearranged at the first call."""

    def polyphase(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """polyphase_weight of the weight as it is: made once, and again for a new or edited weight."""
        key = (self.weight.device, self.weight.dtype, self.weight.data_ptr(), version(self.weight))
        cached = self.__dict__.get("_polyphase")
        if cached is None or cached[0] != key:
            with torch.no_grad():
                cached = self.__dict__["_polyphase"] = (key, *polyphase_weight(self.weight, self.bias, self.stride[0]))
        return cached[1], cached[2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]  # no output_size: a fixed upsample
        weight, bias = self.polyphase()
        return polyphase_upsample(x, weight, bias, self.stride[0], cast(int, self.padding[0]))  # never "same" here


def upsample_conv_params(stride: int) -> dict:
    """ConvTranspose1d geometry that gives exactly L * stride samples out of L."""
    return {
        "kernel_size": 2 * stride,
        "stride": stride,
        "padding": math.ceil(stride / 2),
        "output_padding": stride % 2,
    }


# ---------------------------------------------------------------------------------------------
# Modules (attribute names = checkpoint key names)
# ---------------------------------------------------------------------------------------------


class Snake(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))  # [1, C, 1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return snake(x, self.alpha)


class ResidualUnit(nn.Module):
    """x + conv2(Snake(conv1(Snake(x)))), conv1 k7 dilated, conv2 k1; [B, C, L] -> [B, C, L]."""

    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.snake1 = Snake(channels)
        self.conv1 = nn.Conv1d(channels, channels, kernel_size=7, dilation=dilation, padding=3 * dilation)
        self.snake2 = Snake(channels)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.snake2(self.conv1(self.snake1(x))))
        return y.add_(x)


class DecoderBlock(nn.Module):
    """Snake -> ConvTranspose1d (C -> C/2, x stride) -> 3 residual units; [B, C, L] -> [B, C/2, L*s]."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.snake1 = Snake(in_channels)
        self.conv_t1 = Upsample(in_channels, out_channels, **upsample_conv_params(stride))
        self.res_unit1 = ResidualUnit(out_channels, RES_UNIT_DILATIONS[0])
        self.res_unit2 = ResidualUnit(out_channels, RES_UNIT_DILATIONS[1])
        self.res_unit3 = ResidualUnit(out_channels, RES_UNIT_DILATIONS[2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t1(self.snake1(x))
        return self.res_unit3(self.res_unit2(self.res_unit1(x)))


class AcousticDecoder(nn.Module):
    """DAC decoder as Higgs modifies it: [B, latent, T] -> [B, 1, T * prod(ratios)], no tanh."""

    def __init__(self, latent: int, hidden: int, ratios: tuple[int, ...]):
        super().__init__()
        self.conv1 = nn.Conv1d(latent, hidden, kernel_size=7, padding=3)
        widths = [hidden // 2**i for i in range(len(ratios) + 1)]
        self.block = nn.ModuleList(DecoderBlock(widths[i], widths[i + 1], s) for i, s in enumerate(ratios))
        self.snake1 = Snake(widths[-1])
        self.conv2 = nn.Conv1d(widths[-1], 1, kernel_size=7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for blk in self.block:
            x = blk(x)
        return self.conv2(self.snake1(x))


class Codebook(nn.Module):
    embed: torch.Tensor  # [K, d], a buffer

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("embed", torch.zeros(size, dim))  # [K, d]


class VectorQuantizer(nn.Module):
    """One RVQ level, decode half only (project_in is encode-only)."""

    def __init__(self, size: int, dim: int, hidden: int):
        super().__init__()
        self.codebook = Codebook(size, dim)
        self.project_out = nn.Linear(dim, hidden)  # weight [D, d], bias [D]


class ResidualVQ(nn.Module):
    def __init__(self, n_q: int, size: int, dim: int, hidden: int):
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantizer(size, dim, hidden) for _ in range(n_q))

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, Q, T] -> [B, D, T]"""
        qs = [cast(VectorQuantizer, m) for m in self.quantizers]
        return rvq_decode(
            codes,
            [m.codebook.embed for m in qs],
            [m.project_out.weight for m in qs],
            [m.project_out.bias for m in qs],
        )


class HiggsDecoder(nn.Module):
    """Codes [B, Q, T] int64 -> audio [B, 1, T * hop] float32."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        rvq_dim = cfg.acoustic_hidden_size + cfg.semantic_hidden_size
        self.quantizer = ResidualVQ(cfg.num_quantizers, cfg.codebook_size, cfg.codebook_dim, rvq_dim)
        self.fc2 = nn.Linear(rvq_dim, cfg.acoustic_hidden_size)
        self.acoustic_decoder = AcousticDecoder(
            cfg.acoustic_hidden_size, cfg.decoder_hidden_size, tuple(cfg.upsampling_ratios)
        )
        # the seam for a faster decode: (this decoder) -> what decodes its codes, or None (`plan`)
        self.planner: Callable[[HiggsDecoder], Callable[[torch.Tensor], torch.Tensor] | None] | None = None

    @property
    def hop_length(self) -> int:
        return math.prod(self.cfg.upsampling_ratios)

    @property
    def device(self) -> torch.device:
        return self.fc2.weight.device

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """The module tree, plain: the reference path (`decode` runs the folded plan)."""
        return self.acoustic_decoder(self.latent(codes))  # [B, 1, T * hop]

    def latent(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, Q, T] -> the acoustic decoder's input [B, latent, T] (a transposed view)."""
        latent = self.quantizer(codes)  # [B, D, T]
        return self.fc2(latent.transpose(1, 2)).transpose(1, 2)  # [B, latent, T]

    def plan(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """What decodes codes [B, Q, T] -> audio [B, 1, T * hop] instead of the module tree: the
        plan `planner` makes of the weights as they are (the seam a loader fills; None there, or
        where it has none to give: the module tree decodes)."""
        return None if self.planner is None else self.planner(self)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes: LongTensor [B, Q, T] with values in [0, codebook_size) -> FloatTensor [B, 1, T * hop]."""
        if codes.dim() != 3 or codes.shape[1] != self.cfg.num_quantizers:
            raise ValueError(f"codes must have shape [B, {self.cfg.num_quantizers}, T], got {list(codes.shape)}")
        if codes.dtype.is_floating_point or codes.dtype == torch.bool:
            raise ValueError(f"codes must be an integer tensor, got {codes.dtype}")
        codes = codes.to(device=self.device, dtype=torch.long)
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= self.cfg.codebook_size):
            raise ValueError(
                f"codes must lie in [0, {self.cfg.codebook_size}), got range [{int(codes.min())}, {int(codes.max())}]"
            )
        self.keep_float32()
        plan = self.plan()
        with torch.inference_mode(), torch.autocast(codes.device.type, enabled=False):
            return self.forward(codes) if plan is None else plan(codes)

    def keep_float32(self) -> None:
        """Its weights back in float32 if they were cast to half (`.half()`, `.to(torch.bfloat16)`:
        a GPU run in `--dtype float16`): the real checkpoint stores `fc2` and the decoder in fp16,
        and in an fp16 module the upsampling chain passes 65,504 and turns to NaN
        (vllm-project/vllm-omni#3336). Widening a half weight is exact, so the decode is the fp32
        one; the chain always runs in float32 (and `decode` turns any autocast off)."""
        if any(t.dtype != torch.float32 for t in (*self.parameters(), *self.buffers()) if t.is_floating_point()):
            self.float()


# ---------------------------------------------------------------------------------------------
# Building and loading
# ---------------------------------------------------------------------------------------------


def build_decoder(cfg: CodecConfig) -> HiggsDecoder:
    """Build the decoder (works under `torch.device("meta")`); weights are placeholders."""
    n_blocks = len(cfg.upsampling_ratios)
    if n_blocks == 0 or cfg.decoder_hidden_size % (2**n_blocks):
        raise CheckpointError(
            f"codec decoder_hidden_size {cfg.decoder_hidden_size} cannot be halved "
            f"{n_blocks} times (upsampling_ratios {tuple(cfg.upsampling_ratios)})"
        )
    return HiggsDecoder(cfg)


def decoder_tensor_shapes(cfg: CodecConfig) -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> shape of every tensor the decode path needs."""
    with torch.device("meta"):
        model = build_decoder(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def read_codec_decoder(audio_tokenizer_dir: Path, cfg: CodecConfig, device="cpu") -> HiggsDecoder:
    """Read only the decode tensors of `<dir>/model.safetensors` (mmap) into a float32 HiggsDecoder
    (the module tree; engine/loading.py's load_codec_decoder adds its plan).

    Raises CheckpointError for a missing/corrupt file or for missing / mis-shaped tensors (all
    listed in one message). Extra keys (encoder, training state) are ignored.
    """
    path = Path(audio_tokenizer_dir) / "model.safetensors"
    state = read_floats(path, decoder_tensor_shapes(cfg), what="the codec decoder")
    with torch.device("meta"):
        model = build_decoder(cfg)
    model.load_state_dict(state, strict=True, assign=True)
    model = model.to(device=torch.device(device), dtype=torch.float32)
    model.eval()
    model.requires_grad_(False)
    return model
