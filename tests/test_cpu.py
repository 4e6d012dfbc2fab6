"""What the engine makes of the CPU (engine/fast/cpu.py): the class of a set of features, the caps of
ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY, and what `dtype=bfloat16` does in each class, both with
the capability check forced (every branch, on any machine) and for real in a process run as an
AVX2-only CPU."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from omnivoice_cli.engine import loading
from omnivoice_cli.engine.fast import cpu, linears
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny" / "ckpt"
CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")

# /proc/cpuinfo flags of real CPUs (the parts that matter)
BASE = {"sse2", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}
AVX512 = BASE | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
SAPPHIRE_RAPIDS = AVX512 | {"avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"}
ZEN4 = AVX512 | {"avx512_vnni", "avx512_bf16"}
CASCADE_LAKE = AVX512 | {"avx512_vnni"}
SKYLAKE_SP = AVX512
ZEN3 = BASE
ALDER_LAKE = BASE | {"avx_vnni"}
ARROW_LAKE = BASE | {"avx_vnni", "avx_vnni_int8", "avx_ne_convert"}
SANDY_BRIDGE = {"sse2", "sse4_2", "avx"}


@pytest.mark.parametrize(
    "flags,name,native,runs,vnni",
    [
        (SAPPHIRE_RAPIDS, "amx", True, True, True),
        (ZEN4, "avx512-bf16", True, True, True),
        (CASCADE_LAKE, "avx512", False, True, True),
        (SKYLAKE_SP, "avx512", False, True, False),
        (ZEN3, "avx2", False, False, False),
        (ALDER_LAKE, "avx2", False, False, True),
        (ARROW_LAKE, "avx2", False, True, True),  # AVX-NE-CONVERT: oneDNN runs bf16 (converting)
        (SANDY_BRIDGE, "x86-64", False, False, False),
    ],
)
def test_the_class_of_a_cpu(flags, name, native, runs, vnni):
    info = cpu.detect(flags, "x86_64", env={})
    assert (info.name, info.native_bf16, info.onednn_bf16, info.vnni) == (name, native, runs, vnni)
    assert info.capped_by == () and info.describe().startswith(name)


def test_other_architectures_are_named_by_the_machine():
    info = cpu.detect({"fp", "asimd", "bf16"}, "aarch64", env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert info.name == "aarch64" and not info.native_bf16 and info.onednn_bf16 is None  # torch's probe decides


@pytest.mark.parametrize(
    "env,name,vnni",
    [
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "avx2", False),
        ({"ONEDNN_MAX_CPU_ISA": "avx2"}, "avx2", False),  # oneDNN reads it in any case
        ({"DNNL_MAX_CPU_ISA": "AVX2_VNNI"}, "avx2", True),  # the older name
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, "avx512", False),  # not avx_vnni: not a subset in oneDNN
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "avx512-bf16", True),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, "amx", True),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, "avx2", True),
        ({"ATEN_CPU_CAPABILITY": "default"}, "x86-64", False),
        ({"ONEDNN_MAX_CPU_ISA": "ALL", "ATEN_CPU_CAPABILITY": "avx512"}, "amx", True),  # caps nothing
        ({"ONEDNN_MAX_CPU_ISA": "NO_SUCH_ISA"}, "amx", True),  # ignored by oneDNN: here too
    ],
)
def test_caps_take_away_what_they_forbid(env, name, vnni):
    info = cpu.detect(SAPPHIRE_RAPIDS, "x86_64", env=env)
    assert (info.name, info.vnni) == (name, vnni)
    assert bool(info.capped_by) == (name != "amx")  # said where a cap took something away
    assert info.features >= {"sse4_2", "bmi2"}  # features no cap is about stay


def test_a_cap_above_the_cpu_changes_nothing():
    info = cpu.detect(ZEN3, "x86_64", env={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"})
    assert info == cpu.detect(ZEN3, "x86_64", env={})


def test_this_cpu_agrees_with_its_flags():
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    uncapped = cpu.detect(env={})
    if uncapped.x86:
        avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
        assert uncapped.native_bf16 == (avx512 and bool({"avx512_bf16", "amx_bf16"} & flags))
        assert uncapped.vnni == bool({"avx512_vnni", "avx_vnni", "amx_int8"} & flags)
    assert cpu.info() == cpu.detect()  # what the engine uses: this CPU under this process's caps
    assert cpu.cpu_class() == cpu.info().name and cpu.has_native_bf16() == cpu.info().native_bf16


def test_bf16_runs_is_onednns_own_answer():
    """Where oneDNN says it can run bf16, its weight reorder works; where not, the features said so
    too (a forced class is obeyed without asking oneDNN)."""
    runs = cpu.bf16_runs()
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    if probe is None:
        pytest.skip("this torch build has no oneDNN bf16 probe")
    assert runs == (bool(probe()) and cpu.info().onednn_bf16 is not False)
    w = torch.randn(48, 64).to(torch.bfloat16)
    if runs:
        torch.ops.mkldnn._reorder_linear_weight(w, None)
    elif linears.onednn_linear_available() and cpu.info().onednn_bf16 is False:
        with pytest.raises(RuntimeError):  # what the engine never reaches: the old traceback
            torch.ops.mkldnn._reorder_linear_weight(w, None)


@pytest.mark.slow
def test_torch_is_not_imported_to_read_the_class():
    code = "import sys; from omnivoice_cli.engine.fast import cpu; print(cpu.info().describe()); assert 'torch' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


# ------------------------------------------------------------------------- bf16, forced classes


@pytest.fixture
def force(monkeypatch):
    """force(flags, runs=None, machine="x86_64"): the engine sees a CPU with these flags; oneDNN's own
    answer on bf16 is `runs` (default: the features' prediction)."""

    def set_cpu(flags, runs=None, machine="x86_64"):
        info = cpu.detect(flags, machine, env={})
        monkeypatch.setattr(cpu, "_INFO", info)
        monkeypatch.setattr(cpu, "_BF16_RUNS", info.onednn_bf16 if runs is None else runs)
        return info

    return set_cpu


@pytest.mark.parametrize(
    "flags,dtype,said",
    [
        (SAPPHIRE_RAPIDS, torch.bfloat16, None),
        (ZEN4, torch.bfloat16, None),
        (
            CASCADE_LAKE,
            torch.bfloat16,
            "bfloat16 is emulated on this CPU (avx512: no AVX512-BF16 or AMX): expect it slower than float32",
        ),
        (
            ZEN3,
            torch.float32,
            "bfloat16 is not supported on this CPU (avx2: oneDNN needs AVX-512 for it): running in float32",
        ),
    ],
)
def test_what_bf16_means_in_each_class(force, flags, dtype, said):
    if not cpu.detect(flags, "x86_64", env={}).onednn_bf16 and not linears.onednn_linear_available():
        pytest.skip("this torch build has no oneDNN linear: bf16 runs in torch's own kernels")
    force(flags)
    notices = []
    cpu_dev = torch.device("cpu")
    assert loading._check_cpu_bf16(cpu_dev, torch.bfloat16, notices.append) == dtype
    assert notices == ([said] if said else [])
    # float32, and other devices, are never touched
    assert loading._check_cpu_bf16(cpu_dev, torch.float32, notices.append) == torch.float32
    assert loading._check_cpu_bf16(torch.device("cuda"), torch.bfloat16, notices.append) == torch.bfloat16
    assert len(notices) == (1 if said else 0)


def test_oneDNNs_refusal_is_obeyed_even_where_the_features_say_yes(force):
    if not linears.onednn_linear_available():
        pytest.skip("this torch build has no oneDNN linear: bf16 runs in torch's own kernels")
    force(SKYLAKE_SP, runs=False)  # e.g. a build or OS that does not let oneDNN use AVX-512
    notices = []
    assert loading._check_cpu_bf16(torch.device("cpu"), torch.bfloat16, notices.append) == torch.float32
    assert len(notices) == 1 and "running in float32" in notices[0]


def _step0_logits(engine) -> torch.Tensor:
    from omnivoice_cli.engine.model.generation import pack

    job = engine.prepare(Request(text="Hello there, how are you?", lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        return engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])


def test_bf16_on_an_avx2_cpu_is_the_float32_engine(force):
    """Forced to AVX2 (runs on any machine): bf16 loads the float32 body, bit for bit, and says so once."""
    if not linears.onednn_linear_available():
        pytest.skip("this torch build has no oneDNN linear: bf16 runs in torch's own kernels")
    force(ZEN3)
    notices = []
    engine = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"), on_notice=notices.append)
    assert engine.dtype == torch.float32
    assert [n for n in notices if "bfloat16" in n] == [
        "bfloat16 is not supported on this CPU (avx2: oneDNN needs AVX-512 for it): running in float32"
    ]
    kinds = {
        type(m) for m in engine.model.llm.layers.modules() if isinstance(m, (torch.nn.Linear, linears.KernelLinear))
    }
    assert kinds == ({linears.OneDNNLinear} if linears.onednn_linear_available() else {torch.nn.Linear})
    fp32 = Engine.load(str(TINY), Hardware(device="cpu"))
    assert torch.equal(_step0_logits(engine), _step0_logits(fp32))


def test_int8_on_a_cpu_without_native_bf16_keeps_its_heads_in_float32(force):
    force(ZEN3)
    assert not linears.use_bf16_heads()
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="int8"))
    assert not isinstance(engine.model.audio_heads, linears.BF16Linear)
    assert engine.model.llm.layers[0].self_attn.math_dtype is None


def test_bf16_takes_this_cpus_own_branch():
    """Unforced: oneDNN's bf16 body where this CPU runs it, else the float32 one with its notice."""
    notices = []
    engine = Engine.load(str(TINY), Hardware(device="cpu", dtype="bfloat16"), on_notice=notices.append)
    said = [n for n in notices if "bfloat16" in n]
    if cpu.bf16_runs() and linears.onednn_linear_available():
        assert engine.dtype == torch.bfloat16 and isinstance(
            engine.model.llm.layers[0].mlp.down_proj, linears.BF16Linear
        )
        assert said == ([] if cpu.has_native_bf16() else [said[0]]) and all("emulated" in n for n in said)
    elif linears.onednn_linear_available():
        assert engine.dtype == torch.float32 and len(said) == 1 and "running in float32" in said[0]
    else:
        assert engine.dtype == torch.bfloat16  # no oneDNN in this build: torch's own bf16 kernels


# ------------------------------------------------------------------ a process run as an AVX2 CPU


AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
MAIN = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]  # the `omnivoice` script


def _avx2_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CAPS}
    return {**env, **AVX2_ENV, "PYTHONPATH": str(ROOT)}


needs_avx2 = pytest.mark.skipif(
    not (cpu.detect(env={}).x86 and cpu.detect(env={}).avx2),
    reason="the caps emulate an AVX2 CPU only on an x86 CPU with AVX2",
)


@pytest.mark.slow
@needs_avx2
def test_say_in_bf16_on_a_real_avx2_run(tmp_path):
    """`omnivoice say --dtype bfloat16` with oneDNN and ATen capped at AVX2: no traceback, one line."""
    out = tmp_path / "a.wav"
    args = ["say", "hi", "--model", str(TINY), "--dtype", "bfloat16", "-o", str(out)]
    run = subprocess.run(MAIN + args, capture_output=True, text=True, env=_avx2_env(), timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "RuntimeError" not in run.stderr
    said = [ln for ln in run.stderr.splitlines() if "bfloat16" in ln]
    assert said == ["bfloat16 is not supported on this CPU (avx2: oneDNN needs AVX-512 for it): running in float32"]
    assert out.stat().st_size > 44


_AVX2_PROBE = """
import torch
from omnivoice_cli.engine.fast import cpu, linears
from omnivoice_cli.engine.pipeline import Engine, Request
from omnivoice_cli.engine.hardware import Hardware
info = cpu.info()
assert info.name == "avx2", info
if cpu.detect(env={}).avx512:  # a bigger CPU run as an AVX2 one: the caps are said
    assert info.capped_by == ("ONEDNN_MAX_CPU_ISA=AVX2", "ATEN_CPU_CAPABILITY=avx2"), info
assert not cpu.bf16_runs() and not cpu.has_native_bf16() and not cpu.has_vnni()
assert not torch.ops.mkldnn._is_mkldnn_bf16_supported()  # oneDNN reads the same cap
assert linears.Int8Linear.half == 63  # 7-bit activations: no VNNI under the cap
engine = Engine.load("{tiny}", Hardware(device="cpu", quantize="int8"))
assert not isinstance(engine.model.audio_heads, linears.BF16Linear)
tokens = engine.generate([Request(text="hi", lang="en", seed=1)])[0].tokens
print("ok", tuple(tokens.shape))
"""


@pytest.mark.slow
@needs_avx2
def test_the_engine_under_avx2_caps():
    """In that process the engine sees an AVX2 CPU: no oneDNN bf16, no VNNI, and int8 runs there."""
    code = _AVX2_PROBE.replace("{tiny}", str(TINY))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_avx2_env(), timeout=300, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok")


# ----------------------------------------------------------------- the choice table and `auto`

ROWS = {  # a CPU of each row of cpu.CHOICES
    "amx": SAPPHIRE_RAPIDS,
    "avx512-bf16": ZEN4,
    "avx512+vnni": CASCADE_LAKE,
    "avx512": SKYLAKE_SP,
    "avx2+vnni": ALDER_LAKE,
    "avx2": ZEN3,
    "x86-64": SANDY_BRIDGE,
}


def test_every_class_has_a_row_that_names_its_measurement():
    assert set(cpu.CHOICES) == set(ROWS)  # every x86 class cpu.py can name (with VNNI or not), and only those
    assert {cpu.row_name(cpu.detect(flags, "x86_64", env={})) for flags in ROWS.values()} == set(ROWS)
    for name, row in cpu.CHOICES.items():
        assert row.quantize in ("int8", None) and row.int8 in ("onednn", "fbgemm") and row.dtype == "float32"
        assert "bench_" in row.measured and any(c.isdigit() for c in row.measured), (
            name,
            row.measured,
        )  # a benchmark and its figures
    assert cpu.UNMEASURED.quantize is None and "not measured" in cpu.UNMEASURED.measured


@pytest.mark.parametrize(
    "flags,machine,quantize,int8",
    [
        (SAPPHIRE_RAPIDS, "x86_64", "int8", "onednn"),
        (ZEN4, "x86_64", "int8", "onednn"),
        (CASCADE_LAKE, "x86_64", "int8", "onednn"),
        (SKYLAKE_SP, "x86_64", "int8", "onednn"),
        (ZEN3, "x86_64", "int8", "fbgemm"),
        (ALDER_LAKE, "x86_64", "int8", "onednn"),  # AVX-VNNI: oneDNN's kernels use it, FBGEMM's do not
        (ARROW_LAKE, "x86_64", "int8", "onednn"),
        (SANDY_BRIDGE, "x86_64", "int8", "onednn"),
        ({"fp", "asimd", "bf16"}, "aarch64", None, "onednn"),
    ],
)
def test_the_choice_of_each_cpu(flags, machine, quantize, int8):
    row = cpu.choice(cpu.detect(flags, machine, env={}))
    assert (row.quantize, row.int8) == (quantize, int8)


def test_a_cap_changes_the_choice():
    capped = cpu.detect(SAPPHIRE_RAPIDS, "x86_64", env={"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"})
    assert cpu.choice(capped) is cpu.CHOICES["avx2"]
    vnni = cpu.detect(SAPPHIRE_RAPIDS, "x86_64", env={"ONEDNN_MAX_CPU_ISA": "AVX2_VNNI"})
    assert cpu.choice(vnni) is cpu.CHOICES["avx2+vnni"]
    assert cpu.choice(cpu.detect(SAPPHIRE_RAPIDS, "x86_64", env={})) is cpu.CHOICES["amx"]


@pytest.mark.parametrize("name", list(ROWS))
def test_auto_in_each_forced_class(force, name):
    """quantize "auto" is its class's row; --dtype auto is float32 in every class; a clash with
    bf16 or compile leaves int8 out, said once."""
    force(ROWS[name])
    row = cpu.CHOICES[name]
    assert cpu.choice() is row and cpu.row_name(cpu.info()) == name
    assert cpu.decide().dtype == "float32" and cpu.decide(Hardware(dtype="auto")).quantize is None
    auto = Hardware(quantize="auto")
    assert cpu.decide(auto) == cpu.Decision(row.quantize, "float32", row.int8, None, row)
    dropped = "dtype" if row.quantize else None
    assert cpu.decide(replace(auto, dtype="bfloat16")) == cpu.Decision(None, "bfloat16", row.int8, dropped, row)
    dropped = "compile" if row.quantize else None
    assert cpu.decide(replace(auto, compile=True)) == cpu.Decision(None, "float32", row.int8, dropped, row)
    kind = linears.int8_kind()
    if row.int8 == "fbgemm" and linears.fbgemm_available():
        assert kind is linears.FbgemmInt8Linear
    else:
        assert kind is (linears.Int8Linear if linears.onednn_int8_available() else linears.LegacyInt8Linear)


@pytest.mark.parametrize("name", list(ROWS))
def test_the_choice_at_one_thread(name):
    """A class's row holds at every thread count unless it has a row of its own at 1 thread: AMX,
    where bf16 was measured first (issue 37); at 2 threads and more int8 everywhere."""
    of = cpu.detect(ROWS[name], "x86_64", env={})
    row = cpu.CHOICES[name]
    assert cpu.choice(of) is row and cpu.choice(of, threads=2) is row and cpu.choice(of, threads=16) is row
    one = cpu.choice(of, threads=1)
    assert (one.fastest, one is not row) == (("bfloat16", True) if name == "amx" else (row.fastest, False))
    assert row.fastest == "int8" and one.quantize == "int8"  # in float32 (asked for), int8 at any count


def test_auto_at_one_thread_on_amx_is_the_bf16_body_unless_float32_or_compile_is_asked(force):
    force(SAPPHIRE_RAPIDS, runs=True)

    def auto(threads, dtype="auto", compile=False, runs=cpu.bf16_runs):
        d = cpu.decide(Hardware(dtype=dtype, quantize="auto", compile=compile), threads, bf16_runs=runs)
        return d.quantize, d.dtype, d.dropped

    assert auto(1) == (None, "bfloat16", None)
    assert auto(2) == ("int8", "float32", None)
    assert auto(1, dtype="float32") == ("int8", "float32", None)
    assert auto(1, dtype="bfloat16") == (None, "bfloat16", None)
    assert auto(1, compile=True) == (None, "float32", "compile")
    force(SAPPHIRE_RAPIDS, runs=False)  # oneDNN refusing bf16 after all: int8, never an emulated bf16
    assert auto(1) == ("int8", "float32", None)
    assert auto(1, dtype="bfloat16") == (None, "bfloat16", "dtype")


def test_the_loader_says_when_auto_leaves_int8_out(force):
    """The loader's one line where a dtype asked for keeps quantize auto from its int8."""
    force(ZEN3)
    said: list[str] = []
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="auto", dtype="float16"), on_notice=said.append)
    assert engine.dtype == torch.float16 and not isinstance(
        engine.model.llm.layers[0].mlp.down_proj, linears.KernelLinear
    )
    assert said == [
        "quantize auto: int8 (the fastest on this CPU, avx2) needs float32 and no compile: without it here (dtype float16)"
    ]


@pytest.fixture
def torch_threads():
    """Restores torch's thread count after a test that loads with another."""
    count = torch.get_num_threads()
    yield count
    torch.set_num_threads(count)


@pytest.mark.parametrize("threads,kind", [(1, "BF16Linear"), (2, "Int8Linear")])
def test_the_engine_takes_amxs_path_at_its_thread_count(force, torch_threads, threads, kind):
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported() or not linears.onednn_int8_available():
        pytest.skip("the AMX rows run bf16 and oneDNN's int8, which this CPU or build cannot")
    force(SAPPHIRE_RAPIDS)
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="auto", threads=threads))
    assert engine.threads == threads
    assert engine.dtype == (torch.bfloat16 if kind == "BF16Linear" else torch.float32)
    assert type(engine.model.llm.layers[0].self_attn.fused_qkv.linear).__name__ == kind


def test_auto_off_the_cpu_is_nothing(monkeypatch, force):
    force(ZEN3)
    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda"))
    said = []
    for device in ("auto", "cuda"):
        assert loading._resolve_hardware(Hardware(device=device, quantize="auto"), said.append)[1] is None
    assert said == []  # the table is the CPU's: a GPU runs its own dtype, with nothing to say


@pytest.mark.parametrize("name,kind", [("avx2", "FbgemmInt8Linear"), ("amx", "Int8Linear"), ("aarch64", None)])
def test_the_engine_takes_the_auto_path_of_the_class(force, name, kind):
    if name == "aarch64":  # no row: the exact path
        force({"fp", "asimd"}, runs=True, machine="aarch64")
    else:
        force(ROWS[name])
    if kind == "FbgemmInt8Linear" and not linears.fbgemm_available():
        pytest.skip("this torch build has no FBGEMM")
    if kind == "Int8Linear" and not linears.onednn_int8_available():
        pytest.skip("this torch build has no oneDNN int8 linear")
    if name == "amx" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():  # the real CPU, not the forced class
        pytest.skip("the AMX row runs its attention and heads in bf16, which this CPU cannot (no AVX-512)")
    engine = Engine.load(str(TINY), Hardware(device="cpu", quantize="auto"))
    down = engine.model.llm.layers[0].mlp.down_proj
    if kind is None:  # the exact float32 body, bit for bit
        assert engine.dtype == torch.float32 and not isinstance(down, linears.KernelLinear)
        assert torch.equal(_step0_logits(engine), _step0_logits(Engine.load(str(TINY), Hardware(device="cpu"))))
    else:
        assert (
            type(down).__name__ == kind and type(engine.model.llm.layers[0].self_attn.fused_qkv.linear).__name__ == kind
        )


def test_info_shows_the_class_and_its_choice(invoke, force):
    force(ZEN3)
    r = invoke("info")
    assert r.exit_code == 0, r.stderr
    rows = dict(line.split(":", 1) for line in r.stdout.splitlines() if not line.startswith(" "))
    rows = {k.strip(): v.strip() for k, v in rows.items()}
    assert rows["class"] == cpu.info().describe() == "avx2 (no oneDNN bf16, no VNNI)"
    assert rows["flags"] == "avx avx2 fma f16c"
    assert rows["--quantize auto"] == "int8" and rows["--dtype auto"].startswith("float32")
    assert cpu.CHOICES["avx2"].measured not in r.stdout  # the figures: --verbose
    assert "  why:            the fastest path measured on avx2 CPUs (info --verbose: the measurements)\n" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 100
    assert cpu.CHOICES["avx2"].measured in invoke("info", "--verbose").stdout
    assert rows["--dtype bfloat16"].startswith("runs float32") == linears.onednn_linear_available()
    if linears.fbgemm_available():
        assert rows["--quantize int8"].startswith("FBGEMM")
    force({"fp", "asimd", "bf16"}, machine="aarch64")
    r = invoke("info")
    assert "--quantize auto:  none (the exact float32 body)" in r.stdout and "class:            aarch64\n" in r.stdout
    assert cpu.UNMEASURED.measured in r.stdout


def test_info_on_this_cpu(invoke):
    r = invoke("info")
    assert r.exit_code == 0, r.stderr
    assert f"class:            {cpu.info().describe()}\n" in r.stdout
    assert r.stderr == "" and cpu.choice().measured in invoke("info", "--verbose").stdout
