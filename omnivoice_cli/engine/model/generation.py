"""The diffusion loop over many requests at once, packed with no padding.

Every request keeps its own canvas, schedule, settings and random generator. Each forward packs
the conditional row of every active request, and its unconditional row (target frames only) when
its guidance_scale is not 0, back to back. A request leaves as soon as its own steps are done and
waiting requests join the next forward, bounded by max_batch_size requests and max_packed_tokens
canvas positions (admission.py: the one admission, the service's too).

The step cache (GenerationConfig.step_cache, off by default: an approximation; `StepCache`): a
request's prompt (style, text, reference audio: the canvas before its target) never changes, but
its keys and values do, a little, as the targets are revealed (the attention is bidirectional).
So every n-th step (step_cache_prompt_every) runs the whole conditional row and keeps the prompt's
keys and values of every layer; the steps between run only its target positions, which attend to
those. And the unconditional row runs every k-th step (step_cache_uncond_every); the steps between
reuse its last log-probabilities. Each job keeps its own cache, so requests with it on and off
share forwards; with it off the loop is exactly the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from . import scheduler
from .admission import admit
from .backbone import OmniVoiceModel, PackedBatch, PromptKV
from .canvas import Canvas
from .config import GenerationConfig


@dataclass
class StepCache:
    """One job's step cache: when its prompt's keys/values and its unconditional row are computed
    anew, and what is kept of them between (see the module doc)."""

    prompt_every: int  # n: the whole conditional row runs at steps 0, n, 2n, ...
    uncond_every: int  # k: the unconditional row runs at steps 0, k, 2k, ...
    prompt: PromptKV | None = None  # the prompt's keys and values, from the last whole-row step
    uncond: torch.Tensor | None = None  # [C, T, V] fp32: the unconditional log-probabilities last computed

    def prompt_due(self, step: int) -> bool:
        return self.prompt is None or step % self.prompt_every == 0

    def uncond_due(self, step: int) -> bool:
        return self.uncond is None or step % self.uncond_every == 0


@dataclass
class Job:
    """One request's state through the loop."""

    canvas: Canvas  # the conditional canvas (target region all MASK at the start, or an edit's known codes)
    gen: GenerationConfig  # its decoding settings
    generator: torch.Generator | None  # its own randomness
    tokens: torch.Tensor  # [C, T] the target region as it is now
    schedule: list[int] = field(default_factory=list)  # tokens revealed per step
    step: int = 0  # steps done
    cache: StepCache | None = None  # the step cache (gen.step_cache), None: every step exact

    @property
    def guided(self) -> bool:
        return self.gen.guidance_scale != 0

    @property
    def packed_len(self) -> int:
        """Positions of its rows in a forward (at most: the step cache packs fewer between refreshes)."""
        return self.canvas.input_ids.shape[1] + (self.canvas.target_len if self.guided else 0)

    @property
    def done(self) -> bool:
        return self.step >= len(self.schedule)


def make_job(canvas: Canvas, gen: GenerationConfig, seed: int, mask_id: int, device) -> Job:
    """A request's job: its target starts as the canvas's (all MASK, or an edit's known codes with
    MASK where to fill) and the schedule reveals exactly its MASK positions, so a known code is
    never written (scheduler.position_scores gives revealed positions -inf)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    tokens = canvas.input_ids[:, canvas.target_start :].to(device=device, dtype=torch.long, copy=True)  # [C, T]
    total = int((tokens == mask_id).sum())
    cache = StepCache(gen.step_cache_prompt_every, gen.step_cache_uncond_every) if gen.step_cache else None
    schedule = scheduler.reveal_schedule(total, gen.num_step, gen.t_shift)
    return Job(canvas, gen, generator, tokens, schedule, 0, cache)


def pack(jobs: list[Job], device) -> tuple[PackedBatch, list[tuple[int, int]]]:
    """Lay out every job's rows; return the batch and each job's (cond, uncond) offsets into the
    heads (uncond -1: no unconditional row in this forward, unguided or reused by the step cache)."""
    ids, masks, lens, index, spans, layout, prompts = [], [], [], [], [], [], []
    n = m = 0
    for job in jobs:
        c, cache = job.canvas, job.cache
        T, P = c.target_len, c.target_start
        prompt = None
        if cache is not None and P > 0:
            due = cache.prompt_due(job.step)  # (always while none is kept)
            prompt = cache.prompt
            if due or prompt is None:  # the whole row, its prompt's keys and values kept anew
                prompt = cache.prompt = PromptKV(P)
            prompt.store = due
        if prompt is not None and not prompt.store:  # the targets alone, after the cached prompt
            ids.append(job.tokens)
            masks.append(c.audio_mask[P:].to(device))
        else:
            ids.append(torch.cat([c.input_ids[:, :P].to(device), job.tokens], dim=1))
            masks.append(c.audio_mask.to(device))
        L = ids[-1].shape[1]
        lens.append(L)
        layout.append((L, T))
        prompts.append(prompt)
        index.append(torch.arange(n + L - T, n + L, device=device))
        n += L
        cond_at, m = m, m + T
        uncond_at = -1
        if job.guided and (
            cache is None or cache.uncond_due(job.step)
        ):  # the unconditional row: the target frames alone
            ids.append(job.tokens)
            masks.append(torch.ones(T, dtype=torch.bool, device=device))
            lens.append(T)
            layout.append((T, T))
            prompts.append(None)
            index.append(torch.arange(n, n + T, device=device))
            n += T
            uncond_at, m = m, m + T
        spans.append((cond_at, uncond_at))
    cached = any(p is not None for p in prompts)
    batch = PackedBatch(
        torch.cat(ids, dim=1),
        torch.cat(masks),
        lens,
        torch.cat(index),
        () if cached else tuple(layout),  # a forward that reads or writes a cache is not graphed
        tuple(prompts) if cached else (),
    )
    return batch, spans


def step_log_probs(
    job: Job, model: OmniVoiceModel, hidden: torch.Tensor, cond_at: int, uncond_at: int, mask_id: int
) -> torch.Tensor:
    """A job's guided log-probabilities [C, T, V] of this step, from the packed hidden states
    [M, H] of the forward (and the step cache's unconditional ones where its row did not run)."""
    T = job.canvas.target_len
    cond = model.heads(hidden[cond_at : cond_at + T])  # [C, T, V]
    g = job.gen
    if job.cache is None:
        uncond = model.heads(hidden[uncond_at : uncond_at + T]) if uncond_at >= 0 else None
        return scheduler.guided_log_probs(cond, uncond, g.guidance_scale, mask_id)
    if uncond_at >= 0:
        job.cache.uncond = F.log_softmax(model.heads(hidden[uncond_at : uncond_at + T]), dim=-1)
    return scheduler.guide(cond, job.cache.uncond if job.guided else None, g.guidance_scale, mask_id)


def advance(job: Job, model: OmniVoiceModel, hidden: torch.Tensor, cond_at: int, uncond_at: int, mask_id: int) -> None:
    """Apply one step's reveal to a job, from the packed hidden states [M, H] of the forward."""
    k = job.schedule[job.step]
    job.step += 1
    if k <= 0:
        return
    g = job.gen
    lp = step_log_probs(job, model, hidden, cond_at, uncond_at, mask_id)
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
    on_advance: Callable[[list[Job]], None] | None = None,
    may_join: Callable[[list[Job], Job], bool] | None = None,
) -> None:
    """Run every job to the end, in the order given.

    on_step(forwards done, forwards planned) after each forward; on_advance(jobs) after each
    forward, with the jobs it moved one step on (Engine.generate's bar counts those
    steps against its plans' total); on_done(job) when a job has
    revealed its last token: it may return new jobs (which need that one's result) to queue.
    forward: what runs the body (default the model itself; e.g. a GraphedForward on CUDA).
    may_join(active, job): whether the next waiting job may join the forward now, within the bounds
    (admission.admit, the jobs one group; e.g. admission.Stagger: jobs spaced so that they leave one
    by one); never asked when none is active.
    """
    forward = forward or model
    device = model.audio_heads.weight.device
    waiting = list(jobs)
    active: list[Job] = []
    done_forwards = 0
    with torch.inference_mode():
        while waiting or active:
            joining = admit(
                active,
                waiting,
                max_jobs=max_batch_size,
                max_tokens=max_packed_tokens,
                tokens=_packed_len,
                may_join=may_join,
            )
            del waiting[: len(joining)]  # (one group: those who join are the first waiting)
            active += joining
            forward_step(model, active, mask_id=mask_id, forward=forward, device=device)
            done_forwards += 1
            if on_advance:
                on_advance(active)
            finished = [j for j in active if j.done]
            active = [j for j in active if not j.done]
            for job in finished:
                waiting.extend((on_done(job) if on_done else None) or [])
            if on_step:
                on_step(done_forwards, done_forwards + forwards_left(active, waiting, max_batch_size))


def _packed_len(job: Job) -> int:
    return job.packed_len


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
