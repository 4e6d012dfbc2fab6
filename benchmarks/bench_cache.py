#!/usr/bin/env python3
"""The step cache against the same engine without it, in one process (one load, one reference
encoded), generate() runs alternating: a clone of a reference of --ref-seconds and an auto-voice
sentence, at --steps steps, greedy settings, the same precision for both (--quantize).

    python benchmarks/bench_cache.py [--ckpt DIR] [--steps 16] [--repeats 2] [--threads 2]
                                     [--quantize auto|int8|none] [--ref-seconds 6]

Reported: generate() seconds per run and their medians, the ratio without / with the cache, and
the forwards' positions (what the cache leaves out).
"""

import json
import sys
import time
from pathlib import Path

import _harness as H
from _ours import REF_TEXT, synthetic_reference


def main() -> int:
    ap = H.engine_args(__doc__)
    ap.add_argument("--quantize", default="auto", help="auto, int8 or none (both runs the same)")
    ap.add_argument("--ref-seconds", type=float, default=6.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request

    q = None if args.quantize == "none" else args.quantize
    ckpt, engine = H.cpu_engine(args, **({"quantize": q} if q else {}))
    ref = engine.voice_from_audio(synthetic_reference(args.ref_seconds), REF_TEXT)
    print(f"checkpoint {ckpt}, {args.threads} threads, quantize {args.quantize}, {args.steps} steps", flush=True)
    gen = GenerationConfig(num_step=args.steps, position_temperature=0.0, class_temperature=0.0)
    cases = {"clone": ref, "auto voice": None}
    times = {(c, on): [] for c in cases for on in (False, True)}
    for rep in range(args.repeats):
        for case, voice in cases.items():
            for on in (False, True):
                req = Request(text=H.SENTENCE_9S, lang="en", ref=voice, generation=gen.replace(step_cache=on))
                t0 = time.perf_counter()
                engine.generate([req])
                times[(case, on)].append(time.perf_counter() - t0)
                print(f"  {case:10s} cache {'on ' if on else 'off'} {times[(case, on)][-1]:7.1f} s", flush=True)
    out = {}
    for case in cases:
        off, on = times[(case, False)], times[(case, True)]
        pairs = [round(a / b, 2) for a, b in zip(off, on)]
        job = engine.prepare(Request(text=H.SENTENCE_9S, lang="en", ref=cases[case], generation=gen))
        print(
            f"{case}: generate() {H.median(off):.1f} s without, {H.median(on):.1f} s with the cache: "
            f"{H.median(off) / H.median(on):.2f}x (pairs {pairs}); prompt {job.canvas.target_start} positions, "
            f"target {job.canvas.target_len}"
        )
        out[case] = {
            "off": off,
            "on": on,
            "pairs": pairs,
            "prompt": job.canvas.target_start,
            "target": job.canvas.target_len,
        }
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
