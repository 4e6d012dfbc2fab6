#!/usr/bin/env python3
"""One ~9 s sentence, side by side with the reference (when its oracle venv exists).

    python benchmarks/bench_say.py [--ckpt DIR] [--steps 32 16] [--repeats 3] [--whole-steps 8]
                                   [--bf16] [--quantize int8 auto] [--int8-kernels onednn fbgemm]
                                   [--no-base] [--threads 2]
                                   [--device cuda --dtype bfloat16]

Per-step figures: our engine and the reference each run generate() in their own subprocess, in
alternation, `--repeats` times; medians are reported (s/step is the median forward). Whole-command
figures time the entire process at `--whole-steps`: `omnivoice say ... -o x.wav` against a script
doing the same with the reference (import, load, generate, write). Greedy settings (identical
tokens are checked by the parity tests; here the target lengths are compared).

The whole-command lines also split each run: the model's load and generation (from `say --json` and
the reference script's RESULT line) and the rest (interpreter, imports, exit).

Rows: ours at --dtype (fp32 on the CPU by default; --no-base skips it), and with --bf16,
--quantize int8 and --compile; each pair of runs' ratio to the reference is printed (the spread).
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
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument(
        "--ref-seconds", type=float, default=0, help="clone a synthetic reference of this length (no reference run)"
    )
    H.add_device_args(ap)
    H.add_variant_args(ap)
    ap.add_argument("--out", type=Path, default=None, help="write all figures as JSON here")
    ap.add_argument(
        "--unfused",
        action="store_true",
        help="whole commands: also each row without the fused kernels (OMNIVOICE_KERNELS=off), alternating",
    )
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    ref = H.have_reference() and not args.no_reference and args.device == "cpu" and not args.ref_seconds
    texts = [H.SENTENCE_9S]
    variants = H.variants(args)
    if args.ref_seconds:  # per step only: the whole command would need the recording on disk
        variants = [(name, [*extra, "--ref-seconds", str(args.ref_seconds)]) for name, extra in variants]
        args.whole_steps = 0
    out = {"ckpt": str(args.ckpt), "threads": args.threads, "per_step": {}, "whole": {}}
    print(H.cpu_header())
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
        print(f"\n{steps} steps\n{H.table_header()}")
        table = H.table(runs)
        for name, med in table.items():
            print(H.fmt_row(name, med) + f"   s/step runs {[round(r['s_per_step'], 2) for r in med['runs']]}")
        if ref:
            for name, _ in variants:
                pairs = H.pair_ratios(runs["reference"], runs[name])
                print(H.summary(name, table["reference"], table[name]) + f" (per-step pairs {pairs})")
        if H.fast_vs_balanced(table):
            print(H.fast_vs_balanced(table))
        out["per_step"][steps] = table
    if args.whole_steps:
        rows = H.cli_variants(variants)
        if args.unfused:  # the same rows on torch's ops between the products (engine/fast/kernels.py off)
            rows = [r for name, extra in rows for r in ((name, extra), (f"{name} unfused", extra))]
        whole(args, rows, ref, texts, out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


def whole(args, variants, ref: bool, texts: list[str], out: dict) -> None:
    """`omnivoice say` against the reference's script, whole processes, alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "omnivoice_cli.cli",
            "say",
            H.SENTENCE_9S,
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
            "--json",  # the report (load and generation seconds) on stdout, nothing else
            "-o",
            f"{tmp}/ours.wav",
        ]
        runs = {name: [] for name, _ in variants}
        if ref:
            runs["reference"] = []
        for rep in range(args.repeats):
            for name, extra in variants:
                env = {"OMNIVOICE_KERNELS": "off"} if name.endswith(" unfused") else None
                runs[name].append(H.run_whole(cmd + extra, env))
                print(f"  whole command, repeat {rep + 1}: {name:14s} {parts(runs[name][-1])}", flush=True)
            if ref:
                rcmd = H.reference_cmd(args, texts, args.whole_steps, ["--output", f"{tmp}/ref.wav"])
                runs["reference"].append(H.run_whole(rcmd))
                print(
                    f"  whole command, repeat {rep + 1}: {'reference':14s} {parts(runs['reference'][-1])}", flush=True
                )
        H.report_whole(
            {name: [r["wall"] for r in rs] for name, rs in runs.items()}, args.whole_steps, args.repeats, out
        )
        print("  within the whole command (medians): the model's load, generation (steps, decode, post-processing;")
        print("  ours: and writing), the rest (interpreter, imports, tokenizer, exit)")
        for name, rs in runs.items():
            med = {k: H.median([split(r)[k] for r in rs]) for k in ("load", "generate", "rest")}
            print(
                f"  {name:14s} load {med['load']:6.1f} s, generate {med['generate']:6.1f} s, rest {med['rest']:6.1f} s"
            )
            out["whole"][name]["parts"] = [split(r) for r in rs]


def split(r: dict) -> dict:
    """A whole run's wall time in three: the model's load, generation, the rest."""
    load = r.get("load_seconds", float("nan"))
    gen = r.get("generate_seconds", r.get("seconds", float("nan")))
    return {"wall": r["wall"], "load": load, "generate": gen, "rest": r["wall"] - load - gen}


def parts(r: dict) -> str:
    """One run's wall time and its split, for the line printed as it ends."""
    s = split(r)
    return f"{s['wall']:7.1f} s (load {s['load']:.1f}, generate {s['generate']:.1f}, rest {s['rest']:.1f})"


if __name__ == "__main__":
    sys.exit(main())
