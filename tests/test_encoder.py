"""Codec encode path: parity with the reference's encodes, structure, loader."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile
from omnivoice_cli.engine.errors import CheckpointError
from omnivoice_cli.engine.model import hubert
from omnivoice_cli.engine.model.encoder import (
    EncoderConfig,
    build_encoder,
    encoder_tensor_shapes,
    load_codec_encoder,
)
from omnivoice_cli.engine.model.hubert import HubertConfig, fold_weight_norm

FIX = Path(__file__).parent / "fixtures"
TINY_AT = FIX / "tiny" / "ckpt" / "audio_tokenizer"
GOLDEN = FIX / "golden"
FULL_CONFIG = FIX / "full" / "audio_tokenizer" / "config.json"
FULL_TENSORS = FIX / "full" / "tensors.json"

ENCODE_PREFIXES = ("semantic_model.", "encoder_semantic.", "acoustic_encoder.", "fc.")
RVQ_SUFFIXES = ("codebook.embed", "project_in.weight", "project_in.bias", "project_out.weight", "project_out.bias")


def encode_subset(names) -> set[str]:
    """The checkpoint keys the encode path needs (spec: codec.md section 3)."""
    out = set()
    for n in names:
        if n.startswith(ENCODE_PREFIXES) and n != "semantic_model.masked_spec_embed":
            out.add(n)
        elif n.startswith("quantizer.quantizers.") and n.split(".", 3)[3] in RVQ_SUFFIXES:
            out.add(n)
    return out


@pytest.fixture(scope="module")
def encoder():
    return load_codec_encoder(TINY_AT)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["clone", "clone_16k"])
def test_encode_matches_reference(encoder, case):
    g = load_file(GOLDEN / f"{case}.safetensors")
    wav = g["encode0.input_values"]
    codes = encoder.encode(wav)
    ref = g["encode0.audio_codes"]
    assert codes.dtype == torch.int64 and codes.shape == ref.shape == (1, 8, wav.shape[-1] // 960)
    assert torch.equal(codes, ref), f"{int((codes != ref).sum())} of {ref.numel()} codes differ"


def test_full_structure_is_exactly_the_encode_subset():
    cfg = EncoderConfig.from_dict(json.loads(FULL_CONFIG.read_text()), FULL_CONFIG)
    assert cfg.hubert == HubertConfig()  # the real checkpoint is HuBERT-base
    assert cfg.hubert.num_hidden_states == 13 and cfg.semantic_downsample_factor == 2
    file_tensors = json.loads(FULL_TENSORS.read_text())["audio_tokenizer/model.safetensors"]
    assert len(file_tensors) == 527
    expected = encode_subset(file_tensors)
    assert len(expected) == 375
    shapes = encoder_tensor_shapes(cfg)  # built on the meta device
    assert set(shapes) == expected
    for name, shape in shapes.items():
        dtype, file_shape = file_tensors[name]
        assert dtype == "F32" and list(shape) == file_shape, name
    assert sum(torch.Size(s).numel() for s in shapes.values()) == 163_063_744


def test_tiny_structure_is_the_encode_subset():
    keys = SafetensorsFile(TINY_AT / "model.safetensors").keys()
    assert set(encoder_tensor_shapes(EncoderConfig.from_dir(TINY_AT))) == encode_subset(keys)


def test_loader_reads_each_encoder_tensor_once(monkeypatch):
    read = []
    original = SafetensorsFile.get

    def spy(self, name):
        read.append(name)
        return original(self, name)

    monkeypatch.setattr(SafetensorsFile, "get", spy)
    model = load_codec_encoder(TINY_AT)
    assert sorted(read) == sorted(model.state_dict())
    assert len(read) == len(set(read))
    assert not any(n.startswith(("acoustic_decoder.", "decoder_semantic.", "fc1.", "fc2.")) for n in read)
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in model.parameters())


def test_legacy_weight_norm_names_are_accepted(tmp_path, encoder):
    state = load_file(TINY_AT / "model.safetensors")
    base = "semantic_model.encoder.pos_conv_embed.conv."
    state[base + "weight_g"] = state.pop(base + "parametrizations.weight.original0")
    state[base + "weight_v"] = state.pop(base + "parametrizations.weight.original1")
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((TINY_AT / "config.json").read_text())
    legacy = load_codec_encoder(tmp_path)
    ours, theirs = encoder.state_dict(), legacy.state_dict()
    assert set(ours) == set(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_missing_and_misshaped_tensors_are_listed(tmp_path):
    state = load_file(TINY_AT / "model.safetensors")
    del state["fc.weight"]
    del state["quantizer.quantizers.3.project_in.bias"]
    state["acoustic_encoder.conv1.bias"] = torch.zeros(5)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((TINY_AT / "config.json").read_text())
    with pytest.raises(CheckpointError) as e:
        load_codec_encoder(tmp_path)
    msg = str(e.value)
    assert "fc.weight" in msg and "quantizers.3.project_in.bias" in msg and "acoustic_encoder.conv1.bias" in msg


def test_missing_file_is_a_checkpoint_error(tmp_path):
    (tmp_path / "config.json").write_text((TINY_AT / "config.json").read_text())
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_codec_encoder(tmp_path)
    with pytest.raises(CheckpointError, match="config.json"):
        load_codec_encoder(tmp_path / "nowhere")


def test_hubert_config_from_tiny_and_refusals():
    d = json.loads((TINY_AT / "config.json").read_text())
    cfg = EncoderConfig.from_dict(d)
    h = cfg.hubert
    assert (h.hidden_size, h.num_hidden_layers, h.num_attention_heads, h.intermediate_size) == (8, 2, 2, 16)
    assert h.conv_dim == (4,) * 7 and h.num_conv_pos_embeddings == 16 and h.num_conv_pos_embedding_groups == 4
    assert cfg.codec.codebook_dim == 8 and cfg.rvq_dim == 16
    for bad in (
        {"do_stable_layer_norm": True},
        {"hidden_act": "relu"},
        {"conv_kernel": [10, 3]},
        {"num_attention_heads": 3},
    ):
        dd = json.loads(json.dumps(d))
        dd["semantic_model_config"].update(bad)
        with pytest.raises(CheckpointError):
            EncoderConfig.from_dict(dd)


def test_fold_weight_norm_formula():
    g = torch.rand(1, 1, 5) + 0.5
    v = torch.randn(6, 3, 5)
    w = fold_weight_norm(g, v)
    expect = g * v / v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt()
    assert torch.allclose(w, expect, atol=1e-6)


@pytest.mark.slow
def test_batch_and_non_hop_lengths(encoder):
    g = torch.Generator().manual_seed(0)
    wav = 0.1 * torch.randn(2, 1, 960 * 4, generator=g)
    codes = encoder.encode(wav)
    assert codes.shape == (2, 8, 4)
    assert torch.equal(codes[1:], encoder.encode(wav[1:]))
    # not a multiple of the hop: the acoustic branch is re-run on input padded by hop/2 each side
    # (the reference's path); the frame count follows HuBERT's
    odd = 0.1 * torch.randn(1, 1, 960 * 3 + 123, generator=g)
    assert encoder.acoustic_encoder.output_length(odd.shape[-1]) != 4
    assert encoder.encode(odd).shape == (1, 8, 4)
    assert encoder.acoustic_encoder.output_length(960 * 7) == 7


def test_encode_rejects_bad_input(encoder):
    with pytest.raises(ValueError, match="mono"):
        encoder.encode(torch.zeros(1, 2, 1920))
    with pytest.raises(ValueError, match="shorter than one frame"):
        encoder.encode(torch.zeros(1, 1, 100))
    with pytest.raises(ValueError, match="floating"):
        encoder.encode(torch.zeros(1, 1, 1920, dtype=torch.long))


def test_meta_build_touches_no_memory():
    cfg = EncoderConfig.from_dict(json.loads(FULL_CONFIG.read_text()))
    with torch.device("meta"):
        model = build_encoder(cfg)
    assert all(t.is_meta for t in model.state_dict().values())
    assert isinstance(model.semantic_model.encoder.pos_conv_embed.conv, hubert.WeightNormConv1d)
