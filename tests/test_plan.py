"""plan_request: cutting a request into pieces without a model, and without torch."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from omnivoice_cli.engine.model.config import GenerationConfig, ModelConfig
from omnivoice_cli.engine.pieces import Piece
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request, plan_request
from omnivoice_cli.engine.text.duration import resolve_target_len

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
LONG = json.loads((GOLDEN / "long.json").read_text())


def test_short_text_is_one_piece_at_its_estimated_length():
    req = Request(text="Hello there, how are you?", lang="en")
    plan = plan_request(req)
    target, _ = resolve_target_len(req.text, None, None, None, None, 25.0)
    assert plan.pieces == [Piece(0, 0, req.text, target)]
    assert plan.gaps == [0.0, 0.0] and plan.n_parts == 1 and plan.tokens == [None]


def test_pause_tags_cut_parts_and_keep_the_silences():
    plan = plan_request(Request(text="First part. [pause 1.5s] Second part. [pause] Third."))
    assert [(p.part, p.chunk, p.text.strip()) for p in plan.pieces] == [
        (0, 0, "First part."),
        (1, 0, "Second part."),
        (2, 0, "Third."),
    ]
    assert plan.gaps == [0.0, 1.5, 0.5, 0.0] and plan.n_parts == 3


def test_long_text_is_chunked_as_the_reference_chunks_it():
    kwargs = LONG["generate_kwargs"]
    plan = plan_request(Request(text=kwargs["text"], lang=kwargs["language"]))
    assert [p.text for p in plan.pieces] == [c["texts"][0] for c in LONG["calls"]]
    assert all(p.target_len is None and p.part == 0 for p in plan.pieces)  # estimated when each starts
    assert [p.chunk for p in plan.pieces] == list(range(len(LONG["calls"])))


def test_the_chunk_threshold_and_frame_rate_come_from_the_settings():
    req = Request(text="Hello there, how are you today? " * 4)
    [whole] = plan_request(req).pieces
    assert whole.target_len > 50
    low = Request(text=req.text, generation=GenerationConfig(audio_chunk_threshold=2.0, audio_chunk_duration=1.0))
    assert len(plan_request(low).pieces) > 1
    fixed = Request(text="Hello.", duration=2.0)
    assert plan_request(fixed).pieces[0].target_len == 50
    assert plan_request(fixed, ModelConfig(frame_rate=50.0)).pieces[0].target_len == 100  # not a fixed 25


def test_a_reference_sets_the_estimate_without_torch():
    ref = SimpleNamespace(codes=np.zeros((8, 100), dtype=np.int64), text="A reference of four seconds.")
    req = Request(text="Hello there.", ref=ref)
    target, _ = resolve_target_len(req.text, ref.text, 100, None, None, 25.0)
    assert plan_request(req).pieces[0].target_len == target
    assert target != plan_request(Request(text="Hello there.")).pieces[0].target_len


def test_engine_plan_is_plan_request_with_its_config():
    engine = object.__new__(Engine)  # no model: plan reads only the config
    engine.cfg = ModelConfig(frame_rate=50.0)
    req = Request(text="One. [pause 1s] Two.", speed=1.3)
    assert engine.plan(req) == plan_request(req, engine.cfg)


@pytest.mark.slow
def test_plan_request_imports_no_torch():
    code = (
        "import sys\n"
        "from omnivoice_cli.engine.pipeline import Request, plan_request, validate_request\n"
        "req = Request(text='Hello. [pause 1s] ' + 'A long sentence, said slowly. ' * 40)\n"
        "validate_request(req)\n"
        "print(len(plan_request(req).pieces), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 2 and out[1] == "False"
