"""The int8 codes (engine/fast/int8pack.py): the weights' coding per output channel, in blocks and with
their row sums, and the packing straight into oneDNN's layout, byte for byte oneDNN's own."""

import pytest
import torch

from omnivoice_cli.engine.fast import int8pack, linears
from omnivoice_cli.engine.fast.int8pack import int8_weight
from omnivoice_cli.engine.fast.linears import Int8Linear

needs_onednn_int8 = pytest.mark.skipif(
    not linears.onednn_int8_available(), reason="this torch build has no oneDNN int8 linear"
)


def test_int8_weight_codes_round_to_the_nearest_step():
    w = torch.randn(24, 40) * torch.linspace(0.01, 3, 24)[:, None]
    codes, scale = int8_weight(w)
    assert codes.dtype == torch.int8 and codes.min() >= -128
    err = (codes.double() * scale.double()[:, None] - w.double()).abs()
    assert (err <= scale.double()[:, None] / 2 * (1 + 1e-4)).all()  # a channel's max sits on a tie, by construction


def test_int8_weight_in_blocks_is_the_same_coding():
    w = torch.randn(37, 40) * torch.linspace(0.01, 3, 37)[:, None]
    whole, s1 = int8_weight(w)
    blocks, s2 = int8_weight(w, block=3 * 40 + 5)  # 3 rows a block, 13 blocks, the last short
    assert torch.equal(whole, blocks) and torch.equal(s1, s2)
    assert torch.equal(s1, int8pack._channel_scales(w))  # each block's scales are the whole weight's
    want = torch.div(w.double(), s1.double()[:, None]).round().clamp(-128, 127)
    assert (whole.double() - want).abs().max() <= 1  # division rounding only ever at an exact tie


def onednn_packed(codes: torch.Tensor) -> torch.Tensor:
    """oneDNN's own packing of int8 codes, for the rows the engine packs for (int8pack.PACK_ROWS)."""
    return torch.ops.onednn.qlinear_prepack(codes, [int8pack.PACK_ROWS, codes.shape[1]])


@pytest.mark.parametrize("n_in", [40, 3072, (1 << 17) + 8])
def test_int8_row_sums_from_float_codes_are_the_codes_sums(n_in):
    w = torch.randn(6, n_in)
    w[0], w[1] = 1.0, -1.0  # every code 127, every code -128 (the largest sums)
    w[2, ::2] = 1.0  # 127s and -128s alternating with small codes
    w[2, 1::2] = -1.0
    scale = int8pack._channel_scales(w)
    codes, sums = int8pack._code_rows_summed(w, scale)
    assert torch.equal(codes, int8pack._code_rows(w, scale)) and sums.dtype == torch.int32
    assert torch.equal(sums, codes.sum(1, dtype=torch.int32))
    assert sums[0] == 127 * n_in and sums[1] <= -127 * n_in  # the largest sums a row can have


@needs_onednn_int8
@pytest.mark.parametrize("n_out,n_in", [(128, 64), (192, 128), (64, 256)])
def test_int8_packing_is_onednns_byte_for_byte(monkeypatch, n_out, n_in):
    monkeypatch.setattr(int8pack, "_TEMPLATES", {})
    monkeypatch.setattr(int8pack, "_FOREIGN", set())
    g = torch.Generator().manual_seed(n_out + n_in)
    codes = [torch.randint(-128, 128, (n_out, n_in), dtype=torch.int8, generator=g) for _ in range(3)]
    first = int8pack.prepack_int8(codes[0])  # oneDNN's, checked against ours
    if (n_out, n_in) in int8pack._FOREIGN:
        pytest.skip("this CPU / torch build packs int8 weights in another layout (oneDNN's packing is used)")
    assert int8pack._TEMPLATES[(n_out, n_in)] is first
    zero = Int8Linear.half + 1  # inputs on 7 bits without VNNI (8-bit pairs would saturate int16 sums)
    x = torch.randint(1, 2 * zero, (5, n_in), dtype=torch.uint8, generator=g)
    scales = torch.rand(n_out, generator=g) / 100
    for c in codes[1:]:
        ours, theirs = int8pack.prepack_int8(c), onednn_packed(c)
        assert torch.equal(int8pack._packed_bytes(ours), int8pack._packed_bytes(theirs))
        run = lambda p: torch.ops.onednn.qlinear_pointwise(
            x, 0.05, zero, p, scales, None, None, 1.0, 0, torch.float32, "none", [], ""
        )  # noqa: E731
        assert torch.equal(run(ours), run(theirs))
        want = ((x.double() - zero) * 0.05) @ (c.double() * scales.double()[:, None]).T
        torch.testing.assert_close(run(ours).double(), want, rtol=1e-5, atol=1e-4)


@needs_onednn_int8
def test_int8_layers_coded_straight_into_the_packed_layout(monkeypatch):
    monkeypatch.setattr(int8pack, "_TEMPLATES", {})
    monkeypatch.setattr(int8pack, "_FOREIGN", set())
    g = torch.Generator().manual_seed(9)
    parts = [torch.randn(n, 128, generator=g) * torch.linspace(0.1, 2, n)[:, None] for n in (128, 64, 192)]
    codes, scale = int8_weight(torch.cat(parts))
    want = int8pack._packed_bytes(onednn_packed(codes))
    first = Int8Linear(torch.cat(parts))  # the first of its shape: oneDNN packs it, then checked
    if (384, 128) in int8pack._FOREIGN:
        pytest.skip("this CPU / torch build packs int8 weights in another layout (oneDNN's packing is used)")
    assert torch.equal(int8pack._packed_bytes(first.packed), want)
    for block in (1 << 18, 64 * 128, 100):  # whole parts, 64 rows at a time, and less than 64 asked
        packed, s = int8pack.pack_int8_rows(parts, block)
        assert torch.equal(int8pack._packed_bytes(packed), want) and torch.equal(s, scale)
    fused = Int8Linear.stacked(parts, None)
    assert fused.out_features == 384 and torch.equal(int8pack._packed_bytes(fused.packed), want)
    x = torch.randn(5, 128, generator=g)
    assert torch.equal(fused(x), first(x))


@needs_onednn_int8
def test_int8_packing_falls_back_to_onednn_where_the_layout_differs(monkeypatch):
    monkeypatch.setattr(int8pack, "_TEMPLATES", {})
    monkeypatch.setattr(int8pack, "_FOREIGN", set())
    odd = torch.randint(-128, 128, (40, 24), dtype=torch.int8)  # not whole 64 x 64 blocks
    int8pack.prepack_int8(odd)
    assert (40, 24) in int8pack._FOREIGN and not int8pack._TEMPLATES
    real = int8pack._pack_like

    def transposed_blocks(template, codes):  # a layout that is not oneDNN's
        return real(template, codes.view(-1, 64, codes.shape[1]).flip(1).reshape(codes.shape).contiguous())

    monkeypatch.setattr(int8pack, "_pack_like", transposed_blocks)
    codes = torch.randint(-128, 128, (128, 64), dtype=torch.int8)
    packed = int8pack.prepack_int8(codes)
    assert (128, 64) in int8pack._FOREIGN and (128, 64) not in int8pack._TEMPLATES
    assert torch.equal(int8pack._packed_bytes(packed), int8pack._packed_bytes(onednn_packed(codes)))
    again = torch.randint(-128, 128, (128, 64), dtype=torch.int8)  # later weights of that shape: oneDNN's too
    assert torch.equal(
        int8pack._packed_bytes(int8pack.prepack_int8(again)),
        int8pack._packed_bytes(onednn_packed(again)),
    )


@pytest.mark.parametrize("half", [127, 63])
def test_activation_codes_are_the_rounded_scaled_inputs_shifted_to_the_zero_point(half):
    g = torch.Generator().manual_seed(half)
    ties = torch.arange(-2 * half, 2 * half + 1, dtype=torch.float32) / 2  # every half step: ties both ways
    for x in (ties, torch.randn(37, 300, generator=g) * 3, -torch.rand(5, 64, generator=g)):
        codes, scale = int8pack.quantize_activations(x, half)
        assert codes.dtype == torch.uint8 and codes.shape == x.shape
        assert scale == x.abs().max().item() / half
        want = torch.round(x * (1.0 / scale)) + half + 1  # torch.round: ties to even
        assert torch.equal(codes.float(), want) and codes.min() >= 1 and codes.max() <= 2 * half + 1
    assert torch.equal(codes_at_ties(half)[:4], torch.tensor([1, 2, 2, 2], dtype=torch.uint8))


def codes_at_ties(half: int) -> torch.Tensor:
    """The codes of -half, -half + 0.5, -half + 1, -half + 1.5 (scale 1): ties go to the even code."""
    x = torch.tensor([-half, -half + 0.5, -half + 1, -half + 1.5] + [half], dtype=torch.float32)
    return int8pack.quantize_activations(x, half)[0]
