"""Voice cloning equal to the reference: encoder input and codes, canvas, every step, audio."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.parity import run_traced
from safetensors.torch import load_file

from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = FIXTURES / "golden"


@pytest.mark.parametrize("case", ["clone", "clone_16k"])
def test_clone_matches_reference(engine, case):
    meta = json.loads((GOLDEN / f"{case}.json").read_text())
    g = load_file(GOLDEN / f"{case}.safetensors")
    kw = meta["generate_kwargs"]
    voice = engine.voice_from_audio(str(GOLDEN / kw["ref_audio"]), kw["ref_text"])
    assert torch.equal(voice.codes, g["prompt0.ref_audio_tokens"])
    assert voice.text == meta["task"]["ref_texts"][0]
    assert voice.rms == pytest.approx(meta["task"]["ref_rms"][0], abs=1e-7)
    gen = GenerationConfig(position_temperature=0.0, class_temperature=0.0)
    req = Request(text=kw["text"], lang=kw["language"], ref=voice, generation=gen)
    [job], [trace] = run_traced(engine, [req])
    assert job.canvas.target_len == meta["task"]["target_lens"][0]
    assert torch.equal(job.canvas.input_ids, g["call0.item0.input_ids"].long())
    steps = g["call0.item0.step_tokens"].long()
    for s in range(steps.shape[0]):
        assert torch.equal(trace[s], steps[s]), f"first difference entering step {s}"
    assert torch.equal(job.tokens, g["call0.item0.tokens"])
    np.testing.assert_allclose(engine.render(req, job).audio, g["item0.audio"].numpy(), rtol=0, atol=1e-3)
    # and through the public entry point
    [result] = engine.generate([req])
    np.testing.assert_allclose(result.audio, g["item0.audio"].numpy(), rtol=0, atol=1e-3)
