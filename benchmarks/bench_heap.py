#!/usr/bin/env python3
"""Page faults of repeated step-like allocations, with and without memory.keep_heap.

Each run is a fresh process (glibc's settings are process-wide): after one warm-up step, ten steps
that make and drop tensors of a few MiB, as a forward does; the minor page faults of those ten
steps are counted (getrusage). The count moves with the machine (its load, transparent huge pages,
the thread pool), so it is measured here, over --repeats runs per mode (median, min, max), and not
asserted in the tests: tests/test_backbone.py checks what keep_heap asks of glibc instead.

    python benchmarks/bench_heap.py [--repeats 5] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STEP = """
import resource, sys, torch
torch.set_num_threads(int(sys.argv[2]))
if sys.argv[1] == "keep":
    from omnivoice_cli.engine.fast.memory import keep_heap
    keep_heap()
def step():
    xs = []
    for mib in (6, 2, 8, 4, 12, 3):
        t = torch.ones(mib << 18)
        xs.append(t * 2)
        del t
    return sum(float(x[0]) for x in xs)
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = 10 * (6 + 2 + 8 + 4 + 12 + 3) * 2 * 256  # every tensor and its double, 4 KiB pages, 10 steps


def faults(mode: str, threads: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", STEP, mode, str(threads)], capture_output=True, text=True, check=True, env=env
    )
    return int(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    print(H.cpu_header())
    report = {"pages_touched": PAGES, "threads": args.threads}
    for mode in ("keep", "default"):
        runs = [faults(mode, args.threads) for _ in range(args.repeats)]
        report[mode] = {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "runs": runs}
        print(
            f"{mode:8s} faults over 10 steps: median {statistics.median(runs):8.0f}  min {min(runs):7d}  max {max(runs):7d}  ({PAGES} pages touched)"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
