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
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass

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
    "avx512_fp16", "avx_vnni"
}  # fmt: skip
_ONEDNN_ISAS["AVX512_CORE_AMX"] = _ONEDNN_ISAS["AVX10_1_512_AMX"] = _ONEDNN_ISAS["AVX512_CORE_FP16"] | {
    "amx_tile", "amx_int8", "amx_bf16"
}  # fmt: skip
_ONEDNN_ISAS["AVX512_CORE_AMX_FP16"] = _ONEDNN_ISAS["AVX10_1_512_AMX_FP16"] = _ONEDNN_ISAS["AVX512_CORE_AMX"] | {"amx_fp16"}
_CONTROLLED = _ONEDNN_ISAS["AVX512_CORE_AMX_FP16"] | _ONEDNN_ISAS["AVX2_VNNI_2"]  # what a cap can take away
# ATEN_CPU_CAPABILITY's values (torch's vectorised kernels) -> the same; "avx512" caps nothing
_ATEN_CAPS = {"default": frozenset(), "avx2": _ONEDNN_ISAS["AVX2_VNNI_2"]}
_X86 = ("x86_64", "amd64", "i386", "i686", "x86")


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
            import torch

            _BF16_RUNS = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):  # an older or other build: trust the features
            _BF16_RUNS = predicted is not False
    return _BF16_RUNS
