"""The int8 body's layer forward with the work between its products fused (kernels.c): narrow.py's
layer forward, each run of elementwise torch ops between two products one kernel of one or two
passes. Per layer:

- the input norm and the activations' codes for q/k/v: one kernel (the normed [N, H] never exists),
  the rows' 1 / rms by torch's reduction (one read of h) so that the codes are narrow.py's bit for bit;
- q and k: their norm, RoPE and the rounding to the attention's dtype, one pass each, head-major;
- the attention's softmax (bf16 scores) in one kernel, its exponentials a polynomial (within 3e-6);
- the attention's result written in bf16 where it computes in bf16 (exact: its values are bf16), and
  coded for o_proj in one kernel (bit for bit int8pack.quantize_activations);
- the post-attention norm and its codes: one kernel; the gate's product (SiLU in the product's
  epilogue) times the up product, coded for down_proj in one kernel (the [N, I] product never exists);
- the residual adds stay in the products' epilogues;
- where the attention computes in bf16, the layer as one function (fused_layer, the seam's
  LayerPath.layer): q and k's norm + RoPE and v's rounding in one kernel written straight into each
  packed row's dense blocks, the attention's result written into such blocks and coded from them,
  so that no row's slice is copied in or out (the same values as the three parts').

The products, the attention and the model are narrow.py's; linears.quantize_int8 installs this
forward (the model's seam, backbone.LayerPath) where the layers are oneDNN's Int8Linears and the
kernels build on this machine (kernels.load), else narrow.py's stays. The arithmetic is narrow.py's
but for q and k's norms (their sums of squares in another order: their last bits) and the softmax's
exponential (a polynomial within 3e-6).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

import torch

from ..model.backbone import DecoderLayer, LayerPath, OmniVoiceModel, RMSNorm
from . import kernels as kernel_build
from .narrow import (
    FoldedNorm,
    LeanRMSNorm,
    NarrowAttention,
    attention_output_and_mlp,
    grouped_attention,
    put_in_place,
    stacked_rope,
)

if TYPE_CHECKING:  # annotations only
    from .kernels import Kernels


class Int8Product(Protocol):
    """What this forward asks of a layer's linear (linears.Int8Linear: linears imports this module)."""

    half: int

    def run(
        self, q: tuple[torch.Tensor, float], post: str = "none", other: torch.Tensor | None = None
    ) -> torch.Tensor: ...


def fused_attention_inputs(k8: "Kernels", layer: DecoderLayer, h: torch.Tensor, cos_sin: torch.Tensor, _=None):
    """h [N, H] fp32, cos_sin [2, N, D] (narrow.stacked_rope) -> q [h, N, D], k [kv, N, D] dense in
    the attention's dtype, v [kv, N, D] a view of the product (narrow.attention_inputs' contract)."""
    a = cast(NarrowAttention, layer.self_attn)
    n, d = h.shape[0], a.head_dim
    q, k, v = _qkv_product(k8, layer, h).split(a.fused_qkv.sizes, dim=-1)  # type: ignore[attr-defined]
    dtype = a.math_dtype or torch.float32
    vh = v.view(n, a.n_kv, d).transpose(0, 1)  # head-major, a view (rounded by the attention)
    if a.math_dtype is None:
        vh = torch.empty(a.n_kv, n, d, dtype=dtype).copy_(vh)  # dense, as q and k
    return (*_rotated(k8, a, q, k, cos_sin, dtype), vh)


def _qkv_product(k8: "Kernels", layer: DecoderLayer, h: torch.Tensor) -> torch.Tensor:
    """h [N, H] fp32 -> the q/k/v product [N, (h + 2 kv) D] fp32 of its norm, coded in one kernel."""
    fused = cast(NarrowAttention, layer.self_attn).fused_qkv  # linears.Fused
    linear = cast(Int8Product, fused.linear)  # type: ignore[attr-defined]
    norm = layer.input_layernorm
    return linear.run(k8.rms_norm_quantize(h, norm.weight, norm.eps, linear.half))


def fused_attention_output_and_mlp(
    k8: "Kernels", layer: DecoderLayer, h: torch.Tensor, attn: torch.Tensor
) -> torch.Tensor:
    """h + o_proj(attn), then + down(silu(gate(x)) * up(x)) for x its norm; attn [N, h * D] in
    fp32 or bf16."""
    return _output_and_mlp(k8, layer, h, k8.quantize(attn, cast(Int8Product, layer.self_attn.o_proj).half))


def fused_layer(
    k8: "Kernels", layer: DecoderLayer, h: torch.Tensor, cos_sin: torch.Tensor, _, seq_lens: list[int], prompts=(),
    index: int = 0,
) -> torch.Tensor:  # fmt: skip
    """The whole int8 layer where the attention computes in bf16 (LayerPath.layer): as
    fused_attention_inputs, attend and fused_attention_output_and_mlp, the same values, but q, k
    and v written by one kernel straight into each packed row's dense blocks (kernels.qkv_rows: no
    copy of a row's slice), the attention's result written into such blocks and coded for o_proj
    from them (kernels.quantize_rows: no copy back into position order)."""
    a = cast(NarrowAttention, layer.self_attn)
    qn, kn, d = cast(FoldedNorm, a.q_norm), cast(FoldedNorm, a.k_norm), a.head_dim
    y = _qkv_product(k8, layer, h)
    q, k, v = k8.qkv_rows(y, a.n_heads, cos_sin, (qn.rope_weights, qn.eps), (kn.rope_weights, kn.eps), seq_lens)
    out = torch.empty_like(q)
    blocks = (kernel_build.row_blocks(x, m, d, seq_lens) for x, m in ((q, a.n_heads), (k, a.n_kv), (v, a.n_kv)))
    for row, (qr, kr, vr, o) in enumerate(zip(*blocks, kernel_build.row_blocks(out, a.n_heads, d, seq_lens))):
        if prompts and prompts[row] is not None:
            kr, vr = prompts[row].keys_values(index, kr, vr)
        grouped_attention(qr, kr, vr, torch.bfloat16, a.softmax_, out=o)
    o_proj = cast(Int8Product, a.o_proj)
    return _output_and_mlp(k8, layer, h, k8.quantize_rows(out, a.n_heads, d, seq_lens, o_proj.half))


def _output_and_mlp(k8: "Kernels", layer: DecoderLayer, h: torch.Tensor, codes: tuple[torch.Tensor, float]):
    """h + o_proj(the attention's result, coded), then + down(silu(gate(x)) * up(x)) for x its norm."""
    a, m = layer.self_attn, layer.mlp
    o, gate, up, down = (cast(Int8Product, x) for x in (a.o_proj, m.gate_proj, m.up_proj, m.down_proj))
    h = o.run(codes, other=h)  # a new tensor: o_proj(attn) + h
    norm = layer.post_attention_layernorm
    codes = k8.rms_norm_quantize(h, norm.weight, norm.eps, gate.half)
    g, u = gate.run(codes, "swish"), up.run(codes)
    return down.run(k8.mul_quantize(g, u, down.half), other=h)


def bf16_attention_inputs(k8: "Kernels", layer: DecoderLayer, h: torch.Tensor, cos_sin: torch.Tensor, _=None):
    """The bf16 body's: h [N, H] bf16 -> q [h, N, D], k [kv, N, D] dense bf16 (norm, RoPE and the
    rounding in one pass each), v [kv, N, D] a view of the product (narrow.attention_inputs' contract)."""
    a = cast(NarrowAttention, layer.self_attn)
    q, k, v = a.qkv(layer.input_layernorm(h))  # the norm: a KernelRMSNorm
    return (*_rotated(k8, a, q, k, cos_sin, torch.bfloat16), v.view(h.shape[0], a.n_kv, a.head_dim).transpose(0, 1))


def _rotated(k8: "Kernels", a: NarrowAttention, q: torch.Tensor, k: torch.Tensor, cos_sin: torch.Tensor, dtype):
    """q [N, h * D] and k [N, kv * D] (views of the product) -> q [h, N, D] and k [kv, N, D] dense in
    `dtype`: each normed by its FoldedNorm, rotated and rounded in one pass (kernels.norm_rope)."""
    n, d = q.shape[0], a.head_dim
    qn, kn = cast(FoldedNorm, a.q_norm), cast(FoldedNorm, a.k_norm)
    q = k8.norm_rope(q.view(n, a.n_heads, d), cos_sin, qn.rope_weights, qn.eps, dtype)
    k = k8.norm_rope(k.view(n, a.n_kv, d), cos_sin, kn.rope_weights, kn.eps, dtype)
    return q.transpose(0, 1), k.transpose(0, 1)


class KernelRMSNorm(LeanRMSNorm):
    """A bf16 body's RMSNorm in one pass (kernels.rms_norm_bf16) for bf16 rows, else lean_rms_norm."""

    kernels: "Kernels"

    @classmethod
    def with_kernels(cls, norm: RMSNorm, k8: "Kernels") -> "KernelRMSNorm":
        new = cast(KernelRMSNorm, cls.of(norm))
        new.kernels = k8
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.bfloat16 and x.dim() == 2 and x.stride(1) == 1 and x.shape[1] <= 8192:
            return self.kernels.rms_norm_bf16(x, self.weight, self.eps)
        return super().forward(x)


def _linears(layer: DecoderLayer) -> list[object]:
    a, m = layer.self_attn, layer.mlp
    return [getattr(getattr(a, "fused_qkv", None), "linear", None), a.o_proj, m.gate_proj, m.up_proj, m.down_proj]


def install(model: OmniVoiceModel) -> bool:
    """This layer forward in `model`'s seam, where the kernels build here (kernels.load) and the body
    is narrow.py's int8 one (linears.quantize_int8, oneDNN's Int8Linears: their kind "int8"; FBGEMM's
    and torch's quantise inside) or its bf16 one (linears.to_bfloat16); True where installed."""
    k8 = kernel_build.load()
    layers = [cast(DecoderLayer, m) for m in model.llm.layers]
    kinds = {getattr(x, "kind", None) for layer in layers for x in _linears(layer)}
    narrow_body = all(isinstance(layer.self_attn, NarrowAttention) for layer in layers)
    if k8 is None or not narrow_body or kinds not in ({"int8"}, {"bf16"}):
        return False
    for layer in layers:
        a = cast(NarrowAttention, layer.self_attn)
        if a.math_dtype == torch.bfloat16:
            a.softmax_ = k8.softmax_  # the scores' softmax in one kernel
    if kinds == {"bf16"}:
        put_in_place(model, lambda m: KernelRMSNorm.with_kernels(m, k8) if type(m) is LeanRMSNorm else None)
        model.use_layer_path(LayerPath(stacked_rope, partial(bf16_attention_inputs, k8), attention_output_and_mlp))
        return True
    for layer in layers:
        a = cast(NarrowAttention, layer.self_attn)
        a.out_dtype = a.math_dtype or torch.float32  # coded at once: bf16 is read as it is
    rows = all(cast(NarrowAttention, layer.self_attn).math_dtype == torch.bfloat16 for layer in layers)
    inputs, outputs = partial(fused_attention_inputs, k8), partial(fused_attention_output_and_mlp, k8)
    model.use_layer_path(LayerPath(stacked_rope, inputs, outputs, partial(fused_layer, k8) if rows else None))
    return True


def installed(model: OmniVoiceModel) -> bool:
    """Whether `model` runs this file's layer forward (int8 or bf16)."""
    inputs = model.layer_path.inputs
    return isinstance(inputs, partial) and inputs.func in (fused_attention_inputs, bf16_attention_inputs)
