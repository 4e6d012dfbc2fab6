"""HuBERT, the codec encoder's semantic teacher (transformers' HubertModel, its module names kept so
that the checkpoint's `semantic_model.*` keys load as they are): its configuration from
`semantic_model_config`, the conv feature encoder, the weight-normed positional conv, the
transformer layers that give every hidden state. Plain PyTorch, float32; encoder.py fuses its
features with the acoustic encoder's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError

POS_CONV_G = "parametrizations.weight.original0"  # weight-norm magnitude g [1, 1, K]
POS_CONV_V = "parametrizations.weight.original1"  # weight-norm direction v [C, C/groups, K]
LEGACY_POS_CONV = {POS_CONV_G: "weight_g", POS_CONV_V: "weight_v"}  # older spelling of the same


@dataclass(frozen=True)
class HubertConfig:
    """The semantic teacher (transformers HubertModel), from `semantic_model_config`.

    Defaults are HuBERT-base, which is what the real checkpoint uses.
    """

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    conv_dim: tuple[int, ...] = (512,) * 7
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_bias: bool = False
    feat_extract_norm: str = "group"  # GroupNorm after conv layer 0 only ("layer": LayerNorm after each)
    feat_proj_layer_norm: bool = True
    num_conv_pos_embeddings: int = 128  # positional conv kernel
    num_conv_pos_embedding_groups: int = 16
    layer_norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def num_hidden_states(self) -> int:
        """Hidden states returned with output_hidden_states: the embedding output + one per layer."""
        return self.num_hidden_layers + 1

    @classmethod
    def from_dict(cls, d: dict, where: object = "semantic_model_config") -> "HubertConfig":
        """Adopt sizes; refuse options the engine does not implement (CheckpointError)."""
        d = d or {}
        unsupported = []
        if d.get("model_type", "hubert") != "hubert":
            unsupported.append(f"model_type {d.get('model_type')!r} (hubert only)")
        if d.get("do_stable_layer_norm", False):
            unsupported.append("do_stable_layer_norm true (post-LN HuBERT only)")
        if d.get("conv_pos_batch_norm", False):
            unsupported.append("conv_pos_batch_norm true")
        for act in ("hidden_act", "feat_extract_activation"):
            if d.get(act, "gelu") != "gelu":
                unsupported.append(f"{act} {d.get(act)!r} (gelu only)")
        if d.get("feat_extract_norm", "group") not in ("group", "layer"):
            unsupported.append(f"feat_extract_norm {d.get('feat_extract_norm')!r}")
        if d.get("use_weighted_layer_sum", False):
            unsupported.append("use_weighted_layer_sum true")
        if unsupported:
            raise CheckpointError(f"{where}: unsupported HuBERT options: " + "; ".join(unsupported))
        dflt = cls()
        try:
            cfg = cls(
                hidden_size=int(d.get("hidden_size", dflt.hidden_size)),
                num_hidden_layers=int(d.get("num_hidden_layers", dflt.num_hidden_layers)),
                num_attention_heads=int(d.get("num_attention_heads", dflt.num_attention_heads)),
                intermediate_size=int(d.get("intermediate_size", dflt.intermediate_size)),
                conv_dim=tuple(int(x) for x in d.get("conv_dim", dflt.conv_dim)),
                conv_kernel=tuple(int(x) for x in d.get("conv_kernel", dflt.conv_kernel)),
                conv_stride=tuple(int(x) for x in d.get("conv_stride", dflt.conv_stride)),
                conv_bias=bool(d.get("conv_bias", dflt.conv_bias)),
                feat_extract_norm=str(d.get("feat_extract_norm", dflt.feat_extract_norm)),
                feat_proj_layer_norm=bool(d.get("feat_proj_layer_norm", dflt.feat_proj_layer_norm)),
                num_conv_pos_embeddings=int(d.get("num_conv_pos_embeddings", dflt.num_conv_pos_embeddings)),
                num_conv_pos_embedding_groups=int(
                    d.get("num_conv_pos_embedding_groups", dflt.num_conv_pos_embedding_groups)
                ),
                layer_norm_eps=float(d.get("layer_norm_eps", dflt.layer_norm_eps)),
            )
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{where}: bad HuBERT configuration ({e})") from None
        n_layers = d.get("num_feat_extract_layers", len(cfg.conv_dim))
        problems = []
        if not (len(cfg.conv_dim) == len(cfg.conv_kernel) == len(cfg.conv_stride) == n_layers) or not cfg.conv_dim:
            problems.append("conv_dim, conv_kernel, conv_stride and num_feat_extract_layers disagree")
        if cfg.num_attention_heads <= 0 or cfg.hidden_size % cfg.num_attention_heads:
            problems.append(f"hidden_size {cfg.hidden_size} is not a multiple of num_attention_heads")
        if cfg.num_conv_pos_embedding_groups <= 0 or cfg.hidden_size % cfg.num_conv_pos_embedding_groups:
            problems.append(f"hidden_size {cfg.hidden_size} is not a multiple of num_conv_pos_embedding_groups")
        if problems:
            raise CheckpointError(f"{where}: " + "; ".join(problems))
        return cfg


# ---------------------------------------------------------------------------------------------
# HuBERT (names = transformers HubertModel's)
# ---------------------------------------------------------------------------------------------


class HubertConvLayer(nn.Module):
    """Valid conv (no padding) -> optional norm -> exact GELU; [B, C_in, L] -> [B, C_out, L']."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, bias: bool, norm: str | None, eps: float):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size=kernel, stride=stride, bias=bias)
        self.norm = norm
        if norm == "group":  # one group per channel; torch's default eps, as transformers
            self.layer_norm: nn.GroupNorm | nn.LayerNorm = nn.GroupNorm(
                num_groups=c_out, num_channels=c_out, affine=True
            )
        elif norm == "layer":  # over channels (transformers' HubertLayerNormConvLayer: default eps)
            self.layer_norm = nn.LayerNorm(c_out, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.norm == "group":
            x = self.layer_norm(x)
        elif self.norm == "layer":
            x = self.layer_norm(x.transpose(-2, -1)).transpose(-2, -1)
        return F.gelu(x)


class HubertFeatureEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        layers = []
        c_in = 1
        for i, (c_out, k, s) in enumerate(zip(cfg.conv_dim, cfg.conv_kernel, cfg.conv_stride)):
            norm = "group" if (cfg.feat_extract_norm == "group" and i == 0) else None
            if cfg.feat_extract_norm == "layer":
                norm = "layer"
            layers.append(HubertConvLayer(c_in, c_out, k, s, cfg.conv_bias, norm, cfg.layer_norm_eps))
            c_in = c_out
        self.conv_layers = nn.ModuleList(layers)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        """wav [B, L] -> features [B, C, frames]"""
        x = wav[:, None]
        for layer in self.conv_layers:
            x = layer(x)
        return x


class HubertFeatureProjection(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.use_norm = cfg.feat_proj_layer_norm
        if self.use_norm:
            self.layer_norm = nn.LayerNorm(cfg.conv_dim[-1], eps=cfg.layer_norm_eps)
        self.projection = nn.Linear(cfg.conv_dim[-1], cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, frames, C] -> [B, frames, hidden]"""
        if self.use_norm:
            x = self.layer_norm(x)
        return self.projection(x)


class _WeightNormState(nn.Module):
    def __init__(self, channels: int, in_per_group: int, kernel: int):
        super().__init__()
        self.original0 = nn.Parameter(torch.ones(1, 1, kernel))  # g
        self.original1 = nn.Parameter(torch.zeros(channels, in_per_group, kernel))  # v


class WeightNormConv1d(nn.Module):
    """The positional conv, stored as weight-norm state (dim=2: one norm per kernel tap).

    weight[o, i, k] = g[k] * v[o, i, k] / ||v[:, :, k]||, recomputed per call with torch's own
    weight-norm kernel (what the reference's parametrization runs; 4.7 M elements, ~1 ms).
    """

    def __init__(self, channels: int, kernel: int, groups: int):
        super().__init__()
        self.padding = kernel // 2
        self.groups = groups
        self.parametrizations = nn.Module()
        self.parametrizations.weight = _WeightNormState(channels, channels // groups, kernel)
        self.bias = nn.Parameter(torch.zeros(channels))

    def weight(self) -> torch.Tensor:
        state = cast(_WeightNormState, self.parametrizations.weight)
        return fold_weight_norm(state.original0, state.original1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.weight(), self.bias, padding=self.padding, groups=self.groups)


def fold_weight_norm(g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Weight norm over dims (0, 1), one norm per tap: g [1, 1, K], v [O, I, K] -> w [O, I, K]."""
    wn = getattr(torch, "_weight_norm", None)
    if wn is not None:
        return wn(v, g, 2)
    return v * (g / v.norm(dim=(0, 1), keepdim=True))


class HubertPositionalConvEmbedding(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.conv = WeightNormConv1d(cfg.hidden_size, cfg.num_conv_pos_embeddings, cfg.num_conv_pos_embedding_groups)
        self.num_pad_remove = 1 if cfg.num_conv_pos_embeddings % 2 == 0 else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, frames, hidden] -> positional term [B, frames, hidden]"""
        y = self.conv(x.transpose(1, 2))
        if self.num_pad_remove:
            y = y[:, :, : -self.num_pad_remove]
        return F.gelu(y).transpose(1, 2)


class HubertAttention(nn.Module):
    """Bidirectional multi-head self-attention, no mask, scale head_dim^-0.5."""

    def __init__(self, cfg: HubertConfig):
        super().__init__()
        h = cfg.hidden_size
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.head_dim
        self.q_proj = nn.Linear(h, h)
        self.k_proj = nn.Linear(h, h)
        self.v_proj = nn.Linear(h, h)
        self.out_proj = nn.Linear(h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        shape = (b, n, self.num_heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False, scale=self.head_dim**-0.5)
        return self.out_proj(o.transpose(1, 2).reshape(b, n, -1))


class HubertFeedForward(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.intermediate_dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output_dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class HubertEncoderLayer(nn.Module):
    """Post-LN: h = LN1(h + Attn(h)); h = LN2(h + FFN(h))."""

    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.attention = HubertAttention(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.feed_forward = HubertFeedForward(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class HubertEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.pos_conv_embed = HubertPositionalConvEmbedding(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(HubertEncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """[B, frames, hidden] -> every hidden state: embedding output, then each layer's output."""
        x = self.layer_norm(x + self.pos_conv_embed(x))
        states = [x]
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        return states


class HubertModel(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.feature_extractor = HubertFeatureEncoder(cfg)
        self.feature_projection = HubertFeatureProjection(cfg)
        self.encoder = HubertEncoder(cfg)

    def forward(self, wav: torch.Tensor) -> list[torch.Tensor]:
        """wav [B, L] at 16 kHz -> num_hidden_layers + 1 hidden states [B, frames, hidden]"""
        feats = self.feature_extractor(wav).transpose(1, 2)
        return self.encoder(self.feature_projection(feats))
