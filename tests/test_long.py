"""Long text: chunked synthesis equal to the reference, and pause tags."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from omnivoice_cli.engine import audio, generation
from omnivoice_cli.engine.config import GenerationConfig
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.pipeline import Request, validate_request
from omnivoice_cli.engine.text import split_pauses

FIXTURES = Path(__file__).parent / "fixtures"
GREEDY = GenerationConfig(position_temperature=0.0, class_temperature=0.0)


def traced_generate(engine, requests, monkeypatch):
    """Engine.generate, recording every job's tokens entering each step (in order of creation)."""
    traces: dict[int, list] = {}
    jobs = []
    real = generation.advance

    def advance(job, *args):
        if id(job) not in traces:
            traces[id(job)] = []
            jobs.append(job)
        traces[id(job)].append(job.tokens.clone())
        return real(job, *args)

    monkeypatch.setattr(generation, "advance", advance)
    results = engine.generate(requests)
    return results, [(job, traces[id(job)]) for job in jobs]


@pytest.mark.slow
def test_long_text_matches_reference(engine, monkeypatch):
    meta = json.loads((FIXTURES / "golden" / "long.json").read_text())
    g = load_file(FIXTURES / "golden" / "long.safetensors")
    req = Request(text=meta["generate_kwargs"]["text"], lang=meta["generate_kwargs"]["language"], generation=GREEDY)
    plan = engine.plan(req)
    assert [p.text for p in plan.pieces] == [c["texts"][0] for c in meta["calls"]]
    [result], jobs = traced_generate(engine, [req], monkeypatch)
    assert len(jobs) == 5
    for c, (job, steps) in enumerate(jobs):  # chunk 0 first, then chunks 1-4 with chunk 0 as reference
        key = f"call{c}.item0"
        assert job.canvas.target_len == meta["calls"][c]["target_lens"][0]
        assert torch.equal(job.canvas.input_ids, g[f"{key}.input_ids"].long())
        golden_steps = g[f"{key}.step_tokens"].long()
        for s in range(golden_steps.shape[0]):
            assert torch.equal(steps[s], golden_steps[s]), f"chunk {c}: first difference entering step {s}"
        assert torch.equal(job.tokens, g[f"{key}.tokens"])
    chunks = [engine._decode(job.tokens) for job, _ in jobs]
    raw = audio.cross_fade_chunks(chunks, engine.sample_rate)
    np.testing.assert_allclose(raw, g["item0.raw_waveform"][0].numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(result.audio, g["item0.audio"].numpy(), rtol=0, atol=1e-3)


def test_long_text_is_no_longer_an_error():
    validate_request(Request(text="A sentence that goes on and on. " * 60))


def test_chunks_with_a_reference_all_use_it(engine):
    from omnivoice_cli.engine.voice import VoicePrompt

    g = load_file(FIXTURES / "golden" / "clone.safetensors")
    voice = VoicePrompt(g["prompt0.ref_audio_tokens"], "This is the reference voice for the test.", 0.05)
    req = Request(text="Every chunk speaks in the same voice. " * 25, generation=GREEDY.replace(num_step=2), ref=voice)
    plan = engine.plan(req)
    assert len(plan.pieces) > 1
    for piece in plan.pieces:
        job = engine.prepare(req, piece)
        ref_len = voice.codes.shape[1]
        assert torch.equal(
            job.canvas.input_ids[:, job.canvas.target_start - ref_len : job.canvas.target_start], voice.codes
        )


@pytest.mark.parametrize(
    "text, parts, gaps",
    [
        ("First part. [pause 1.5s] Second part.", ["First part. ", " Second part."], [0, 1.5, 0]),
        ("A [pause 500ms] B [pause] C", ["A ", " B ", " C"], [0, 0.5, 0.5, 0]),
        ("[pause 0.25s]Hi[PAUSE 2s][pause .5s]", ["Hi"], [0.25, 2.5]),
        ("No pause here.", ["No pause here."], [0, 0]),
    ],
)
def test_pause_tags_split_the_text(text, parts, gaps):
    assert split_pauses(text) == (parts, gaps)


@pytest.mark.parametrize("tag", ["[pause 1.5]", "[pause x]", "[pause 2 sec]", "[pause -1s]", "[pause 1.5s"])
def test_malformed_pause_tag_is_named(tag):
    with pytest.raises(InvalidRequest, match="malformed pause tag"):
        validate_request(Request(text=f"Before {tag} after."))


def test_pause_layout_is_exact():
    a, b = np.full(5000, 0.3, np.float32), np.full(7000, -0.2, np.float32)
    out = audio.post_process_parts([a, b], [100, 36000, 0], None, 24000, postprocess_output=False, fade_duration=0.0)
    pad = 2400
    assert len(out) == 2 * pad + 100 + 5000 + 36000 + 7000
    assert np.all(out[: pad + 100] == 0) and np.all(out[pad + 100 : pad + 5100] != 0)
    assert np.all(out[pad + 5100 : pad + 41100] == 0) and np.all(out[pad + 41100 : pad + 48100] != 0)
    assert np.abs(out).max() == pytest.approx(0.5)  # one level for all parts: the loudest peaks at 0.5


def test_pause_inserts_exactly_the_requested_silence(engine):
    g = GREEDY.replace(num_step=4, postprocess_output=False, fade_duration=0.0)
    [r] = engine.generate([Request(text="First part. [pause 1.5s] Second part.", generation=g)])
    silent = np.flatnonzero(r.audio == 0)
    pad = int(0.1 * engine.sample_rate)
    middle = silent[(silent >= pad) & (silent < len(r.audio) - pad)]
    assert len(middle) == int(1.5 * engine.sample_rate)  # decoded speech has no exact zeros
    assert np.all(np.diff(middle) == 1)  # one contiguous run


def test_duration_and_pauses_do_not_mix():
    with pytest.raises(InvalidRequest, match="duration cannot be combined"):
        validate_request(Request(text="A [pause] B", duration=2.0))
