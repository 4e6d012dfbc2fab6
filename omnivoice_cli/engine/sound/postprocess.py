"""The reference's post-processing of a decoded waveform (`_post_process_audio`), numpy only:
silence removal (audio.py's pydub reproduction), the level (a quiet reference's RMS, else a peak of
0.5), fades in and out, padding; the parts of a text cut at pause tags spaced by exact silences,
with the layout of where each part's kept samples landed (`post_process_parts`); and the
reference's joining of chunks with fades and a silent gap (`cross_fade_chunks`).
"""

from __future__ import annotations

import numpy as np

from .audio import INT16_SCALE, Layout, remove_silence_mapped, to_int16


def fade_chunk(chunk: np.ndarray, first: bool, last: bool, sample_rate: int, silence_duration: float = 0.3):
    """One chunk [N] as `cross_fade_chunks` leaves it: faded in unless first, out unless last.

    Lets a caller fade (and quantise) each chunk as it arrives, then `join_chunks` them."""
    fade_n = int(silence_duration * sample_rate) // 3
    out = np.array(chunk, dtype=np.float32).reshape(-1)
    if not first:
        n_in = min(fade_n, len(out))
        out[:n_in] *= np.linspace(0, 1, n_in, dtype=np.float32)
    if not last:
        # the reference fades the last fade_n samples of everything so far: after the first chunk
        # that window may reach back over the silent gap (zeros stay zeros)
        n_out = min(fade_n, len(out)) if first else fade_n
        w = np.linspace(1, 0, n_out, dtype=np.float32)
        k = min(n_out, len(out))
        out[len(out) - k :] *= w[n_out - k :]
    return out


def join_chunks(faded: list[np.ndarray], sample_rate: int, silence_duration: float = 0.3) -> np.ndarray:
    """Concatenate faded chunks (float32 or int16) with silence_duration/3 of zeros between."""
    gap = int(silence_duration * sample_rate) // 3
    out = np.zeros(sum(len(c) for c in faded) + gap * (len(faded) - 1), dtype=faded[0].dtype)
    pos = 0
    for c in faded:
        out[pos : pos + len(c)] = c
        pos += len(c) + gap
    return out


def cross_fade_chunks(chunks: list[np.ndarray], sample_rate: int, silence_duration: float = 0.3) -> np.ndarray:
    """Join mono chunks [N_i] as the reference does: each boundary gets a linear fade-out of
    silence_duration/3, silence_duration/3 of zeros, and a linear fade-in of silence_duration/3."""
    if not chunks:
        raise ValueError("cross_fade_chunks needs at least one chunk")
    if any(np.ndim(c) != 1 for c in chunks):
        raise ValueError("cross_fade_chunks joins mono waveforms [N]")
    last = len(chunks) - 1
    faded = [fade_chunk(c, i == 0, i == last, sample_rate, silence_duration) for i, c in enumerate(chunks)]
    return join_chunks(faded, sample_rate, silence_duration)


def _level_and_fade_into(out: np.ndarray, ref_rms: float | None, peak: float | np.floating | None, fade_n: int) -> None:
    """In place on out [N] float32, the reference's level rule then its fades, with its float32
    arithmetic and no temporaries of the signal's size: with a reference quieter than RMS 0.1,
    scale by ref_rms / 0.1; without one, peak-normalise to 0.5 (when the peak exceeds 1e-6); then a
    linear fade in and out over fade_n samples (at most half the length)."""
    if ref_rms is not None:
        if ref_rms < 0.1:
            out *= ref_rms
            out /= 0.1
    elif peak is not None and peak > 1e-6:
        out /= peak
        out *= 0.5
    k = min(fade_n, len(out) // 2)
    if k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)


def _peak(x: np.ndarray) -> np.float32:
    """max |x| without an abs() copy."""
    return max(x.max(), -x.min()) if x.size else np.float32(0)


def post_process(
    raw: np.ndarray,
    ref_rms: float | None,
    sample_rate: int,
    postprocess_output: bool = True,
    pad_duration: float = 0.1,
    fade_duration: float = 0.1,
) -> np.ndarray:
    """The reference's `_post_process_audio` on one mono waveform ([N] or [1, N]) -> [N'] float32:
    silence removal (optional), volume, fade and pad."""
    audio = np.asarray(raw)
    if audio.ndim == 2 and audio.shape[0] == 1:
        audio = audio[0]
    if audio.ndim != 1:
        raise ValueError(f"post_process expects mono audio [N] or [1, N], got shape {list(np.shape(raw))}")
    return post_process_parts([audio], [0, 0], ref_rms, sample_rate, postprocess_output, pad_duration, fade_duration)[0]


def post_process_parts(
    parts: list[np.ndarray],
    gaps: list[int],
    ref_rms: float | None,
    sample_rate: int,
    postprocess_output: bool = True,
    pad_duration: float = 0.1,
    fade_duration: float = 0.1,
    release=None,
) -> tuple[np.ndarray, list[tuple[int, Layout]]]:
    """Post-process the parts of a text cut at pause tags and space them by exact silences: the
    audio [N'] float32, and where each part went.

    parts: mono waveforms, float32 (raw decoder output) or int16 (already quantised as the
    silence removal does; the list is emptied as they are used, to free them early); gaps:
    len(parts) + 1 silences in samples (before, between, after). One part with no gaps is exactly
    the reference's post-processing. Otherwise each part has its silences removed and is faded
    on its own, the level is set once for all parts (so they match), and exactly gaps[i] zero
    samples separate them, inside the usual padding at both ends. release(), if given, is called
    when large temporaries have been freed (to hand the memory back to the system).

    Where each part went: (offset, layout) per part, its kept samples lying at
    out[offset : offset + layout_length(layout)], described in the part's own samples (see
    audio.Layout; audio.map_span finds a stretch of the part there)."""
    cleaned, layouts = [], []
    while parts:
        p = parts.pop(0)
        if postprocess_output:
            p = p if p.dtype == np.int16 else to_int16(p)
            p, layout = remove_silence_mapped(p, sample_rate, mid_sil_ms=500, lead_sil_ms=100, trail_sil_ms=100)
            if release:
                release()
        else:
            layout = [(0, len(p))]
        cleaned.append(p)
        layouts.append(layout)
    total = sum(len(p) for p in cleaned)
    if total == 0 and not any(gaps):
        return np.zeros(0, dtype=np.float32), [(0, layout) for layout in layouts]  # as the reference: not padded
    pad = int(pad_duration * sample_rate)
    out = np.zeros(2 * pad + sum(gaps) + total, dtype=np.float32)
    views, placed, pos = [], [], pad + gaps[0]
    for p, gap, layout in zip(cleaned, gaps[1:], layouts):
        view = out[pos : pos + len(p)]
        if p.dtype == np.int16:
            np.divide(p, np.float32(INT16_SCALE), out=view)
        else:
            view[:] = p
        views.append(view)
        placed.append((pos, layout))
        pos += len(p) + gap
    del cleaned
    peak = max((_peak(v) for v in views), default=np.float32(0)) if ref_rms is None else None
    for view in views:
        _level_and_fade_into(view, ref_rms, peak, int(fade_duration * sample_rate))
    return out, placed
