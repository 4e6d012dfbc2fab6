"""What this CPU can do for the body's kernels, read once: the one place the engine asks.

The features come from /proc/cpuinfo's flags (Linux; elsewhere from torch's own probes) and are
capped as the kernels themselves are: oneDNN's ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) and ATen's
ATEN_CPU_CAPABILITY remove what they forbid, so that a run forced down to AVX2 on a bigger machine
(`ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`) is told, and does, what an AVX2-only CPU
would. From them, one class name (`cpu_class()`):

    amx          AVX-512 with AMX tiles (bf16 and int8 matrix units: Sapphire Rapids and later)
    avx512-bf16  AVX-512 with AVX512-BF16 (Cooper Lake, AMD Zen 4 and 5)
    avx512       AVX-512 F/BW/VL/DQ without bf16 (Skylake-SP, Cascade Lake, Ice Lake)
    avx2         AVX2 without AVX-512 (AMD Zen 2/3, Intel client CPUs, many cloud VMs)
    x86-64       below AVX2
    <machine>    another architecture (aarch64, arm64, ...), as the OS names it

and the answers the loading needs: whether bf16 products are native (`has_native_bf16`), whether
oneDNN can run bf16 at all (`bf16_runs`: it refuses to reorder a bf16 weight below AVX-512 unless
the CPU has AVX-NE-CONVERT), whether int8 dot products have VNNI (`has_vnni`). Torch-light: only
`bf16_runs` (and the probes where /proc/cpuinfo is absent) import torch.

And what `auto` means in each class at the thread count the engine runs with (a row of CHOICES,
each naming the measurement behind it), decided in one function, `decide(hardware, threads)`, which
the settings' check and the loader both ask: `--quantize auto` is the fastest path
measured (between paths within 5% of each other, the one with the smaller error), which is int8 on
every x86 class measured, on FBGEMM's kernel where that beats oneDNN's (AVX2 without VNNI), except
AMX at 1 thread, where it is the bf16 body (with `--dtype auto`; asked for float32, int8 there
too); `--dtype auto` alone is float32, the exact path, everywhere. The `fast` preset asks for
`--quantize auto`. `omnivoice info` prints the class, its flags and these choices.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..hardware import Hardware

_AVX512 = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})  # oneDNN's "avx512_core"
_AVX2 = frozenset({"avx", "avx2", "fma", "f16c"})

# ONEDNN_MAX_CPU_ISA's values -> the features (of those in _CONTROLLED) the kernels may use under
# it, composed as oneDNN composes its ISAs (avx512_core is not a superset of avx2_vnni_2).
_ONEDNN_ISAS: dict[str, frozenset[str]] = {}
_ONEDNN_ISAS["SSE41"] = frozenset()
_ONEDNN_ISAS["AVX"] = frozenset({"avx"})
_ONEDNN_ISAS["AVX2"] = _AVX2
_ONEDNN_ISAS["AVX2_VNNI"] = _AVX2 | {"avx_vnni"}
_ONEDNN_ISAS["AVX2_VNNI_2"] = _ONEDNN_ISAS["AVX2_VNNI"] | {"avx_vnni_int8", "avx_ne_convert"}
_ONEDNN_ISAS["AVX512_CORE"] = _AVX2 | _AVX512 | {"avx512cd"}
_ONEDNN_ISAS["AVX512_CORE_VNNI"] = _ONEDNN_ISAS["AVX512_CORE"] | {"avx512_vnni"}
_ONEDNN_ISAS["AVX512_CORE_BF16"] = _ONEDNN_ISAS["AVX512_CORE_VNNI"] | {"avx512_bf16"}
_ONEDNN_ISAS["AVX512_CORE_FP16"] = _ONEDNN_ISAS["AVX10_1_512"] = _ONEDNN_ISAS["AVX512_CORE_BF16"] | {
    "avx512_fp16",
    "avx_vnni",
}
_ONEDNN_ISAS["AVX512_CORE_AMX"] = _ONEDNN_ISAS["AVX10_1_512_AMX"] = _ONEDNN_ISAS["AVX512_CORE_FP16"] | {
    "amx_tile",
    "amx_int8",
    "amx_bf16",
}
_ONEDNN_ISAS["AVX512_CORE_AMX_FP16"] = _ONEDNN_ISAS["AVX10_1_512_AMX_FP16"] = _ONEDNN_ISAS["AVX512_CORE_AMX"] | {
    "amx_fp16"
}
_CONTROLLED = _ONEDNN_ISAS["AVX512_CORE_AMX_FP16"] | _ONEDNN_ISAS["AVX2_VNNI_2"]  # what a cap can take away
# ATEN_CPU_CAPABILITY's values (torch's vectorised kernels) -> the same; "avx512" caps nothing
_ATEN_CAPS = {"default": frozenset(), "avx2": _ONEDNN_ISAS["AVX2_VNNI_2"]}
_X86 = ("x86_64", "amd64", "i386", "i686", "x86")
# what `omnivoice info` and the benchmarks' headers show of a CPU's flags: those the kernels ask about
FLAGS_OF_INTEREST = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "avx512_bf16",
    "avx_ne_convert",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "asimddp",
    "bf16",
    "i8mm",
    "sve",
)


@dataclass(frozen=True)
class CpuInfo:
    """A CPU's features as the kernels may use them (after the caps), and what follows from them."""

    machine: str  # platform.machine(), lower case
    features: frozenset[str]  # /proc/cpuinfo's names: avx2, avx512f, avx512_bf16, amx_tile, ...
    capped_by: tuple[str, ...] = ()  # the caps that took features away, as "NAME=value"

    @property
    def x86(self) -> bool:
        return self.machine in _X86

    @property
    def avx2(self) -> bool:
        return {"avx2", "fma"} <= self.features

    @property
    def avx512(self) -> bool:
        return _AVX512 <= self.features

    @property
    def avx512_bf16(self) -> bool:
        return self.avx512 and "avx512_bf16" in self.features

    @property
    def amx(self) -> bool:
        return self.avx512 and {"amx_tile", "amx_bf16"} <= self.features

    @property
    def vnni(self) -> bool:
        """A u8 x s8 dot product into int32 (AVX512-VNNI, AVX-VNNI or AMX-INT8). Without it, x86 int8
        kernels add pairs of products in int16, which 8-bit inputs could overflow."""
        return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & self.features)

    @property
    def native_bf16(self) -> bool:
        """bf16 products in hardware (AVX512-BF16 or AMX). Elsewhere oneDNN emulates them with fp32
        arithmetic and conversions, slower than fp32 itself."""
        return self.avx512_bf16 or self.amx

    @property
    def onednn_bf16(self) -> bool | None:
        """Whether oneDNN can run bf16 products at all (natively or emulated): AVX-512 F/BW/VL/DQ, or
        AVX-NE-CONVERT. None off x86 (torch's probe decides there)."""
        if not self.x86:
            return None
        return self.avx512 or "avx_ne_convert" in self.features

    @property
    def name(self) -> str:
        """The class: amx, avx512-bf16, avx512, avx2, x86-64, or the machine's name off x86."""
        if not self.x86:
            return self.machine or "unknown"
        if self.amx:
            return "amx"
        if self.avx512_bf16:
            return "avx512-bf16"
        if self.avx512:
            return "avx512"
        return "avx2" if self.avx2 else "x86-64"

    def flags(self) -> tuple[str, ...]:
        """The flags of interest (FLAGS_OF_INTEREST) this CPU has, after the caps."""
        return tuple(f for f in FLAGS_OF_INTEREST if f in self.features)

    def describe(self) -> str:
        """One line: the class, what it has of bf16 / VNNI, and the caps applied."""
        bf16 = "native bf16" if self.native_bf16 else "bf16 emulated" if self.onednn_bf16 else "no oneDNN bf16"
        parts = [bf16, "VNNI" if self.vnni else "no VNNI"] if self.x86 else []
        capped = f", capped by {' '.join(self.capped_by)}" if self.capped_by else ""
        return f"{self.name}" + (f" ({', '.join(parts)}{capped})" if parts or capped else "")


def detect(
    flags: frozenset[str] | set[str] | None = None, machine: str | None = None, env: Mapping[str, str] | None = None
) -> CpuInfo:
    """The CpuInfo of `flags` (default: this CPU's) on `machine` (default: this one), capped by the
    ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA / ATEN_CPU_CAPABILITY of `env` (default: os.environ). An
    unknown cap value caps nothing, as oneDNN and ATen then ignore it."""
    env = os.environ if env is None else env
    machine = (platform.machine() if machine is None else machine).lower()
    have = frozenset(_read_flags() if flags is None else flags)
    onednn_var = next((v for v in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA") if env.get(v)), None)  # oneDNN's order
    caps = [(onednn_var, _ONEDNN_ISAS.get(env[onednn_var].strip().upper()))] if onednn_var else []
    aten = env.get("ATEN_CPU_CAPABILITY")
    if aten:
        caps.append(("ATEN_CPU_CAPABILITY", _ATEN_CAPS.get(aten.strip().lower())))
    features, capped = have, []
    for var, allowed in caps:
        if allowed is not None and have & (_CONTROLLED - allowed):  # it forbids something this CPU has
            features -= _CONTROLLED - allowed
            capped.append(f"{var}={env[var]}")
    return CpuInfo(machine, features, tuple(capped))


def model_name() -> str:
    """The CPU's model name (/proc/cpuinfo's "model name"), else the platform's processor or machine."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _read_flags() -> frozenset[str]:
    """The CPU's feature flags: /proc/cpuinfo's "flags" (x86) or "Features" (ARM) line; where there is
    none (another OS), the features torch's own probes report."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return _torch_flags()


def _torch_flags() -> frozenset[str]:
    """The x86 features torch's cpuinfo probes report, under /proc/cpuinfo's names (empty off x86 or
    where torch lacks them)."""
    try:
        import torch

        probes = {
            "_is_avx2_supported": _AVX2,
            "_is_avx512_supported": _AVX512,
            "_is_avx512_vnni_supported": {"avx512_vnni"},
            "_is_avx512_bf16_supported": {"avx512_bf16"},
            "_is_amx_tile_supported": {"amx_tile", "amx_bf16", "amx_int8"},
        }
        out: set[str] = set()
        for probe, names in probes.items():
            fn = getattr(torch.cpu, probe, None)
            if fn is not None and fn():
                out |= names
        return frozenset(out)
    except (ImportError, AttributeError, RuntimeError):
        return frozenset()


@dataclass(frozen=True)
class Choice:
    """What `auto` means in a CPU class, and the int8 kernel it runs."""

    quantize: str | None  # `--quantize auto` in float32: "int8", or None (the exact float32 body)
    int8: str  # the int8 kernel (of `--quantize int8` and of auto's int8): "onednn" (Int8Linear) or "fbgemm"
    measured: str  # the measurement behind the row
    dtype: str = "float32"  # `--dtype auto` alone on the CPU: the exact path in every class
    bf16_first: bool = False  # bf16 ahead of int8 (or within 5%: its error is the smaller): `--quantize auto` with `--dtype auto` runs the bf16 body
    one_thread: "Choice | None" = None  # the class's row at 1 thread, where measured to differ (else this row)

    @property
    def fastest(self) -> str:
        """The path `--quantize auto` runs with `--dtype auto`: "bfloat16", "int8" or "float32"."""
        return "bfloat16" if self.bf16_first else self.quantize or "float32"


# Each class's fastest faithful path, from measurements: benchmarks/bench_int8.py (the kernels at
# the body's shapes, one thread, all in one process in alternation) and benchmarks/bench_say.py
# (whole steps against the reference). A class whose int8 kernels differ with VNNI has a row for
# each ("+vnni": AVX-VNNI or AVX512-VNNI); a class whose fastest path differs at 1 thread has that
# row as its `one_thread` (a row holds at 2 threads and, unmeasured, above). A capped run on a bigger CPU (ONEDNN_MAX_CPU_ISA=...,
# and FBGEMM_ENABLE_INSTRUCTIONS, which FBGEMM reads instead) emulates a class on the same cores.
CHOICES: dict[str, Choice] = {
    "amx": Choice(
        "int8",
        "onednn",
        (
            "bench_int8.py 2026-12-01 (Xeon, AMX, 1 thread): oneDNN's int8 4.0-5.8x fp32 a layer at 300-2400 "
            "rows, FBGEMM's 1.7-2.2x slower than oneDNN's; bench_say.py (1 thread): int8 3.71x the reference a step, "
            "2.95x the whole command, fp32 0.89x; bench_say.py 2026-12-02 (Xeon, AMX, 2 threads, 16 steps, two runs): "
            "generate() int8 14.1 / 14.7 s against bf16 14.5 / 16.7 s, with the step cache 8.0 / 8.8 s against "
            "9.3 / 9.8 s: int8 at 2 threads"
        ),
        one_thread=Choice(
            "int8",
            "onednn",
            (
                "bench_say.py 2026-12-02 (Xeon, AMX, 1 thread, 16 steps, two runs): generate() bf16 22.7 / 23.2 s "
                "against int8 24.6 / 26.9 s, with the step cache bf16 16.0 / 15.8 s against int8 15.6 / 15.6 s (a tie "
                "within 5%: bf16's error is the smaller): bf16 at 1 thread (asked for float32, int8)"
            ),
            bf16_first=True,
        ),
    ),
    "avx512-bf16": Choice(
        "int8",
        "onednn",
        (
            "bench_say.py 2026-12-01 (Zen 4): int8 4.07x the reference a step, bf16 2.71x, fp32 1.39x; "
            "bench_int8.py at AVX512_CORE_BF16 (emulated): oneDNN's int8 2.7-3.0x fp32, FBGEMM's 1.02-1.33x slower"
        ),
    ),
    "avx512+vnni": Choice(
        "int8",
        "onednn",
        (
            "bench_int8.py at AVX512_CORE_VNNI (emulated): oneDNN's int8 2.1-3.1x fp32 a layer, FBGEMM's 1.01-1.23x slower"
        ),
    ),
    "avx512": Choice(
        "int8",
        "onednn",
        (
            "bench_int8.py at AVX512_CORE (emulated): oneDNN's int8 1.48-1.53x fp32 a layer, FBGEMM's 0.96-1.06x "
            "its time (a tie: oneDNN's fuses the adds and shares the gate's quantisation)"
        ),
    ),
    "avx2+vnni": Choice(
        "int8",
        "onednn",
        (
            "bench_int8.py at AVX2_VNNI (emulated): oneDNN's int8 (AVX-VNNI) 2.5-3.0x fp32 a layer, FBGEMM's "
            "(no AVX-VNNI kernels) 1.53-1.57x slower"
        ),
    ),
    "avx2": Choice(
        "int8",
        "fbgemm",
        (
            "bench_int8.py 2026-12-02 on a real AVX2 CPU (AMD EPYC Zen 3, 2 vCPU, loaded): at 2 threads FBGEMM's "
            "int8 0.53-0.64x oneDNN's time a layer (1.47-1.79x fp32), at 1 thread 1.03-1.07x oneDNN's (a tie "
            "within 5% at 300 rows: FBGEMM's error is the smaller, 2.5-2.9% against 2.6-3.1%) and 1.73-1.76x fp32; "
            "bf16 cannot run (no AVX-512: the engine loads float32); issue 29 (Zen 3): oneDNN's int8 2.01x the "
            "reference a step"
        ),
    ),
    "x86-64": Choice(
        "int8", "onednn", ("bench_int8.py at SSE41 (emulated): oneDNN's int8 2.1-2.4x fp32 a layer (FBGEMM needs AVX2)")
    ),
}
# another architecture (aarch64, ...): nothing measured, so auto is the exact path there
UNMEASURED = Choice(None, "onednn", "not measured on this architecture: auto keeps the exact float32 body")


def row_name(of: CpuInfo) -> str:
    """The row of CHOICES a CPU takes: its class, "+vnni" where the class has a row for it."""
    return f"{of.name}+vnni" if of.vnni and f"{of.name}+vnni" in CHOICES else of.name


def choice(of: CpuInfo | None = None, threads: int | None = None) -> Choice:
    """The row of CHOICES for `of` (default: this CPU, caps included) at `threads` torch threads
    (None: the row as measured at 2 threads and above)."""
    row = CHOICES.get(row_name(of or info()), UNMEASURED)
    return row.one_thread if threads == 1 and row.one_thread else row


@dataclass(frozen=True)
class Decision:
    """What a load runs on the CPU for a Hardware record (`decide`)."""

    quantize: str | None  # "int8" (the body in int8) or None
    dtype: str  # the dtype asked, "auto" made the class's on the CPU; "bfloat16" where auto is the bf16 body
    kernel: str  # the int8 kernel: "onednn" (Int8Linear) or "fbgemm" (linears.int8_kind)
    dropped: str | None = None  # what kept `quantize auto` from its int8: "compile" or "dtype" (else None)
    row: Choice = UNMEASURED  # the row of CHOICES behind it (its measurement: `omnivoice info`)


def decide(
    hw: Hardware | None = None,
    threads: int | None = None,
    *,
    on_cpu: bool = True,
    of: CpuInfo | None = None,
    bf16_runs: Callable[[], bool] | None = None,
) -> Decision:
    """What `hw` (default: Hardware()) runs on the CPU `of` (default: this one, caps included) at
    `threads` torch threads (default: hw.threads; None: the row as measured at 2 threads and
    above): the one place where the CPU's class and the thread count choose, by their row of CHOICES.

    `--dtype auto` on the CPU is the row's dtype (float32, the exact path, in every class).
    `--quantize auto` is the fastest path measured: the bf16 body where the row puts bf16 first
    (AMX at 1 thread), the dtype asked is auto or bfloat16, there is no compile and the CPU runs
    bf16 natively (`bf16_runs`: oneDNN's own answer, asked only then; default: the features'); else
    int8 where the row says so, unless a dtype other than float32 or compile was asked for (then
    the exact path of those, `dropped` naming the clash); None where the exact float32 body is the
    fastest; off the CPU (`on_cpu` False) nothing (the table is the CPU's). The int8 kernel:
    hw.int8_kernel, else the row's."""
    hw = hw or Hardware()
    of = of or info()
    row = choice(of, hw.threads if threads is None else threads)
    dtype = row.dtype if on_cpu and hw.dtype == "auto" else hw.dtype
    kernel = hw.int8_kernel or row.int8
    if hw.quantize != "auto" or not on_cpu:
        return Decision(hw.quantize if hw.quantize != "auto" else None, dtype, kernel, None, row)
    if (
        row.bf16_first
        and hw.dtype in ("auto", "bfloat16")
        and not hw.compile
        and of.native_bf16
        and (bf16_runs() if bf16_runs else of.onednn_bf16 is not False)
    ):
        return Decision(None, "bfloat16", kernel, None, row)
    if row.quantize == "int8" and (dtype != "float32" or hw.compile):
        return Decision(None, dtype, kernel, "compile" if hw.compile else "dtype", row)
    return Decision(row.quantize, dtype, kernel, None, row)


_INFO: CpuInfo | None = None
_BF16_RUNS: bool | None = None


def info() -> CpuInfo:
    """This CPU's CpuInfo, detected once (tests force another by setting `_INFO`)."""
    global _INFO
    if _INFO is None:
        _INFO = detect()
    return _INFO


def cpu_class() -> str:
    return info().name


def has_native_bf16() -> bool:
    return info().native_bf16


def has_vnni() -> bool:
    return info().vnni


def bf16_runs() -> bool:
    """Whether oneDNN can run bf16 products on this CPU (natively or emulated): the features say so
    (CpuInfo.onednn_bf16) and oneDNN itself agrees (torch's probe, which reads the same caps), so
    that a forced class is obeyed and an unexpected oneDNN refusal is caught before any weight is
    converted. oneDNN's own answer is asked once."""
    global _BF16_RUNS
    predicted = info().onednn_bf16
    if predicted is False:
        return False
    if _BF16_RUNS is None:
        try:
            from .. import torchprivate

            _BF16_RUNS = torchprivate.bf16_supported()
        except (AttributeError, RuntimeError):  # an older or other build: trust the features
            _BF16_RUNS = predicted is not False
    return _BF16_RUNS
