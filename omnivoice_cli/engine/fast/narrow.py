"""The decoder layer's forward on the CPU's narrow paths (`dtype=bfloat16`, `quantize="int8"`).

The same network as backbone.py's, computed with fewer passes over memory: on these paths a step
is no longer all matrix products, and every pass over an [N, H] tensor shows. Not the reference's
arithmetic (summation orders and roundings differ), so the fp32 path, which must give the
reference's tokens, never uses it.

- Every pass runs in one dtype: a bf16 tensor is widened once, worked in fp32 and rounded once.
  torch runs mixed-dtype passes (a bf16 operand beside an fp32 one, an fp32 result written as
  bf16) unvectorised, several times slower than a cast followed by same-dtype passes.
- RMSNorm: one reduction (fp32 sums), one scaling, one weighting (instead of a cast, a square, a
  mean, a scaling, a cast).
- q/k norm and RoPE: the norm's weight folded into RoPE's tables (cos and sin in fp32, stacked
  once per forward, times the weight: one small product per layer), the norm's scale applied
  last; the int8 path's fp32 product read where it lies (no widening copy; bf16 is widened once,
  head-major); worked head-major from
  the first write, the rotation's two half products accumulated into the scaled copy
  (`addcmul_`), no rotated copy. (q and k normed as one, [G, heads/G, N, D] against per-group
  tables, was measured slower; what was tried: benchmarks/speed-log.md.)
- Attention: grouped_attention (two batched products and a softmax in bf16), q, k and v
  rounded to bf16 row by row into the dense blocks its batched products read (a product on the
  CPU copies a strided operand first: that copy is the rounding now, no pass of its own); on the
  int8 path its result is written in fp32 (`NarrowAttention.out_dtype`), what o_proj's quantisation reads.
- The residual adds and the MLP's SiLU and gate product run in the epilogues of the products
  (`KernelLinear.add`, `KernelLinear.gated`: oneDNN post-ops), with no pass of their own.

The model never knows this path: linears.convert_layers puts a NarrowAttention in each layer's
attention's place (its q, k and v one product), and `install_narrow` (called by linears.to_bfloat16 and
linears.quantize_int8) puts LeanRMSNorms in the norms' places and this layer forward in the
model's one seam for it (backbone.LayerPath). The modules put in place take over the old ones'
parameters: the state dict keeps its keys.
"""

from __future__ import annotations

from typing import Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..model.backbone import Attention, DecoderLayer, LayerPath, OmniVoiceModel, RMSNorm, rope_cos_sin


def grouped_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dtype: torch.dtype,
    softmax_: Callable | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for one row, as two batched products and a softmax in `dtype`:
    q [h, L, D], k and v [kv, S, D] (S = L, or more where a cached prompt's keys come first) ->
    [h, L, D]. The query heads that share a key/value head are stacked along L ([kv, h/kv * L, D]),
    so k and v are never repeated. On CPUs this beats the fused kernel at these lengths in bf16 (its
    products run at the bf16 rate); it is not the reference's arithmetic, so the fp32 path keeps
    scaled_dot_product_attention. `softmax_`: a softmax over the last dim in place (fusedpath's
    kernel), else torch's. `out`: a dense [h, L, D] in `dtype` the result is written into."""
    h, L, D = q.shape
    kv, S = k.shape[0], k.shape[1]
    qs = q.to(dtype).reshape(kv, h // kv * L, D)  # a contiguous copy: head pairs side by side
    scores = torch.baddbmm(qs.new_empty(kv, qs.shape[1], S), qs, k.to(dtype).transpose(1, 2), beta=0, alpha=D**-0.5)
    probs = softmax_(scores) if softmax_ else scores.softmax(-1)  # [kv, h/kv * L, S], computed in fp32 internally
    return torch.bmm(probs, v.to(dtype), out=None if out is None else out.view(kv, -1, D)).view(h, L, D)


def dense(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in `dtype`, dense and contiguous (one pass; x itself where it already is). A batched product
    on the CPU copies an operand whose matrices are not back to back (a row's slice of a packed
    [heads, N, D]) before it reads it; rounding a row into its own block costs that pass only."""
    return x.to(dtype, memory_format=torch.contiguous_format)


def inv_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D] (fp32 or fp64) -> rsqrt(mean(x^2) + eps) [..., 1]."""
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()


def _scale_by_rms(xf: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """xf (dense, fp32 or fp64) scaled in place: xf * rsqrt(mean(xf^2) + eps) * weight, last dim."""
    return xf.mul_(inv_rms(xf, eps)).mul_(weight.to(xf.dtype))


def lean_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * weight, computed in fp32 (fp64 stays
    fp64) and rounded once to x's dtype. A bf16 x is widened once: torch's mixed-dtype passes (a bf16
    operand beside an fp32 one, or an output of another dtype) run unvectorised, several times
    slower than a cast plus same-dtype passes."""
    acc = torch.promote_types(x.dtype, torch.float32)
    if x.dtype == acc:  # scaled into a new dense tensor (x may be a strided view)
        return torch.mul(x, inv_rms(x, eps)).mul_(weight.to(acc))
    return _scale_by_rms(x.to(acc), weight, eps).to(x.dtype)


class LeanRMSNorm(RMSNorm):
    """RMSNorm computed by lean_rms_norm (in the narrow paths' norms' places)."""

    @classmethod
    def of(cls, norm: RMSNorm) -> "LeanRMSNorm":
        """One in `norm`'s place: its weight (the same parameter) and eps."""
        new = cls(0, norm.eps)
        new.weight = norm.weight
        return new.train(norm.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lean_rms_norm(x, self.weight, self.eps)


class FoldedNorm(LeanRMSNorm):
    """A q or k norm whose weight the narrow layer forward folds into RoPE's tables (norm_rope):
    `rope_weights` [2, 1, D] fp32, made once from its weight as it was put in place."""

    rope_weights: torch.Tensor

    @classmethod
    def of(cls, norm: RMSNorm) -> "FoldedNorm":
        new = cast(FoldedNorm, super().of(norm))  # as a q or k norm's own weight: in fp32 where the path converts later
        new.rope_weights = rope_weights(norm.weight)
        return new


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
        inv = inv_rms(y, eps)
    else:
        y = torch.empty(heads, n, d, dtype=tables.dtype, device=x.device)
        y.copy_(x.transpose(0, 1))  # widened and head-major in one pass
        inv = inv_rms(y, eps)
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
    a = cast("NarrowAttention", layer.self_attn)  # put in place by linears.convert_layers
    qn, kn = cast(FoldedNorm, a.q_norm), cast(FoldedNorm, a.k_norm)  # put in place by install_narrow
    n, d = h.shape[0], a.head_dim
    dtype = cos_sin.dtype if a.math_dtype is not None else h.dtype
    q, k, v = a.qkv(layer.input_layernorm(h))
    q = norm_rope(q.view(n, a.n_heads, d), rope_tables(qn.rope_weights, cos_sin), qn.eps, dtype)
    k = norm_rope(k.view(n, a.n_kv, d), rope_tables(kn.rope_weights, cos_sin), kn.eps, dtype)
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


def put_in_place(model: nn.Module, make: Callable[[nn.Module], nn.Module | None]) -> None:
    """Every module under `model` for which `make` gives another replaced by it (in its parent)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = make(child)
            if new is not None:
                setattr(parent, name, new)


class NarrowAttention(Attention):
    """The attention of the narrow paths, in a plain Attention's place (linears.convert_layers): its
    modules (q_proj, k_proj and v_proj then the parts of `fused_qkv`), q, k and v as one product,
    and each row's attention in `math_dtype` (grouped_attention; None: scaled_dot_product_attention)
    with its result written in `out_dtype` (None: q's; the int8 path asks for fp32, what its
    products read). `install_narrow` sets the two dtypes."""

    def __init__(self, plain: Attention, fused_qkv: Callable[[torch.Tensor], tuple[torch.Tensor, ...]]):
        nn.Module.__init__(self)  # the plain one's modules, not new ones (its __init__ would make them)
        self.n_heads, self.n_kv, self.head_dim = plain.n_heads, plain.n_kv, plain.head_dim
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = plain.q_proj, plain.k_proj, plain.v_proj, plain.o_proj
        self.q_norm, self.k_norm = plain.q_norm, plain.k_norm
        self.fused_qkv = fused_qkv
        self.math_dtype: torch.dtype | None = None
        self.out_dtype: torch.dtype | None = None
        self.softmax_: Callable[[torch.Tensor], torch.Tensor] | None = None  # grouped_attention's (None: torch's)
        self.train(plain.training)

    def qkv(self, x: torch.Tensor):
        """x [N, H] -> q [N, h * D], k and v [N, kv * D], views of one product."""
        return self.fused_qkv(x)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens: list[int], prompts=(), layer: int = 0
    ) -> torch.Tensor:
        """backbone.Attention.attend, each row in `math_dtype` (its k and v rounded into dense
        blocks first: its products copy no strided slice) and written in `out_dtype`."""
        n, math = q.shape[1], self.math_dtype
        out = q.new_empty(n, self.n_heads, self.head_dim, dtype=self.out_dtype or math or q.dtype)  # [N, h, D]
        start = 0
        for row, length in enumerate(seq_lens):
            s = slice(start, start + length)
            kr, vr = k[:, s], v[:, s]
            if math is not None:
                kr, vr = dense(kr, math), dense(vr, math)
            if prompts and prompts[row] is not None:
                kr, vr = prompts[row].keys_values(layer, kr, vr)
            if math is not None:
                o = grouped_attention(dense(q[:, s], math), kr, vr, math, self.softmax_)
            else:
                o = F.scaled_dot_product_attention(
                    q[None, :, s], kr[None], vr[None], enable_gqa=self.n_kv != self.n_heads
                )[0]
            out[s] = o.transpose(0, 1)  # [h, L, D] -> [L, h, D]
            start += length
        return out.view(n, self.n_heads * self.head_dim)


NARROW = LayerPath(stacked_rope, attention_inputs, attention_output_and_mlp)  # this file's layer forward


def install_narrow(model: OmniVoiceModel, attention: torch.dtype, output: torch.dtype | None = None) -> None:
    """Switch a converted body (linears.convert_layers: NarrowAttentions in place) to this layer
    forward (NARROW, in the model's seam) and its norms to LeanRMSNorms (the q and k norms to
    FoldedNorms). Attention: grouped_attention in bf16; scaled_dot_product_attention when
    `attention` is float32 (it beats the batched products in fp32). `output`: the dtype the
    attention's result is written in (default the attention's), the one o_proj reads."""
    layers = [cast(DecoderLayer, m) for m in model.llm.layers]  # nn.ModuleList holds plain modules
    if not all(isinstance(layer.self_attn, NarrowAttention) for layer in layers):
        raise ValueError("narrow.install_narrow needs a converted body (linears.convert_layers first)")
    for layer in layers:
        a = cast(NarrowAttention, layer.self_attn)
        a.q_norm, a.k_norm = FoldedNorm.of(a.q_norm), FoldedNorm.of(a.k_norm)  # their weights folded in fp32
        a.math_dtype = None if attention == torch.float32 else attention
        a.out_dtype = output
    put_in_place(model, lambda m: LeanRMSNorm.of(m) if type(m) is RMSNorm else None)
    model.use_layer_path(NARROW)
