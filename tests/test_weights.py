"""Finding and strictly loading checkpoints."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from omnivoice_cli.engine.checkpoint import hub
from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile
from omnivoice_cli.engine.errors import CheckpointError, ModelUnavailable
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.backbone import OmniVoiceModel
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.pipeline import Engine

TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"


@pytest.fixture
def ckpt(tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(TINY, dst)
    return dst


def test_mmap_views_equal_a_plain_read():
    from safetensors.torch import load_file

    plain = load_file(TINY / "model.safetensors")
    f = SafetensorsFile(TINY / "model.safetensors")
    assert sorted(f.keys()) == sorted(plain)
    for name, t in plain.items():
        assert torch.equal(f.get(name), t)


def test_missing_file_is_named(ckpt):
    (ckpt / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="missing tokenizer.json"):
        hub.resolve_checkpoint(str(ckpt))


def test_truncated_safetensors_is_named(ckpt):
    path = ckpt / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(CheckpointError, match="model.safetensors is truncated"):
        Engine.load(str(ckpt), Hardware(device="cpu"))


def test_garbage_safetensors_is_named(ckpt):
    (ckpt / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="not a valid safetensors file"):
        Engine.load(str(ckpt), Hardware(device="cpu"))


def test_missing_unexpected_and_misshaped_tensors_are_listed_together(ckpt):
    from safetensors.torch import load_file, save_file

    t = load_file(ckpt / "model.safetensors")
    del t["llm.norm.weight"]
    t["llm.layers.0.mlp.up_proj.weight"] = t["llm.layers.0.mlp.up_proj.weight"][:-1].contiguous()
    t["lm_head.weight"] = torch.zeros(2, 2)
    save_file(t, ckpt / "model.safetensors")
    with pytest.raises(CheckpointError) as e:
        Engine.load(str(ckpt), Hardware(device="cpu"))
    msg = str(e.value)
    assert "3 problems" in msg
    assert "missing llm.norm.weight" in msg
    assert "llm.layers.0.mlp.up_proj.weight has shape [95, 32], expected [96, 32]" in msg
    assert "unexpected lm_head.weight" in msg


def test_codebook_offsets_may_be_absent(ckpt):
    from safetensors.torch import load_file, save_file

    t = load_file(ckpt / "model.safetensors")
    del t["codebook_layer_offsets"]
    save_file(t, ckpt / "model.safetensors")
    engine = Engine.load(str(ckpt), Hardware(device="cpu"))
    assert engine.model.codebook_layer_offsets.tolist() == [c * 1025 for c in range(8)]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(audio_mask_id=1000), "audio_mask_id 1000"),
        (lambda c: c["llm_config"]["rope_parameters"].update(rope_type="yarn"), "only the default RoPE"),
        (lambda c: c.update(num_audio_codebook=4), "num_audio_codebook 4"),
        (lambda c: c["llm_config"].update(use_sliding_window=True), "full attention"),
        (lambda c: c.update(model_type="llama"), "model_type is 'llama'"),
    ],
)
def test_config_that_contradicts_the_engine_is_an_error(ckpt, edit, message):
    cfg = json.loads((ckpt / "config.json").read_text())
    edit(cfg)
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=message):
        Engine.load(str(ckpt), Hardware(device="cpu"))


def test_sizes_are_adopted_from_the_checkpoint():
    cfg = ModelConfig.from_checkpoint(TINY)
    assert (cfg.backbone.hidden_size, cfg.backbone.num_hidden_layers, cfg.backbone.head_dim) == (32, 2, 16)
    with torch.device("meta"):
        model = OmniVoiceModel(cfg)
    assert tuple(model.llm.layers[0].self_attn.q_proj.weight.shape) == (64, 32)


def test_offline_without_cache_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    with pytest.raises(ModelUnavailable) as e:
        hub.resolve_checkpoint("k2-fsa/OmniVoice")
    assert "k2-fsa/OmniVoice (about 3.2 GB) is not in the Hugging Face cache" in str(e.value)
    assert "the path of a local checkpoint folder" in str(e.value)  # an engine message names engine things


def test_not_a_folder_nor_a_hub_id(tmp_path):
    with pytest.raises(CheckpointError, match="no such folder"):
        hub.resolve_checkpoint(str(tmp_path / "nope"))
