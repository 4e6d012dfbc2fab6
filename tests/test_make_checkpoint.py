"""benchmarks/make_checkpoint.py: its files readable by others (a container's user reading a
mounted folder), as any new file: 0666 less the umask, not safetensors' own 0600."""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
FULL = ROOT / "tests" / "fixtures" / "full"


def test_a_made_checkpoints_files_are_readable_by_others(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_checkpoint", ROOT / "benchmarks" / "make_checkpoint.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    small = tmp_path / "full"  # the real manifest's files and configs, two small tensors each
    shutil.copytree(FULL / "audio_tokenizer", small / "audio_tokenizer")
    shutil.copyfile(FULL / "config.json", small / "config.json")
    manifest = json.loads((FULL / "tensors.json").read_text())
    (small / "tensors.json").write_text(
        json.dumps({file: dict(list(entries.items())[:2]) for file, entries in manifest.items()})
    )
    monkeypatch.setattr(tool, "FULL", small)
    out = tmp_path / "ckpt"
    monkeypatch.setattr(sys, "argv", ["make_checkpoint.py", "--out", str(out)])
    old = os.umask(0o022)
    try:
        tool.main()
    finally:
        os.umask(old)
    for file in manifest:
        assert (out / file).stat().st_mode & 0o777 == 0o644, file
        assert len(load_file(out / file)) == 2
    assert (out / "config.json").stat().st_mode & 0o777 == 0o644
