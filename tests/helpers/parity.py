"""The parity cases (tests/fixtures/golden, from the reference on the tiny checkpoint) as requests,
and a packed run that records every step's tokens: test_parity.py, test_clone.py, test_cuda.py."""

import json

from conftest import GOLDEN
from safetensors.torch import load_file

from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import run_jobs
from omnivoice_cli.engine.planning import Request

CASES = ["auto_en", "design_en", "zh", "batch3", "steps8", "steps16", "guidance0", "duration2", "speed13", "nonverbal"]


def golden(case):
    meta = json.loads((GOLDEN / f"{case}.json").read_text())
    return meta, load_file(GOLDEN / f"{case}.safetensors")


def requests_for(meta) -> list[Request]:
    """The reference's generate() kwargs as our requests."""
    kw = dict(meta["generate_kwargs"])
    texts = kw.pop("text")
    texts = texts if isinstance(texts, list) else [texts]
    gen = GenerationConfig(**{k: kw.pop(k) for k in list(kw) if k in GenerationConfig.field_names()})
    lang, instruct = kw.pop("language", None), kw.pop("instruct", None)
    duration, speed = kw.pop("duration", None), kw.pop("speed", None)
    assert not kw, f"case uses arguments this test does not map: {kw}"
    return [
        Request(text=t, lang=lang, instruct=instruct, duration=duration, speed=speed, generation=gen) for t in texts
    ]


def run_traced(engine, reqs):
    """Run the requests in one packed loop; return the jobs and every step's entering tokens."""
    jobs = [engine.prepare(r) for r in reqs]
    trace = [[job.tokens.clone()] for job in jobs]

    def snap(done, total):
        for job, t in zip(jobs, trace):
            if not job.done:
                t.append(job.tokens.clone())

    cfg = engine.cfg
    run_jobs(
        engine.model,
        jobs,
        mask_id=cfg.audio_mask_id,
        max_batch_size=cfg.max_batch_size,
        max_packed_tokens=cfg.max_packed_tokens,
        on_step=snap,
    )
    return jobs, trace
