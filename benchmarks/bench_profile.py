#!/usr/bin/env python3
"""Where a step's time goes: one sentence's forwards on the full-size checkpoint under torch's
profiler, the ops ranked by their own time, and the share of the linear products.

    python benchmarks/bench_profile.py [--ckpt DIR] [--quantize int8|auto] [--dtype bfloat16]
                                       [--int8-kernel onednn|fbgemm] [--forwards 3] [--threads 2]
                                       [--shapes aten::copy_ ...]

Beside the split, the linear products' rate: their operations a forward (2 x rows x in x out for
each of the body's and the heads' products) over their own time in the profiled forwards ("in
place"), and the same products run alone on inputs of the same rows, back to back: every layer's
weight in turn, as a forward reads them (from memory), and one weight repeated (from cache); wall
time, medians (CPU time: means) of `--alone-repeats` rounds, the shapes alternating: TOP/s (int8; the heads are bf16)
or TFLOP/s, per shape and for the whole forward, and in place / alone. `--clock cpu` measures the
same in the process's CPU time (unprofiled forwards, each product's time taken around its kernel's
call), for a shared machine, where wall time measures the other processes as much as this one.

`--reorders`: one more forward under oneDNN's verbose output, counting the weights repacked at run
time (a reorder, or a brgemm product on a plain weight; none where the packing at load holds).

`--shapes OP`: that op's calls by their input shapes too (where the copies come from: a row's
slice copied inside a batched product shows as [kv, D, L], a rounding as [heads, N, D]).

Run it under caps to see another class (e.g. `ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
FBGEMM_ENABLE_INSTRUCTIONS=AVX2` for an AVX2-only CPU). The profiler adds a little to every op;
the shares are what to read.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _harness as H

# the ops that are the linear products, on every path (fp32 oneDNN, bf16, oneDNN int8, FBGEMM, torch's)
PRODUCTS = (
    "mkldnn::_linear_pointwise",
    "onednn::qlinear_pointwise",
    "quantized::linear_dynamic",
    "aten::addmm",
    "aten::mm",
    "aten::linear",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--int8-kernel", default=None, choices=["onednn", "fbgemm"])
    ap.add_argument("--forwards", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--alone-repeats", type=int, default=5, help="rounds of the products run alone (0: none)")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: also the split and the rates in CPU time (the process's), unprofiled forwards",
    )
    ap.add_argument(
        "--reorders", action="store_true", help="count the weights oneDNN repacks in one forward (its verbose output)"
    )
    ap.add_argument("--shapes", nargs="*", default=[], metavar="OP", help="these ops' calls by input shape")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from omnivoice_cli.engine.fast import fusedpath
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.generation import pack
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    H.force_int8_kernel(args.int8_kernel)
    ckpt = args.ckpt or H.default_ckpt()
    kw = {"quantize": args.quantize} if args.quantize else {}
    named_kernels()  # before the load: the layers keep bound methods of the kernels (a softmax)
    engine = Engine.load(str(ckpt), Hardware(device="cpu", dtype=args.dtype, **kw))
    job = engine.prepare(Request(text=H.SENTENCE_9S, lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])  # warm
        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=bool(args.shapes)) as prof:
            for _ in range(args.forwards):
                engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
        wall = (time.perf_counter() - t) / args.forwards
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    print(H.cpu_header())
    layer = engine.model.llm.layers[0]
    print(
        f"path: dtype {engine.dtype}, quantize {args.quantize or 'none'}, down_proj {type(layer.mlp.down_proj).__name__}, "
        f"{batch.input_ids.shape[-1] if hasattr(batch, 'input_ids') else '?'} positions; "
        f"{wall:.3f} s a forward with the heads (profiled), {args.threads} threads; "
        f"fused kernels {'on' if fusedpath.installed(engine.model) else 'off'}"
    )
    print(f"{'op':44s} {'self ms/fwd':>11s} {'share':>6s} {'calls/fwd':>9s}")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
        ms = e.self_cpu_time_total / 1e3 / args.forwards
        print(f"{e.key[:44]:44s} {ms:11.1f} {e.self_cpu_time_total / total:6.1%} {e.count / args.forwards:9.0f}")
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    print(
        f"linear products: {products / total:.1%} of the ops' own time; the rest {(total - products) / 1e3 / args.forwards:.1f} ms a forward "
        f"({1 - products / total:.1%} outside the products)"
    )
    if args.alone_repeats > 0:
        rows = int(batch.input_ids.shape[-1]) if hasattr(batch, "input_ids") else job.canvas.target_len
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        in_place_ms = products / 1e3 / args.forwards
        if args.clock == "cpu":
            in_place_ms = cpu_split(engine, batch, job, c, args.forwards)
        rates(engine.model, rows, job.canvas.target_len, in_place_ms, args.alone_repeats, clock)
    if args.reorders:
        repacked, products = count_repacks(
            lambda: engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
        )
        print(f"oneDNN in one forward: {products} linear products, {len(repacked)} weights repacked at run time")
        for line in repacked[:5]:
            print("  " + line)
    for op in args.shapes:
        rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == op]
        print(f"{op} by input shapes: self ms/fwd, calls/fwd")
        for e in sorted(rows, key=lambda e: -e.self_cpu_time_total)[: args.top]:
            print(
                f"  {e.self_cpu_time_total / 1e3 / args.forwards:9.1f} {e.count / args.forwards:6.0f}  {e.input_shapes}"
            )
    return 0


def _products(model, rows: int, heads_rows: int) -> list[tuple[str, list, int, int, int]]:
    """The forward's linear products by shape: (name, the modules (one a layer), rows, in, out)."""
    layers = list(model.llm.layers)
    found = []
    for name in ("qkv", "o", "gate", "up", "down"):
        mods = []
        for layer in layers:
            a, m = layer.self_attn, layer.mlp
            fused = getattr(a, "fused_qkv", None)
            if name == "qkv":
                mods += [fused.linear] if fused is not None else [a.q_proj, a.k_proj, a.v_proj]
            else:
                mods.append({"o": a.o_proj, "gate": m.gate_proj, "up": m.up_proj, "down": m.down_proj}[name])
        if name == "qkv" and getattr(layers[0].self_attn, "fused_qkv", None) is None:  # three shapes
            for part, at in (("q", 0), ("k", 1), ("v", 2)):
                ms = mods[at::3]
                found.append((part, ms, rows, ms[0].in_features, ms[0].out_features))
            continue
        found.append((name, mods, rows, mods[0].in_features, mods[0].out_features))
    heads = model.audio_heads
    return [*found, ("heads", [heads], heads_rows, heads.in_features, heads.out_features)]


def _alone_call(module, x):
    """The product of `module` alone on x, as the forward calls its kernel: (the call, the unit).
    int8 on oneDNN: the product of codes already quantised (the op the profile counts)."""
    import torch

    quantize = getattr(module, "quantize", None)
    if quantize is not None and hasattr(module, "run"):  # linears.Int8Linear
        q = quantize(x)
        return (lambda: module.run(q)), "TOP/s"
    if getattr(module, "kind", "").startswith("int8"):
        return (lambda: module(x)), "TOP/s"  # torch's quantised op quantises inside
    if getattr(module, "kind", "") == "bf16":
        xb = x.to(torch.bfloat16)
        return (lambda: module(xb)), "TFLOP/s"
    return (lambda: module(x)), "TFLOP/s"


def count_repacks(forward) -> tuple[list[str], int]:
    """Run `forward` under oneDNN's verbose output (this process's stdout, caught at its file
    descriptor): (the executions that repack a weight: a reorder, or a brgemm product reading a
    plain 2-D weight, which it copies into blocks at every call; the 2-D products run)."""
    import os
    import re
    import tempfile

    import torch

    plain = re.compile(r"\bwei:\w+:\w*:blocked:(ab|ba):")
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+") as caught, torch.inference_mode():
        saved = os.dup(1)
        os.dup2(caught.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                forward()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        caught.seek(0)
        lines = caught.read().splitlines()
    found, products = [], 0
    for line in lines:
        f = line.split(",")
        if len(f) < 11 or f[2:4] != ["primitive", "exec"]:
            continue
        two_d = f[5] == "inner_product" or (f[5] == "matmul" and f[-2].count("x") == 2)
        products += two_d
        if f[5] == "reorder" or (two_d and "brg" in f[6] and plain.search(line)):
            found.append(line)
    return found, products


def named_kernels() -> None:
    """The fused kernels' calls (engine/fast/kernels.py, through ctypes: no torch op of their own)
    recorded by the profiler under `omnivoice::<name>`, so that they are ranked among the ops."""
    import functools

    from torch.profiler import record_function

    from omnivoice_cli.engine.fast import kernels

    for name, f in list(vars(kernels.Kernels).items()):  # every kernel, none missed
        if name.startswith("_") or not callable(f):
            continue

        def named(*a, _f=f, _name=f"omnivoice::{name}", **k):
            with record_function(_name):
                return _f(*a, **k)

        setattr(kernels.Kernels, name, functools.wraps(f)(named))


# the kernels' entry points (engine/torchprivate.py) a forward's linear products go through
_ENTRIES = ("linear", "linear_binary", "qlinear", "qlinear_add", "quantized_linear_dynamic")


def cpu_split(engine, batch, job, c: int, forwards: int) -> float:
    """Unprofiled forwards with the heads in CPU time (the process's, every thread's): each product
    call's time taken around the kernel's entry point. Prints the split; returns the products' ms a
    forward. (The plain fp32 path's nn.Linears go through none of them: 0 there.)"""
    import torch

    from omnivoice_cli.engine import torchprivate as tp

    spent = [0.0]
    originals = {name: getattr(tp, name) for name in _ENTRIES}

    def timed(f):
        def call(*a, **k):
            t = time.process_time()
            out = f(*a, **k)
            spent[0] += time.process_time() - t
            return out

        return call

    for name, f in originals.items():
        setattr(tp, name, timed(f))
    try:
        with torch.inference_mode():
            t = time.process_time()
            for _ in range(forwards):
                engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
            total = (time.process_time() - t) / forwards
    finally:
        for name, f in originals.items():
            setattr(tp, name, f)
    products = spent[0] / forwards
    print(
        f"CPU time, {forwards} unprofiled forwards: {total:.3f} s a forward, the products {products:.3f} s, "
        f"{1 - products / total:.1%} outside the products"
    )
    return products * 1e3


def rates(model, rows: int, heads_rows: int, in_place_ms: float, repeats: int, clock=time.perf_counter) -> None:
    """Print the products' rate in place (their profiled time a forward, `in_place_ms`) and alone:
    each shape's products back to back, every layer's weight in turn (as a forward reads them:
    from memory) and one weight repeated (from cache)."""
    import statistics

    import torch

    g = torch.Generator().manual_seed(0)
    shapes = []
    for name, mods, m, k, n in _products(model, rows, heads_rows):
        x = torch.randn(m, k, generator=g)
        calls = [_alone_call(mod, x) for mod in mods]
        shapes.append((name, [c for c, _ in calls], calls[0][1], 2.0 * m * k * n, m, k, n))
    cycled: dict[str, list[float]] = {s[0]: [] for s in shapes}
    hot: dict[str, list[float]] = {s[0]: [] for s in shapes}
    with torch.inference_mode():
        for shape in shapes:
            for call in shape[1]:
                call()  # the primitives made
        for _ in range(repeats):
            for name, calls, *_ in shapes:
                t = clock()
                for call in calls:
                    call()
                cycled[name].append((clock() - t) / len(calls))
                reps = max(1, min(len(calls), 8))
                t = clock()
                for _ in range(reps):
                    calls[0]()
                hot[name].append((clock() - t) / reps)
    unit = shapes[0][2]
    cpu = clock is time.process_time
    # the process's CPU time counts the other threads' at the scheduler's ticks: a mean of the rounds, not a median
    mid = statistics.mean if cpu else statistics.median
    kind = "CPU time, means" if cpu else "wall time, medians"
    print(f"the products' rate ({unit}; alone: {kind} of {repeats} rounds)")
    head = f"  {'product':8s} {'rows x in x out':>22s} {'calls/fwd':>9s} {'each layer':>10s} {'ms':>7s} {'one weight':>10s} {'ms':>7s}"
    print(head)
    total_ops = alone_s = hot_s = 0.0
    for name, calls, _u, ops, m, k, n in shapes:
        c, h = mid(cycled[name]), mid(hot[name])
        total_ops, alone_s, hot_s = total_ops + ops * len(calls), alone_s + c * len(calls), hot_s + h * len(calls)
        print(
            f"  {name:8s} {f'{m} x {k} x {n}':>22s} {len(calls):9d} {ops / c / 1e12:10.2f} {c * 1e3:7.3f} {ops / h / 1e12:10.2f} {h * 1e3:7.3f}"
        )
    in_place = total_ops / (in_place_ms / 1e3) / 1e12
    alone, hot_rate = total_ops / alone_s / 1e12, total_ops / hot_s / 1e12
    print(
        f"  a forward's products: {total_ops / 1e9:.1f} G operations; in place {in_place_ms:.1f} ms = {in_place:.2f} {unit}; "
        f"alone, each layer's weight {alone_s * 1e3:.1f} ms = {alone:.2f}, one weight repeated {hot_s * 1e3:.1f} ms = {hot_rate:.2f}"
    )
    print(
        f"  in place at {in_place / alone:.0%} of the alone rate (each layer's weight), {in_place / hot_rate:.0%} of one weight's"
    )


if __name__ == "__main__":
    sys.exit(main())
