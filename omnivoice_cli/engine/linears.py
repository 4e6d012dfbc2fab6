"""The CPU linears of the body: oneDNN fp32 (a weight repacked once into oneDNN's blocked layout)
and dynamic int8 (fbgemm). Both keep the module tree and state-dict keys of the network; the
network itself (backbone.py) knows nothing of them: loading.py picks one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .memory import release_pages

if TYPE_CHECKING:  # annotations only
    from .backbone import OmniVoiceModel


class OneDNNLinear(nn.Linear):
    """nn.Linear whose fp32 GEMM runs in oneDNN (the op torch's own CPU compiler uses) on a weight
    repacked into oneDNN's blocked layout at its first call. Measured on a 2-core AVX-512 EPYC,
    whole forwards of the full model: 2.62 s against 3.13 s with the default BLAS (2.85 s with
    oneDNN on the unpacked weight, which it repacks internally at every call). Packing at the first
    call costs what that first call would have spent anyway; the packed copy replaces the mmap'd
    weight's pages (released to the page cache, they fault back in if ever read)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.__dict__.get("packed")
        if packed is None:
            packed = self.__dict__["packed"] = torch.ops.mkldnn._reorder_linear_weight(self.weight, None)
            release_pages(self.weight)
        return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [], "")


_onednn_ok: bool | None = None


def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN's linear and it agrees with F.linear (checked once)."""
    global _onednn_ok
    if _onednn_ok is None:
        try:
            g = torch.Generator().manual_seed(0)
            x, w, b = torch.randn(37, 64, generator=g), torch.randn(48, 64, generator=g), torch.randn(48, generator=g)
            packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
            y = torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")
            _onednn_ok = bool(torch.backends.mkldnn.is_available()) and torch.allclose(y, F.linear(x, w, b), atol=1e-4)
        except (AttributeError, RuntimeError, NotImplementedError, TypeError):  # absent or changed
            _onednn_ok = False
    return _onednn_ok


def use_onednn_linears(model: nn.Module) -> int:
    """Compute every fp32 CPU nn.Linear of `model` with oneDNN; returns how many were switched
    (0 where the build lacks it). The modules keep their weights and state-dict keys."""
    if not onednn_linear_available():
        return 0
    n = 0
    for m in model.modules():
        if type(m) is nn.Linear and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32:
            m.__class__ = OneDNNLinear
            n += 1
    return n


def int8_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [out, in] -> (codes int8 [out, in], scales [out]): symmetric per output channel, as torch's
    per-channel weight observer: scale = max|w| / 127.5 floored at float32 eps, code = round(w / scale)
    in -128..127. (torch.quantize_per_channel divides in higher precision, so a weight exactly
    half-way between two codes may land one code away from its choice; this is twice as fast.)"""
    scale = (w.abs().amax(dim=1).float() / 127.5).clamp_min(torch.finfo(torch.float32).eps)  # [out]
    codes = torch.round(w.float() / scale[:, None]).clamp_(-128, 127).to(torch.int8)  # [out, in]
    return codes, scale


class Int8Linear(nn.Module):
    """A dynamic int8 linear layer (CPU, fbgemm): the weight is int8 per output channel, the input
    is quantised per tensor on the fly at each call, accumulation is int32, the output fp32."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        codes, scale = int8_weight(linear.weight.detach())
        zero = torch.zeros(len(scale), dtype=torch.long)
        qweight = torch._make_per_channel_quantized_tensor(codes, scale.double(), zero, 0)
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.packed = torch.ops.quantized.linear_prepack(qweight, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic(x, self.packed, True)  # True: 7-bit inputs, as fbgemm needs

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: OmniVoiceModel) -> int:
    """Dynamic int8 linear layers for the body on CPU: weights int8 per output channel,
    activations quantised on the fly each forward. Embeddings, norms and the audio heads stay fp32.
    (Per channel: 95% of step-0 argmaxes agree with fp32 on random weights, 86% per tensor, at the
    same speed.) Layer by layer, each fp32 weight's mmap'd pages released once it is packed, so
    memory never holds the whole fp32 body. Returns the number of linear layers quantised."""
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    todo = [
        (parent, name, child)
        for layer in model.llm.layers
        for parent in (layer.self_attn, layer.mlp)
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)  # OneDNNLinear too
    ]

    def build(item):
        parent, name, child = item
        q = Int8Linear(child)
        release_pages(child.weight)
        return parent, name, q

    with warnings.catch_warnings():  # torch marks its quantised tensor types deprecated
        warnings.simplefilter("ignore")
        # two at a time: fbgemm's packing runs on one core (measured: ~30% less time than one by one)
        with ThreadPoolExecutor(2) as pool:
            for parent, name, q in pool.map(build, todo):
                setattr(parent, name, q)
    return len(todo)
