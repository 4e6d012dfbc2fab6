"""Every private torch name the engine uses, here and nowhere else: oneDNN's prepacked linear and
convolution ops (the kernels torch's own CPU compiler emits), its int8 linear, the raw bytes of a
packed weight, torch's quantised tensors, a tensor's edit count and storages' weak pointers.

None of them is torch's public API: a torch upgrade may rename, re-sign or drop any of them, and
the first thing it breaks should be this file and its test (tests/test_torchprivate.py). `NAMES`
lists them; `missing()` says which this torch lacks (the probe the test runs). Each caller keeps its own fallback where one exists (linears.onednn_linear_available,
codecplan.can_pack, cpu.bf16_runs, int8pack's byte check): a name missing there turns its fast
path off, it does not fail.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

LINEAR = "torch.ops.mkldnn._linear_pointwise"  # (x, packed, bias, post-op, ...) fp32 / bf16, with a unary post-op
LINEAR_BINARY = "torch.ops.mkldnn._linear_pointwise.binary"  # ... with a binary post-op (add, mul)
REORDER_LINEAR = "torch.ops.mkldnn._reorder_linear_weight"  # a weight packed for LINEAR
CONV = "torch.ops.mkldnn._convolution_pointwise"  # a conv2d on a packed weight
CONV_ADD_ = "torch.ops.mkldnn._convolution_pointwise_.binary"  # ... added into `other`, in place
REORDER_CONV = "torch.ops.mkldnn._reorder_convolution_weight"  # a weight packed for CONV
BF16_SUPPORTED = "torch.ops.mkldnn._is_mkldnn_bf16_supported"  # whether oneDNN runs bf16 on this CPU
NBYTES = "torch.ops.mkldnn._nbytes"  # the bytes of an opaque (packed) oneDNN tensor
DATA_PTR = "torch.ops.mkldnn.data_ptr"  # ... and their address
QLINEAR = "torch.ops.onednn.qlinear_pointwise"  # oneDNN's u8 x s8 linear
QLINEAR_BINARY = "torch.ops.onednn.qlinear_pointwise.binary"  # ... with a binary post-op
QLINEAR_PREPACK = "torch.ops.onednn.qlinear_prepack"  # int8 codes packed for QLINEAR
PER_CHANNEL = "torch._make_per_channel_quantized_tensor"  # int8 codes as a quantised tensor
QUANTIZED_PREPACK = "torch.ops.quantized.linear_prepack"  # torch's quantised linear (fbgemm, qnnpack)
QUANTIZED_DYNAMIC = "torch.ops.quantized.linear_dynamic"
VERSION = "torch.Tensor._version"  # a tensor's in-place edit count
WEAK_REF = "torch.UntypedStorage._weak_ref"  # a storage's weak pointer (an int)
EXPIRED = "torch.UntypedStorage._expired"  # whether a weak pointer's storage is gone
FREE_WEAK_REF = "torch.UntypedStorage._free_weak_ref"  # a weak pointer given back

NAMES = (
    LINEAR,
    LINEAR_BINARY,
    REORDER_LINEAR,
    CONV,
    CONV_ADD_,
    REORDER_CONV,
    BF16_SUPPORTED,
    NBYTES,
    DATA_PTR,
    QLINEAR,
    QLINEAR_BINARY,
    QLINEAR_PREPACK,
    PER_CHANNEL,
    QUANTIZED_PREPACK,
    QUANTIZED_DYNAMIC,
    VERSION,
    WEAK_REF,
    EXPIRED,
    FREE_WEAK_REF,
)

# the exceptions a missing or changed private name raises when looked up or called
ABSENT = (AttributeError, RuntimeError, NotImplementedError, TypeError)


@functools.cache
def get(name: str) -> Any:
    """The object a name of NAMES stands for (looked up once); AttributeError or RuntimeError where
    this torch has no such thing (torch.ops raises either)."""
    first, *rest = name.split(".")
    assert first == "torch" and name in NAMES, name
    obj: Any = torch
    for part in rest:
        obj = getattr(obj, part)
    return obj


def missing() -> list[str]:
    """The names of NAMES this torch does not have (none: every fast path can run)."""
    return [name for name in NAMES if not present(name)]


def present(*names: str) -> bool:
    """Whether this torch has all of `names`."""
    try:
        for name in names:
            get(name)
    except ABSENT:
        return False
    return True


# ------------------------------------------------------------------------- oneDNN: fp32 and bf16


def reorder_linear_weight(weight: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """A weight [out, in] packed into oneDNN's blocked layout (for its dtype) for inputs of `rows`
    rows (None: oneDNN's default batch, 128), at the calling thread's thread count: the layout a
    product picks may depend on both (on AMX it does), and a product whose weight is not in its
    layout reorders it at every call."""
    return get(REORDER_LINEAR)(weight, rows)


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, post: str = "none") -> torch.Tensor:
    """x W^T (+ bias) on a packed weight, with a unary post-op ("none", "swish")."""
    return get(LINEAR)(x, packed, bias, post, [], "")


def linear_binary(x: torch.Tensor, other: torch.Tensor, packed: torch.Tensor, bias, op: str) -> torch.Tensor:
    """x W^T (+ bias) `op` other ("add" or "mul"), in the product's epilogue."""
    return get(LINEAR_BINARY)(x, other, packed, bias, op)


def bf16_supported() -> bool:
    """oneDNN's own answer: whether it runs bf16 products on this CPU."""
    return bool(get(BF16_SUPPORTED)())


def reorder_conv_weight(weight: torch.Tensor, padding: list, stride: list, dilation: list, groups: int, size: list):
    """A conv2d weight packed into oneDNN's layout for inputs of `size`."""
    return get(REORDER_CONV)(weight, padding, stride, dilation, groups, size)


def conv(x: torch.Tensor, weight: torch.Tensor, bias, padding: list, stride: list, dilation: list, groups: int):
    """conv2d on a packed weight (channels-last in, channels-last out)."""
    return get(CONV)(x, weight, bias, padding, stride, dilation, groups, "none", [], "")


def conv_add_(other: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias, padding, stride, dilation, groups):
    """other += conv2d(x) on a packed weight, in the convolution's epilogue (in place)."""
    return get(CONV_ADD_)(other, x, weight, bias, padding, stride, dilation, groups, "add", 1.0, None, [], None)


def packed_nbytes(packed: torch.Tensor) -> int:
    """The size in bytes of an opaque (packed) oneDNN tensor."""
    return int(get(NBYTES)(packed))


def packed_data_ptr(packed: torch.Tensor) -> int:
    """The address of an opaque (packed) oneDNN tensor's bytes."""
    return int(get(DATA_PTR)(packed))


# ------------------------------------------------------------------------------------------- int8


def qlinear_prepack(codes: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """int8 codes [out, in] packed for oneDNN's u8 x s8 linear, for inputs of `rows` rows (None:
    no hint), as reorder_linear_weight."""
    return get(QLINEAR_PREPACK)(codes, None if rows is None else [rows, codes.shape[1]])


def qlinear(codes, scale: float, zero: int, packed, w_scale, bias, post: str = "none") -> torch.Tensor:
    """oneDNN's u8 x s8 product of quantised inputs (codes, scale, zero point) and a packed weight
    (per-channel scales `w_scale`), fp32 out, with a unary post-op."""
    return get(QLINEAR)(codes, scale, zero, packed, w_scale, None, bias, 1.0, 0, torch.float32, post, [], "")


def qlinear_add(codes, scale: float, zero: int, packed, w_scale, other, bias, post: str = "none") -> torch.Tensor:
    """qlinear + other (fp32 [N, out]), in the product's epilogue."""
    return get(QLINEAR_BINARY)(
        codes, scale, zero, packed, w_scale, None, other, bias, 1.0, 0, torch.float32, 1.0, 0, "add", 1.0, post, [], ""
    )


def per_channel_quantized(codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, axis: int):
    """int8 codes as torch's quantised tensor, per channel along `axis`."""
    return get(PER_CHANNEL)(codes, scales, zeros, axis)


def quantized_linear_prepack(qweight: torch.Tensor, bias: torch.Tensor | None):
    """A quantised weight packed by torch's quantised engine in force."""
    return get(QUANTIZED_PREPACK)(qweight, bias)


def quantized_linear_dynamic(x: torch.Tensor, packed, reduce_range: bool) -> torch.Tensor:
    """torch's dynamic quantised linear (inputs quantised inside; `reduce_range`: 7-bit inputs)."""
    return get(QUANTIZED_DYNAMIC)(x, packed, reduce_range)


# ----------------------------------------------------------------------------- tensors, storages


def version(t: torch.Tensor) -> int | None:
    """A tensor's in-place edit count (None for an inference tensor, which cannot be edited outside
    inference mode and keeps no count)."""
    try:
        return get(VERSION).__get__(t)  # the attribute's descriptor, read for `t`
    except RuntimeError:
        return None


def storage_weak_ref(storage: object) -> int | None:
    """torch's weak pointer to a storage (an int; every tensor viewing it keeps it alive), or None
    for an object without one."""
    weak = getattr(storage, WEAK_REF.rsplit(".", 1)[1], None)
    return None if weak is None else weak()


def weak_ref_expired(ref: int) -> bool:
    """Whether the storage of a weak pointer (storage_weak_ref) is gone."""
    return bool(get(EXPIRED)(ref))


def free_weak_ref(ref: int) -> None:
    """Give a weak pointer back (storage_weak_ref's)."""
    get(FREE_WEAK_REF)(ref)
