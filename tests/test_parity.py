"""Parity with the reference implementation on the tiny checkpoint (greedy settings).

Golden values come from the reference (omnivoice 0.2.1) run on tests/fixtures/tiny/ckpt; see
tests/fixtures/golden/<case>.json for the exact generate() arguments of each case.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.parity import CASES, golden, requests_for, run_traced

from omnivoice_cli.engine.model.generation import pack
from omnivoice_cli.engine.planning import Request

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = FIXTURES / "golden"


@pytest.mark.parametrize("case", CASES)
def test_tokens_and_audio_match_reference(engine, case):
    meta, g = golden(case)
    reqs = requests_for(meta)
    jobs, trace = run_traced(engine, reqs)
    assert [j.canvas.target_len for j in jobs] == g["task.target_lens"].tolist()
    for i, (req, job) in enumerate(zip(reqs, jobs)):
        key = f"call0.item{i}"
        assert torch.equal(job.canvas.input_ids, g[f"{key}.input_ids"].long())
        assert torch.equal(job.canvas.audio_mask, g[f"{key}.audio_mask"].bool())
        steps = g[f"{key}.step_tokens"].long()  # [S, C, T] entering each step
        assert len(trace[i]) == steps.shape[0]
        for s in range(steps.shape[0]):
            assert torch.equal(trace[i][s], steps[s]), f"{case} item {i}: first difference entering step {s}"
        assert torch.equal(job.tokens, g[f"{key}.tokens"])
        result = engine.render(req, job)
        want = g[f"item{i}.audio"].numpy()
        assert result.audio.shape == want.shape
        np.testing.assert_allclose(result.audio, want, rtol=0, atol=1e-3)


def test_step0_logits_match_reference(engine):
    meta, g = golden("auto_en")
    job = engine.prepare(requests_for(meta)[0])
    batch, [(cond_at, uncond_at)] = pack([job], engine.device)
    T = job.canvas.target_len
    with torch.inference_mode():
        hidden = engine.model(batch)  # [M, H]
        cond = engine.model.heads(hidden[cond_at : cond_at + T])  # [C, T, V]
        uncond = engine.model.heads(hidden[uncond_at : uncond_at + T])
    torch.testing.assert_close(cond, g["step0.cond_target_logits"], rtol=0, atol=1e-4)
    torch.testing.assert_close(uncond, g["step0.uncond_target_logits"], rtol=0, atol=1e-4)


def test_packing_does_not_change_a_request(engine):
    """A request gives the same tokens alone and packed with others of other lengths and settings."""
    meta, _ = golden("batch3")
    reqs = requests_for(meta)
    reqs[1] = Request(
        text=reqs[1].text, lang="en", generation=reqs[1].generation.replace(guidance_scale=0.0, num_step=8)
    )
    together, _ = run_traced(engine, reqs)
    for req, job in zip(reqs, together):
        [alone], _ = run_traced(engine, [req])
        assert torch.equal(alone.tokens, job.tokens)
