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
    ids, masks, lens, index, spans, layout = [], [], [], [], [], []
    n = m = 0
    for job in jobs:
        c = job.canvas
        prefix = c.input_ids[:, : c.target_start].to(device)
        ids.append(torch.cat([prefix, job.tokens], dim=1))
        masks.append(c.audio_mask.to(device))
        L, T = ids[-1].shape[1], c.target_len
        lens.append(L)
        layout.append((L, T))
        index.append(torch.arange(n + L - T, n + L, device=device))
        n += L
        cond_at, m = m, m + T
        uncond_at = -1
        if job.guided:  # the unconditional row: the target frames alone
            ids.append(job.tokens)
            masks.append(torch.ones(T, dtype=torch.bool, device=device))
            lens.append(T)
            layout.append((T, T))
            index.append(torch.arange(n, n + T, device=device))
            n += T
            uncond_at, m = m, m + T
        spans.append((cond_at, uncond_at))
    batch = PackedBatch(torch.cat(ids, dim=1), torch.cat(masks), lens, torch.cat(index), tuple(layout))
    return batch, spans


def advance(job: Job, model: OmniVoiceModel, hidden: torch.Tensor, cond_at: int, uncond_at: int, mask_id: int) -> None:
    """Apply one step's reveal to a job, from the packed hidden states [M, H] of the forward."""
    T = job.canvas.target_len
    k = job.schedule[job.step]
    job.step += 1
    if k <= 0:
        return
    cond = model.heads(hidden[cond_at : cond_at + T])  # [C, T, V]
    uncond = model.heads(hidden[uncond_at : uncond_at + T]) if uncond_at >= 0 else None
    g = job.gen
    lp = scheduler.guided_log_probs(cond, uncond, g.guidance_scale, mask_id)
    pred, confidence = scheduler.predict(lp, g.class_temperature, job.generator)
    revealed = job.tokens != mask_id
    scores = scheduler.position_scores(
        confidence, revealed, g.layer_penalty_factor, g.position_temperature, job.generator
    )
    scheduler.reveal(job.tokens, pred, scores, k)


def forward_step(
    model: OmniVoiceModel,
    active: list[Job],
    *,
    mask_id: int,
    forward: Callable[[PackedBatch], torch.Tensor] | None = None,
    device=None,
) -> None:
    """One forward of the active jobs, packed, and each one's reveal (run_jobs' loop body; the
    server's engine loop calls it too). Call it under torch.inference_mode()."""
    device = device if device is not None else model.audio_heads.weight.device
    batch, spans = pack(active, device)
    hidden = (forward or model)(batch)
    for job, (cond_at, uncond_at) in zip(active, spans):
        advance(job, model, hidden, cond_at, uncond_at, mask_id)


def run_jobs(
    model: OmniVoiceModel,
    jobs: list[Job],
    *,
    mask_id: int,
    max_batch_size: int,
    max_packed_tokens: int,
    on_step: Callable[[int, int], None] | None = None,
    on_done: Callable[[Job], list[Job] | None] | None = None,
    forward: Callable[[PackedBatch], torch.Tensor] | None = None,
) -> None:
    """Run every job to the end, in the order given.

    on_step(forwards done, forwards planned) after each forward; on_done(job) when a job has
    revealed its last token: it may return new jobs (which need that one's result) to queue.
    forward: what runs the body (default the model itself; e.g. a GraphedForward on CUDA).
    """
    forward = forward or model
    device = model.audio_heads.weight.device
    waiting = list(jobs)
    active: list[Job] = []
    done_forwards = 0
    with torch.inference_mode():
        while waiting or active:
            used = sum(j.packed_len for j in active)
            while waiting and len(active) < max_batch_size:
                if active and used + waiting[0].packed_len > max_packed_tokens:
                    break
                used += waiting[0].packed_len
                active.append(waiting.pop(0))
            forward_step(model, active, mask_id=mask_id, forward=forward, device=device)
            done_forwards += 1
            finished = [j for j in active if j.done]
            active = [j for j in active if not j.done]
            for job in finished:
                waiting.extend((on_done(job) if on_done else None) or [])
            if on_step:
                on_step(done_forwards, done_forwards + forwards_left(active, waiting, max_batch_size))


def forwards_left(active: list[Job], waiting: list[Job], max_batch_size: int) -> int:
    """Forwards still to run if the queue drains in waves of max_batch_size (exact for one wave)."""
    left = max((len(j.schedule) - j.step for j in active), default=0)
    queue = [len(j.schedule) for j in waiting]
    free = max_batch_size - len(active)
    while queue:  # waiting jobs start as active ones finish; approximate by waves
        wave, queue = queue[: max(free, 1)], queue[max(free, 1) :]
        left += max(wave)
        free = max_batch_size
    return left
