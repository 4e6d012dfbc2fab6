#!/usr/bin/env python3
"""The work between the products, change by change: whole forwards (with the heads) of the 9 s
sentence's 523 positions on the full-size checkpoint, in one process, one load, the variants
alternating (A, B, C, D, A, B, ...); each variant's median and its time against "before", pair by
pair. Variants: the attention (grouped_attention's batched products, or torch's fused
scaled-dot-product kernel in the same dtype: `flash`, measured and not kept) and, on the int8 path, the activations' quantisation (the
four-pass form it replaced, or int8pack's three passes: `quant`).

With `--against REV`, the variants are instead "before" (the layer forward, attention and kernel
linears' methods of git revision REV, loaded beside the checkout's from `git show`) and "after"
(the checkout's), on the same loaded weights; `--profile` then adds one profiled forward of each,
the ops' own time split into the products and the rest.

    python benchmarks/bench_between.py [--ckpt DIR] [--quantize int8 | --dtype bfloat16]
                                       [--rounds 5] [--threads 2] [--against main [--profile]]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as H


def four_passes(x, half):
    """The quantisation before (scaling, rounding, cast to int8, shift), for comparison."""
    import torch

    x = x.float()
    lo, hi = torch.aminmax(x)
    scale = max(-float(lo), float(hi), 1e-30) / half
    return x.mul(1.0 / scale).round_().to(torch.int8).view(torch.uint8).add_(half + 1), scale


# what a revision's code swaps in: (module, class or None, names); the packed weights stay the checkout's
SWAPPED = (
    ("narrow", "LeanRMSNorm", ("forward",)),
    ("linears", "Int8Linear", ("quantize", "run", "gated", "add", "forward")),
    ("linears", "BF16Linear", ("forward", "binary", "add", "gated")),
)


# where a module lives in the engine's folders (a revision before them had it at the top)
FOLDERS = {"narrow": "fast", "linears": "fast", "backbone": "model"}


def engine_at(rev: str, into: Path):
    """The package's engine modules at git revision `rev` (its folders kept), imported as the
    package `engine_<rev>`."""
    name = "engine_" + "".join(c if c.isalnum() else "_" for c in rev)
    root = into / name
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "omnivoice_cli/engine/"],
        cwd=H.ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for f in files:
        if f.endswith(".py"):
            text = subprocess.run(["git", "show", f"{rev}:{f}"], cwd=H.ROOT, check=True, capture_output=True, text=True)
            target = root / Path(f).relative_to("omnivoice_cli/engine")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.stdout)
    sys.path.insert(0, str(into))

    def module(short: str):
        folder = root / FOLDERS.get(short, "")
        where = f"{FOLDERS[short]}.{short}" if short in FOLDERS and folder.is_dir() else short
        return importlib.import_module(f"{name}.{where}")

    return module


def code_of(model, modules) -> dict:
    """The layer forward, attention and kernels' methods that `modules` (module name -> module)
    give the loaded model: its LayerPath (model.use_layer_path) of the halves and RoPE, and the
    narrow attention's methods (a revision before NarrowAttention: the plain Attention's, which
    carried the narrow paths' switches)."""
    from omnivoice_cli.engine.model.backbone import LayerPath

    narrow = modules("narrow")
    code: dict = {
        ("model", "layer_path"): LayerPath(
            narrow.stacked_rope, narrow.attention_inputs, narrow.attention_output_and_mlp
        )
    }
    attention = getattr(narrow, "NarrowAttention", None) or modules("backbone").Attention
    for n in ("attend", "qkv"):
        code[("narrow.NarrowAttention", n)] = attention.__dict__[n]
    for module, cls, names in SWAPPED:
        for n in names:
            code[(f"{module}.{cls}", n)] = getattr(modules(module), cls).__dict__[n]
    return code


def against(args, engine, batch, c, job) -> None:
    """before (revision args.against) and after (the checkout), alternated on one loaded model."""

    from omnivoice_cli.engine.fast import linears, narrow
    from omnivoice_cli.engine.model import backbone

    here = {"backbone": backbone, "narrow": narrow, "linears": linears}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {
            "before": code_of(engine.model, engine_at(args.against, Path(tmp))),
            "after": code_of(engine.model, here.get),
        }

    def use(code) -> None:
        for (owner, name), value in code.items():
            if owner == "model":
                engine.model.use_layer_path(value)
            else:
                module, cls = owner.split(".")
                setattr(getattr(here[module], cls), name, value)

    def forward(name) -> None:
        use(codes[name])
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])

    alternate(codes, forward, args.rounds)
    for _ in range(2 if args.profile else 0):  # alternated too
        for name in codes:
            use(codes[name])
            profiled(engine, batch, c, job, name)
    use(codes["after"])


ATTENTION = ("aten::baddbmm", "aten::bmm", "aten::_softmax", "aten::_scaled_dot_product_flash_attention_for_cpu")


def profiled(engine, batch, c, job, name: str, forwards: int = 3) -> None:
    """`forwards` profiled forwards: the ops' own time a forward in the linear products, the
    attention's (its batched products and softmax) and the rest (the passes between), the
    rest's largest ops (ms a forward, calls a forward)."""
    from bench_profile import PRODUCTS
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(forwards):
            engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]

    def ms(keys) -> float:
        return sum(e.self_cpu_time_total for e in events if e.key in keys) / 1e3 / forwards

    rest = sorted((e for e in events if e.key not in PRODUCTS + ATTENTION), key=lambda e: -e.self_cpu_time_total)
    calls = sum(e.count for e in rest) / forwards
    top = ", ".join(
        f"{e.key.split('::')[-1]} {e.self_cpu_time_total / 1e3 / forwards:.1f} ({e.count / forwards:.0f})"
        for e in rest[:8]
    )
    print(
        f"  {name} profiled: products {ms(PRODUCTS):.1f} ms, attention {ms(ATTENTION):.1f} ms, the rest "
        f"{ms({e.key for e in rest}):.1f} ms in {calls:.0f} calls; {top}",
        flush=True,
    )


def alternate(variants: dict, forward, rounds: int) -> None:
    """Each variant warmed, then `rounds` rounds of one forward each; medians and pairs against the
    first, of the wall time and of the process's CPU time (on a shared machine the CPU time at 1
    thread leaves out the time the other processes held the core; at 2 the waits of one thread for
    the other still count)."""
    import torch

    first = next(iter(variants))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}

    def timed(name) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        forward(name)
        return time.perf_counter() - t, time.process_time() - c

    with torch.inference_mode():
        for name in variants:
            forward(name)  # warm each
        for r in range(rounds):
            for name in variants:
                times[name].append(timed(name))
            print(
                f"  round {r + 1}: "
                + ", ".join(f"{n} {t[-1][0]:.2f} s ({t[-1][1]:.2f} cpu)" for n, t in times.items()),
                flush=True,
            )
    for name, ts in times.items():
        for i, what in enumerate(("wall", "cpu")):
            mine, base = [t[i] for t in ts], [t[i] for t in times[first]]
            pairs = [round(t / b, 3) for t, b in zip(mine, base)]
            print(
                f"  {name:7s} {what:4s} median {statistics.median(mine):.2f} s, against {first} "
                f"{statistics.median(pairs):.3f} (pairs {pairs})"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--against", default=None, help="a git revision: its code before, the checkout's after")
    ap.add_argument("--profile", action="store_true", help="with --against: one profiled forward of each")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    from omnivoice_cli.engine.fast import int8pack, linears, narrow
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.generation import pack
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    hardware = Hardware(device="cpu", dtype=args.dtype, quantize=args.quantize)
    engine = Engine.load(str(args.ckpt or H.default_ckpt()), hardware)
    job = engine.prepare(Request(text=H.SENTENCE_9S, lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    grouped = narrow.grouped_attention

    def fused(q, k, v, dtype):  # grouped_attention's inputs and result, through the fused kernel
        return F.scaled_dot_product_attention(q[None].to(dtype), k[None].to(dtype), v[None].to(dtype), enable_gqa=True)[
            0
        ]

    print(H.cpu_header())
    print(f"path: dtype {engine.dtype}, quantize {args.quantize or 'none'}, {args.threads} threads", flush=True)
    if args.against:
        with torch.inference_mode():
            against(args, engine, batch, c, job)
        print(H.cpu_header().splitlines()[-1])  # the load at the end
        return 0
    variants = {"before": (False, four_passes), "flash": (True, four_passes)}
    if args.quantize:
        variants |= {"quant": (False, int8pack.quantize_activations), "both": (True, int8pack.quantize_activations)}

    def forward(name):
        flash, quantize = variants[name]
        narrow.grouped_attention = fused if flash else grouped
        linears.quantize_activations = quantize
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])

    alternate(variants, forward, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
