"""Codec decode path: parity with the reference's decodes, loader errors, Snake."""

import copy
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.numpy import load_file as load_np
from safetensors.torch import load_file, save_file

from omnivoice_cli.engine.errors import CheckpointError
from omnivoice_cli.engine.loading import load_codec_decoder
from omnivoice_cli.engine.model.codec import (
    Upsample,
    build_decoder,
    decoder_tensor_shapes,
    polyphase_upsample,
    polyphase_weight,
    rvq_decode,
    snake,
    upsample_conv_params,
)
from omnivoice_cli.engine.model.config import CodecConfig, ModelConfig

TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"
GOLDEN = Path(__file__).parent / "fixtures" / "golden"
FULL_MANIFEST = Path(__file__).parent / "fixtures" / "full" / "tensors.json"

# (case, decode index) for every golden decode that recorded its output


def _keys(path: Path) -> set[str]:
    with safe_open(str(path), "np") as f:
        return set(f.keys())


DECODES = [
    (p.stem, k)
    for p in sorted(GOLDEN.glob("*.safetensors"))
    for k in range(len(json.loads(p.with_suffix(".json").read_text()).get("decodes", [])))  # long_speed15: none
    if f"decode{k}.audio_values" in _keys(p)
]


@pytest.fixture(scope="module")
def codec_cfg():
    return ModelConfig.from_checkpoint(TINY).codec


@pytest.fixture(scope="module")
def decoder(codec_cfg):
    return load_codec_decoder(TINY / "audio_tokenizer", codec_cfg, "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("case,k", DECODES, ids=[f"{c}-{k}" for c, k in DECODES])
def test_decode_matches_reference(decoder, case, k):
    g = load_np(GOLDEN / f"{case}.safetensors")
    codes = torch.from_numpy(g[f"decode{k}.codes"])
    out = decoder.decode(codes)
    ref = g[f"decode{k}.audio_values"]
    assert out.dtype == torch.float32
    assert tuple(out.shape) == ref.shape == (1, 1, codes.shape[-1] * 960)
    # fp32 noise: the tiny random decoder reaches |x| ~ 3e3 inside, so ~4e-5 is the floor
    assert np.abs(out.numpy() - ref).max() < 1e-4


@pytest.mark.slow
def test_decode_is_batch_consistent(decoder):
    g = load_np(GOLDEN / "batch3.safetensors")
    a = torch.from_numpy(g["decode0.codes"])  # [1, 8, 32]
    b = torch.from_numpy(g["decode1.codes"])[..., :32]
    both = decoder.decode(torch.cat([a, b]))
    assert both.shape == (2, 1, 32 * 960)
    torch.testing.assert_close(both[:1], decoder.decode(a), atol=1e-4, rtol=0)
    torch.testing.assert_close(both[1:], decoder.decode(b), atol=1e-4, rtol=0)
    assert decoder.decode(a[..., :1]).shape == (1, 1, 960)


def test_decode_rejects_bad_codes(decoder):
    with pytest.raises(ValueError, match=r"\[B, 8, T\]"):
        decoder.decode(torch.zeros(1, 7, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="1024"):
        decoder.decode(torch.full((1, 8, 3), 1024, dtype=torch.long))


def test_snake_formula():
    x = torch.linspace(-7, 7, 57, dtype=torch.float64).reshape(1, 3, 19)
    alpha = torch.tensor([0.5, 1.0, 3.0], dtype=torch.float64).reshape(1, 3, 1)
    got = snake(x, alpha)
    for c in range(3):
        a = float(alpha[0, c, 0])
        for j in range(19):
            v = float(x[0, c, j])
            assert math.isclose(
                float(got[0, c, j]), v + math.sin(a * v) ** 2 / (a + 1e-9), rel_tol=1e-12, abs_tol=1e-12
            )
    # alpha is used raw (not exp'd): alpha -> 0 gives x + alpha * x^2 -> x
    tiny = snake(x, torch.full_like(alpha, 1e-6))
    torch.testing.assert_close(tiny, x, atol=1e-4, rtol=0)


@pytest.mark.parametrize("stride", [2, 3, 4, 5, 8])
def test_polyphase_upsample_is_the_transposed_convolution(stride):
    g = torch.Generator().manual_seed(stride)
    x = torch.randn(2, 6, 11, generator=g, dtype=torch.float64)
    w = torch.randn(6, 4, 2 * stride, generator=g, dtype=torch.float64)  # [C_in, C_out, 2s]
    b = torch.randn(4, generator=g, dtype=torch.float64)
    geometry = upsample_conv_params(stride)
    want = F.conv_transpose1d(
        x, w, b, stride=stride, padding=geometry["padding"], output_padding=geometry["output_padding"]
    )
    pw, pb = polyphase_weight(w, b, stride)
    got = polyphase_upsample(x, pw, pb, stride, geometry["padding"])
    assert got.shape == want.shape == (2, 4, 11 * stride)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    module = Upsample(6, 4, **geometry).double()
    with torch.no_grad():
        module.weight.copy_(w)
        module.bias.copy_(b)
    torch.testing.assert_close(module(x), want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # new weights are picked up, not the first call's rearrangement
        module.weight.mul_(2)
    torch.testing.assert_close(module(x) - b[:, None], 2 * (want - b[:, None]), rtol=1e-12, atol=1e-12)


def test_rvq_decode_sums_projected_levels():
    g = torch.Generator().manual_seed(0)
    embeds = [torch.randn(5, 3, generator=g) for _ in range(2)]
    ws = [torch.randn(4, 3, generator=g) for _ in range(2)]
    bs = [torch.randn(4, generator=g) for _ in range(2)]
    codes = torch.tensor([[[0, 4, 2], [1, 1, 3]]])  # [B=1, Q=2, T=3]
    out = rvq_decode(codes, embeds, ws, bs)
    assert out.shape == (1, 4, 3)
    for t in range(3):
        want = sum(ws[q] @ embeds[q][codes[0, q, t]] + bs[q] for q in range(2))
        torch.testing.assert_close(out[0, :, t], want)


def test_build_on_meta_and_key_set(codec_cfg):
    with torch.device("meta"):
        model = build_decoder(codec_cfg)
    assert all(p.is_meta for p in model.state_dict().values())
    shapes = decoder_tensor_shapes(codec_cfg)
    assert len(shapes) == 136
    file_keys = set(load_file(TINY / "audio_tokenizer" / "model.safetensors"))
    assert set(shapes) <= file_keys
    assert shapes["acoustic_decoder.block.4.conv_t1.weight"] == (2, 1, 6)


def test_full_size_shapes_match_real_checkpoint():
    tensors = json.loads(FULL_MANIFEST.read_text())["audio_tokenizer/model.safetensors"]
    shapes = decoder_tensor_shapes(CodecConfig())
    assert {k: tuple(tensors[k][1]) for k in shapes} == shapes
    assert sum(math.prod(s) for s in shapes.values()) == 21_557_281


def _broken_copy(tmp_path, edit) -> Path:
    dst = tmp_path / "audio_tokenizer"
    shutil.copytree(TINY / "audio_tokenizer", dst)
    tensors = load_file(dst / "model.safetensors")
    edit(tensors)
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


def test_missing_tensor_is_named(tmp_path, codec_cfg):
    d = _broken_copy(tmp_path, lambda t: t.pop("acoustic_decoder.block.2.res_unit3.conv1.weight"))
    with pytest.raises(CheckpointError, match=r"missing acoustic_decoder\.block\.2\.res_unit3\.conv1\.weight"):
        load_codec_decoder(d, codec_cfg)


def test_misshaped_tensor_is_named(tmp_path, codec_cfg):
    def edit(t):
        t["fc2.weight"] = torch.zeros(8, 15)
        del t["quantizer.quantizers.5.codebook.embed"]

    d = _broken_copy(tmp_path, edit)
    with pytest.raises(CheckpointError) as e:
        load_codec_decoder(d, codec_cfg)
    msg = str(e.value)
    assert "fc2.weight has shape [8, 15], expected [8, 16]" in msg
    assert "quantizer.quantizers.5.codebook.embed" in msg  # both problems in one message


def test_extra_and_encoder_keys_are_ignored(tmp_path, codec_cfg):
    d = _broken_copy(tmp_path, lambda t: t.update({"semantic_model.masked_spec_embed": torch.zeros(8)}))
    load_codec_decoder(d, codec_cfg)


def test_truncated_file_names_the_file(tmp_path, codec_cfg):
    d = tmp_path / "audio_tokenizer"
    shutil.copytree(TINY / "audio_tokenizer", d)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors") as e:
        load_codec_decoder(d, codec_cfg)
    assert str(f) in str(e.value)
    f.write_bytes(b"\x01\x02")
    with pytest.raises(CheckpointError, match=str(f)):
        load_codec_decoder(d, codec_cfg)
    f.unlink()
    with pytest.raises(CheckpointError, match="missing"):
        load_codec_decoder(d, codec_cfg)


FP16_OVERFLOW_SCALE = 100.0  # fc2 scaled so the tiny decoder's chain reaches ~2e5 inside (fp16 tops out at 65,504)


def _as_real_checkpoint_in_fp16(tensors: dict) -> None:
    """fc2 scaled up, then fc2 and the decoder stored in fp16, as the real checkpoint stores them."""
    tensors["fc2.weight"] = tensors["fc2.weight"] * FP16_OVERFLOW_SCALE
    tensors["fc2.bias"] = tensors["fc2.bias"] * FP16_OVERFLOW_SCALE
    for key in list(tensors):
        if key.startswith(("fc2.", "acoustic_decoder.")):
            tensors[key] = tensors[key].half()


@pytest.mark.slow
def test_fp16_weights_that_overflow_an_fp16_chain_decode_as_fp32(tmp_path, codec_cfg):
    """The real checkpoint's fp16 codec weights: in an fp16 module the upsampling chain passes
    65,504 and turns to NaN (vllm-project/vllm-omni#3336); ours decodes them in fp32, finite and
    equal to the fp32 decode of the same weights, also under an autocast or cast to half."""
    d = _broken_copy(tmp_path, _as_real_checkpoint_in_fp16)
    codes = torch.from_numpy(load_np(GOLDEN / "auto_en.safetensors")["decode0.codes"])[..., :16]
    stored = load_file(d / "model.safetensors")
    assert stored["fc2.weight"].dtype == torch.float16
    fp32 = build_decoder(codec_cfg)
    fp32.load_state_dict({k: stored[k].float() for k in decoder_tensor_shapes(codec_cfg)}, strict=True)
    with torch.inference_mode():
        want = fp32(codes)
        half = copy.deepcopy(fp32).half()(codes)  # what an fp16 chain gives
    assert want.abs().max() > 1 and torch.isfinite(want).all()
    assert not torch.isfinite(half).all()  # the scale does overflow an fp16 chain

    floor = 1e-4 * float(want.abs().max())  # the goldens' floor (1e-4 at a peak of ~1) at this peak
    dec = load_codec_decoder(d, codec_cfg, "cpu")  # decode runs the folded plan, forward the modules
    out = dec.decode(codes)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out, want, rtol=0, atol=floor)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # an autocast around it is turned off
        torch.testing.assert_close(dec.decode(codes), want, rtol=0, atol=floor)
    dec.half()  # the whole decoder cast to half (a GPU run in --dtype float16): widened before decoding
    rounded = build_decoder(codec_cfg)  # the fp32 decode of what it holds now (its fp32 weights rounded)
    rounded.load_state_dict({k: v.float() for k, v in dec.state_dict().items()}, strict=True)
    again = dec.decode(codes)
    assert again.dtype == torch.float32 and torch.isfinite(again).all()
    with torch.inference_mode():
        torch.testing.assert_close(again, rounded(codes), rtol=0, atol=floor)
