#!/usr/bin/env python3
"""Where a step's time goes: one sentence's forwards on the full-size checkpoint under torch's
profiler, the ops ranked by their own time, and the share of the linear products.

    python benchmarks/bench_profile.py [--ckpt DIR] [--quantize int8|auto] [--dtype bfloat16]
                                       [--int8-kernel onednn|fbgemm] [--forwards 3] [--threads 2]
                                       [--shapes aten::copy_ ...]

`--shapes OP`: that op's calls by their input shapes too (where the copies come from: a row's
slice copied inside a batched product shows as [kv, D, L], a rounding as [heads, N, D]).

Run it under caps to see another class (e.g. `ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
FBGEMM_ENABLE_INSTRUCTIONS=AVX2` for an AVX2-only CPU). The profiler adds a little to every op;
the shares are what to read.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _harness as H

# the ops that are the linear products, on every path (fp32 oneDNN, bf16, oneDNN int8, FBGEMM, torch's)
PRODUCTS = (
    "mkldnn::_linear_pointwise",
    "onednn::qlinear_pointwise",
    "quantized::linear_dynamic",
    "aten::addmm",
    "aten::mm",
    "aten::linear",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--int8-kernel", default=None, choices=["onednn", "fbgemm"])
    ap.add_argument("--forwards", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--shapes", nargs="*", default=[], metavar="OP", help="these ops' calls by input shape")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.generation import pack
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    H.force_int8_kernel(args.int8_kernel)
    ckpt = args.ckpt or H.default_ckpt()
    kw = {"quantize": args.quantize} if args.quantize else {}
    engine = Engine.load(str(ckpt), Hardware(device="cpu", dtype=args.dtype, **kw))
    job = engine.prepare(Request(text=H.SENTENCE_9S, lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])  # warm
        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=bool(args.shapes)) as prof:
            for _ in range(args.forwards):
                engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
        wall = (time.perf_counter() - t) / args.forwards
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    print(H.cpu_header())
    layer = engine.model.llm.layers[0]
    print(
        f"path: dtype {engine.dtype}, quantize {args.quantize or 'none'}, down_proj {type(layer.mlp.down_proj).__name__}, "
        f"{batch.input_ids.shape[-1] if hasattr(batch, 'input_ids') else '?'} positions; "
        f"{wall:.3f} s a forward with the heads (profiled), {args.threads} threads"
    )
    print(f"{'op':44s} {'self ms/fwd':>11s} {'share':>6s} {'calls/fwd':>9s}")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
        ms = e.self_cpu_time_total / 1e3 / args.forwards
        print(f"{e.key[:44]:44s} {ms:11.1f} {e.self_cpu_time_total / total:6.1%} {e.count / args.forwards:9.0f}")
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    print(
        f"linear products: {products / total:.1%} of the ops' own time; the rest {(total - products) / 1e3 / args.forwards:.1f} ms a forward"
    )
    for op in args.shapes:
        rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == op]
        print(f"{op} by input shapes: self ms/fwd, calls/fwd")
        for e in sorted(rows, key=lambda e: -e.self_cpu_time_total)[: args.top]:
            print(
                f"  {e.self_cpu_time_total / 1e3 / args.forwards:9.1f} {e.count / args.forwards:6.0f}  {e.input_shapes}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
