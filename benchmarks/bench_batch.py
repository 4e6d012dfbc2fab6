#!/usr/bin/env python3
"""A batch of lines of 1.5-9 s (8 by default), side by side with the reference (when its oracle
venv exists).

    python benchmarks/bench_batch.py [--ckpt DIR] [--steps 8] [--repeats 3] [--whole-steps 2]
                                     [--lines 8] [--bf16] [--quantize int8 auto] [--no-base]
                                     [--device cuda --dtype bfloat16]

Per-step figures: generate() of the 8 lines in one call, in alternating subprocesses, medians of
`--repeats`. The reference pads all 16 rows (8 conditional + 8 unconditional) to the longest canvas;
our engine packs the rows back to back. Whole-command figures time `omnivoice batch lines.txt -o
DIR` against a script that does the same with the reference (import, load, generate, write 8 files).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import _harness as H


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--whole-steps", type=int, default=2, help="0 skips the whole-command runs")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--lines", type=int, default=8, help="lines in the batch (the 8 lines, repeated)")
    H.add_device_args(ap)
    H.add_variant_args(ap)
    args = ap.parse_args()
    batch = H.lines(args.lines)
    args.ckpt = args.ckpt or H.default_ckpt()
    ref = H.have_reference() and not args.no_reference and args.device == "cpu"
    variants = H.variants(args)
    print(H.cpu_header())
    print(f"checkpoint {args.ckpt}, {args.threads} threads, reference {'on' if ref else 'off'}", flush=True)
    runs = {name: [] for name, _ in variants} | ({"reference": []} if ref else {})
    for rep in range(args.repeats):
        for name, extra in variants:
            runs[name].append(H.run_json(H.ours_cmd(args, batch, args.steps, extra)))
        if ref:
            runs["reference"].append(H.run_json(H.reference_cmd(args, batch, args.steps)))
        print(f"  repeat {rep + 1}/{args.repeats} done", flush=True)
    out = {"ckpt": str(args.ckpt), "threads": args.threads, "num_step": args.steps, "whole": {}}
    print(f"\nbatch of {len(batch)} at {args.steps} steps\n{H.table_header()}")
    out["per_step"] = H.table(runs)
    for name, med in out["per_step"].items():
        print(H.fmt_row(name, med) + f"   s/step runs {[round(r['s_per_step'], 2) for r in med['runs']]}")
    if ref:
        for name, _ in variants:
            pairs = H.pair_ratios(runs["reference"], runs[name])
            print(H.summary(name, out["per_step"]["reference"], out["per_step"][name]) + f" (per-step pairs {pairs})")
    if H.fast_vs_balanced(out["per_step"]):
        print(H.fast_vs_balanced(out["per_step"]))
    if args.whole_steps:
        whole(args, batch, H.cli_variants(variants), ref, out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


def whole(args, batch: list[str], variants, ref: bool, out: dict) -> None:
    """`omnivoice batch` against the reference's script, whole processes, alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp) / "lines.txt"
        lines.write_text("\n".join(batch) + "\n")
        walls = {name: [] for name, _ in variants} | ({"reference": []} if ref else {})
        for rep in range(args.repeats):
            for i, (name, extra) in enumerate(variants):
                cmd = [
                    sys.executable,
                    "-m",
                    "omnivoice_cli.cli",
                    "batch",
                    str(lines),
                    "-o",
                    f"{tmp}/out{rep}_{i}",
                    "--model",
                    str(args.ckpt),
                    "--lang",
                    "en",
                    "--num-step",
                    str(args.whole_steps),
                    "--position-temperature",
                    "0",
                    "--threads",
                    str(args.threads),
                    "--device",
                    args.device,
                    "--dtype",
                    args.dtype,
                    "-q",
                    *extra,
                ]
                walls[name].append(H.run_wall(cmd))
            if ref:
                rcmd = H.reference_cmd(args, batch, args.whole_steps, ["--output", f"{tmp}/ref.wav"])
                walls["reference"].append(H.run_wall(rcmd))
        H.report_whole(walls, args.whole_steps, args.repeats, out)


if __name__ == "__main__":
    sys.exit(main())
