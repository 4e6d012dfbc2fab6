#!/usr/bin/env python3
"""Where the whole command's time goes outside the steps: one fresh process per run, timed part by
part (the interpreter's start, importing torch, the rest of the imports, loading the model, the
text's preparation into a canvas, the steps, the decode and post-processing, writing the file).

    python benchmarks/bench_startup.py [--ckpt DIR] [--steps 8] [--repeats 3] [--threads 2]
                                       [--quantize int8|auto] [--step-cache]

Medians of --repeats runs (each its own process, so nothing is warm but the page cache). The parts
add up to the process's wall time but for the interpreter's exit.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _harness as H

CHILD = r"""
import json, sys, time
t = {"start": time.perf_counter()}
import torch
t["torch"] = time.perf_counter()
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import run_jobs
from omnivoice_cli.engine.pipeline import Engine, Request
from omnivoice_cli.engine.hardware import Hardware
import soundfile
t["imports"] = time.perf_counter()
a = json.loads(sys.argv[1])
kw = {"quantize": a["quantize"]} if a["quantize"] else {}
engine = Engine.load(a["ckpt"], Hardware(device="cpu", threads=a["threads"], **kw))
t["load"] = time.perf_counter()
gen = GenerationConfig(num_step=a["steps"], position_temperature=0.0, step_cache=a["step_cache"])
req = Request(text=a["text"], lang="en", generation=gen)
job = engine.prepare(req)
t["text"] = time.perf_counter()
cfg = engine.cfg
run_jobs(engine.model, [job], mask_id=cfg.audio_mask_id, max_batch_size=16, max_packed_tokens=cfg.max_packed_tokens)
t["steps"] = time.perf_counter()
result = engine.render(req, job)
t["decode"] = time.perf_counter()
soundfile.write(a["out"], result.audio, result.sample_rate)
t["write"] = time.perf_counter()
print("RESULT " + json.dumps(t), flush=True)
"""
PARTS = ("torch", "imports", "load", "text", "steps", "decode", "write")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--step-cache", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    ckpt = args.ckpt or H.default_ckpt()
    print(H.cpu_header())
    print(f"checkpoint {ckpt}, {args.threads} threads, {args.steps} steps, quantize {args.quantize or 'none'}")
    runs = []
    for _ in range(args.repeats):
        spec = {
            "ckpt": str(ckpt),
            "steps": args.steps,
            "threads": args.threads,
            "quantize": args.quantize,
            "step_cache": args.step_cache,
            "text": H.SENTENCE_9S,
            "out": "/tmp/bench_startup.wav",
        }
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(H.ROOT)},
        )
        wall = time.perf_counter() - t0
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(p.stderr[-3000:])
        t = json.loads(line[7:])
        # the child's clock starts at its first line: what came before is the interpreter's start
        parts = {"interpreter": None}
        prev = t["start"]
        for name in PARTS:
            parts[name] = t[name] - prev
            prev = t[name]
        parts["interpreter"] = wall - (t["write"] - t["start"])  # start and exit, outside the child's clock
        parts["wall"] = wall
        runs.append(parts)
    med = {k: H.median([r[k] for r in runs]) for k in runs[0]}
    for k, v in med.items():
        print(f"  {k:12s} {v:6.2f} s   runs {[round(r[k], 2) for r in runs]}")
    if args.out:
        args.out.write_text(json.dumps({"median": med, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
