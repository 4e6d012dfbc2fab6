"""The GPU path: parity on CUDA in fp32, CUDA graphs against eager, a bf16 run. Skipped without a
CUDA device; where there is one: `python -m pytest -q tests/test_cuda.py`."""

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.parity import CASES, golden, requests_for

from omnivoice_cli.engine.fast.graphs import GraphedForward
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import run_jobs
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
TINY = Path(__file__).parent / "fixtures" / "tiny" / "ckpt"


@pytest.fixture(scope="module")
def engine():
    return Engine.load(str(TINY), Hardware(device="cuda", dtype="float32"))  # CUDA graphs on (the default)


def run_packed(engine, reqs, forward):
    jobs = [engine.prepare(r) for r in reqs]
    cfg = engine.cfg
    run_jobs(
        engine.model,
        jobs,
        mask_id=cfg.audio_mask_id,
        max_batch_size=cfg.max_batch_size,
        max_packed_tokens=cfg.max_packed_tokens,
        forward=forward,
    )
    return jobs


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_fp32_tokens_and_audio_match_reference_on_cuda(engine, case):
    meta, g = golden(case)
    reqs = requests_for(meta)
    assert isinstance(engine.forward, GraphedForward)
    jobs = run_packed(engine, reqs, engine.forward)
    assert engine.forward.disabled is None, engine.forward.disabled
    for i, (req, job) in enumerate(zip(reqs, jobs)):
        assert torch.equal(job.tokens.cpu(), g[f"call0.item{i}.tokens"]), f"{case} item {i}"
        audio = engine.render(req, job).audio
        np.testing.assert_allclose(audio, g[f"item{i}.audio"].numpy(), rtol=0, atol=1e-3)


@pytest.mark.slow
def test_graph_replay_gives_the_eager_tokens_as_layouts_change(engine):
    reqs = [
        Request(text=t, lang="en", seed=i, generation=GenerationConfig(num_step=n, guidance_scale=gs))
        for i, (t, n, gs) in enumerate(
            [("Hello there.", 4, 2.0), ("A second, longer sentence for the batch.", 8, 0.0), ("Third.", 6, 2.0)]
        )
    ]
    eager = run_packed(engine, reqs, engine.model)
    fwd = GraphedForward(engine.model)
    graphed = run_packed(engine, reqs, fwd)
    assert fwd.disabled is None and fwd.captures == 3
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(eager, graphed))


def test_bfloat16_body_gives_valid_audio():
    engine = Engine.load(str(TINY), Hardware(device="cuda", dtype="bfloat16"))
    [result] = engine.generate([Request(text="Hello there, how are you?", lang="en", seed=3)])
    assert result.audio.dtype == np.float32 and np.isfinite(result.audio).all() and len(result.audio) > 0
