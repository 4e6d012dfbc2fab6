"""The codec's folded decode plan (engine/fast/codecplan.py) against the module tree it is made from."""

from pathlib import Path

import pytest
import torch

from omnivoice_cli.engine.fast.codecplan import MIN_ALPHA, build_plan, can_pack
from omnivoice_cli.engine.loading import load_codec_decoder
from omnivoice_cli.engine.model.codec import AcousticDecoder
from omnivoice_cli.engine.model.config import ModelConfig

TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"


def _decoder(seed: int, signs: bool) -> AcousticDecoder:
    """A small float64 acoustic decoder with random weights and alphas (negative ones too)."""
    g = torch.Generator().manual_seed(seed)
    dec = AcousticDecoder(latent=6, hidden=8, ratios=(2, 3)).double().eval()
    with torch.no_grad():
        for name, p in dec.named_parameters():
            if name.endswith("alpha"):
                a = 0.3 + 1.5 * torch.rand(p.shape, generator=g, dtype=p.dtype)
                p.copy_(a * torch.where(torch.rand(p.shape, generator=g) < 0.3, -1.0, 1.0) if signs else a)
            else:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / p[0].numel() ** 0.5)
    return dec


@pytest.mark.slow  # float64 convolutions run torch's slow reference kernels (~0.4 s a decode)
@pytest.mark.parametrize("signs", [False, True], ids=["positive", "mixed-sign"])
def test_the_plan_is_the_module_tree(signs):
    """Folded scales, phase-major upsampling and the rescaled skips: the module tree's result in
    float64 (where the eps of Snake's 1 / (alpha + 1e-9) is all that differs)."""
    dec = _decoder(1, signs)
    before = {k: v.clone() for k, v in dec.state_dict().items()}
    plan = build_plan(dec)
    assert plan is not None
    assert any(u.ratio is not None for b in plan.blocks for u in b.units)  # the rescaled skip ran
    x = torch.randn(2, 6, 9, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        want = dec(x)
        got = plan(x)
    assert got.shape == want.shape == (2, 1, 9 * 6)
    torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-7)
    assert all(torch.equal(before[k], v) for k, v in dec.state_dict().items())  # the weights it read are unchanged


def test_a_near_zero_alpha_leaves_the_module_tree_to_decode():
    dec = load_codec_decoder(TINY / "audio_tokenizer", ModelConfig.from_checkpoint(TINY).codec)
    codes = torch.randint(0, 1024, (1, 8, 5), generator=torch.Generator().manual_seed(0))
    assert dec.plan() is not None
    with torch.no_grad():  # an edit: the plan is made again, and there is none to make
        dec.acoustic_decoder.block[1].res_unit2.snake2.alpha[0, 3, 0] = MIN_ALPHA / 2
    assert dec.plan() is None
    with torch.inference_mode():
        want = dec.forward(codes)
    assert torch.equal(dec.decode(codes), want)


def test_an_edited_weight_is_picked_up():
    dec = load_codec_decoder(TINY / "audio_tokenizer", ModelConfig.from_checkpoint(TINY).codec)
    codes = torch.randint(0, 1024, (1, 8, 5), generator=torch.Generator().manual_seed(0))
    first = dec.decode(codes)
    with torch.no_grad():
        dec.acoustic_decoder.conv2.bias.add_(1.0)
    torch.testing.assert_close(dec.decode(codes), first + 1.0, rtol=0, atol=1e-5)


def test_packed_weights_give_the_same_bits():
    """oneDNN's prepacked weights (where torch has the ops) change the layout, not the arithmetic."""
    dec = load_codec_decoder(TINY / "audio_tokenizer", ModelConfig.from_checkpoint(TINY).codec)
    packed, plain = build_plan(dec.acoustic_decoder), build_plan(dec.acoustic_decoder, pack=False)
    assert packed is not None and plain is not None
    for plan, want in ((packed, can_pack()), (plain, False)):
        convs = [plan.first, plan.last, *(c for b in plan.blocks for u in b.units for c in (b.up, u.conv1, u.conv2))]
        assert [c.packed for c in convs] == [want] * len(convs)
    codes = torch.randint(0, 1024, (2, 8, 7), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        latent = dec.latent(codes)
        assert torch.equal(packed(latent), plain(latent))
        assert torch.equal(packed(latent[:, :, :3]), plain(latent[:, :, :3]))  # another length than packed for


def test_the_latent_is_the_residual_vq_and_fc2():
    """The levels' lookups and projections as one gather and one product, then fc2."""
    dec = load_codec_decoder(TINY / "audio_tokenizer", ModelConfig.from_checkpoint(TINY).codec)
    plan = dec.plan()
    assert plan is not None
    codes = torch.randint(0, 1024, (2, 8, 11), generator=torch.Generator().manual_seed(4))
    codes[0, :, 0], codes[1, :, 1] = 0, 1023  # both ends of every codebook
    with torch.inference_mode():
        got, want = plan.latent(codes), dec.latent(codes)
    assert got.shape == want.shape == (2, 8, 11)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
