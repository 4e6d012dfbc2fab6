"""The engine builds exactly the real checkpoint's structure, so the real 0.6B model loads."""

import json
from pathlib import Path

import torch

from omnivoice_cli.engine.backbone import OmniVoiceModel
from omnivoice_cli.engine.codec import build_decoder
from omnivoice_cli.engine.config import ModelConfig

FULL = Path(__file__).parent / "fixtures" / "full"  # the real config files and tensor list
MANIFEST = json.loads((FULL / "tensors.json").read_text())


def test_full_config_files_give_the_builtin_defaults():
    assert ModelConfig.from_checkpoint(FULL) == ModelConfig(checkpoint_dtype="float32")


def test_full_size_body_matches_the_real_tensor_list_exactly():
    with torch.device("meta"):
        model = OmniVoiceModel(ModelConfig.from_checkpoint(FULL))
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    real = {k: shape for k, (dtype, shape) in MANIFEST["model.safetensors"].items()}
    assert ours == real


def test_full_size_codec_decoder_tensors_exist_in_the_real_file():
    with torch.device("meta"):
        decoder = build_decoder(ModelConfig.from_checkpoint(FULL).codec)
    real = {k: shape for k, (dtype, shape) in MANIFEST["audio_tokenizer/model.safetensors"].items()}
    ours = {k: list(v.shape) for k, v in decoder.state_dict().items()}
    assert len(ours) == 136  # the decode path: RVQ embed + project_out, fc2, acoustic decoder
    assert {k: real.get(k) for k in ours} == ours
