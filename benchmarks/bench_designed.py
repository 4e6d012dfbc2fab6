#!/usr/bin/env python3
"""A designed voice cloned against designed afresh on every request (docs/voices.md), in one
process, generate() runs alternating: the same sentence spoken (a) by its voice-design items and a
seed, as every request was before a designed voice was kept, and (b) by cloning the voice prompt
rendered once from those items (app/voices/design.py: what `voice add --instruct`, the built-in
names and a `--cast` member's later lines do), each without and with the step cache (whose
prompt K/V reuse is made for a cloned prompt). The prompt lengthens the canvas: this measures
what that costs per step.

    python benchmarks/bench_designed.py [--ckpt DIR] [--steps 16] [--repeats 2] [--threads 2]

Reported: generate() seconds and s/step per run, their medians, and the ratios cloned / afresh
(each with the cache off and on) and off / on; the canvas positions of each case.
"""

import dataclasses
import json
import sys
import time
from pathlib import Path

import _harness as H

ITEMS = "female, low pitch, british accent"
SENTENCE = "The train to the city leaves at seven in the evening, so there is plenty of time left for tea."


def main() -> int:
    ap = H.engine_args(__doc__)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from omnivoice_cli.app.voices.design import BUILTIN_SEED, Design, default_sample
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    ckpt, engine = H.cpu_engine(args)
    gen = GenerationConfig(num_step=args.steps, position_temperature=0.0, class_temperature=0.0)
    t0 = time.perf_counter()
    # the built-in names' design (its sample's length is what the cost depends on), at --steps
    design = Design(ITEMS, BUILTIN_SEED, default_sample("en"), "en")
    [made] = engine.generate([dataclasses.replace(design.request(), generation=gen)])
    prompt = VoicePrompt(made.tokens, engine.plan(design.request()).pieces[0].text, None)
    print(
        f"checkpoint {ckpt}, {args.threads} threads, {args.steps} steps; the voice rendered once in "
        f"{time.perf_counter() - t0:.1f} s ({prompt.codes.shape[-1]} frames)",
        flush=True,
    )
    cases = {
        "afresh": dict(instruct=ITEMS),
        "cloned": dict(ref=prompt),
    }
    times = {(c, on): [] for c in cases for on in (False, True)}
    for rep in range(args.repeats):
        for case, given in cases.items():
            for on in (False, True):
                req = Request(text=SENTENCE, lang="en", seed=rep, generation=gen.replace(step_cache=on), **given)
                t0 = time.perf_counter()
                engine.generate([req])
                times[(case, on)].append(time.perf_counter() - t0)
                print(
                    f"  {case:7s} cache {'on ' if on else 'off'} {times[(case, on)][-1] / args.steps:6.3f} s/step",
                    flush=True,
                )
    out: dict = {"steps": args.steps, "threads": args.threads, "cpu": H.cpu_header()}
    for case, given in cases.items():
        job = engine.prepare(Request(text=SENTENCE, lang="en", generation=gen, **given))
        off, on = H.median(times[(case, False)]), H.median(times[(case, True)])
        out[case] = {
            "off_s_per_step": off / args.steps,
            "on_s_per_step": on / args.steps,
            "positions": job.canvas.target_start + job.canvas.target_len,
            "target": job.canvas.target_len,
        }
        print(
            f"{case}: {off / args.steps:.3f} s/step without the cache, {on / args.steps:.3f} with it "
            f"({off / on:.2f}x); canvas {out[case]['positions']} positions, target {job.canvas.target_len}"
        )
    for on in (False, True):
        pairs = [round(c / a, 2) for c, a in zip(times[("cloned", on)], times[("afresh", on)])]
        ratio = H.median(times[("cloned", on)]) / H.median(times[("afresh", on)])
        out[f"cloned_over_afresh_cache_{'on' if on else 'off'}"] = ratio
        print(f"cloned / afresh, cache {'on' if on else 'off'}: {ratio:.2f}x (pairs {pairs})")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
