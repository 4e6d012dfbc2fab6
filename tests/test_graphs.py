"""CUDA-graph replay of the forward: layouts, static buffers, eviction, fallback.

No GPU here: the capture is replaced by one that records the forward on static buffers and
replays it by re-running the model on them, which exercises everything but the CUDA calls."""

import pytest
import torch

from omnivoice_cli.engine.fast.graphs import Graph, GraphedForward, static_copy
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import pack, run_jobs
from omnivoice_cli.engine.planning import Request

TEXTS = ["Hello there.", "A second, somewhat longer sentence for the batch.", "Third one."]


def fake_capture(log):
    def capture(model, batch):
        static = static_copy(batch)
        out = model(static)
        log.append(("capture", batch.layout))

        def replay():
            log.append(("replay", static.layout))
            out.copy_(model(static))

        return Graph(static, out, replay)

    return capture


def jobs_for(engine, steps=(4, 6, 8), guidance=(2.0, 0.0, 2.0)):
    reqs = [
        Request(text=t, lang="en", seed=i, generation=GenerationConfig(num_step=n, guidance_scale=g))
        for i, (t, n, g) in enumerate(zip(TEXTS, steps, guidance))
    ]
    return [engine.prepare(r) for r in reqs]


def run_forward(engine, forward=None, **kw):
    jobs = jobs_for(engine, **kw)
    cfg = engine.cfg
    run_jobs(engine.model, jobs, mask_id=cfg.audio_mask_id, max_batch_size=16, max_packed_tokens=10**6, forward=forward)
    return [j.tokens for j in jobs]


@pytest.mark.slow
def test_layout_names_each_rows_length_and_targets(engine):
    jobs = jobs_for(engine)
    batch, _ = pack(jobs, "cpu")
    want = []
    for j in jobs:
        L, T = j.canvas.input_ids.shape[1], j.canvas.target_len
        want += [(L, T)] + ([(T, T)] if j.guided else [])
    assert batch.layout == tuple(want) and [n for n, _ in batch.layout] == batch.seq_lens


@pytest.mark.slow
def test_replayed_graphs_give_the_eager_tokens(engine):
    eager = run_forward(engine)
    log = []
    fwd = GraphedForward(engine.model, capture=fake_capture(log))
    graphed = run_forward(engine, fwd)
    assert all(torch.equal(a, b) for a, b in zip(eager, graphed))
    # three layouts (3 jobs for 4 steps, 2 for 2 more, 1 for 2 more): each runs once eagerly,
    # is captured at its second step and replayed from then on
    layouts = list(dict.fromkeys(k for _, k in log))
    assert fwd.captures == 3 and len(layouts) == 3
    replays = [sum(1 for e, k in log if e == "replay" and k == lay) for lay in layouts]
    assert replays == [3, 1, 1] and fwd.disabled is None


@pytest.mark.slow
def test_old_layouts_are_evicted(engine):
    fwd = GraphedForward(engine.model, max_graphs=1, capture=fake_capture([]))
    run_forward(engine, fwd)
    assert fwd.captures == 3 and len(fwd.graphs) == 1


def test_layouts_seen_once_are_remembered_within_a_bound():
    from types import SimpleNamespace

    from omnivoice_cli.engine.fast import graphs

    captured = []

    def capture(model, batch):
        captured.append(batch.layout)
        return SimpleNamespace(run=lambda b: "replayed")

    fwd = GraphedForward(lambda batch: batch.layout, capture=capture)
    for n in range(graphs.MAX_SEEN + 50):  # every layout new: run eagerly, never captured
        assert fwd(SimpleNamespace(layout=((n, 1),))) == ((n, 1),)
    assert len(fwd.seen) == graphs.MAX_SEEN and ((0, 1),) not in fwd.seen and not captured
    last = SimpleNamespace(layout=((graphs.MAX_SEEN + 49, 1),))
    assert fwd(last) == "replayed"  # its second step: captured, and no longer among those seen once
    assert captured == [last.layout] and last.layout not in fwd.seen


@pytest.mark.slow
def test_a_failed_capture_falls_back_to_eager(engine):
    eager = run_forward(engine)

    def broken(model, batch):
        raise RuntimeError("operation not permitted when stream is capturing")

    fwd = GraphedForward(engine.model, capture=broken)
    graphed = run_forward(engine, fwd)
    assert all(torch.equal(a, b) for a, b in zip(eager, graphed))
    assert "not permitted" in fwd.disabled and not fwd.graphs


@pytest.mark.slow
def test_graphs_are_used_on_cuda_only(engine):
    assert engine.forward is engine.model  # CPU: plain eager forward
