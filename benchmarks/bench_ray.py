#!/usr/bin/env python3
"""What Ray costs: `omnivoice batch --ray local --workers 1` against a plain `omnivoice batch`, on
the same lines, side by side in one run (the runs alternate; medians).

    python benchmarks/bench_ray.py [--ckpt DIR] [--lines 8] [--steps 2] [--threads 2] [--repeats 3]

Each run is the whole command in its own subprocess (imports, for Ray: starting a local cluster
and its worker, loading the model, generating, writing the files, shutting down). From each
summary line it also reads the generation time (plain: after the model loaded; Ray: from the
worker being ready to the last file written, which adds the trips of the audio from the worker)
and the load time (Ray: the cluster's start is before it, in the wall time only). Both runs use
--threads THREADS (the one worker reserves that many CPUs), so the work is the same; the outputs
are checked to be byte for byte the same.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as H

SUMMARY = re.compile(r"of audio in ([\d.]+) s \(RTF [^;]*; model loaded in ([\d.]+) s\); wall time ([\d.]+) s")


def run(cmd: list[str]) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = SUMMARY.search(p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return {"wall": wall, "generate": float(m.group(1)), "load": float(m.group(2)), "inside": float(m.group(3))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None, help="default: the full-size checkpoint")
    ap.add_argument("--lines", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    kinds = {"plain": [], "ray": ["--ray", "local", "--workers", "1"]}
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "lines.txt"
        src.write_text("\n".join(H.lines(args.lines)) + "\n")
        for rep in range(args.repeats):
            for kind, extra in kinds.items():
                cmd = [
                    sys.executable,
                    "-m",
                    "omnivoice_cli.cli",
                    "batch",
                    str(src),
                    "-o",
                    f"{tmp}/{kind}{rep}",
                    "--model",
                    str(args.ckpt),
                    "--lang",
                    "en",
                    "--num-step",
                    str(args.steps),
                    "--seed",
                    "1",
                    "--threads",
                    str(args.threads),
                    "--device",
                    "cpu",
                    *extra,
                ]
                runs[kind].append(run(cmd))
            for name in sorted(p.name for p in Path(f"{tmp}/plain{rep}").glob("*.wav")):
                if (Path(f"{tmp}/plain{rep}") / name).read_bytes() != (Path(f"{tmp}/ray{rep}") / name).read_bytes():
                    raise SystemExit(f"{name}: the Ray run's file differs from the plain run's")
            print(f"  repeat {rep + 1}/{args.repeats} done", flush=True)
    med = {k: {m: H.median([r[m] for r in rs]) for m in ("wall", "generate", "load")} for k, rs in runs.items()}
    print(
        f"\n{args.lines} lines at {args.steps} steps, {args.threads} threads, {args.ckpt} "
        f"(median of {args.repeats}, seconds)"
    )
    print(H.cpu_header())
    print(f"{'run':8s} {'wall':>8s} {'generate':>9s} {'load':>7s}")
    for kind, m in med.items():
        walls = [round(r["wall"], 1) for r in runs[kind]]
        print(f"{kind:8s} {m['wall']:8.1f} {m['generate']:9.2f} {m['load']:7.1f}   walls {walls}")
    p, r = med["plain"], med["ray"]
    print(
        f"ray / plain: whole command {r['wall'] / p['wall']:.2f}x (+{r['wall'] - p['wall']:.1f} s), "
        f"generation {r['generate'] / p['generate']:.2f}x"
    )
    if args.out:
        report = {"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs, "median": med}
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
