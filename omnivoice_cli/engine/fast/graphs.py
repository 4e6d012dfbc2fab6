"""CUDA graphs of the body's forward: one per packed layout, replayed while the layout holds.

A packed layout (each row's length and number of target positions) stays the same through all the
steps of a set of requests: only the target tokens change. So the first forward of a layout runs
eagerly; at the second, the forward is captured once into a CUDA graph, and from then on each step
copies its tokens into the graph's input buffers and replays it: one launch instead of ~700
kernel launches a step. A few graphs are kept (least recently used first out), so a batch whose
requests come and go re-captures only when its layout changes.

Used on CUDA only (Hardware.cuda_graphs, on by default: engine/hardware.py). If a capture fails, the
forward falls back to eager for the rest of the run and `disabled` says why.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

import torch

from ..cancel import suspended
from ..model.backbone import OmniVoiceModel, PackedBatch

MAX_SEEN = 256  # layouts remembered as run once (a server meets new layouts without end)


@dataclass
class Graph:
    """A captured forward: its static input batch, its output buffer, and how to replay it."""

    batch: PackedBatch  # static inputs, overwritten before each replay
    out: torch.Tensor  # [M, H] static output, overwritten by each replay
    replay: Callable[[], None]

    def run(self, batch: PackedBatch) -> torch.Tensor:
        self.batch.input_ids.copy_(batch.input_ids)
        self.batch.audio_mask.copy_(batch.audio_mask)
        self.batch.target_index.copy_(batch.target_index)
        self.replay()
        return self.out


def static_copy(batch: PackedBatch) -> PackedBatch:
    return replace(
        batch,
        input_ids=batch.input_ids.clone(),
        audio_mask=batch.audio_mask.clone(),
        target_index=batch.target_index.clone(),
        seq_lens=list(batch.seq_lens),
    )


def capture_cuda_graph(model: OmniVoiceModel, batch: PackedBatch) -> Graph:
    """Warm the forward up on a side stream, then capture it into a CUDA graph."""
    static = static_copy(batch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        model(static)  # kernels chosen and workspaces allocated outside the graph
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(static)
    return Graph(static, out, graph.replay)


class GraphedForward:
    """Callable like the model: `forward(batch) -> hidden [M, H]`. The result of a replay is the
    graph's own buffer: use it before the next call (run_jobs does)."""

    def __init__(
        self,
        model: OmniVoiceModel,
        *,
        max_graphs: int = 4,
        capture: Callable[[OmniVoiceModel, PackedBatch], Graph] = capture_cuda_graph,
    ):
        self.model = model
        self.max_graphs = max_graphs  # graphs kept; each holds its own activation memory
        self.capture = capture
        self.graphs: OrderedDict[tuple, Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()  # layouts run once eagerly (the latest MAX_SEEN)
        self.captures = 0  # graphs captured so far
        self.disabled: str | None = None  # why graphs were turned off, if a capture failed

    def __call__(self, batch: PackedBatch) -> torch.Tensor:
        key = batch.layout
        if self.disabled is not None or not key:
            return self.model(batch)
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.seen:  # a layout used for one step only is not worth capturing
                self.seen[key] = None
                while len(self.seen) > MAX_SEEN:  # a long-running server meets endless layouts
                    self.seen.popitem(last=False)
                return self.model(batch)
            del self.seen[key]
            try:
                with suspended():  # a cancelled render is not cut inside a capture (engine/cancel.py)
                    graph = self.capture(self.model, batch)
            except (RuntimeError, AssertionError) as e:  # capture is unsupported here: stay eager
                self.disabled = f"{type(e).__name__}: {e}"
                self.graphs.clear()
                return self.model(batch)
            self.captures += 1
            self.graphs[key] = graph
            while len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
        else:
            self.graphs.move_to_end(key)
        return graph.run(batch)
