"""The masked-diffusion step scheduler: how many tokens each step reveals, and which.

Pure functions over one request's target region ([C, T] codebook rows x frames). Randomness comes
only from the request's own `torch.Generator`; with position_temperature = class_temperature = 0
no random number is drawn and the result equals the reference's exactly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def time_steps(num_step: int, t_shift: float) -> list[float]:
    """num_step + 1 shifted times in [0, 1], computed in fp32 like the reference."""
    ts = torch.linspace(0.0, 1.0, num_step + 1)
    ts = t_shift * ts / (1 + (t_shift - 1) * ts)
    return ts.tolist()


def reveal_schedule(total: int, num_step: int, t_shift: float) -> list[int]:
    """Tokens revealed at each step; sums to `total`, the last step takes all that remain."""
    ts = time_steps(num_step, t_shift)
    remaining, counts = total, []
    for i in range(num_step):
        k = remaining if i == num_step - 1 else min(math.ceil(total * (ts[i + 1] - ts[i])), remaining)
        counts.append(int(k))
        remaining -= int(k)
    return counts


def guided_log_probs(cond: torch.Tensor, uncond: torch.Tensor | None, guidance_scale: float, mask_id: int):
    """cond/uncond logits [C, T, V] fp32 -> log-probabilities [C, T, V] with the mask id excluded."""
    if guidance_scale != 0 and uncond is None:
        raise ValueError("guidance needs the unconditional logits")
    lu = F.log_softmax(uncond, dim=-1) if uncond is not None and guidance_scale != 0 else None
    return guide(cond, lu, guidance_scale, mask_id)


def guide(cond: torch.Tensor, lu: torch.Tensor | None, guidance_scale: float, mask_id: int):
    """cond logits [C, T, V] fp32 and the unconditional log-probabilities lu [C, T, V] (None
    without guidance; the step cache may give those of an earlier step) -> guided
    log-probabilities [C, T, V] with the mask id excluded."""
    if guidance_scale != 0:
        if lu is None:
            raise ValueError("guidance needs the unconditional log-probabilities")
        lc = F.log_softmax(cond, dim=-1)
        lp = torch.log_softmax(lc + guidance_scale * (lc - lu), dim=-1)
    else:
        lp = F.log_softmax(cond, dim=-1)
    lp[..., mask_id] = -float("inf")
    return lp


def gumbel_perturb(x: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """x / temperature + Gumbel noise, with uniforms from the request's generator."""
    u = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    return x / temperature - torch.log(-torch.log(u + 1e-10) + 1e-10)


def top_fraction(lp: torch.Tensor, ratio: float = 0.1) -> torch.Tensor:
    """Keep the top ceil(ratio * V) entries of the last dim, -inf elsewhere."""
    k = math.ceil(ratio * lp.shape[-1])
    values, index = lp.topk(k, dim=-1)
    return torch.full_like(lp, float("-inf")).scatter_(-1, index, values)


def predict(lp: torch.Tensor, class_temperature: float, generator: torch.Generator | None):
    """lp [C, T, V] -> (tokens [C, T], confidence [C, T])."""
    if class_temperature > 0:
        tokens = gumbel_perturb(top_fraction(lp), class_temperature, generator).argmax(dim=-1)
    else:
        tokens = lp.argmax(dim=-1)
    return tokens, lp.max(dim=-1).values


def position_scores(
    confidence: torch.Tensor,
    revealed: torch.Tensor,
    layer_penalty_factor: float,
    position_temperature: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """confidence [C, T], revealed [C, T] bool -> scores [C, T]; earlier codebooks are preferred."""
    layers = torch.arange(confidence.shape[0], device=confidence.device).view(-1, 1)
    scores = confidence - layers * layer_penalty_factor
    if position_temperature > 0:
        scores = gumbel_perturb(scores, position_temperature, generator)
    return scores.masked_fill(revealed, -float("inf"))


def reveal(target: torch.Tensor, tokens: torch.Tensor, scores: torch.Tensor, k: int) -> torch.Tensor:
    """Write the k best-scoring predicted tokens into target [C, T] (in place); return it."""
    index = torch.topk(scores.flatten(), k).indices
    flat = target.view(-1)
    flat[index] = tokens.flatten()[index]
    return target
