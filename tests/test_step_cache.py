"""The step cache (GenerationConfig.step_cache, engine/model/generation.py): the prompt's keys and values
reused between refreshes, the unconditional log-probabilities reused for k steps. Off, the loop is
the exact one (the parity tests run it); on, outputs are valid, deterministic, independent of
what shares their forwards, and the same through generate, the service and the stream."""

import json
import queue

import numpy as np
import pytest
import torch
from conftest import GOLDEN, TINY_CKPT
from safetensors.torch import load_file

from omnivoice_cli.app.settings.layers import Source, check_layer, generation_kwargs, resolve_settings
from omnivoice_cli.app.settings.presets import find_preset
from omnivoice_cli.app.settings.schema import DEFAULTS, GENERATION_KEYS, SCHEMA
from omnivoice_cli.app.settings.setting import FLAG, HTTP, LINE, PRESET, SettingsError
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import pack, run_jobs
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

G = GenerationConfig(num_step=16, position_temperature=0.0)
CACHED = G.replace(step_cache=True)  # n = 8, k = 3
TEXT = "The old clockmaker opened the wooden shutters."


def run_steps(engine, reqs, seeds=None):
    jobs = [engine.prepare(r, seed=s) for r, s in zip(reqs, seeds or [r.seed for r in reqs])]
    cfg = engine.cfg
    run_jobs(engine.model, jobs, mask_id=cfg.audio_mask_id, max_batch_size=16, max_packed_tokens=cfg.max_packed_tokens)
    return jobs


def rel(a, b) -> float:
    return ((a - b).norm() / b.norm()).item()


def forward_targets(engine, job):
    """The hidden states [T, H] of the conditional row's targets in one forward of the job."""
    batch, [(cond_at, _)] = pack([job], engine.device)
    with torch.inference_mode():
        return engine.model(batch)[cond_at : cond_at + job.canvas.target_len], batch


@pytest.fixture(scope="module")
def int8_engine():
    return Engine.load(str(TINY_CKPT), Hardware(device="cpu", quantize="int8"))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["fp32", "int8"])
def test_a_cached_prompt_gives_the_whole_rows_result(engine, int8_engine, which, ref_voice):
    """With the targets as they were at the refresh, the targets-only row that attends to the
    stored prompt computes what the whole row computed (RoPE from the prompt's length, the
    prompt's keys first); without the prompt it would not. fp32 (the fused attention) and int8
    (the narrow layer forward, grouped attention)."""
    e = engine if which == "fp32" else int8_engine
    gen = G.replace(step_cache=True, step_cache_prompt_every=64, step_cache_uncond_every=64)
    job = e.prepare(Request(text=TEXT, lang="en", ref=ref_voice, generation=gen), seed=1)
    whole, b0 = forward_targets(e, job)
    job.step = 1  # a cached step: same tokens, the prompt from step 0
    cached, b1 = forward_targets(e, job)
    T, P = job.canvas.target_len, job.canvas.target_start
    assert b0.seq_lens == [P + T, T] and b1.seq_lens == [T, T]  # (no reveal ran: the unconditional row is due)
    assert b1.starts == (P, 0) and b1.layout == ()  # a cached forward is never a CUDA graph
    if which == "fp32":
        torch.testing.assert_close(cached, whole, rtol=0, atol=1e-5)
    else:  # the activations' int8 scale is per tensor: a forward of other rows quantises them a little otherwise
        assert rel(cached, whole) < 0.06
    stored = job.cache.prompt
    assert len(stored.k) == e.cfg.backbone.num_hidden_layers and stored.k[0].shape[1] == P
    job.cache.prompt.k, job.cache.prompt.v = (
        {i: k[:, :0] for i, k in stored.k.items()},
        {i: v[:, :0] for i, v in stored.v.items()},
    )  # the prompt taken away: a different result
    alone, _ = forward_targets(e, job)
    assert rel(alone, whole) > 0.2


@pytest.mark.slow
def test_refreshing_every_step_is_the_exact_path(engine):
    """n = k = 1 runs every step whole: the reference's tokens (the golden steps16 case)."""
    meta = json.loads((GOLDEN / "steps16.json").read_text())["generate_kwargs"]
    g = load_file(GOLDEN / "steps16.safetensors")
    kw = {k: v for k, v in meta.items() if k in GenerationConfig.field_names()}
    gen = GenerationConfig(**kw).replace(step_cache=True, step_cache_prompt_every=1, step_cache_uncond_every=1)
    [job] = run_steps(engine, [Request(text=meta["text"], lang=meta.get("language"), generation=gen)])
    assert torch.equal(job.tokens, g["call0.item0.tokens"])


@pytest.mark.slow
def test_cache_on_is_valid_deterministic_and_not_the_exact_path(engine, ref_voice):
    reqs = [Request(text=TEXT, lang="en", generation=CACHED), Request(text=TEXT, ref=ref_voice, generation=CACHED)]
    a, b = run_steps(engine, reqs), run_steps(engine, reqs)
    exact = run_steps(engine, [Request(text=r.text, lang=r.lang, ref=r.ref, generation=G) for r in reqs])
    mask = engine.cfg.audio_mask_id
    for x, y, z in zip(a, b, exact):
        assert torch.equal(x.tokens, y.tokens)
        assert x.tokens.min() >= 0 and x.tokens.max() < mask  # every token revealed, none the mask
        assert not torch.equal(x.tokens, z.tokens)  # it is an approximation (on these random weights)
    audio = engine.render(reqs[1], a[1]).audio
    assert np.isfinite(audio).all() and audio.std() > 0


@pytest.mark.slow
def test_each_step_packs_what_the_schedule_says(engine):
    """Whole conditional rows at steps 0 and 8 (n = 8), unconditional rows at 0, 3, 6, ... (k = 3)."""
    job = engine.prepare(Request(text=TEXT, lang="en", generation=CACHED))
    T, P = job.canvas.target_len, job.canvas.target_start
    seen = []
    with torch.inference_mode():
        while not job.done:
            batch, spans = pack([job], engine.device)
            seen.append((tuple(batch.seq_lens), spans[0][1] >= 0))
            from omnivoice_cli.engine.model.generation import advance

            advance(job, engine.model, engine.model(batch), *spans[0], engine.cfg.audio_mask_id)
    for s, (lens, uncond) in enumerate(seen):
        assert lens[0] == (P + T if s % 8 == 0 else T), s
        assert uncond == (s % 3 == 0) and len(lens) == 1 + uncond, s


@pytest.mark.slow
def test_requests_with_it_on_and_off_share_forwards(engine, ref_voice):
    """Packed together, each request (cache on or off, other lengths) gives its own tokens alone."""
    reqs = [
        Request(text=TEXT, lang="en", generation=CACHED),
        Request(text="Good morning to you all.", lang="en", generation=G),
        Request(text="Please close the door.", ref=ref_voice, generation=CACHED.replace(step_cache_uncond_every=2)),
        Request(text="Thank you.", generation=CACHED.replace(guidance_scale=0.0, num_step=8)),
    ]
    together = run_steps(engine, reqs)
    for req, job in zip(reqs, together):
        [alone] = run_steps(engine, [req])
        assert torch.equal(alone.tokens, job.tokens)


@pytest.mark.slow
def test_the_service_and_the_stream_render_it_as_generate(engine):
    from omnivoice_cli.engine.service import Service
    from omnivoice_cli.engine.stream.cut import StreamConfig
    from omnivoice_cli.engine.stream.render import stream

    req = Request(text="I can speak in the same voice.", seed=11, generation=CACHED.replace(num_step=6))
    [plain] = engine.generate([req])
    events = queue.Queue()
    service = Service(engine, max_queue=4, config=StreamConfig()).start()
    try:
        service.submit(req, events.put)
        got = []
        while not got or got[-1].kind == "piece":
            got.append(events.get(timeout=120))
    finally:
        service.stop()
    assert got[-1].kind == "done"
    assert np.concatenate([e.piece.audio for e in got if e.kind == "piece"]).tobytes() == plain.audio.tobytes()
    streamed = []
    stream(engine, req, streamed.append)
    assert np.concatenate([p.audio for p in streamed]).tobytes() == plain.audio.tobytes()


def test_settings_the_fast_preset_and_bad_values():
    assert DEFAULTS["step_cache"] is False and "step_cache" in GENERATION_KEYS
    for key in ("step_cache", "step_cache_prompt_every", "step_cache_uncond_every"):
        assert {FLAG, PRESET, LINE, HTTP} <= SCHEMA[key].where  # per request: packing mixes them
    fast = find_preset("fast").settings
    assert fast["step_cache"] is True and (fast["step_cache_prompt_every"], fast["step_cache_uncond_every"]) == (8, 3)
    assert find_preset("balanced").settings["step_cache"] is False  # balanced = the defaults: off
    gen = GenerationConfig(**generation_kwargs(resolve_settings(DEFAULTS, fast, {})))
    assert gen.step_cache and gen.step_cache_prompt_every == 8
    with pytest.raises(SettingsError, match="step_cache_prompt_every.*integer in 1..64"):
        check_layer({"step_cache_prompt_every": 0}, Source("line", "3"), LINE)
    with pytest.raises(InvalidRequest, match="step_cache_uncond_every 2.5"):
        GenerationConfig(step_cache_uncond_every=2.5)
    with pytest.raises(InvalidRequest, match="step_cache must be true or false"):
        GenerationConfig(step_cache="yes")
