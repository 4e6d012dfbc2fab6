"""The hardware a checkpoint is loaded on, as asked: one record from the settings to the loader.

    hw = Hardware(device="cpu", quantize="auto", threads=2)   # app/session.hardware_from_settings
    engine = Engine.load("k2-fsa/OmniVoice", hw)              # loading.load_checkpoint(cls, model, hw)

Torch-free: the settings build it before anything loads. What `auto` becomes on this CPU at a
thread count (int8, bf16 or float32, and the int8 kernel) is `cpu.decide`'s, the one place that
chooses; the loader (loading.py) resolves the device and checks the rest.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """How a checkpoint is loaded: device, dtype, quantisation, compile, threads, kernels."""

    device: str = "auto"  # auto, cpu, cuda, cuda:N, mps
    dtype: str = "auto"  # auto, float32, float16, bfloat16
    quantize: str | None = None  # "int8" (the CPU body in int8), "auto" (the fastest measured: cpu.decide) or None
    compile: bool = False  # torch.compile the position-wise halves of each layer (compiled by a first forward)
    threads: int | None = None  # torch CPU threads (None: torch's own count)
    cuda_graphs: bool = True  # on CUDA, each packed layout's forward replayed as a CUDA graph
    int8_kernel: str | None = None  # "onednn" or "fbgemm" (linears.int8_kind); None: this CPU class's (cpu.decide)
