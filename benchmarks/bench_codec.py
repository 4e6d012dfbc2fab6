#!/usr/bin/env python3
"""The codec's decode of ~9 s of codes (226 frames) on the full-size checkpoint: the module tree
(`HiggsDecoder.forward`, "old": the decode as it was before the folded plan, Snake in four
passes, convolutions in torch's default layout), the plan without oneDNN's packed weights
("unpacked": Snake's alphas folded into the convolutions, channels-last) and `decode` ("new":
the plan, packed), alternating in one process (old, unpacked, new, new, unpacked, old, ...) at each
thread count, then one profiled decode of each with the ops' time by kind.

    python benchmarks/bench_codec.py [--ckpt DIR] [--frames 226] [--threads 2 1] [--pairs 5]
                                     [--json out.json]

Reported per thread count: each round's times and ratios to old, the medians, the load average
beside them (the machine may be shared: read the ratios), the largest difference of the two
outputs against their peak, the plan's making time (once at load), and the profile's split.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import _harness as H

KINDS = {  # profiler op -> kind of work
    "aten::mkldnn_convolution": "convolutions",
    "mkldnn::_convolution_pointwise": "convolutions",
    "mkldnn::_convolution_pointwise_": "convolutions",  # with the skip added in its epilogue
    "aten::sin": "Snake: sin",
    "aten::sin_": "Snake: sin",
    "aten::pow_": "Snake: scale, square",
    "aten::mul": "Snake: scale, square",
    "aten::addcmul": "Snake: add",
    "aten::addcmul_": "Snake: add; rescaled skips",
    "aten::add_": "residual adds",
    "aten::copy_": "copies (pad, interleave, RVQ)",
    "aten::fill_": "copies (pad, interleave, RVQ)",
    "aten::addmm": "RVQ and fc2",
    "aten::add": "RVQ and fc2",
}
VARIANTS = ("old", "unpacked", "new")  # the module tree; the plan without oneDNN's packed weights; decode


def load_avg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def split(run) -> dict[str, float]:
    """ms of the ops' own time by kind, for one profiled call of run()."""
    import torch

    with torch.profiler.profile() as prof:
        run()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    out: dict[str, float] = {}
    for e in events:  # an op not named above under its own name where it is 2% or more
        kind = KINDS.get(e.key, e.key if e.self_cpu_time_total >= 0.02 * total else "other")
        out[kind] = out.get(kind, 0.0) + e.self_cpu_time_total / 1e3
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def measure(dec, codes, threads: int, pairs: int) -> dict:
    import torch

    from omnivoice_cli.engine.fast.codecplan import build_plan

    torch.set_num_threads(threads)
    unpacked = build_plan(dec.acoustic_decoder, pack=False)
    assert unpacked is not None

    def old():
        with torch.inference_mode():
            return dec.forward(codes)

    def plain():
        with torch.inference_mode():
            return unpacked(dec.latent(codes))

    runs = {"old": old, "unpacked": plain, "new": lambda: dec.decode(codes)}
    outs = {k: f() for k, f in runs.items()}  # warm-up (oneDNN's primitives for these shapes)
    peak = float(outs["old"].abs().max())
    diff = float((outs["old"] - outs["new"]).abs().max())
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    loads = []
    for i in range(pairs):
        for name in VARIANTS if i % 2 == 0 else VARIANTS[::-1]:  # alternate which runs first
            t0 = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - t0)
        loads.append(load_avg())
        print(
            f"  {threads} thr: "
            + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items())
            + f", new/old {times['new'][-1] / times['old'][-1]:.3f} (load {loads[-1]})",
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {k: [n / o for o, n in zip(times["old"], times[k])] for k in ("unpacked", "new")}
    result = {
        "threads": threads,
        "times": times,
        "loads": loads,
        "median": med,
        "pair_ratios": ratios,
        "median_ratio": {k: statistics.median(v) for k, v in ratios.items()},
        "max_abs_diff": diff,
        "peak": peak,
        "split_ms": {k: split(runs[k]) for k in VARIANTS},
    }
    print(
        f"{threads} thread(s): medians "
        + ", ".join(f"{k} {v:.3f} s" for k, v in med.items())
        + "; "
        + "; ".join(
            f"{k}/old {result['median_ratio'][k]:.3f} (runs {', '.join(f'{r:.2f}' for r in v)})"
            for k, v in ratios.items()
        )
        + f"; max |new - old| {diff:.2e} at a peak of {peak:.1f} ({diff / peak:.1e})"
    )
    for label, parts in result["split_ms"].items():
        print(
            f"  {label} profiled, {sum(parts.values()):.0f} ms: " + ", ".join(f"{k} {v:.0f}" for k, v in parts.items())
        )
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None, help="full-size checkpoint (default: the harness's)")
    ap.add_argument("--frames", type=int, default=226, help="codec frames (25 a second; 226 = the 9 s sentence)")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import torch

    sys.path.insert(0, str(H.ROOT))
    from omnivoice_cli.engine.fast import codecplan
    from omnivoice_cli.engine.fast.memory import keep_heap
    from omnivoice_cli.engine.loading import load_codec_decoder
    from omnivoice_cli.engine.model.config import ModelConfig

    keep_heap()  # as the engine does once loaded: large blocks reused from the heap, not faulted afresh

    ckpt = args.ckpt or H.default_ckpt()
    print(H.cpu_header())
    cfg = ModelConfig.from_checkpoint(ckpt).codec
    t0 = time.perf_counter()
    dec = load_codec_decoder(ckpt / "audio_tokenizer", cfg)
    load_s = time.perf_counter() - t0
    plans = []
    for _ in range(3):  # the plan made again (what load does once)
        t0 = time.perf_counter()
        codecplan.install_plan(dec)  # a new planner: the plan made again
        plans.append(time.perf_counter() - t0)
    print(
        f"checkpoint {ckpt}: load {load_s:.3f} s with the plan; the plan alone {statistics.median(plans):.3f} s "
        f"(runs {', '.join(f'{p:.3f}' for p in plans)}; load {load_avg()})"
    )
    codes = torch.randint(
        0, cfg.codebook_size, (1, cfg.num_quantizers, args.frames), generator=torch.Generator().manual_seed(0)
    )
    out = {"ckpt": str(ckpt), "frames": args.frames, "load_s": load_s, "plan_s": plans, "cpu": H.cpu_header()}
    out["runs"] = [measure(dec, codes, n, args.pairs) for n in args.threads]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
