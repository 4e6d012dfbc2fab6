#!/usr/bin/env python3
"""The int8 kernels at the body's shapes, side by side, on this CPU and under caps that make it run
as a smaller class (ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS; FBGEMM reads
its own FBGEMM_ENABLE_INSTRUCTIONS, so it is measured with and without that one).

    python benchmarks/bench_int8.py [--caps native avx2 avx2-fbgemm] [--rows 300 523 1200 2400]
                                    [--rounds 5] [--threads 2] [--json out.json]

Kernels (engine/fast/linears.py): `fp32` oneDNN on a packed weight (OneDNNLinear, the fp32 path),
`onednn` the u8 x s8 qlinear of Int8Linear (the activations' quantisation included), `fbgemm`
torch's dynamic quantised linear (torch.ops.quantized.linear_dynamic on fbgemm's packed weight,
7-bit activations quantised inside it: LegacyInt8Linear / FbgemmInt8Linear). The shapes are one
decoder layer's products (K in, N out): q/k/v fused 1024 -> 4096, o 2048 -> 1024, gate and up
1024 -> 3072 each, down 3072 -> 1024; M (rows) 300-2400 (a 9 s sentence's step is 523 rows).
Every kernel runs in the same process, in alternation, `--rounds` times; medians are reported
as ms per call and per layer (the five products), and as GOP/s.

Each class is its own subprocess (the caps are read when the kernels load), and prints its CPU
class and flags at the top of its table. On a machine with more than the class, a capped run is an
emulation: the same cores, the smaller instruction set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _harness as H

SHAPES = [
    ("qkv", 1024, 4096, 1),
    ("o", 2048, 1024, 1),
    ("gate/up", 1024, 3072, 2),
    ("down", 3072, 1024, 1),
]  # name, K, N, per layer
AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
CAPS = {
    "native": {},
    "avx2": AVX2,  # oneDNN, ATen and MKL capped; FBGEMM not told
    "avx2-fbgemm": {**AVX2, "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"},  # FBGEMM capped too: an AVX2-only CPU
    "avx2-vnni-fbgemm": {
        **AVX2,
        "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI",
        "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
    },  # Alder Lake-like
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX512"},  # Skylake-SP-like
    "avx512-vnni": {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI",
        "FBGEMM_ENABLE_INSTRUCTIONS": "AVX512_E1",
    },  # Cascade Lake-like
    "avx512-bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX512_E1"},  # Zen 4-like
    "x86-64": {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
}
CAP_VARS = (
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "FBGEMM_ENABLE_INSTRUCTIONS",
)


def measure(rows: list[int], rounds: int, threads: int) -> dict:
    """In this process: ms per call of every kernel at every shape and M (medians of `rounds`)."""
    import torch

    from omnivoice_cli.engine.fast import cpu, linears

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    kernels = {"fp32": None, "onednn": None, "fbgemm": None}
    if not linears.onednn_linear_available():
        kernels.pop("fp32")
    if not linears.onednn_int8_available():
        kernels.pop("onednn")
    out = {
        "class": cpu.info().describe(),
        "flags": list(cpu.info().flags()),
        "half": linears.Int8Linear.half,
        "rows": {},
    }
    for m in rows:
        per = {}
        for name, k, n, _count in SHAPES:
            w = torch.randn(n, k, generator=g) * 0.02
            x = torch.randn(m, k, generator=g)
            layers = {}
            if "fp32" in kernels:
                layers["fp32"] = linears.OneDNNLinear(k, n, bias=False)
                layers["fp32"].weight.data = w
            if "onednn" in kernels:
                layers["onednn"] = linears.Int8Linear(w)
            layers["fbgemm"] = linears.FbgemmInt8Linear(w)
            times = {kind: [] for kind in layers}
            with torch.inference_mode():
                for layer in layers.values():  # warm: packing, primitive caches
                    layer(x), layer(x)
                calls = max(1, int(2e9 / (2 * m * k * n)))  # ~2 GOP per timing
                for _ in range(rounds):
                    for kind, layer in layers.items():
                        t = time.perf_counter()
                        for _ in range(calls):
                            layer(x)
                        times[kind].append((time.perf_counter() - t) / calls * 1e3)
            per[name] = {kind: statistics.median(ts) for kind, ts in times.items()}
        out["rows"][m] = per
    return out


def show(name: str, env: dict, r: dict) -> None:
    capped = " ".join(f"{k}={v}" for k, v in env.items()) or "no caps"
    print(f"\n== {name}: {capped}")
    print(H.cpu_header(env={k: v for k, v in env.items() if k != "FBGEMM_ENABLE_INSTRUCTIONS"}))
    print(f"  (the child saw: {r['class']}; activations on {'8' if r['half'] == 127 else '7'} bits in oneDNN's int8)")
    kinds = list(next(iter(next(iter(r["rows"].values())).values())))
    print(
        f"{'M':>5s} {'product':8s} "
        + " ".join(f"{k + ' ms':>10s}" for k in kinds)
        + "   "
        + " ".join(f"{k + ' GOP/s':>13s}" for k in kinds)
    )
    for m, per in r["rows"].items():
        m = int(m)
        layer = {k: 0.0 for k in kinds}
        ops = 0
        for pname, k, n, count in SHAPES:
            row = per[pname]
            ops += 2 * m * k * n * count
            for kind in kinds:
                layer[kind] += row[kind] * count
            rate = " ".join(f"{2 * m * k * n / row[kind] / 1e6:13.0f}" for kind in kinds)
            print(f"{m:5d} {pname:8s} " + " ".join(f"{row[kind]:10.2f}" for kind in kinds) + "   " + rate)
        rate = " ".join(f"{ops / layer[kind] / 1e6:13.0f}" for kind in kinds)
        print(f"{m:5d} {'layer':8s} " + " ".join(f"{layer[kind]:10.2f}" for kind in kinds) + "   " + rate)
        ratios = []
        if "onednn" in layer:
            ratios.append(f"fbgemm / onednn {layer['fbgemm'] / layer['onednn']:.2f}")
        if "fp32" in layer:
            ratios += [f"fp32 / {kind} {layer['fp32'] / layer[kind]:.2f}" for kind in kinds if kind != "fp32"]
        print(f"{'':5s} {'':8s} per layer: " + ", ".join(ratios))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--caps", nargs="+", choices=list(CAPS), default=["native", "avx2", "avx2-fbgemm"])
    ap.add_argument("--rows", type=int, nargs="+", default=[300, 523, 1200, 2400])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(measure(args.rows, args.rounds, args.threads)), flush=True)
        return 0
    print(H.cpu_header())
    print(f"torch threads {args.threads}, {args.rounds} rounds, rows {args.rows}")
    results = {}
    for name in args.caps:
        env = {k: v for k, v in os.environ.items() if k not in CAP_VARS} | CAPS[name]
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--rows",
            *map(str, args.rows),
            "--rounds",
            str(args.rounds),
            "--threads",
            str(args.threads),
        ]
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"\n== {name}: failed\n{p.stderr[-2000:]}")
            continue
        results[name] = json.loads(line[7:]) | {"env": CAPS[name], "seconds": time.perf_counter() - t}
        show(name, CAPS[name], results[name])
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
