"""Loading a checkpoint: what `Engine.load` does.

Threads, device and dtype are resolved and checked first (before anything is read); then the
checkpoint is found (hub.download_checkpoint when it is a hub id), the body is built on the meta device and
strictly loaded from the mapped file, switched to its CPU linears (int8, oneDNN) or compiled,
and the tokenizer and the codec's decoder are loaded beside it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch

from .checkpoint import hub, tensorfile
from .errors import CheckpointError, InvalidRequest
from .fast import codecplan, cpu, kernels, memory, weightcache
from .fast.graphs import GraphedForward
from .fast.linears import (
    FbgemmInt8Linear,
    Int8Linear,
    LegacyInt8Linear,
    int8_kind,
    onednn_linear_available,
    quantize_int8,
    to_bfloat16,
    use_onednn_linears,
)
from .hardware import Hardware
from .model.backbone import OmniVoiceModel
from .model.codec import HiggsDecoder, read_codec_decoder
from .model.config import ModelConfig, int8_clash, int8_problem
from .text.tokenizer import TextTokenizer


def resolve_device(device: str = "auto") -> "torch.device":
    allowed = ("auto", "cpu", "cuda", "mps")
    if device not in allowed and not device.startswith("cuda:"):
        raise InvalidRequest(f"device {device!r} is not allowed: use one of {', '.join(allowed)}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidRequest(f"device {device!r} is not available: this torch build sees no CUDA GPU (use cpu)")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidRequest("device 'mps' is not available on this machine (use cpu)")
    return torch.device(device)


def resolve_dtype(dtype: str, cfg: ModelConfig) -> "torch.dtype":
    """A dtype's name as torch's; "auto" (left so off the CPU by cpu.decide) the checkpoint's."""
    names = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if dtype == "auto":
        return names[cfg.load_dtype]
    if dtype not in names:
        raise InvalidRequest(f"dtype {dtype!r} is not allowed: use auto, float32, float16 or bfloat16")
    return names[dtype]


def _set_threads(threads: int | None) -> int:
    """Check and set torch's CPU thread count (None: keep torch's); the count the engine runs with."""

    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidRequest(f"threads {threads!r} is not allowed: use an integer >= 1")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def use_threads(count: int | None) -> None:
    """Run torch in the calling thread on `count` CPU threads (what the engine was loaded with).

    torch.set_num_threads reaches only the thread that calls it and the threads that have not run
    torch yet: each thread has its own OpenMP and MKL thread count, which torch sets from its
    process-wide count once, at the thread's first parallel operation. A thread that had run
    torch before (a server's engine loop started before another engine was loaded with other
    --threads; the main thread after that load; a caller's thread pool) goes on with its old
    count, and a sum split over another number of threads adds its floats up in another order:
    other samples. So every entry of the engine that runs torch calls this first."""

    if count is not None and torch.get_num_threads() != count:
        torch.set_num_threads(count)


def _resolve_hardware(hw: Hardware, notice: Callable[[str], None]):
    """(device, quantize) of `hw`, checked against each other before any reading. int8 is a CPU
    path: with device "auto" on a machine with a GPU it is dropped (said through `notice`), so
    that a preset asking for it runs everywhere; with a GPU named explicitly it is refused. "auto"
    (the fastest path measured on this CPU's class) is left for cpu.decide, once the thread count
    is known; off the CPU it is nothing (the table is the CPU's)."""
    device, quantize, compile = hw.device, hw.quantize, hw.compile
    if quantize not in (None, "int8", "auto"):
        raise InvalidRequest(f"quantize {quantize!r} is not allowed: use int8 or auto (or leave it off)")
    dev = resolve_device(device)
    if quantize == "auto" and dev.type != "cpu":
        quantize = None
    if quantize == "int8" and int8_clash(dev.type, None, False):
        if device != "auto":
            raise InvalidRequest(int8_problem("device", dev.type), "quantize")
        notice(f"quantize int8 is for the CPU: running on {dev.type} without it")
        quantize = None
    if quantize == "int8" and int8_clash(None, None, compile):
        raise InvalidRequest(int8_problem("compile", ""))
    return dev, quantize


def _check_cpu_bf16(dev, dt, notice: Callable[[str], None]) -> "torch.dtype":
    """What bfloat16 means on this CPU (cpu.py), said in one line where it is not the plain thing:
    oneDNN bf16 where the CPU multiplies bf16 natively (AVX512-BF16, AMX); oneDNN's emulated bf16,
    slower than float32, on AVX-512 without them; float32 where oneDNN cannot run bf16 at all (AVX2
    only: its bf16 weight reorder refuses), which is also what that CPU runs fastest (torch's own bf16
    products are several times slower there: benchmarks/speed-log.md). Returns the dtype to load in."""

    if dev.type != "cpu" or dt != torch.bfloat16:
        return dt
    if onednn_linear_available() and not cpu.bf16_runs():
        notice(
            f"bfloat16 is not supported on this CPU ({cpu.cpu_class()}: oneDNN needs AVX-512 for it): running in float32"
        )
        return torch.float32
    if not cpu.has_native_bf16():
        notice(
            f"bfloat16 is emulated on this CPU ({cpu.cpu_class()}: no AVX512-BF16 or AMX): expect it slower than float32"
        )
    return dt


def load_body(
    root: Path,
    cfg: ModelConfig,
    dev,
    dt,
    quantize: str | None,
    compile: bool,
    notice: Callable[[str], None] | None = None,
    kernel: str | None = None,
):
    """The OmniVoiceModel, built on the meta device, strictly loaded, then switched to its CPU
    linears (int8 on `kernel`, default the CPU class's; bf16 or fp32 oneDNN) or compiled. int8's
    codes come from the weight cache when it holds them (weightcache.py), else are made and kept
    there."""

    # CPU bf16 with oneDNN: converted layer by layer from the mapped fp32 file (else loaded as bf16)
    cpu_bf16 = dev.type == "cpu" and dt == torch.bfloat16 and not compile and onednn_linear_available()
    with torch.device("meta"):
        net = OmniVoiceModel(cfg)
    tensorfile.load_module(
        net,
        root / "model.safetensors",
        optional=["codebook_layer_offsets"],
        dtype=None if cpu_bf16 else dt,
        device=dev,
        prefetch=not (quantize or cpu_bf16),  # converting reads every weight at once anyway
        prefetch_skip=["llm.embed_tokens.weight"],  # 620 MB, of which a step reads a few rows
    )
    check_offsets(net, root)
    net.eval()
    if quantize == "int8":
        kind = int8_kind(kernel)
        make, done = weightcache.int8_maker(net, root, kind, notice or (lambda line: None))
        try:
            quantize_int8(net, make, kind)
        except BaseException:
            done(False)
            raise
        done(True)
    elif cpu_bf16:
        to_bfloat16(net)
    if compile:
        net.compile_layers()
    elif dev.type == "cpu" and dt == torch.float32:
        use_onednn_linears(net)  # the fp32 linears left (all, or the heads when quantised)
    return net


def check_offsets(net, root: Path) -> None:
    """codebook_layer_offsets may be absent from the file (then derived); if present it must be
    the layout the engine assumes."""

    offsets = net.codebook_layer_offsets
    loaded = not offsets.is_meta
    if loaded and not torch.equal(offsets.cpu(), net.codebook_offsets()):
        raise CheckpointError(
            f"{root / 'model.safetensors'}: codebook_layer_offsets {offsets.tolist()} != {net.codebook_offsets().tolist()}"
        )
    net.init_buffers(net.audio_heads.weight.device, offsets_loaded=loaded)


def load_codec_decoder(audio_tokenizer_dir: Path, cfg, device="cpu") -> HiggsDecoder:
    """The codec's decoder (codec.read_codec_decoder: float32, the decode tensors only) with its
    faster decode installed (codecplan.install_plan: on a CPU, the plan made here, once)."""
    decoder = read_codec_decoder(audio_tokenizer_dir, cfg, device)
    codecplan.install_plan(decoder)
    return decoder


def load_tokenizer(root: Path, cfg: ModelConfig):
    tokenizer = TextTokenizer.from_file(root / "tokenizer.json")
    if tokenizer.vocab_size > cfg.backbone.vocab_size:
        raise CheckpointError(
            f"{root / 'tokenizer.json'} has {tokenizer.vocab_size} tokens but the model embeds "
            f"{cfg.backbone.vocab_size}"
        )
    return tokenizer


def load_checkpoint(
    engine_cls,
    model: str | None = None,
    hardware: Hardware | None = None,
    *,
    on_notice: Callable[[str], None] | None = None,
    on_download: Callable[[int, int], None] | None = None,
):
    """Load a checkpoint on `hardware` (default: Hardware(), all auto) into `engine_cls(root, cfg,
    tokenizer, model, codec, device, dtype)` (see Engine.load for the callbacks)."""

    hw = hardware or Hardware()
    notice = on_notice or (lambda line: None)
    count = _set_threads(hw.threads)
    memory.keep_heap()
    dev, quantize = _resolve_hardware(hw, notice)
    root = hub.resolve_checkpoint(model, on_notice, on_download)
    cfg = ModelConfig.from_checkpoint(root)
    on_cpu = dev.type == "cpu"
    chosen = cpu.decide(replace(hw, quantize=quantize), count, on_cpu=on_cpu, bf16_runs=cpu.bf16_runs)
    dt = resolve_dtype(chosen.dtype, cfg)
    if chosen.dropped:
        clash = "compile" if chosen.dropped == "compile" else f"dtype {chosen.dtype}"
        notice(
            f"quantize auto: int8 (the fastest on this CPU, {cpu.cpu_class()}) needs float32 and no "
            f"compile: without it here ({clash})"
        )
    quantize = chosen.quantize
    if quantize and dt != torch.float32:
        raise InvalidRequest(int8_problem("dtype", str(hw.dtype)), "quantize")
    dt = _check_cpu_bf16(dev, dt, notice)
    net = load_body(root, cfg, dev, dt, quantize, hw.compile, notice, chosen.kernel)
    memory.release_free_memory()  # the conversions' freed temporaries (~0.2 GB for int8), kept by keep_heap
    tokenizer = load_tokenizer(root, cfg)
    codec_device = torch.device("cpu") if dev.type == "mps" else dev  # MPS convs cap lengths at 65536
    codec = load_codec_decoder(root / "audio_tokenizer", cfg.codec, device=codec_device)
    engine = engine_cls(root, cfg, tokenizer, net, codec, dev, dt)
    engine.threads = count
    engine.quantize = quantize
    if hw.cuda_graphs and dev.type == "cuda" and not hw.compile:
        engine.forward = GraphedForward(net)
    if hw.compile:  # torch.compile compiles on the first call: now, as part of loading, not in a request
        engine.warm_up()
    return engine


def cpu_paths(verbose: bool = False) -> list[tuple[str, str]]:
    """What this machine is and what the CPU settings run on it, as (label, value) rows for
    `omnivoice info`: the CPU's class and flags (cpu.py, caps included), what `--dtype auto` and
    `--quantize auto` choose (cpu.CHOICES) and why in words (`verbose`: the measurement behind
    it), the int8 kernel, what `--dtype bfloat16` does, torch and its threads, the GPUs torch sees."""

    threads = torch.get_num_threads()
    info, chosen = cpu.info(), cpu.choice(threads=threads)
    other = cpu.choice(threads=2 if threads == 1 else 1)
    differs = other is not chosen  # a class whose choice depends on the thread count (AMX)
    kind = int8_kind()
    described: dict[type, str] = {  # a kernel not named here is described by its own `kind`
        Int8Linear: f"oneDNN's u8 x s8 kernel, {8 if Int8Linear.half == 127 else 7}-bit activations",
        FbgemmInt8Linear: "FBGEMM's dynamic quantised linear, 7-bit activations",
        LegacyInt8Linear: "torch's quantised ops (this torch build has no oneDNN int8)",
    }
    kernel = described.get(kind, str(getattr(kind, "kind", kind.__name__)))
    if onednn_linear_available() and not cpu.bf16_runs():
        bf16 = "runs float32 (oneDNN cannot run bf16 on this CPU)"
    elif cpu.has_native_bf16():
        bf16 = "native bf16 (AVX512-BF16 / AMX)"
    else:
        bf16 = "emulated bf16: slower than float32"
    gpus = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    return [
        ("cpu", f"{cpu.model_name()}, {os.cpu_count()} logical cores"),
        ("class", info.describe()),
        ("flags", " ".join(info.flags()) or "-"),
        ("--dtype auto", f"{chosen.dtype} on the CPU (exact); on a GPU the checkpoint's dtype"),
        ("--quantize auto", _auto_path(chosen) + (f" (at {threads} thread{'s' * (threads > 1)})" if differs else "")),
        ("  measured", chosen.measured) if verbose else ("  why", _why(chosen)),
        *([(f"  at {'2+ threads' if threads == 1 else '1 thread'}", _auto_path(other))] if differs else []),
        ("--quantize int8", kernel),
        ("--dtype bfloat16", bf16),
        ("fused kernels", kernels.state_in_words()),
        ("torch", f"{torch.__version__}, {torch.get_num_threads()} threads"),
        ("gpu", ", ".join(gpus) or "none"),
    ]


def _why(row: "cpu.Choice") -> str:
    """Why `--quantize auto` runs what it runs here, in words (the figures: `info --verbose`)."""
    if row is cpu.UNMEASURED:
        return row.measured
    return f"the fastest path measured on {cpu.cpu_class()} CPUs (info --verbose: the measurements)"


def _auto_path(row: "cpu.Choice") -> str:
    """What `--quantize auto` runs by a row of cpu.CHOICES, in words (`omnivoice info`)."""
    if row.fastest == "bfloat16":
        return "the bf16 body (int8 with --dtype float32)"
    return "int8" if row.quantize == "int8" else "none (the exact float32 body)"
