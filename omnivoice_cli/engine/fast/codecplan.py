"""The codec's decode prepared for speed (`engine/model/codec.py`'s module tree stays the plain
reference path; `install_plan` puts a Planner in the decoder's seam for it, engine/loading.py calls it): Snake's scales folded into the convolutions, every convolution channels-last and
packed, the residual VQ as one product.

Snake(x) = x + sin(a x)^2 / a = (1/a) (y + sin(y)^2) with y = a x. So each Snake runs on a tensor
already scaled by its alpha (the convolution before it multiplies its output channels by a, and
the one after divides its input channels by a: both folded into the weights once), and costs two
passes (sin, then y += sin^2) instead of four (scale, sin, square, scaled add). The residual
stream is kept scaled by the alpha of the Snake that reads it next; a unit's skip adds the stream
rescaled by the ratio of the two alphas. Equal to the module tree's decode to float rounding
(tests/test_codecplan.py, tests/test_codec.py).

The convolutions run as conv2d over [B, C, 1, L] in channels-last memory ([B, L, C]): oneDNN
then reads and writes the tensors as they are (no reorder to its blocked layout and back at each
call), which is what pays with few channels and long signals; their weights are packed once into
oneDNN's layout, and each unit's skip is added in its last convolution's epilogue, over the
stream. The upsamplings are two-tap convolutions whose outputs are ordered phase-major, so in
channels-last memory the interleave is a view. Where an alpha is near zero (the fold would divide
by it) there is no plan, and the module tree decodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import torch
import torch.nn.functional as F

from .. import torchprivate as tp
from ..model.codec import HiggsDecoder, Upsample, VectorQuantizer
from .memory import release_pages

PACK_FRAMES = 250  # the input length oneDNN packs the weights for: a 10 s piece
MIN_ALPHA = 1e-3  # |alpha| below this: the 1e-9 in Snake's 1 / (alpha + 1e-9) would show; no fold
CL = torch.channels_last


@dataclass(frozen=True)
class Conv:
    """One prepared convolution: weight [O, I, 1, k] channels-last, or oneDNN's packed copy of it
    (`packed`: made once, where torch calls oneDNN for it at every call otherwise), bias [O]."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    padding: int = 0
    dilation: int = 1
    packed: bool = False

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return tp.conv(x, self.weight, self.bias, [0, self.padding], [1, 1], [1, self.dilation], 1)
        return F.conv2d(x, self.weight, self.bias, padding=(0, self.padding), dilation=(1, self.dilation))

    def add_to(self, other: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """other += conv(x), in place (packed: in the convolution's epilogue, the same bits as a
        separate add; no tensor made for the convolution's output)."""
        if self.packed:
            return tp.conv_add_(other, x, self.weight, self.bias, [0, self.padding], [1, 1], [1, self.dilation], 1)
        return other.add_(self(x))

    def pack(self, length: int) -> Conv:
        """Packed into oneDNN's layout for an input of about `length` samples (0: not packed;
        another length still runs, oneDNN reordering the weight as it did unpacked): float32 on a
        CPU where torch has oneDNN's convolution ops (those torch's own CPU compiler emits); as it
        is otherwise. The same arithmetic, bit for bit."""
        w = self.weight
        if length <= 0 or self.packed or w.device.type != "cpu" or w.dtype != torch.float32 or not can_pack():
            return self
        size = [1, w.shape[1], 1, length]
        weight = tp.reorder_conv_weight(w, [0, self.padding], [1, 1], [1, self.dilation], 1, size)
        return replace(self, weight=weight, packed=True)


def can_pack() -> bool:
    """Whether this torch build has oneDNN's prepacked convolution ops."""
    try:
        return torch.backends.mkldnn.is_available() and tp.present(tp.CONV, tp.CONV_ADD_, tp.REORDER_CONV)
    except (AttributeError, RuntimeError):
        return False


@dataclass(frozen=True)
class Unit:
    """A residual unit on the scaled stream: z' = conv2(g(conv1(g(z)))) + ratio * z, written over z
    (three tensors of the stream's size live at once: z, g(z) or sin, conv1's output)."""

    conv1: Conv
    conv2: Conv
    ratio: torch.Tensor | None  # [1, C, 1, 1], the next Snake's alpha over this one's; None: all 1

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        t = torch.sin(z)
        u = torch.addcmul(z, t, t, out=t)  # g(z) = z + sin(z)^2: alpha * Snake(x)
        h = self.conv1(u)
        snake_scaled_(h, out=u)  # u is free again: sin(h) goes there
        del u, t
        if self.ratio is not None:
            z.mul_(self.ratio)  # the stream is this unit's own (a block's or the unit before's output)
        return self.conv2.add_to(z, h)  # z += conv2(h), in place


@dataclass(frozen=True)
class Block:
    """Snake (in place) -> upsampling (two-tap conv, phase-major outputs) -> residual units."""

    up: Conv
    stride: int
    crop: int  # the transposed convolution's padding: the first output kept
    units: tuple[Unit, ...]

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        y = self.up(snake_scaled_(z))  # [B, s * C, 1, L + 1], rows r * C + c
        b, sc, _, n1 = y.shape
        s = self.stride
        v = y.permute(0, 2, 3, 1).reshape(b, n1 * s, sc // s)  # a view: channels-last memory interleaved
        z = v[:, self.crop : self.crop + (n1 - 1) * s].permute(0, 2, 1).unsqueeze(2)  # [B, C, 1, L * s]
        z = z.contiguous(memory_format=CL)  # a no-op for one row
        for unit in self.units:
            z = unit(z)
        return z


@dataclass(frozen=True)
class DecoderPlan:
    """The acoustic decoder, folded: latent [B, C, T] -> audio [B, 1, T * hop]."""

    first: Conv
    blocks: tuple[Block, ...]
    last: Conv

    def __call__(self, latent: torch.Tensor) -> torch.Tensor:
        z = self.first(latent.unsqueeze(2).contiguous(memory_format=CL))
        for block in self.blocks:
            z = block(z)
        return self.last(snake_scaled_(z)).squeeze(2)


@dataclass(frozen=True)
class Latent:
    """The residual VQ's decode as one gather and one product, then fc2: codes [B, Q, T] ->
    [B, C, T] (a transposed view, as DecoderPlan reads it). The levels' codebooks stacked
    [Q * K, d], their projections side by side [Q * d, D] and their biases summed [D]."""

    table: torch.Tensor  # [Q * K, d]
    offsets: torch.Tensor  # [Q, 1]: q * K
    weight: torch.Tensor  # [Q * d, D]
    bias: torch.Tensor  # [D]
    fc2_weight: torch.Tensor  # [D, C]
    fc2_bias: torch.Tensor  # [C]

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        b, q, t = codes.shape
        rows = F.embedding((codes + self.offsets).transpose(1, 2), self.table)  # [B, T, Q, d]
        summed = torch.addmm(self.bias, rows.reshape(b * t, -1), self.weight)  # [B * T, D]
        out = torch.addmm(self.fc2_bias, summed, self.fc2_weight)  # [B * T, C]
        return out.view(b, t, -1).transpose(1, 2)  # [B, C, T], [B, T, C] in memory


@dataclass(frozen=True)
class CodecPlan:
    """codes [B, Q, T] -> audio [B, 1, T * hop]: Latent, then DecoderPlan."""

    latent: Latent
    decoder: DecoderPlan

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.latent(codes))


def build_latent(embeds: list, weights: list, biases: list, fc2_weight, fc2_bias) -> Latent:
    """Latent from each level's codebook [K, d], project_out weight [D, d] and bias [D] (their
    sum over levels is one product: sum_q W_q e_q = [W_0 .. W_Q-1] [e_0 .. e_Q-1]), and fc2."""
    dtype = fc2_weight.dtype
    size = embeds[0].shape[0]
    offsets = torch.arange(len(embeds), device=fc2_weight.device).view(-1, 1) * size
    table = torch.cat([e.detach() for e in embeds]).to(dtype)
    weight = torch.cat([w.detach() for w in weights], dim=1).t().contiguous()  # [Q * d, D]
    bias = torch.stack([b.detach().double() for b in biases]).sum(0).to(dtype)
    return Latent(table, offsets, weight, bias, fc2_weight.detach().t().contiguous(), fc2_bias.detach().clone())


def snake_scaled_(y: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """y + sin(y)^2 in place (y = alpha * x: this is alpha * Snake(x)); two passes. `out`: a
    tensor of y's shape and layout to hold sin(y) (one is made otherwise)."""
    t = torch.sin(y) if out is None else torch.sin(y, out=out)
    return y.addcmul_(t, t)


def _ones(t) -> bool:
    return t is None or bool((t == 1).all())


def _scaled(weight: torch.Tensor, bias: torch.Tensor | None, rows, cols, owned: bool) -> tuple:
    """A weight [O, I, 1, k] with its output channels multiplied by `rows` and its input channels
    divided by `cols` (skipped where they are all 1; in place if `owned`, else into a new tensor
    of the same layout), and its bias [O] multiplied by `rows` (always a new tensor)."""
    if not _ones(rows):
        weight = weight.mul_(rows.view(-1, 1, 1, 1)) if owned else weight * rows.view(-1, 1, 1, 1)
        owned = True
        bias = None if bias is None else bias * rows
    if not _ones(cols):
        weight = weight.div_(cols.view(1, -1, 1, 1)) if owned else weight / cols.view(1, -1, 1, 1)
    return weight, None if bias is None else bias.detach().clone()


def _conv(w: torch.Tensor, b: torch.Tensor | None, length: int, rows=None, cols=None, **geometry) -> Conv:
    """A conv1d weight [O, I, k] and bias, scaled (see _scaled), as a Conv packed for inputs of
    about `length` samples (Conv.pack), else channels-last. Packed straight from the weight as it
    lies (one pass over the mapped file where nothing is scaled), never edited in place."""
    weight, bias = _scaled(w.detach().unsqueeze(2), b, rows, cols, owned=False)
    conv = Conv(weight, bias, **geometry).pack(length)
    if not conv.packed:
        conv = replace(conv, weight=weight.clone(memory_format=CL))  # a copy: [O, 1, k, I] in memory
    release_pages(w)  # a view of the mapped file: its pages go back (they fault in if read)
    return conv


def _upsample(m, a_in: torch.Tensor, a_out: torch.Tensor, length: int) -> tuple[Conv, int, int]:
    """A ConvTranspose1d [C_in, C_out, 2s] as a two-tap conv1d [s * C_out, C_in, 2] (row r * C_out
    + c is phase r of channel c; tap 0 reads the previous frame, the kernel's later half), input
    divided by a_in and output multiplied by a_out, packed for inputs of about `length` frames
    (Conv.pack); with its stride and crop."""
    s = m.stride[0]
    w = m.weight.detach()
    c_in, c_out, k = w.shape
    assert k == 2 * s, (k, s)
    weight = torch.empty((s * c_out, c_in, 1, 2), dtype=w.dtype, device=w.device, memory_format=CL)
    dst = weight.permute(0, 2, 3, 1).view(s, c_out, 2, c_in)  # the memory: [row, 1, tap, C_in]
    src = w.view(c_in, c_out, 2, s).permute(3, 1, 2, 0)  # [s, C_out, half, C_in]
    dst[:, :, 0].copy_(src[:, :, 1])
    dst[:, :, 1].copy_(src[:, :, 0])
    release_pages(m.weight)
    bias = None if m.bias is None else m.bias.detach().repeat(s)
    weight, bias = _scaled(weight, bias, a_out.repeat(s), a_in, owned=True)
    return Conv(weight, bias, padding=1).pack(length), s, int(m.padding[0])


def _alpha(snake) -> torch.Tensor:
    return snake.alpha.detach().reshape(-1)


def build_plan(decoder, pack: bool = True) -> DecoderPlan | None:
    """The plan of an AcousticDecoder (codec.py), or None where an alpha is near zero or not
    finite; `pack=False` leaves the weights to torch (channels-last, not prepacked)."""
    alphas = [_alpha(m) for m in decoder.modules() if hasattr(m, "alpha")]
    if any(not bool(torch.isfinite(a).all()) or bool((a.abs() < MIN_ALPHA).any()) for a in alphas):
        return None
    blocks = list(decoder.block)
    entry = [_alpha(b.snake1) for b in blocks] + [_alpha(decoder.snake1)]  # the Snake each block's stream meets first
    n = PACK_FRAMES if pack else 0  # 0: no packing
    first = _conv(decoder.conv1.weight, decoder.conv1.bias, n, rows=entry[0], padding=3)
    built = []
    for i, blk in enumerate(blocks):
        res = [blk.res_unit1, blk.res_unit2, blk.res_unit3]
        a1 = [_alpha(r.snake1) for r in res]
        up, s, crop = _upsample(blk.conv_t1, entry[i], a1[0], n and n + 1)  # its input padded by one frame
        n *= s
        units = []
        for k, r in enumerate(res):
            nxt = a1[k + 1] if k + 1 < len(res) else entry[i + 1]
            a2 = _alpha(r.snake2)
            d = int(r.conv1.dilation[0])
            conv1 = _conv(r.conv1.weight, r.conv1.bias, n, rows=a2, cols=a1[k], padding=3 * d, dilation=d)
            conv2 = _conv(r.conv2.weight, r.conv2.bias, n, rows=nxt, cols=a2)
            ratio = (nxt.double() / a1[k].double()).to(nxt.dtype)  # rescales the skip
            units.append(Unit(conv1, conv2, None if bool((ratio == 1).all()) else ratio.view(1, -1, 1, 1)))
        built.append(Block(up, s, crop, tuple(units)))
    last = _conv(decoder.conv2.weight, decoder.conv2.bias, n, cols=entry[-1], padding=3)
    return DecoderPlan(first, tuple(built), last)


def latent_of(decoder: HiggsDecoder) -> Latent:
    """The Latent of a HiggsDecoder's residual VQ and fc2."""
    qs = [cast(VectorQuantizer, m) for m in decoder.quantizer.quantizers]
    return build_latent(
        [m.codebook.embed for m in qs],
        [m.project_out.weight for m in qs],
        [m.project_out.bias for m in qs],
        decoder.fc2.weight,
        decoder.fc2.bias,
    )


class Planner:
    """What a HiggsDecoder's seam holds (`HiggsDecoder.planner`): its decode folded (the residual
    VQ and fc2 as one gather and one product, the acoustic decoder folded and channels-last), made
    at the first call and made again if a weight is replaced or edited. None where the decoder
    cannot fold, and off a CPU (measured on CPUs only): the module tree decodes."""

    def __init__(self) -> None:
        self.made: tuple[tuple, CodecPlan | None] | None = None  # (the weights' key, their plan)

    def __call__(self, decoder: HiggsDecoder) -> CodecPlan | None:
        if decoder.device.type != "cpu":
            return None
        tensors = [*decoder.parameters(), *decoder.buffers()]
        key = tuple((p.device, p.dtype, p.data_ptr(), tp.version(p)) for p in tensors)
        if self.made is None or self.made[0] != key:
            with torch.no_grad():
                folded = build_plan(decoder.acoustic_decoder)
                self.made = (key, None if folded is None else CodecPlan(latent_of(decoder), folded))
        return self.made[1]


def install_plan(decoder: HiggsDecoder) -> None:
    """Decode `decoder` through its plan (a Planner in its seam), made here once so that the first
    decode does not pay for it. Where there is no plan on a CPU, the module tree's upsamplings
    rearrange their weights now and the mapped pages those were read from go back (they fault in
    if read again)."""
    decoder.planner = Planner()
    if decoder.plan() is None and decoder.device.type == "cpu":
        for m in decoder.modules():
            if isinstance(m, Upsample):
                m.polyphase()
                release_pages(m.weight)
