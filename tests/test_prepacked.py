"""The body's products read their weights in the layout they were packed in at load: one forward of
the tiny checkpoint on the bf16 body and on the int8 body (oneDNN's u8 x s8 kernel), under oneDNN's
verbose output, runs no reorder and no product on a plain (unpacked) weight. A weight in another
layout than the product's is reordered at every call (AMX's bf16 body did: benchmarks/speed-log.md).
Run in a subprocess (oneDNN's verbose output is the process's stdout); each path is checked where
it runs on this CPU and skipped with the reason elsewhere. A control first shows that the count
sees a repack where there is one (a product on a plain weight, oneDNN's own int8 packing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, TINY_CKPT

# one forward per path, the verbose output of each after its "@@ <path>" line; "@@ skip <path>:
# <reason>" where the path does not run here
SCRIPT = r"""
import sys
import torch
from omnivoice_cli.engine import torchprivate as tp
from omnivoice_cli.engine.fast import cpu, linears
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.generation import pack
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

torch.set_num_threads(2)
verbose = lambda: torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
bf16 = cpu.bf16_runs() and linears.onednn_linear_available()
int8 = linears.onednn_int8_available()
paths = {"bf16": (bf16, "oneDNN runs no bf16 linear on this CPU", dict(dtype="bfloat16")),
         "int8": (int8, "this torch has no oneDNN int8 linear", dict(quantize="int8", int8_kernel="onednn"))}
print("@@ control-bf16" if bf16 else "@@ skip control-bf16: no bf16", flush=True)
if bf16:
    with verbose():
        tp.linear(torch.randn(8, 64).bfloat16(), torch.randn(64, 64).bfloat16(), None)
print("@@ control-int8" if int8 else "@@ skip control-int8: no int8", flush=True)
if int8:
    with verbose():
        tp.qlinear_prepack(torch.randint(-127, 127, (64, 64), dtype=torch.int8))
for name, (runs, why, kw) in paths.items():
    if not runs:
        print(f"@@ skip {name}: {why}", flush=True)
        continue
    engine = Engine.load(sys.argv[1], Hardware(device="cpu", threads=2, **kw))
    job = engine.prepare(Request(text="The old clockmaker opened the wooden shutters.", lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])  # primitives made
        print(f"@@ {name}", flush=True)
        with verbose():
            engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])
    sys.stdout.flush()
print("@@ end", flush=True)
"""

_PLAIN = re.compile(r"\bwei:\w+:\w*:blocked:(ab|ba):")  # a 2-D weight in its plain layout


def repacks(lines: list[str]) -> list[str]:
    """The executions among oneDNN verbose `lines` that repack a weight: a reorder, or a brgemm
    product reading a plain 2-D weight (it copies it into blocks at every call). The attention's
    batched products (3-D) read activations, not weights: not counted."""
    found = []
    for line in lines:
        f = line.split(",")
        if len(f) < 11 or f[2:4] != ["primitive", "exec"]:
            continue
        kind, impl, problem = f[5], f[6], f[-2]
        two_d = kind == "inner_product" or (kind == "matmul" and problem.count("x") == 2)
        if kind == "reorder" or (two_d and "brg" in impl and _PLAIN.search(line)):
            found.append(line)
    return found


@pytest.fixture(scope="module")
def sections() -> dict[str, list[str]]:
    """Each path's verbose lines (or ["skip", reason])."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ONEDNN_VERBOSE": "0"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TINY_CKPT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.stdout.splitlines():
        if line.startswith("@@ skip "):
            name, reason = line[len("@@ skip ") :].split(": ", 1)
            found[name] = ["skip", reason]
        elif line.startswith("@@ "):
            current = found.setdefault(line[3:], [])
        elif line.startswith("onednn_verbose"):
            current.append(line)
    assert "end" in found, out.stdout[-2000:]
    return found


def _lines(sections: dict[str, list[str]], name: str) -> list[str]:
    lines = sections[name]
    if lines[:1] == ["skip"]:
        pytest.skip(f"{name}: {lines[1]}")
    return lines


@pytest.mark.parametrize("control", ["control-bf16", "control-int8"])
def test_the_count_sees_a_weight_repacked(sections, control):
    """A product on a plain bf16 weight, and oneDNN packing int8 codes, each count as a repack:
    the count below is not blind on this CPU and oneDNN."""
    assert repacks(_lines(sections, control)), sections[control]


@pytest.mark.parametrize("path", ["bf16", "int8"])
def test_a_forward_repacks_no_weight(sections, path):
    lines = _lines(sections, path)
    products = [x for x in lines if ",primitive,exec," in x and (",inner_product," in x or ",matmul," in x)]
    assert len(products) >= 7 * 2, lines  # the tiny body's two layers ran under the count
    assert repacks(lines) == [], "\n".join(repacks(lines))
