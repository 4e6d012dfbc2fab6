#!/usr/bin/env python3
"""One ~9 s sentence, side by side with the reference (when its oracle venv exists).

    python benchmarks/bench_say.py [--ckpt DIR] [--steps 32 16] [--repeats 3] [--whole-steps 8]
                                   [--quantize int8] [--threads 2] [--device cuda --dtype bfloat16]

Per-step figures: our engine and the reference each run generate() in their own subprocess, in
alternation, `--repeats` times; medians are reported (s/step is the median forward). Whole-command
figures time the entire process at `--whole-steps`: `omnivoice say ... -o x.wav` against a script
doing the same with the reference (import, load, generate, write). Greedy settings (identical
tokens are checked by the parity tests; here the target lengths are compared).
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
    ap.add_argument("--steps", type=int, nargs="*", default=[32, 16])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--whole-steps", type=int, default=8, help="0 skips the whole-command runs")
    ap.add_argument("--quantize", choices=["int8"], default=None, help="also measure ours with --quantize")
    ap.add_argument("--compile", action="store_true", help="also measure ours with --compile")
    ap.add_argument("--no-reference", action="store_true")
    H.add_device_args(ap)
    ap.add_argument("--out", type=Path, default=None, help="write all figures as JSON here")
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    ref = H.have_reference() and not args.no_reference and args.device == "cpu"
    texts = [H.SENTENCE_9S]
    variants = [("ours fp32", [])]
    if args.quantize:
        variants.append((f"ours {args.quantize}", ["--quantize", args.quantize]))
    if args.compile:
        variants.append(("ours compile", ["--compile"]))
    out = {"ckpt": str(args.ckpt), "threads": args.threads, "per_step": {}, "whole": {}}
    print(f"checkpoint {args.ckpt}, {args.threads} threads, reference {'on' if ref else 'off'}", flush=True)
    for steps in args.steps:
        runs = {name: [] for name, _ in variants}
        if ref:
            runs["reference"] = []
        for rep in range(args.repeats):
            for name, extra in variants:
                runs[name].append(H.run_json(H.ours_cmd(args, texts, steps, extra)))
            if ref:
                runs["reference"].append(H.run_json(H.reference_cmd(args, texts, steps)))
            print(f"  {steps} steps, repeat {rep + 1}/{args.repeats} done", flush=True)
        print(f"\n{steps} steps\n{H.HEADER}")
        table = {}
        for name, rs in runs.items():
            med = {k: H.median([r[k] for r in rs]) for k in ("s_per_step", "generate_seconds", "audio_seconds", "rtf", "peak_rss_gib", "load_seconds")}
            table[name] = med | {"runs": rs}
            print(H.fmt_row(name, med))
        if ref:
            for name, _ in variants:
                r, o = table["reference"], table[name]
                print(f"  {name}: {r['s_per_step'] / o['s_per_step']:.2f}x per step, "
                      f"{r['generate_seconds'] / o['generate_seconds']:.2f}x generate(), "
                      f"peak RSS {o['peak_rss_gib']:.2f} vs {r['peak_rss_gib']:.2f} GiB")  # fmt: skip
        out["per_step"][steps] = table
    if args.whole_steps:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "omnivoice_cli.cli", "say", H.SENTENCE_9S, "--model", str(args.ckpt),
                   "--lang", "en", "--num-step", str(args.whole_steps), "--position-temperature", "0",
                   "--threads", str(args.threads), "--device", args.device, "--dtype", args.dtype,
                   "-q", "-o", f"{tmp}/ours.wav"]  # fmt: skip
            walls = {name: [] for name, _ in variants}
            if ref:
                walls["reference"] = []
            for rep in range(args.repeats):
                for name, extra in variants:
                    walls[name].append(H.run_wall(cmd + extra))
                if ref:
                    rcmd = H.reference_cmd(args, texts, args.whole_steps, ["--output", f"{tmp}/ref.wav"])
                    walls["reference"].append(H.run_wall(rcmd))
            H.report_whole(walls, args.whole_steps, args.repeats, out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
