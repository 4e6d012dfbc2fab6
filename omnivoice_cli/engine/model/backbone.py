"""The OmniVoice network: a bidirectional Qwen3 body between audio embeddings and audio heads.

Module attribute names mirror the checkpoint keys (`llm.layers.0.self_attn.q_proj.weight`, ...),
so the safetensors file loads with a strict `load_state_dict`.

Rows are packed: several canvases (conditional and unconditional rows of many requests) are laid
back to back in one [N, H] sequence with no padding. Each row attends only within itself and
counts its RoPE positions from 0, exactly as if it ran alone.

The step cache (engine/model/generation.py) adds one kind of row: a conditional row that holds only its
target positions, counts its positions from the prompt's length and attends to the prompt's keys
and values as a forward that ran the whole row stored them (`PromptKV`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..cancel import check as cancel_check
from .config import ModelConfig

# --------------------------------------------------------------------------- pure functions


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, computed in fp32 and cast back (as Qwen3 does). The same
    operations as `weight * (x * rsqrt(mean(x^2) + eps))`, with fewer temporaries."""
    dtype = x.dtype
    x32 = x.to(torch.float32)
    inv = x32.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()  # [..., 1]
    y = (x32 * inv).to(dtype)  # a new tensor: x itself is never written
    return y.mul_(weight) if weight.dtype == y.dtype else weight * y


def rope_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    """[head_dim / 2] inverse frequencies of the default RoPE."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
    return 1.0 / (theta**exponents)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype):
    """positions [N] -> cos, sin [N, head_dim] (rotate-half layout), computed in fp32."""
    freqs = positions.to(torch.float32)[:, None] * inv_freq.to(torch.float32)[None, :]  # [N, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [N, D]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [heads, N, D], cos/sin [N, D] -> x * cos + rotate_half(x) * sin (two temporaries fewer)."""
    return (x * cos).add_(rotate_half(x).mul_(sin))


def packed_positions(seq_lens: list[int], device=None, starts=()) -> torch.Tensor:
    """[N] RoPE positions: s..s+L-1 for each packed row of length L, s its start (default 0)."""
    starts = starts or (0,) * len(seq_lens)
    return torch.cat([torch.arange(s, s + n, device=device) for n, s in zip(seq_lens, starts)])


class PromptKV:
    """One conditional row's prompt keys and values, layer by layer (the step cache). A forward
    that runs the whole row with `store` set writes them (its first `length` positions); a forward
    that runs only the row's target positions (`store` unset) attends to them as the prompt."""

    def __init__(self, length: int):
        self.length = length  # P: the prompt's positions (style, text, reference audio), the row's first
        self.k: dict[int, torch.Tensor] = {}  # layer -> [kv, P, D], after the norm and RoPE
        self.v: dict[int, torch.Tensor] = {}  # layer -> [kv, P, D]
        self.store = True  # set by the packing: this forward runs the whole row and (re)writes k and v

    @property
    def start(self) -> int:
        """The row's first RoPE position in this forward: 0 for a whole row, P for its targets."""
        return 0 if self.store else self.length

    def keys_values(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This row's k, v [kv, L, D] of one layer -> what its queries attend to: stored (whole row)
        and returned as they are, or the prompt's put before them ([kv, P + L, D])."""
        if self.store:
            self.k[layer], self.v[layer] = k[:, : self.length].clone(), v[:, : self.length].clone()
            return k, v
        return torch.cat((self.k[layer], k), dim=1), torch.cat((self.v[layer], v), dim=1)


# --------------------------------------------------------------------------- modules


class Embedding(nn.Module):
    """A lookup table. Unlike nn.Embedding it draws no random init: the weights always come from
    the checkpoint, and drawing them (even on the meta device) imports torch._dynamo, ~1 s."""

    def __init__(self, num: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num, dim))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        b = cfg.backbone
        self.n_heads, self.n_kv, self.head_dim = b.num_attention_heads, b.num_key_value_heads, b.head_dim
        self.q_proj = nn.Linear(b.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(b.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(b.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, b.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, b.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, b.rms_norm_eps)

    def qkv(self, x: torch.Tensor):
        """x [N, H] -> q [N, h * D], k and v [N, kv * D]."""
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [N, H] -> q [h, N, D], k and v [kv, N, D], with q/k normed and rotated."""
        n = x.shape[0]
        q, k, v = self.qkv(x)
        q = self.q_norm(q.view(n, self.n_heads, self.head_dim)).transpose(0, 1)
        k = self.k_norm(k.view(n, self.n_kv, self.head_dim)).transpose(0, 1)
        v = v.view(n, self.n_kv, self.head_dim).transpose(0, 1)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens: list[int], prompts=(), layer: int = 0
    ) -> torch.Tensor:
        """Block-diagonal attention: each packed row attends within itself (and a row with a
        PromptKV in `prompts`, one entry per row, to its prompt's keys too). -> [N, h * D]."""
        n = q.shape[1]
        out = q.new_empty(n, self.n_heads, self.head_dim)  # [N, h, D]
        start = 0
        for row, length in enumerate(seq_lens):
            s = slice(start, start + length)
            kr, vr = k[:, s], v[:, s]
            if prompts and prompts[row] is not None:
                kr, vr = prompts[row].keys_values(layer, kr, vr)
            o = F.scaled_dot_product_attention(q[None, :, s], kr[None], vr[None], enable_gqa=self.n_kv != self.n_heads)[
                0
            ]
            out[s] = o.transpose(0, 1)  # [h, L, D] -> [L, h, D]
            start += length
        return out.view(n, self.n_heads * self.head_dim)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        b = cfg.backbone
        self.gate_proj = nn.Linear(b.hidden_size, b.intermediate_size, bias=False)
        self.up_proj = nn.Linear(b.hidden_size, b.intermediate_size, bias=False)
        self.down_proj = nn.Linear(b.intermediate_size, b.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x), inplace=True).mul_(self.up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        b = cfg.backbone
        self.input_layernorm = RMSNorm(b.hidden_size, b.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(b.hidden_size, b.rms_norm_eps)
        self.mlp = MLP(cfg)

    def attention_inputs(self, h, cos, sin):
        return self.self_attn.project(self.input_layernorm(h), cos, sin)

    def attention_output_and_mlp(self, h, attn):
        h = self.self_attn.o_proj(attn).add_(h)  # = h + o_proj(attn), into the fresh tensor
        return self.mlp(self.post_attention_layernorm(h)).add_(h)


@dataclass(frozen=True)
class LayerPath:
    """How the decoder layers are computed: the model's one seam for another layer forward. The
    defaults are this file's plain forward, the reference every other path is tested against. A
    faster path (engine/fast/narrow.py) replaces modules (the attention, the norms, the linears)
    and installs its own functions here through `OmniVoiceModel.use_layer_path`; the model never
    knows which path runs.

    rope: (positions [N], inv_freq, dtype) -> (cos, sin), what every layer of one forward reads.
    inputs: (layer, h [N, H], cos, sin) -> q [h, N, D], k and v [kv, N, D] (the norm, q/k/v, RoPE).
    outputs: (layer, h, attn [N, h * D]) -> the layer's output [N, H] (o_proj, residuals, the MLP).
    Between them the attention runs eagerly (`layer.self_attn.attend`): the two halves are
    position-wise and can be compiled (`OmniVoiceModel.compile_layers`).
    layer: (layer, h, cos, sin, seq_lens, prompts, index) -> the layer's output, the whole layer at
    once where a path fuses across the attention (fusedpath: q, k and v written in the rows' own
    blocks); None: inputs, attend, outputs."""

    rope: Callable = rope_cos_sin
    inputs: Callable = DecoderLayer.attention_inputs
    outputs: Callable = DecoderLayer.attention_output_and_mlp
    layer: Callable | None = None


PLAIN = LayerPath()  # the plain forward


def layer_forward(layer: DecoderLayer, h, cos, sin, seq_lens, path: LayerPath = PLAIN, prompts=(), index: int = 0):
    """One decoder layer (the `index`-th) on `path`. prompts: the rows' PromptKV (or None), as
    PackedBatch.prompts."""
    if path.layer is not None:
        return path.layer(layer, h, cos, sin, seq_lens, prompts, index)
    q, k, v = path.inputs(layer, h, cos, sin)
    return path.outputs(layer, h, layer.self_attn.attend(q, k, v, seq_lens, prompts, index))


class Qwen3Body(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        b = cfg.backbone
        self.embed_tokens = Embedding(b.vocab_size, b.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(b.num_hidden_layers))
        self.norm = RMSNorm(b.hidden_size, b.rms_norm_eps)


@dataclass(frozen=True)
class PackedBatch:
    """Rows laid back to back; `target_index` selects the positions whose logits are needed."""

    input_ids: torch.Tensor  # [C, N] long, C codebook rows
    audio_mask: torch.Tensor  # [N] bool, True on audio positions
    seq_lens: list[int]  # length of each packed row, sum = N
    target_index: torch.Tensor  # [M] long, positions to compute heads on
    layout: tuple = ()  # ((length, targets) per row): equal layouts run the same shapes (CUDA graphs)
    prompts: tuple = ()  # per row, a PromptKV (the step cache) or None; () for none at all

    @property
    def starts(self) -> tuple[int, ...]:
        """Each row's first RoPE position (0, or a cached prompt's length); () when all are 0."""
        return tuple(0 if p is None else p.start for p in self.prompts)


class OmniVoiceModel(nn.Module):
    """llm (Qwen3 body) + audio_embeddings + audio_heads, as in the checkpoint."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        b = cfg.backbone
        self.llm = Qwen3Body(cfg)
        self.audio_embeddings = Embedding(cfg.audio_embedding_rows, b.hidden_size)
        self.audio_heads = nn.Linear(b.hidden_size, cfg.audio_embedding_rows, bias=False)
        # buffers get their values in init_buffers() (arange etc. on the meta device import torch._dynamo)
        self.register_buffer("codebook_layer_offsets", torch.empty(cfg.num_audio_codebook, dtype=torch.long))
        self.register_buffer("inv_freq", torch.empty(b.head_dim // 2), persistent=False)
        self.layer_path = PLAIN  # how the layers are computed (LayerPath): the plain forward unless replaced

    def codebook_offsets(self) -> torch.Tensor:
        """[C] the first row of each codebook's block in the audio tables: c * audio_vocab_size."""
        return torch.arange(self.cfg.num_audio_codebook, dtype=torch.long) * self.cfg.audio_vocab_size

    def init_buffers(self, device, offsets_loaded: bool) -> None:
        """Fill the buffers once the weights are in place (offsets only if the file had none)."""
        if not offsets_loaded:
            self.codebook_layer_offsets = self.codebook_offsets().to(device)
        b = self.cfg.backbone
        self.inv_freq = rope_inv_freq(b.head_dim, b.rope_theta).to(device)

    def use_layer_path(self, path: LayerPath) -> None:
        """Compute the layers on `path` from the next forward on (see LayerPath)."""
        self.layer_path = path

    def compile_layers(self) -> None:
        """torch.compile the position-wise halves of a layer (one graph for all layers and lengths)."""
        path = self.layer_path
        compiled = (torch.compile(path.inputs, dynamic=True), torch.compile(path.outputs, dynamic=True))
        self.use_layer_path(replace(path, inputs=compiled[0], outputs=compiled[1], layer=None))

    def embed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """input_ids [C, N], audio_mask [N] -> [N, H]: text rows use row 0, audio sums C tables."""
        text = self.llm.embed_tokens(torch.where(audio_mask, 0, input_ids[0]))  # [N, H]
        shifted = torch.where(audio_mask, input_ids, 0) + self.codebook_layer_offsets[:, None]  # [C, N]
        audio = self.audio_embeddings(shifted).sum(dim=0)  # [N, H]
        return torch.where(audio_mask[:, None], audio, text.to(audio.dtype))  # the text table may stay fp32

    def forward(self, batch: PackedBatch) -> torch.Tensor:
        """-> final hidden states [M, H] at the target positions (pass slices of it to `heads`)."""
        h = self.embed(batch.input_ids, batch.audio_mask)
        positions = packed_positions(batch.seq_lens, device=h.device, starts=batch.starts)
        path = self.layer_path
        cos, sin = path.rope(positions, self.inv_freq, h.dtype)
        for i, layer in enumerate(self.llm.layers):
            cancel_check()  # a cancelled render (engine/cancel.py) stops here, within one layer
            h = layer_forward(cast(DecoderLayer, layer), h, cos, sin, batch.seq_lens, path, batch.prompts, i)
        return self.llm.norm(h[batch.target_index])  # RMSNorm is per position: norm only what the heads need

    def heads(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [T, H] -> logits [C, T, V] in fp32. Applied per request, so that the logits of a
        whole packed batch (M x 8200 floats) never exist at once."""
        logits = self.audio_heads(hidden).float()  # [T, C*V]
        return logits.view(-1, self.cfg.num_audio_codebook, self.cfg.audio_vocab_size).transpose(0, 1)
