"""The decoder layer's forward on the CPU's narrow paths (`dtype=bfloat16`, `quantize="int8"`).

The same network as backbone.py's, computed with fewer passes over memory: on these paths a step
is no longer all matrix products, and every pass over an [N, H] tensor shows. Not the reference's
arithmetic (summation orders and roundings differ), so the fp32 path, which must give the
reference's tokens, never uses it.

- Every pass runs in one dtype: a bf16 tensor is widened once, worked in fp32 and rounded once.
  torch runs mixed-dtype passes (a bf16 operand beside an fp32 one, an fp32 result written as
  bf16) unvectorised, several times slower than a cast followed by same-dtype passes (measured:
  q's norm and RoPE 1.9 ms as mixed passes, 0.7 ms so, for 523 positions).
- RMSNorm: one reduction (fp32 sums), one scaling, one weighting (instead of a cast, a square, a
  mean, a scaling, a cast).
- q/k norm and RoPE: the norm's weight folded into RoPE's tables (cos and sin in fp32, stacked
  once per forward, times the weight: one small product per layer), the norm's scale applied
  last; the int8 path's fp32 product read where it lies (no widening copy: measured 0.5-0.7x the
  time of q's and k's norm and RoPE; bf16 is widened once, head-major); worked head-major from
  the first write, the rotation's two half products accumulated into the scaled copy
  (`addcmul_`), no rotated copy. (q and k normed as one, [G, heads/G, N, D] against per-group
  tables, measured slower: 1.25x at 1 thread.)
- Attention: backbone.grouped_attention (two batched products and a softmax in bf16), q, k and v
  rounded to bf16 row by row into the dense blocks its batched products read (a product on the
  CPU copies a strided operand first: that copy is the rounding now, no pass of its own); on the
  int8 path its result is written in fp32 (`Attention.out_dtype`), what o_proj's quantisation reads.
- The residual adds and the MLP's SiLU and gate product run in the epilogues of the products
  (`KernelLinear.add`, `KernelLinear.gated`: oneDNN post-ops), with no pass of their own.

Installed by linears.to_bfloat16 / linears.quantize_int8 through `install`.
"""

from __future__ import annotations

from typing import cast

import torch

from ..model.backbone import DecoderLayer, OmniVoiceModel, RMSNorm, rope_cos_sin


def _inv_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D] (fp32 or fp64) -> rsqrt(mean(x^2) + eps) [..., 1]."""
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()


def _scale_by_rms(xf: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """xf (dense, fp32 or fp64) scaled in place: xf * rsqrt(mean(xf^2) + eps) * weight, last dim."""
    return xf.mul_(_inv_rms(xf, eps)).mul_(weight.to(xf.dtype))


def lean_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * weight, computed in fp32 (fp64 stays
    fp64) and rounded once to x's dtype. A bf16 x is widened once: torch's mixed-dtype passes (a bf16
    operand beside an fp32 one, or an output of another dtype) run unvectorised, several times
    slower than a cast plus same-dtype passes."""
    acc = torch.promote_types(x.dtype, torch.float32)
    if x.dtype == acc:  # scaled into a new dense tensor (x may be a strided view)
        return torch.mul(x, _inv_rms(x, eps)).mul_(weight.to(acc))
    return _scale_by_rms(x.to(acc), weight, eps).to(x.dtype)


class LeanRMSNorm(RMSNorm):
    """RMSNorm computed by lean_rms_norm (the narrow paths' modules are switched to it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lean_rms_norm(x, self.weight, self.eps)


def rope_weights(weight: torch.Tensor) -> torch.Tensor:
    """A q/k norm's weight w [D] -> [2, 1, D] fp32: w, and (-w2, w1) (halves swapped, the first
    negated): what cos and sin are multiplied by when the weight is folded into RoPE (rope_tables)."""
    w = weight.detach().to(torch.float32)
    half = w.shape[0] // 2
    return torch.stack([w, torch.cat([-w[half:], w[:half]])])[:, None]


def rope_tables(weights: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """The norm's weight folded into RoPE's tables: for y = x * rsqrt(mean(x^2) + eps),
    RoPE(y * w) = y * (cos * w) + (y2, y1) * (sin * (-w2, w1)).
    weights [2, 1, D] (rope_weights), cos_sin [2, N, D] -> [2, N, D] in cos_sin's dtype."""
    return cos_sin * weights.to(cos_sin.dtype)


def norm_rope(x: torch.Tensor, tables: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    """x [N, heads, D] (a view into the q/k/v product) -> RoPE(RMSNorm(x)) [N, heads, D] in `dtype`,
    rotate-half layout, the norm's weight folded into `tables` [2, N, D] (rope_tables). Computed in
    the tables' dtype (fp32, or fp64) and rounded once; the norm's scale is applied last. An x of
    the tables' dtype (the int8 path's fp32 product) is read where it lies, strided: the sum of
    squares and the first product read it, no widening copy; another dtype (bf16) is widened once,
    head-major. Worked head-major from the first write on: the result is a transposed view of a
    dense [heads, N, D]. Asked for the tables' dtype, nothing is rounded (the attention rounds q
    and k row by row, into the dense blocks its batched products read: backbone.Attention.attend)."""
    n, heads, d = x.shape
    half = d // 2
    cw, sw = tables
    if x.dtype == tables.dtype:
        y = x.transpose(0, 1)  # read in place, no widening copy (the same bits as over a dense copy: tested)
        inv = _inv_rms(y, eps)
    else:
        y = torch.empty(heads, n, d, dtype=tables.dtype, device=x.device)
        y.copy_(x.transpose(0, 1))  # widened and head-major in one pass
        inv = _inv_rms(y, eps)
    z = torch.mul(y, cw, out=torch.empty(heads, n, d, dtype=tables.dtype, device=x.device))  # dense, head-major
    z[..., :half].addcmul_(y[..., half:], sw[:, :half])
    z[..., half:].addcmul_(y[..., :half], sw[:, half:])
    return z.mul_(inv).to(dtype).transpose(0, 1)


def stacked_rope(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype):
    """The model's RoPE on the narrow paths: (cos and sin stacked [2, N, D] in fp32, None), built
    once per forward; the layers fold each norm's weight into it (rope_tables). Never rounded to
    bf16: bf16's cos and sin would turn every rotation by up to 0.4%."""
    return torch.stack(rope_cos_sin(positions, inv_freq, torch.float32)), None


def attention_inputs(layer: DecoderLayer, h: torch.Tensor, cos_sin: torch.Tensor, _=None):
    """h [N, H], cos_sin [2, N, D] (stacked_rope) -> q [h, N, D], k and v [kv, N, D]: where the
    attention computes in a narrower dtype (`math_dtype`, bf16), q and k dense in cos_sin's dtype
    and v a view of the product, each rounded row by row by the attention into the dense blocks
    its products read (one pass, no copy of a strided slice inside them); else dense in the
    attention's dtype."""
    a = layer.self_attn
    n, d = h.shape[0], a.head_dim
    dtype = cos_sin.dtype if a.math_dtype is not None else h.dtype
    q, k, v = a.qkv(layer.input_layernorm(h))
    q = norm_rope(q.view(n, a.n_heads, d), rope_tables(a.q_norm.rope_weights, cos_sin), a.q_norm.eps, dtype)
    k = norm_rope(k.view(n, a.n_kv, d), rope_tables(a.k_norm.rope_weights, cos_sin), a.k_norm.eps, dtype)
    vh = v.view(n, a.n_kv, d).transpose(0, 1)  # head-major, a view
    if a.math_dtype is None:
        vh = torch.empty(a.n_kv, n, d, dtype=dtype, device=v.device).copy_(vh)  # dense, as q and k
    return q.transpose(0, 1), k.transpose(0, 1), vh


def attention_output_and_mlp(layer: DecoderLayer, h: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """h + o_proj(attn), then + the MLP of its norm; the adds and the gate fused into the products."""
    a, m = layer.self_attn, layer.mlp
    # the linears are linears.KernelLinears here (convert_layers swapped them in; narrow cannot import
    # linears, which imports it): their fused add and gate
    h = a.o_proj.add(attn, h)  # type: ignore[operator]  # a new tensor: o_proj(attn) + h
    x = layer.post_attention_layernorm(h)
    gated = type(m.gate_proj).gated(m.gate_proj, m.up_proj, x)  # type: ignore[attr-defined]  # a KernelLinear's
    return m.down_proj.add(gated, h)  # type: ignore[operator]  # a KernelLinear's fused add


def install(model: OmniVoiceModel, attention: torch.dtype, output: torch.dtype | None = None) -> None:
    """Switch a converted body (linears.convert_layers) to this layer forward and its norms to
    LeanRMSNorm. Attention: grouped_attention in bf16; scaled_dot_product_attention when
    `attention` is float32 (it beats the batched products in fp32). `output`: the dtype the
    attention's result is written in (default the attention's), the one o_proj reads."""
    for module in model.modules():
        if type(module) is RMSNorm:
            module.__class__ = LeanRMSNorm
    for layer in (cast(DecoderLayer, m) for m in model.llm.layers):  # nn.ModuleList holds plain modules
        for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
            norm.rope_weights = rope_weights(norm.weight)  # [2, 1, D]: its weight folded into RoPE
        layer.self_attn.math_dtype = None if attention == torch.float32 else attention
        layer.self_attn.out_dtype = output
    model._halves = (attention_inputs, attention_output_and_mlp)
    model._rope = stacked_rope
