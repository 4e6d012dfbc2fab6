"""The engine builds exactly the real checkpoint's structure, so the real 0.6B model loads."""

import json
import re
from pathlib import Path

import torch

from omnivoice_cli.engine.model.backbone import OmniVoiceModel
from omnivoice_cli.engine.model.codec import build_decoder
from omnivoice_cli.engine.model.config import ModelConfig

ROOT = Path(__file__).resolve().parent.parent
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


# The folder of spec and oracle files beside a developer's checkout: ../shared, /work/shared,
# a path joined with "shared". Tests and the package read copies in tests/fixtures or their own data.
SHARED = re.compile(r"""(\.\./|/work/)shared\b|["']shared["']""")


def test_no_test_and_nothing_in_the_package_reads_the_shared_folder():
    files = sorted(ROOT.glob("tests/**/*.py")) + sorted(p for p in ROOT.glob("omnivoice_cli/**/*") if p.is_file())
    assert len(files) > 100
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if path.suffix in (".py", ".json", ".toml", ".js", ".html", ".css", ".txt", ".md")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SHARED.search(line) and path.name != "test_structure.py"
    ]
    assert found == []


def test_the_shared_folder_pattern_finds_its_spellings():
    for line in ('Path("/work/shared/fixtures/full/tokenizer.json")', "ROOT / '..' / 'shared'", "../shared/spec"):
        assert SHARED.search(line), line
    for line in ("they shared forwards", "a shared engine loop", "-o /shared/out --ray auto"):
        assert not SHARED.search(line), line
