"""The int8 codes of the CPU's int8 body: weights coded per output channel (int8_weight, in blocks
of rows that stay in cache), packed straight into the layout oneDNN's u8 x s8 kernel reads
(prepack_int8, pack_int8_rows: a few vectorised copies instead of oneDNN's reference reorder,
checked byte for byte against oneDNN's own packing once per shape), the codes and row sums the
weight cache keeps (int8_codes, pack_codes), and the activations' quantisation per tensor at each
call (quantize_activations). The layers that run them are linears.py's.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import cast

import torch

from .. import torchprivate as tp


def _channel_scales(w: torch.Tensor) -> torch.Tensor:
    """w [out, in] -> the per-output-channel scales [out] fp32: max|w| / 127.5, floored at fp32 eps."""
    hi, lo = w.amax(dim=1), w.amin(dim=1)  # no |w| copy; aminmax along a dim runs unvectorised
    return (torch.maximum(hi, lo.neg_()).float() / 127.5).clamp_min(torch.finfo(torch.float32).eps)


def _code_rows(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """rows of w [r, in] and their scales [r] -> codes int8 [r, in]: round(w / scale) in -128..127."""
    return _rounded(w, scale).to(torch.int8)


def _rounded(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """rows of w [r, in] and their scales [r] -> the codes as fp32 [r, in] (whole numbers)."""
    return torch.div(w.float(), scale[:, None]).round_().clamp_(-128, 127)


def _code_rows_summed(w: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """rows of w [r, in] -> (codes int8 [r, in], their row sums int32 [r]). The sums are taken on
    the fp32 codes, exactly (whole numbers, every partial sum under 2^24 while in <= 2^17): an int8
    sum into int32 runs unvectorised, several times slower (the figures: benchmarks/speed-log.md)."""
    rounded = _rounded(w, scale)
    if w.shape[1] > 1 << 17:  # past fp32's exact whole numbers: sum the codes themselves
        codes = rounded.to(torch.int8)
        return codes, codes.sum(1, dtype=torch.int32)
    return rounded.to(torch.int8), rounded.sum(1).to(torch.int32)


def _block_rows(w: torch.Tensor, block: int, multiple: int = 1) -> int:
    """How many rows of w make about `block` elements (a multiple of `multiple`, at least one)."""
    return max(1, block // max(1, w.shape[1] * multiple)) * multiple


def int8_weight(w: torch.Tensor, block: int = 1 << 18) -> tuple[torch.Tensor, torch.Tensor]:
    """w [out, in] -> (codes int8 [out, in], scales [out]): symmetric per output channel, as torch's
    per-channel weight observer: scale = max|w| / 127.5 floored at float32 eps, code = round(w / scale)
    in -128..127. (torch.quantize_per_channel divides in higher precision, so a weight exactly
    half-way between two codes may land one code away from its choice; this is twice as fast.)
    Coded `block` elements of rows at a time (1 MiB of fp32), each block's scales taken in the same
    pass: the range, division, rounding, clamping and cast then stay in the core's cache, and w is
    read from memory once (torch.aminmax along a dim runs unvectorised; the figures:
    benchmarks/speed-log.md)."""
    codes = torch.empty(w.shape, dtype=torch.int8, device=w.device)
    scale = torch.empty(w.shape[0], dtype=torch.float32, device=w.device)
    rows = _block_rows(w, block)
    for i in range(0, w.shape[0], rows):
        scale[i : i + rows] = _channel_scales(w[i : i + rows])
        codes[i : i + rows] = _code_rows(w[i : i + rows], scale[i : i + rows])
    return codes, scale


# 1.5 * 2^23: a float32 in [2^23, 2^24) has a step of 1, so adding this to v (|v| < 2^22) rounds v to
# the nearest whole number (ties to even, as torch.round) and leaves it in the low bits of the float's
# bits: (bits mod 256) = (round(v) + 2^22) mod 256 = round(v) mod 256
_ROUNDER = float(3 << 22)


def quantize_activations(x: torch.Tensor, half: int) -> tuple[torch.Tensor, float]:
    """x -> (codes uint8, scale): symmetric per tensor around the zero point half + 1, so
    x ~ scale * (codes - half - 1) with codes in 1..2 * half + 1; half = 127 uses all 8 bits, 63
    keeps the codes under 128 (CPUs without VNNI). Three passes after the range, all vectorised:
    the scaling, one add that rounds and shifts to the zero point at once (_ROUNDER + half + 1: the
    code is the low byte of the sum's bits), and the cast of those bits (int32) to uint8, which
    keeps the low byte. Bit for bit round(x / scale) + half + 1, as a scaling, a rounding, a cast to
    int8 and a shift (the four passes before, slower: benchmarks/speed-log.md); a direct fp32 -> uint8 cast, or a multiply-add with tensor
    operands, runs unvectorised."""
    x = x.float()  # (x / scale in bf16 would land on half-code steps above 64)
    lo, hi = torch.aminmax(x)
    scale = max(-float(lo), float(hi), 1e-30) / half
    shifted = x.mul(1.0 / scale).add_(_ROUNDER + half + 1)  # whole numbers 2^23 + 2^22 + code
    return shifted.view(torch.int32).to(torch.uint8), scale


# the rows a forward's products are packed for (int8 here, bf16 in linears.BF16Linear): about a
# sentence's forward (the 9 s sentence's two rows are 523 positions). oneDNN picks a weight's layout
# for the input's rows and the thread count; a product whose weight is in another layout reorders it
# at every call (it did on AMX, packed for oneDNN's default of 128 rows: benchmarks/speed-log.md).
PACK_ROWS = 512

_TEMPLATES: "weakref.WeakValueDictionary[tuple[int, int], torch.Tensor]" = weakref.WeakValueDictionary()
_FOREIGN: set[tuple[int, int]] = set()  # weight shapes whose packing here is not oneDNN's


def _packed_bytes(packed: torch.Tensor) -> torch.Tensor:
    """The bytes of a packed (opaque oneDNN) weight as a uint8 tensor over the same memory. The
    tensor (and every view of it) keeps `packed` alive: its buffer holds a reference to it."""
    n = tp.packed_nbytes(packed)
    kind = cast("type[ctypes.Array[ctypes.c_uint8]]", type("PackedBytes", (ctypes.c_uint8 * n,), {}))
    buffer = kind.from_address(tp.packed_data_ptr(packed))
    buffer.owner = packed  # type: ignore[attr-defined]  # a subclass's instance takes attributes
    return torch.frombuffer(buffer, dtype=torch.uint8)


def _write_packed(
    out: torch.Tensor, n: int, k: int, row: int, codes: torch.Tensor, sums: torch.Tensor | None = None
) -> None:
    """Write codes int8 [r, k] (r a multiple of 64) as rows row..row + r of a packed [n, k] weight
    whose bytes are `out` (_packed_bytes), in the layout oneDNN packs u8 x s8 weights in on AVX-512
    (`BA16a64b4a`: blocks of 64 outputs x 64 inputs, outer over the outputs; in a block, 16 groups
    of 4 inputs, each with its 64 outputs' 4 bytes side by side), and their zero-point
    compensation (-sum of each output's codes, int32; `sums`, those sums where known) in the
    table after the blocks."""
    r = codes.shape[0]
    blocks = out[: n * k].view(torch.int32).view(n // 64, k // 64, 16, 64)[row // 64 : (row + r) // 64]
    blocks.copy_(codes.view(torch.int32).view(r // 64, 64, k // 64, 16).permute(0, 2, 3, 1))
    out[n * k :].view(torch.int32)[row : row + r].copy_(
        (codes.sum(1, dtype=torch.int32) if sums is None else sums).neg()
    )


def _pack_like(template: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """codes int8 [out, in] packed as oneDNN packs them (_write_packed), into a copy of `template`,
    a weight oneDNN packed at this shape. A few vectorised copies instead of oneDNN's reference
    reorder, which is several times slower (benchmarks/speed-log.md)."""
    packed = template.clone()
    n, k = codes.shape
    _write_packed(_packed_bytes(packed), n, k, 0, codes)
    return packed


def prepack_int8(codes: torch.Tensor) -> torch.Tensor:
    """codes int8 [out, in] -> the packed weight oneDNN's qlinear reads (qlinear_prepack's result,
    for inputs of PACK_ROWS rows).
    The first weight of each shape is packed by oneDNN and checked against _pack_like, byte for
    byte; where they agree, the later ones of that shape are packed by _pack_like, else (another
    layout: another CPU, torch build or shape) always by oneDNN."""
    key = cast(tuple[int, int], tuple(codes.shape))  # [out, in]
    template = _TEMPLATES.get(key)
    if template is not None:
        return _pack_like(template, codes.contiguous())
    packed = tp.qlinear_prepack(codes, PACK_ROWS)
    if key not in _FOREIGN:
        n, k = key
        try:
            same = n % 64 == 0 and k % 64 == 0 and codes.is_contiguous() and tp.packed_nbytes(packed) == n * k + 4 * n
            if same:
                same = torch.equal(_packed_bytes(_pack_like(packed, codes)), _packed_bytes(packed))
        except (AttributeError, RuntimeError, TypeError, ValueError):  # no raw access in this build
            same = False
        if same:
            _TEMPLATES[key] = packed
        else:
            _FOREIGN.add(key)
    return packed


def pack_int8_rows(weights: list[torch.Tensor], block: int = 1 << 18) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 weights [out_i, in] (one layer's, or layers that read the same input, stacked) ->
    (their codes packed as one weight for oneDNN's qlinear, scales [sum(out_i)]): int8_weight's
    coding and prepack_int8's packing. Once a weight of this shape was packed and checked, each
    part is coded in blocks of rows straight into the packed layout: no fp32 concatenation, no
    whole-size codes, the weights read once (so the load's peak memory stays below the fp32 body's)."""
    n, k = sum(w.shape[0] for w in weights), weights[0].shape[1]
    template = _TEMPLATES.get((n, k))
    if template is None or any(w.shape[0] % 64 for w in weights):  # the first of its shape, or odd
        coded = [int8_weight(w, block) for w in weights]
        return prepack_int8(torch.cat([c for c, _ in coded])), torch.cat([s for _, s in coded])
    packed = template.clone()
    out = _packed_bytes(packed)
    scales, row = [], 0
    for w in weights:
        rows = _block_rows(w, block, 64)
        for i in range(0, w.shape[0], rows):
            part = w[i : i + rows]
            scales.append(_channel_scales(part))  # in the same pass as its codes: w read once
            _write_packed(out, n, k, row + i, *_code_rows_summed(part, scales[-1]))
        row += w.shape[0]
    return packed, torch.cat(scales)


def int8_codes(weights: list[torch.Tensor], block: int = 1 << 18) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 weights [out_i, in] stacked -> (codes int8 [sum(out_i), in], scales [sum(out_i)], row
    sums int32): int8_weight's coding, in blocks of rows, with the sums the packing needs (what the
    weight cache keeps: weightcache.py)."""
    n, k = sum(w.shape[0] for w in weights), weights[0].shape[1]
    codes = torch.empty((n, k), dtype=torch.int8)
    scales, sums = torch.empty(n, dtype=torch.float32), torch.empty(n, dtype=torch.int32)
    row = 0
    for w in weights:
        rows = _block_rows(w, block)
        for i in range(0, w.shape[0], rows):
            part, at = w[i : i + rows], slice(row + i, row + min(i + rows, w.shape[0]))
            scales[at] = _channel_scales(part)
            codes[at], sums[at] = _code_rows_summed(part, scales[at])
        row += w.shape[0]
    return codes, scales, sums


def pack_codes(codes: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    """codes int8 [out, in] and their row sums -> the packed weight (prepack_int8's), the sums
    not taken again where a checked template of this shape is known."""
    template = _TEMPLATES.get(cast(tuple[int, int], tuple(codes.shape)))
    if template is None or not codes.is_contiguous():
        return prepack_int8(codes.contiguous())
    packed = template.clone()
    n, k = codes.shape
    _write_packed(_packed_bytes(packed), n, k, 0, codes, sums)
    return packed
