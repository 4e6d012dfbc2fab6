"""The body's CPU fast paths: oneDNN fp32 linears, dynamic int8 linears, releasing mmap'd pages."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile
from omnivoice_cli.engine.fast import memory
from omnivoice_cli.engine.fast.int8pack import int8_weight
from omnivoice_cli.engine.fast.linears import (
    Int8Linear,
    LegacyInt8Linear,
    OneDNNLinear,
    int8_kind,
    onednn_linear_available,
    quantize_int8,
    use_onednn_linears,
)
from omnivoice_cli.engine.fast.memory import release_pages
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.pipeline import Engine

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny" / "ckpt"
needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN linear")


def _linear(n_in=64, n_out=48, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(n_in, n_out, bias=bias)


@pytest.mark.slow
@needs_onednn
@pytest.mark.parametrize("rows", [1, 7, 300])
def test_onednn_linear_equals_linear_to_fp32_rounding(rows):
    holder = nn.Sequential(_linear())
    x = torch.randn(rows, 64)
    want = holder(x)
    assert use_onednn_linears(holder) == 1 and type(holder[0]) is OneDNNLinear
    lin = holder[0]
    got = lin(x)
    assert got.shape == want.shape and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(lin(x), got)  # the packed weight is reused, same result every call


@pytest.mark.slow
@needs_onednn
def test_onednn_linear_rows_do_not_depend_on_their_neighbours():
    """Packed batches must give each request what it gets alone, bit for bit."""
    holder = nn.Sequential(_linear(128, 96, bias=False))
    use_onednn_linears(holder)
    lin = holder[0]
    x = torch.randn(700, 128)
    full = lin(x)
    for a, b in [(5, 231), (100, 623), (0, 700), (300, 301 + 64)]:
        assert torch.equal(lin(x[a:b]), full[a:b])


@needs_onednn
def test_onednn_switch_keeps_weights_and_state_dict_and_skips_other_dtypes():
    model = nn.Sequential(_linear(), nn.ReLU(), _linear(48, 16).to(torch.float64))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert use_onednn_linears(model) == 1  # the float64 one stays a plain nn.Linear
    assert type(model[0]) is OneDNNLinear and type(model[2]) is nn.Linear
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_int8_weight_is_torchs_symmetric_per_channel_scheme():
    from torch.ao.quantization.observer import default_per_channel_weight_observer

    w = torch.randn(48, 64) * torch.linspace(0.01, 3, 48)[:, None]
    w[3] = 0  # an all-zero channel gets the floor scale, not a division by zero
    codes, scale = int8_weight(w)
    obs = default_per_channel_weight_observer()
    obs(w)
    ref_scale, ref_zero = obs.calculate_qparams()
    assert torch.equal(scale, ref_scale.float()) and (ref_zero == 0).all()
    assert scale[3] == torch.finfo(torch.float32).eps and (codes[3] == 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.quantize_per_channel(w, ref_scale.double(), ref_zero.long(), 0, torch.qint8).int_repr()
    differ = codes != theirs
    ratio = (w / scale[:, None]).double()
    assert (codes.int() - theirs.int()).abs().max() <= 1
    assert ((ratio[differ].abs() - 127.5).abs() < 1e-4).all()  # only a channel's max (a tie by construction)
    err = (codes.float() * scale[:, None] - w).abs()
    assert (err <= scale[:, None] / 2 * (1 + 1e-4)).all()  # each weight rounds to its nearest code


def test_legacy_int8_linear_is_torchs_dynamic_quantised_linear_on_its_codes():
    lin = _linear()
    x = torch.randn(33, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        theirs = quantize_dynamic(nn.Sequential(lin), {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)[0]
        ours = LegacyInt8Linear(lin.weight, lin.bias)
        qweight, bias = torch.ops.quantized.linear_unpack(ours.packed)
        theirs.set_weight_bias(qweight, bias)
    codes, scale = int8_weight(lin.weight.detach())
    assert torch.equal(qweight.int_repr(), codes) and torch.equal(qweight.q_per_channel_scales().float(), scale)
    assert torch.equal(bias, lin.bias.detach())
    assert torch.equal(ours(x), theirs(x))  # torch's dynamic int8 kernel: per-tensor 7-bit inputs
    rel = ((ours(x) - lin(x)).norm() / lin(x).norm()).item()
    assert 0 < rel < 0.05  # int8 is close to fp32, not equal


def test_release_pages_drops_only_mapped_checkpoint_pages():
    f = SafetensorsFile(TINY / "model.safetensors")
    name = max(f.keys(), key=lambda k: f.get(k).numel())
    mapped = f.get(name)
    copy = mapped.clone()
    assert release_pages(mapped) is True
    assert torch.equal(mapped, copy)  # clean file pages fault back in with the same data
    heap = copy.clone()
    assert release_pages(heap) is False  # heap memory would read back as zeros: refused
    assert torch.equal(heap, copy)


_STEPS = """
import ctypes, json, sys
from omnivoice_cli.engine.fast import memory

lib = memory.libc()
fields = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
word = ctypes.c_size_t if hasattr(lib, "mallinfo2") else ctypes.c_int  # glibc < 2.33: mallinfo's ints
info = getattr(lib, "mallinfo2", None) or lib.mallinfo
info.restype = type("Info", (ctypes.Structure,), {"_fields_": [(f, word) for f in fields]})
lib.malloc.restype, lib.malloc.argtypes, lib.free.argtypes = ctypes.c_void_p, (ctypes.c_size_t,), (ctypes.c_void_p,)
if sys.argv[1] == "keep":
    memory.keep_heap()
held = lambda m: m.arena + m.hblkhd  # what malloc holds from the system
base = info()
steps = []
for _ in range(4):  # blocks of a few MiB made, then all freed, as a forward's tensors are
    ptrs = [lib.malloc(mib << 20) for mib in (6, 2, 8, 4, 12, 3, 24)]
    live = info()
    for p in ptrs:
        lib.free(p)
    steps.append({"mapped": live.hblks - base.hblks, "held": held(info()) - held(base), "at": ptrs})
print(json.dumps(steps))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not memory.libc(), reason="glibc only")
def test_keep_heap_lets_steps_reuse_their_pages():
    """What keep_heap asks of glibc, read back from glibc's own counts (no page-fault counts: they
    move with the machine's load and its transparent huge pages; benchmarks/bench_heap.py measures
    them). Each in a fresh process, the setting being process-wide: after keep_heap a step's blocks
    (up to 32 MiB) come from the heap, stay held once freed, and the next step gets the same memory
    back; with glibc's defaults the first step's blocks are mapped afresh and every step's memory
    goes back to the system once freed, to be faulted in again by the next."""

    def steps(mode):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", _STEPS, mode],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        return json.loads(out.stdout)

    total = (6 + 2 + 8 + 4 + 12 + 3 + 24) << 20
    kept, default = steps("keep"), steps("default")
    assert all(s["mapped"] == 0 for s in kept), kept  # every block from the heap
    assert all(s["held"] >= total for s in kept), kept  # freed, still held for the next step
    assert all(s["at"] == kept[0]["at"] and s["held"] == kept[0]["held"] for s in kept), kept  # the same memory again
    assert default[0]["mapped"] >= 1, default  # glibc's defaults: large blocks mapped afresh at first,
    assert all(s["held"] < total // 2 for s in default), default  # and handed back after every step


@pytest.mark.slow
def test_engine_picks_the_cpu_linear_paths():
    fp32 = Engine.load(str(TINY), Hardware(device="cpu"))
    kinds = {type(m) for m in fp32.model.llm.layers.modules() if isinstance(m, (nn.Linear, Int8Linear))}
    assert kinds == ({OneDNNLinear} if onednn_linear_available() else {nn.Linear})
    int8 = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    kind = int8_kind()  # the class's kernel (cpu.CHOICES): FBGEMM's on AVX2 without VNNI, else oneDNN's
    kinds = {type(m) for m in int8.model.llm.layers.modules() if isinstance(m, (nn.Linear, Int8Linear, kind))}
    assert kinds == {kind}
    # the heads: bf16 where the CPU has it natively (test_linears.py), fp32 elsewhere
    n_layers = len(int8.model.llm.layers)
    assert quantize_int8(int8.model) == 0 and n_layers == fp32.cfg.backbone.num_hidden_layers


@pytest.mark.slow
def test_int8_engine_logits_stay_close_to_fp32():
    """Reported, not tight: on the tiny random checkpoint the step-0 logits move by a few percent."""
    from omnivoice_cli.engine.model.generation import pack
    from omnivoice_cli.engine.planning import Request

    out = []
    for q in (None, "int8"):
        engine = Engine.load(str(TINY), Hardware(device="cpu", quantize=q))
        job = engine.prepare(Request(text="Hello there, how are you?", lang="en"))
        batch, [(c, _)] = pack([job], "cpu")
        with torch.inference_mode():
            out.append(engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len]))
    rel = ((out[1] - out[0]).norm() / out[0].norm()).item()
    assert 0 < rel < 0.1
    assert F.cosine_similarity(out[0].flatten(), out[1].flatten(), dim=0) > 0.99


def test_without_onednn_the_plain_linears_stay(monkeypatch):
    from omnivoice_cli.engine.fast import linears

    monkeypatch.setattr(linears, "_onednn_ok", False)  # as if the probe had failed
    lin = _linear()
    assert use_onednn_linears(lin) == 0 and type(lin) is nn.Linear
    engine = Engine.load(str(TINY), Hardware(device="cpu"))
    assert not any(isinstance(m, OneDNNLinear) for m in engine.model.modules())
