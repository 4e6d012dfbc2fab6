"""The decoder layer's forward on the CPU's narrow paths (`dtype=bfloat16`, `quantize="int8"`).

The same network as backbone.py's, computed with fewer passes over memory: on these paths a step
is no longer all matrix products, and every pass over an [N, H] tensor shows. Not the reference's
arithmetic (summation orders and roundings differ), so the fp32 path, which must give the
reference's tokens, never uses it.

- RMSNorm: one reduction (sum of squares accumulated in fp32), one scaling pass written straight
  in the input's dtype, one weighting pass (instead of a cast, a square, a mean, a scaling, a cast).
- q/k norm and RoPE: the rotation's two half products are accumulated into the scaled copy
  (`addcmul_`), no rotated copy, no negation; q and k come out in the attention's dtype.
- Attention: backbone.grouped_attention (two batched products and a softmax in bf16).
- The residual adds and the MLP's SiLU and gate product run in the epilogues of the products
  (`KernelLinear.add`, `KernelLinear.gated`: oneDNN post-ops), with no pass of their own.

Installed by linears.to_bfloat16 / linears.quantize_int8 through `install`.
"""

from __future__ import annotations

import torch

from .backbone import DecoderLayer, OmniVoiceModel, RMSNorm


def lean_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim in three passes: x * rsqrt(mean(x^2) + eps), rounded to x's dtype,
    then * weight (the same roundings as the reference's bf16 arithmetic; sums in another order)."""
    acc = torch.promote_types(x.dtype, torch.float32)  # fp32 sums for bf16 and fp32 (fp64 stays fp64)
    inv = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=acc)  # [..., 1] sqrt(sum x^2)
    inv = inv.square_().div_(x.shape[-1]).add_(eps).rsqrt_()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # dense even when x is a strided view
    torch.mul(x, inv, out=y)  # computed in fp32, stored in x's dtype
    return y.mul_(weight)


class LeanRMSNorm(RMSNorm):
    """RMSNorm computed by lean_rms_norm (the narrow paths' modules are switched to it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lean_rms_norm(x, self.weight, self.eps)


def norm_rope(x: torch.Tensor, norm: RMSNorm, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x [N, heads, D] (a view into the q/k/v product) -> RoPE(RMSNorm(x)) [N, heads, D] in `dtype`,
    rotate-half layout: out = y * cos + (-y2, y1) * sin, with cos, sin [N, D]."""
    y = lean_rms_norm(x, norm.weight, norm.eps)
    half = x.shape[-1] // 2
    c, s = cos[:, None], sin[:, None]  # [N, 1, D]
    out = torch.empty(y.shape, dtype=dtype, device=y.device)
    torch.mul(y, c, out=out)
    out[..., :half].addcmul_(y[..., half:], s[..., :half], value=-1)
    out[..., half:].addcmul_(y[..., :half], s[..., half:])
    return out


def attention_inputs(layer: DecoderLayer, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """h [N, H] -> q [h, N, D], k and v [kv, N, D] in the attention's dtype."""
    a = layer.self_attn
    n, dtype = h.shape[0], a.math_dtype or h.dtype
    q, k, v = a.qkv(layer.input_layernorm(h))
    q = norm_rope(q.view(n, a.n_heads, a.head_dim), a.q_norm, cos, sin, dtype)
    k = norm_rope(k.view(n, a.n_kv, a.head_dim), a.k_norm, cos, sin, dtype)
    v = v.to(dtype).view(n, a.n_kv, a.head_dim)
    return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)


def attention_output_and_mlp(layer: DecoderLayer, h: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """h + o_proj(attn), then + the MLP of its norm; the adds and the gate fused into the products."""
    a, m = layer.self_attn, layer.mlp
    h = a.o_proj.add(attn, h)  # a new tensor: o_proj(attn) + h
    x = layer.post_attention_layernorm(h)
    return m.down_proj.add(type(m.gate_proj).gated(m.gate_proj, m.up_proj, x), h)


def install(model: OmniVoiceModel, attention: torch.dtype) -> None:
    """Switch a converted body (linears.convert_layers) to this layer forward and its norms to
    LeanRMSNorm. Attention: grouped_attention in bf16; scaled_dot_product_attention when
    `attention` is float32 (it beats the batched products in fp32)."""
    for module in model.modules():
        if type(module) is RMSNorm:
            module.__class__ = LeanRMSNorm
    for layer in model.llm.layers:
        layer.self_attn.math_dtype = None if attention == torch.float32 else attention
    model._halves = (attention_inputs, attention_output_and_mlp)
