#!/usr/bin/env python3
"""Whole `omnivoice say` commands of the 9 s sentence, the rows alternating (A, B, C, A, B, C, ...),
each run's wall time printed as it ends (so a run cut short still leaves its figures), then each
row's median and its ratio to the fastest row, pair by pair.

    python benchmarks/bench_whole.py [--ckpt DIR] [--steps 16] [--threads 2] [--repeats 3]
        [--row NAME=ARGS ...]   (default rows: fast, bf16 + step cache, int8 + step cache)
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

import _harness as H

ROWS = {
    "fast": "--preset fast",
    "bf16 + step cache": "--dtype bfloat16 --step-cache",
    "int8 + step cache": "--quantize int8 --step-cache",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--row", action="append", default=[], help="NAME=ARGS (replaces the default rows)")
    args = ap.parse_args()
    rows = dict(r.split("=", 1) for r in args.row) if args.row else ROWS
    ckpt = args.ckpt or H.default_ckpt()
    print(H.cpu_header(), f"\ncheckpoint {ckpt}, {args.threads} threads, {args.steps} steps", flush=True)
    walls: dict[str, list[float]] = {name: [] for name in rows}
    with tempfile.TemporaryDirectory() as tmp:
        base = [sys.executable, "-m", "omnivoice_cli.cli", "say", H.SENTENCE_9S, "--model", str(ckpt)]
        base += ["--lang", "en", "--num-step", str(args.steps), "--position-temperature", "0"]
        base += ["--threads", str(args.threads), "-q", "-o", f"{tmp}/out.wav"]
        for rep in range(args.repeats):
            for name, extra in rows.items():
                walls[name].append(H.run_wall(base + shlex.split(extra)))
                print(f"  repeat {rep + 1}: {name:20s} {walls[name][-1]:7.1f} s", flush=True)
    best = min(walls, key=lambda n: statistics.median(walls[n]))
    print(f"\nmedians ({args.repeats} runs each), against the fastest ({best}) pair by pair\n{H.cpu_header()}")
    for name, ws in walls.items():
        pairs = [round(w / b, 2) for w, b in zip(ws, walls[best])]
        print(f"  {name:20s} {statistics.median(ws):7.1f} s   {statistics.median(pairs):.2f}x (pairs {pairs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
