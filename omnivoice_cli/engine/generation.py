"""The diffusion loop over many requests at once, packed with no padding.

Every request keeps its own canvas, schedule, settings and random generator. Each forward packs
the conditional row of every active request, and its unconditional row (target frames only) when
its guidance_scale is not 0, back to back. A request leaves as soon as its own steps are done and
waiting requests join the next forward, bounded by max_batch_size requests and max_packed_tokens
canvas positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from . import scheduler
from .backbone import OmniVoiceModel, PackedBatch
from .canvas import Canvas
from .config import GenerationConfig


@dataclass
class Job:
    """One request's state through the loop."""

    canvas: Canvas  # the conditional canvas (target region all MASK at the start)
    gen: GenerationConfig  # its decoding settings
    generator: torch.Generator | None  # its own randomness
    schedule: list[int] = field(default_factory=list)  # tokens revealed per step
    step: int = 0  # steps done
    tokens: torch.Tensor | None = None  # [C, T] the target region as it is now

    @property
    def guided(self) -> bool:
        return self.gen.guidance_scale != 0

    @property
    def packed_len(self) -> int:
        return self.canvas.input_ids.shape[1] + (self.canvas.target_len if self.guided else 0)

    @property
    def done(self) -> bool:
        return self.step >= len(self.schedule)


def make_job(canvas: Canvas, gen: GenerationConfig, seed: int, mask_id: int, device) -> Job:
    total = canvas.target_len * canvas.input_ids.shape[0]
    generator = torch.Generator(device=device).manual_seed(seed)
    tokens = torch.full((canvas.input_ids.shape[0], canvas.target_len), mask_id, dtype=torch.long, device=device)
    return Job(canvas, gen, generator, scheduler.reveal_schedule(total, gen.num_step, gen.t_shift), 0, tokens)


def pack(jobs: list[Job], device) -> tuple[PackedBatch, list[tuple[int, int]]]:
    """Lay out every job's rows; return the batch and each job's (cond, uncond) offsets into the heads."""
    ids, masks, lens, index, spans = [], [], [], [], []
    n = m = 0
    for job in jobs:
        c = job.canvas
        prefix = c.input_ids[:, : c.target_start].to(device)
        ids.append(torch.cat([prefix, job.tokens], dim=1))
        masks.append(c.audio_mask.to(device))
        L, T = ids[-1].shape[1], c.target_len
        lens.append(L)
        index.append(torch.arange(n + L - T, n + L, device=device))
        n += L
        cond_at, m = m, m + T
        uncond_at = -1
        if job.guided:  # the unconditional row: the target frames alone
            ids.append(job.tokens)
            masks.append(torch.ones(T, dtype=torch.bool, device=device))
            lens.append(T)
            index.append(torch.arange(n, n + T, device=device))
            n += T
            uncond_at, m = m, m + T
        spans.append((cond_at, uncond_at))
    batch = PackedBatch(torch.cat(ids, dim=1), torch.cat(masks), lens, torch.cat(index))
    return batch, spans


def advance(job: Job, logits: torch.Tensor, cond_at: int, uncond_at: int, mask_id: int) -> None:
    """Apply one step's reveal to a job, from the packed logits [M, C, V]."""
    T = job.canvas.target_len
    k = job.schedule[job.step]
    job.step += 1
    if k <= 0:
        return
    cond = logits[cond_at : cond_at + T].transpose(0, 1)  # [C, T, V]
    uncond = logits[uncond_at : uncond_at + T].transpose(0, 1) if uncond_at >= 0 else None
    g = job.gen
    lp = scheduler.guided_log_probs(cond, uncond, g.guidance_scale, mask_id)
    pred, confidence = scheduler.predict(lp, g.class_temperature, job.generator)
    revealed = job.tokens != mask_id
    scores = scheduler.position_scores(
        confidence, revealed, g.layer_penalty_factor, g.position_temperature, job.generator
    )
    scheduler.reveal(job.tokens, pred, scores, k)


def run_jobs(
    model: OmniVoiceModel,
    jobs: list[Job],
    *,
    mask_id: int,
    max_batch_size: int,
    max_packed_tokens: int,
    on_step: Callable[[int, int], None] | None = None,
    on_done: Callable[[int, Job], None] | None = None,
) -> None:
    """Run every job to the end. on_step(forwards done, forwards planned); on_done(job index, job)."""
    device = model.audio_heads.weight.device
    waiting = list(range(len(jobs)))
    active: list[int] = []
    done_forwards = 0
    with torch.inference_mode():
        while waiting or active:
            while waiting and len(active) < max_batch_size:
                nxt = jobs[waiting[0]]
                used = sum(jobs[i].packed_len for i in active)
                if active and used + nxt.packed_len > max_packed_tokens:
                    break
                active.append(waiting.pop(0))
            batch, spans = pack([jobs[i] for i in active], device)
            logits = model(batch)
            for i, (cond_at, uncond_at) in zip(active, spans):
                advance(jobs[i], logits, cond_at, uncond_at, mask_id)
            done_forwards += 1
            if on_step:
                on_step(done_forwards, done_forwards + _forwards_left(jobs, active, waiting))
            for i in [i for i in active if jobs[i].done]:
                active.remove(i)
                if on_done:
                    on_done(i, jobs[i])


def _forwards_left(jobs: list[Job], active: list[int], waiting: list[int]) -> int:
    """A plan of the forwards still to run (exact for one request, an estimate for a queue)."""
    left = max((len(jobs[i].schedule) - jobs[i].step for i in active), default=0)
    return left + sum(len(jobs[i].schedule) for i in waiting) // max(1, len(active) or 1)
