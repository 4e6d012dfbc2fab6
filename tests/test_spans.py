"""Where each piece of a request lands in the post-processed audio: layouts and spans as pure
functions (engine/sound/audio.py, postprocess.py, pipeline.piece_spans), checked against the post-processing itself."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice_cli.engine.planning import piece_spans
from omnivoice_cli.engine.sound import audio
from omnivoice_cli.engine.sound.audio import layout_slice, map_span, merge_layout, render_layout
from omnivoice_cli.engine.sound.postprocess import post_process_parts

SR = 24000


def speechy(rng, pattern, sr=SR, extra=0):
    """int16 noise bursts and silences: pattern = [(seconds, loud?)...], plus `extra` samples."""
    parts = []
    for seconds, loud in pattern:
        n = int(seconds * sr)
        amp = 0.3 if loud else 1e-5
        parts.append(amp * rng.standard_normal(n))
    parts.append(np.zeros(extra))
    return audio.to_int16(np.concatenate(parts).astype(np.float32))


PATTERNS = [
    [(0.7, False), (1.0, True), (1.2, False), (0.6, True), (0.9, False)],  # edges and a long inner silence
    [(0.3, True), (0.2, False), (0.4, True)],  # nothing to remove inside
    [(2.0, False), (0.05, True), (2.0, False), (0.5, True), (0.02, False)],
    [(1.0, True)],
    [(0.8, False)],  # silent only
]


@pytest.mark.parametrize("extra", [0, 5, 11, 12, 13, 23])  # sample counts that round the ms geometry both ways
@pytest.mark.parametrize("pattern", range(len(PATTERNS)))
def test_layout_renders_the_silence_removal(pattern, extra):
    rng = np.random.default_rng(pattern * 100 + extra)
    x = speechy(rng, PATTERNS[pattern], extra=extra)
    out, layout = audio.remove_silence_mapped(x, SR)
    assert np.array_equal(out, audio.remove_silence_int16(x, SR))
    assert audio.layout_length(layout) == len(out)
    assert np.array_equal(render_layout(x, layout), out)
    srcs = [src for src, _ in layout if src is not None]
    assert srcs == sorted(srcs)  # in order: a stretch of the input maps to one span


@pytest.mark.parametrize("extra", [0, 12, 13])
def test_edges_layout_with_padding(extra):
    """The edge trim pads with zeros when pydub's ms rounding passes the end (both ends)."""
    rng = np.random.default_rng(extra)
    x = speechy(rng, [(0.3, False), (0.5, True), (0.3, False)], extra=extra)
    for lead, trail in [(100, 100), (0, 0), (1000, 1000)]:
        out, layout = audio.remove_silence_edges_mapped(x, SR, lead, trail, audio.SILENCE_THRESHOLD_DB)
        assert np.array_equal(out, audio.remove_silence_edges(x, SR, lead, trail, audio.SILENCE_THRESHOLD_DB))
        assert np.array_equal(render_layout(x, layout), out)


def test_layout_slice_and_merge():
    layout = [(10, 5), (None, 3), (20, 4)]
    assert layout_slice(layout, 0, 12) == [(10, 5), (None, 3), (20, 4)]
    assert layout_slice(layout, 3, 9) == [(13, 2), (None, 3), (20, 1)]
    assert layout_slice(layout, 10, 15) == [(22, 2), (None, 3)]  # past the end: zeros
    assert layout_slice(layout, 20, 22) == [(None, 2)]
    assert merge_layout([(0, 3), (3, 2), (None, 1), (None, 2), (9, 0), (9, 1)]) == [(0, 5), (None, 3), (9, 1)]


def test_map_span():
    layout = [(None, 4), (100, 10), (None, 2), (200, 5)]  # output: 4 zeros, src 100..109, 2 zeros, src 200..204
    assert map_span(layout, 100, 110) == (4, 14)
    assert map_span(layout, 105, 203) == (9, 19)
    assert map_span(layout, 0, 100) == (4, 4)  # nothing kept: where the next kept sample is
    assert map_span(layout, 150, 190) == (16, 16)
    assert map_span(layout, 300, 400) == (21, 21)  # after everything: the end
    assert map_span(layout, 90, 101) == (4, 5)


def test_post_process_parts_places_each_part():
    rng = np.random.default_rng(1)
    parts = [speechy(rng, [(0.7, False), (0.5, True), (0.9, False), (0.4, True)]), speechy(rng, [(0.6, True)])]
    gaps = [0, 12000, 0]
    out, placed = post_process_parts([p.copy() for p in parts], gaps, 0.1, SR, fade_duration=0.0)
    pad = int(0.1 * SR)
    (o0, l0), (o1, l1) = placed
    assert o0 == pad and o1 == o0 + audio.layout_length(l0) + 12000
    assert len(out) == o1 + audio.layout_length(l1) + pad
    for (offset, layout), part in zip(placed, parts):  # ref_rms 0.1 and no fade: the samples themselves
        view = out[offset : offset + audio.layout_length(layout)]
        assert np.array_equal(view, render_layout(part, layout) / np.float32(32768))


def test_post_process_parts_without_postprocessing():
    parts = [np.full(100, 0.2, dtype=np.float32), np.full(50, 0.1, dtype=np.float32)]
    out, placed = post_process_parts(parts, [10, 20, 0], None, SR, postprocess_output=False)
    pad = int(0.1 * SR)
    assert placed == [(pad + 10, [(0, 100)]), (pad + 130, [(0, 50)])]


def test_piece_spans():
    placed = [(2400, [(0, 1000), (5000, 3000)]), (20000, [(None, 10), (0, 500)])]
    parts = [0, 0, 1]
    extents = [(0, 4000), (4400, 8000), (0, 500)]  # two chunks of part 0, one piece in part 1
    assert piece_spans(parts, extents, placed) == [(2400, 3400), (3400, 6400), (20010, 20510)]
