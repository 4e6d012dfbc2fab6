#!/usr/bin/env python3
"""The work between the products, change by change: whole forwards (with the heads) of the 9 s
sentence's 523 positions on the full-size checkpoint, in one process, one load, the variants
alternating (A, B, C, D, A, B, ...); each variant's median and its time against "before", pair by
pair. Variants: the attention (grouped_attention's batched products, or torch's fused
scaled-dot-product kernel in the same dtype: `flash`, measured and not kept) and, on the int8 path, the activations' quantisation (the
four-pass form it replaced, or int8pack's three passes: `quant`).

    python benchmarks/bench_between.py [--ckpt DIR] [--quantize int8 | --dtype bfloat16]
                                       [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import _harness as H


def four_passes(x, half):
    """The quantisation before (scaling, rounding, cast to int8, shift), for comparison."""
    import torch

    x = x.float()
    lo, hi = torch.aminmax(x)
    scale = max(-float(lo), float(hi), 1e-30) / half
    return x.mul(1.0 / scale).round_().to(torch.int8).view(torch.uint8).add_(half + 1), scale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    from omnivoice_cli.engine import backbone, int8pack, linears
    from omnivoice_cli.engine.generation import pack
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    hardware = Hardware(device="cpu", dtype=args.dtype, quantize=args.quantize)
    engine = Engine.load(str(args.ckpt or H.default_ckpt()), hardware)
    job = engine.prepare(Request(text=H.SENTENCE_9S, lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    grouped = backbone.grouped_attention

    def fused(q, k, v, dtype):  # grouped_attention's inputs and result, through the fused kernel
        return F.scaled_dot_product_attention(q[None].to(dtype), k[None].to(dtype), v[None].to(dtype), enable_gqa=True)[
            0
        ]

    variants = {"before": (False, four_passes), "flash": (True, four_passes)}
    if args.quantize:
        variants |= {"quant": (False, int8pack.quantize_activations), "both": (True, int8pack.quantize_activations)}

    def forward(flash, quantize):
        backbone.grouped_attention = fused if flash else grouped
        linears.quantize_activations = quantize
        t = time.perf_counter()
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
        return time.perf_counter() - t

    print(H.cpu_header())
    print(f"path: dtype {engine.dtype}, quantize {args.quantize or 'none'}, {args.threads} threads", flush=True)
    times: dict[str, list[float]] = {name: [] for name in variants}
    with torch.inference_mode():
        for v in variants.values():
            forward(*v)  # warm each
        for r in range(args.rounds):
            for name, v in variants.items():
                times[name].append(forward(*v))
            print(f"  round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), flush=True)
    for name, ts in times.items():
        pairs = [round(t / b, 3) for t, b in zip(ts, times["before"])]
        print(
            f"  {name:7s} median {statistics.median(ts):.2f} s, against before {statistics.median(pairs):.3f} (pairs {pairs})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
