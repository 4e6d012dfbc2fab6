#!/usr/bin/env python3
"""Write a full-size random-weight checkpoint for the benchmarks (never commit it: ~3.2 GB).

    python benchmarks/make_checkpoint.py [--out bench-ckpt-full] [--tokenizer PATH]

Names, shapes and dtypes come from tests/fixtures/full/tensors.json (the real k2-fsa/OmniVoice
list), the config files from tests/fixtures/full/. Weights are N(0, 0.02) (norms 1, codec
convolutions scaled by 1/sqrt(fan-in)); timing does not depend on their values. The tokenizer
defaults to the tiny fixture's (plain text gets the same ids as in the oracle's full tokenizer).
If the reference oracle venv exists, prefer its checkpoint (.oracle/ckpt-full), which the
benchmarks pick up first, so both implementations run the same weights.
"""

import argparse
import json
import math
import shutil
from pathlib import Path

import torch

from omnivoice_cli.engine.checkpoint.tensorfile import write_file

ROOT = Path(__file__).resolve().parent.parent
FULL = ROOT / "tests" / "fixtures" / "full"
DTYPES = {"F32": torch.float32, "I64": torch.int64}


def tensor(name: str, dtype: str, shape: list[int], g: torch.Generator) -> torch.Tensor:
    if dtype == "I64":
        return torch.arange(shape[0], dtype=torch.int64) * 1025  # codebook_layer_offsets
    if name.endswith(("norm.weight", "layer_norm.weight", "alpha", "original0")) or "inited" in name:
        return torch.ones(shape)
    if name.endswith("bias") or "cluster_size" in name:
        return torch.zeros(shape)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
    std = 0.02 if name.startswith(("llm.", "audio_")) else 1 / math.sqrt(max(fan_in, 1))
    return torch.randn(shape, generator=g) * std


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-ckpt-full")
    ap.add_argument("--tokenizer", type=Path, default=ROOT / "tests/fixtures/tiny/ckpt/tokenizer.json")
    args = ap.parse_args()
    manifest = json.loads((FULL / "tensors.json").read_text())
    (args.out / "audio_tokenizer").mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    for file, entries in manifest.items():
        tensors = {name: tensor(name, dt, shape, g).to(DTYPES[dt]) for name, (dt, shape) in entries.items()}
        write_file(args.out / file, tensors, {})  # (readable by others as any new file: the umask's mode)
        print(f"wrote {args.out / file}: {len(tensors)} tensors")
    shutil.copyfile(FULL / "config.json", args.out / "config.json")
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copyfile(FULL / "audio_tokenizer" / name, args.out / "audio_tokenizer" / name)
    shutil.copyfile(args.tokenizer, args.out / "tokenizer.json")
    print(f"done: {args.out}")


if __name__ == "__main__":
    main()
