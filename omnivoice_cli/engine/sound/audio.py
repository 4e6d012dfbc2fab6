"""Silence removal of decoded waveforms, numpy only: the int16 round trip, the layout of what is
kept, pydub's geometry and loudness (postprocess.py then levels, fades and pads).

`remove_silence` reproduces, sample for sample, what the reference computes through pydub
(`split_on_silence` + `detect_leading_silence`) on a mono signal, including pydub's details:
  * the signal is quantised to int16 (`(x * 32768).clip(-32768, 32767).astype(int16)`) and the
    result is converted back with `/ 32768`;
  * positions are milliseconds; a segment's length is `round(1000 * n / sr)` ms and ms `m` maps to
    sample `int(m * (sr / 1000.0))`; a slice reaching past the data is padded with zeros (this can
    happen when the length in ms was rounded up);
  * a window's loudness is audioop's integer RMS, `int(sqrt(sum(x^2) / n))`, and
    dBFS = 20 * log(rms / 32768, 10) (-inf for rms 0).
Windows are scanned with prefix sums of squares (exact in int64, computed block by block), so the
10 ms / 500 ms scans are vectorised and a long signal needs no full-size temporaries.

One difference: when the whole signal is silent the reference returns an empty segment (and then
crashes in the peak normalisation of `postprocess.post_process`); here the result is simply empty.
"""

from __future__ import annotations

import math

import numpy as np

INT16_SCALE = 32768.0
SILENCE_THRESHOLD_DB = -50.0


# ---------------------------------------------------------------------------------------------
# int16 round trip (numpy_to_audiosegment / audiosegment_to_numpy)
# ---------------------------------------------------------------------------------------------


BLOCK = 1 << 20  # samples per block in the passes over long signals (bounds their temporaries)


def to_int16(audio: np.ndarray) -> np.ndarray:
    """float32 [-1, 1) -> int16, truncating toward zero after clipping, as the reference does.

    Done block by block, so a long signal costs its int16 copy and no full-size temporaries."""
    audio = np.asarray(audio, dtype=np.float32)
    out = np.empty(audio.shape, dtype=np.int16)
    flat_in, flat_out = audio.reshape(-1), out.reshape(-1)
    for i in range(0, flat_in.size, BLOCK):
        flat_out[i : i + BLOCK] = (flat_in[i : i + BLOCK] * INT16_SCALE).clip(-32768, 32767).astype(np.int16)
    return out


def from_int16(samples: np.ndarray) -> np.ndarray:
    """int16 -> float32 / 32768."""
    return samples.astype(np.float32) / INT16_SCALE


# ---------------------------------------------------------------------------------------------
# Layouts: which input sample each output sample of the post-processing is
# ---------------------------------------------------------------------------------------------

# A signal described in samples of a source: runs of (source start, length), in order; a run
# whose start is None is zeros that come from no source sample. The post-processing keeps the
# layout of what it cuts (silence removal, edge trimming), so a caller can find where a stretch
# of the decoded audio (one chunk of a long text) lands in the output, with no per-sample arrays.
Layout = list  # list[tuple[int | None, int]]


def layout_length(layout: Layout) -> int:
    return sum(n for _, n in layout)


def merge_layout(layout: Layout) -> Layout:
    """Drop empty runs and join runs that continue each other."""
    out: Layout = []
    for src, n in layout:
        if n <= 0:
            continue
        if out:
            last_src, last_n = out[-1]
            if (src is None and last_src is None) or (
                src is not None and last_src is not None and last_src + last_n == src
            ):
                out[-1] = (last_src, last_n + n)
                continue
        out.append((src, n))
    return out


def layout_slice(layout: Layout, a: int, b: int) -> Layout:
    """The layout of positions [a, b) of the described signal; positions past its end are zeros
    (as `padded_slice` pads)."""
    out: Layout = []
    pos = 0
    for src, n in layout:
        lo, hi = max(a, pos), min(b, pos + n)
        if hi > lo:
            out.append((None if src is None else src + lo - pos, hi - lo))
        pos += n
    if b > max(a, pos):
        out.append((None, b - max(a, pos)))
    return merge_layout(out)


def render_layout(source: np.ndarray, layout: Layout) -> np.ndarray:
    """The signal a layout describes, made of `source` (source positions past its end are zeros)."""
    out = np.zeros(layout_length(layout), dtype=source.dtype)
    pos = 0
    for src, n in layout:
        if src is not None:
            data = source[src : src + n]
            out[pos : pos + len(data)] = data
        pos += n
    return out


def map_span(layout: Layout, a: int, b: int) -> tuple[int, int]:
    """Where the source samples [a, b) are in the described signal: from the first of them that
    is there to one past the last. When none is there, an empty span (p, p) at the position of
    the first source sample after them (the signal's end if none)."""
    first: int | None = None
    last: int | None = None
    pos = 0
    for src, n in layout:
        if src is not None:
            lo, hi = max(a, src), min(b, src + n)
            if hi > lo:
                first = pos + lo - src if first is None else first
                last = pos + hi - src
            elif first is None and src >= b:
                return pos, pos
        pos += n
    return (pos, pos) if first is None or last is None else (first, last)  # last is set with first


# ---------------------------------------------------------------------------------------------
# pydub's millisecond geometry and loudness, on an int16 mono array
# ---------------------------------------------------------------------------------------------


def segment_ms(n_samples: int, sample_rate: int) -> int:
    """pydub `len(segment)`: duration in ms, Python-rounded (half to even)."""
    return round(1000 * (float(n_samples) / sample_rate))


def ms_to_sample(ms, sample_rate: int):
    """pydub `frame_count(ms)` truncated to int (works on ints or int arrays of ms >= 0)."""
    if isinstance(ms, np.ndarray):
        return (ms.astype(np.float64) * (sample_rate / 1000.0)).astype(np.int64)
    return int(ms * (sample_rate / 1000.0))


def ms_bounds(
    n_samples: int, sample_rate: int, start_ms: int | None = None, end_ms: int | None = None
) -> tuple[int, int]:
    """The samples [s, e) pydub's `segment[start_ms:end_ms]` takes of n_samples (start/end >= 0 or
    None); e may pass n_samples, and what lies beyond is zeros."""
    length = segment_ms(n_samples, sample_rate)
    start = 0 if start_ms is None else min(start_ms, length)
    end = length if end_ms is None else min(end_ms, length)
    return ms_to_sample(start, sample_rate), ms_to_sample(end, sample_rate)


def padded_slice(samples: np.ndarray, s: int, e: int) -> np.ndarray:
    """samples[s:e] followed by zeros up to e - s samples (a view when no zeros are needed)."""
    data = samples[s:e]
    missing = (e - s) - len(data)
    if missing > 0:
        data = np.concatenate([data, np.zeros(missing, dtype=samples.dtype)])
    return data


def slice_ms(
    samples: np.ndarray, sample_rate: int, start_ms: int | None = None, end_ms: int | None = None
) -> np.ndarray:
    """pydub `segment[start_ms:end_ms]` for start/end >= 0 (or None), including its zero padding."""
    return padded_slice(samples, *ms_bounds(len(samples), sample_rate, start_ms, end_ms))


def _prefix_squares(samples: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """sum(samples[:i] ** 2) for each i in idx (0 <= i <= n), exact in int64, block by block."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    out = np.empty(len(idx), dtype=np.int64)
    total, k = 0, 0
    for start in range(0, len(samples) + 1, BLOCK):
        block = samples[start : start + BLOCK].astype(np.int64)
        cum = np.cumsum(block * block)
        end = start + len(block)
        hi = np.searchsorted(sorted_idx, end, side="right")
        sel = sorted_idx[k:hi] - start  # prefix lengths within this block, 0..len(block)
        vals = np.full(len(sel), total, dtype=np.int64)
        inner = sel > 0
        vals[inner] += cum[sel[inner] - 1]
        out[order[k:hi]] = vals
        k = int(hi)
        total += int(cum[-1]) if len(cum) else 0
        if k == len(sorted_idx):
            break
    return out


def _window_rms(samples: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """audioop.rms of zero-padded windows [s, e): floor(sqrt(sum_sq / (e - s))), 0 when empty.

    samples: int16 [n]; s, e: [W] sample indices (e may exceed n: the padding adds nothing)."""
    n = len(samples)
    both = _prefix_squares(samples, np.concatenate([np.minimum(s, n), np.minimum(e, n)]))
    sum_sq = both[len(s) :] - both[: len(s)]
    count = e - s
    rms = np.zeros(len(s), dtype=np.int64)
    ok = count > 0
    rms[ok] = np.floor(np.sqrt(sum_sq[ok].astype(np.float64) / count[ok].astype(np.float64))).astype(np.int64)
    return rms


def _dbfs_of_rms(rms: int) -> float:
    """pydub `dBFS` for an integer RMS of 16-bit audio."""
    if rms == 0:
        return -math.inf
    return 20 * math.log(rms / INT16_SCALE, 10)


def _max_rms_below_db(threshold_db: float) -> int:
    """Largest integer RMS whose dBFS is < threshold_db (-1 if none); dBFS is monotonic in RMS."""
    lo, hi = -1, 32768  # invariant: lo satisfies (or is -1), everything above hi fails
    if _dbfs_of_rms(hi) < threshold_db:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _dbfs_of_rms(mid) < threshold_db:
            lo = mid
        else:
            hi = mid
    return lo


def detect_silence(
    samples: np.ndarray, sample_rate: int, min_silence_len: int, silence_thresh: float, seek_step: int = 1
) -> list[list[int]]:
    """pydub `detect_silence`: silent [start_ms, end_ms] ranges of an int16 mono array."""
    length = segment_ms(len(samples), sample_rate)
    if length < min_silence_len:
        return []
    thresh = (10 ** (float(silence_thresh) / 20)) * INT16_SCALE  # rms <= thresh is silent
    last_start = length - min_silence_len
    starts = np.arange(0, last_start + 1, seek_step, dtype=np.int64)
    if last_start % seek_step:
        starts = np.append(starts, last_start)
    ends = np.minimum(starts + min_silence_len, length)
    rms = _window_rms(samples, ms_to_sample(starts, sample_rate), ms_to_sample(ends, sample_rate))
    silence_starts = starts[rms <= thresh].tolist()
    if not silence_starts:
        return []
    ranges = []
    prev = range_start = silence_starts[0]
    for i in silence_starts[1:]:
        continuous = i == prev + seek_step
        has_gap = i > prev + min_silence_len
        if not continuous and has_gap:
            ranges.append([range_start, prev + min_silence_len])
            range_start = i
        prev = i
    ranges.append([range_start, prev + min_silence_len])
    return ranges


def detect_nonsilent(
    samples: np.ndarray, sample_rate: int, min_silence_len: int, silence_thresh: float, seek_step: int = 1
) -> list[list[int]]:
    """pydub `detect_nonsilent`: the complement of `detect_silence`, in ms."""
    silent = detect_silence(samples, sample_rate, min_silence_len, silence_thresh, seek_step)
    length = segment_ms(len(samples), sample_rate)
    if not silent:
        return [[0, length]]
    if silent[0][0] == 0 and silent[0][1] == length:
        return []
    out = []
    prev_end = 0
    for start, end in silent:
        out.append([prev_end, start])
        prev_end = end
    if silent[-1][1] != length:
        out.append([prev_end, length])
    if out[0] == [0, 0]:
        out.pop(0)
    return out


def split_on_silence(
    samples: np.ndarray,
    sample_rate: int,
    min_silence_len: int,
    silence_thresh: float,
    keep_silence: int,
    seek_step: int = 1,
) -> list[np.ndarray]:
    """pydub `split_on_silence` (keep_silence in ms; overlapping keeps meet halfway)."""
    bounds = split_on_silence_bounds(samples, sample_rate, min_silence_len, silence_thresh, keep_silence, seek_step)
    return [padded_slice(samples, s, e) for s, e in bounds]


def split_on_silence_bounds(
    samples: np.ndarray,
    sample_rate: int,
    min_silence_len: int,
    silence_thresh: float,
    keep_silence: int,
    seek_step: int = 1,
) -> list[tuple[int, int]]:
    """The sample bounds [s, e) of the pieces `split_on_silence` returns (e may pass the end: zeros)."""
    length = segment_ms(len(samples), sample_rate)
    ranges = [
        [start - keep_silence, end + keep_silence]
        for start, end in detect_nonsilent(samples, sample_rate, min_silence_len, silence_thresh, seek_step)
    ]
    for left, right in zip(ranges, ranges[1:]):
        if right[0] < left[1]:
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    return [ms_bounds(len(samples), sample_rate, max(s, 0), min(e, length)) for s, e in ranges]


def detect_leading_silence(
    samples: np.ndarray, sample_rate: int, silence_threshold: float = SILENCE_THRESHOLD_DB, chunk_size: int = 10
) -> int:
    """pydub `detect_leading_silence`: ms where the leading run of quiet chunk_size-ms windows ends."""
    length = segment_ms(len(samples), sample_rate)
    starts = np.arange(0, length, chunk_size, dtype=np.int64)  # the loop runs while trim_ms < length
    if len(starts) == 0:
        return 0
    ends = np.minimum(starts + chunk_size, length)
    rms = _window_rms(samples, ms_to_sample(starts, sample_rate), ms_to_sample(ends, sample_rate))
    loud = np.flatnonzero(rms > _max_rms_below_db(silence_threshold))
    trim = int(starts[loud[0]]) if len(loud) else len(starts) * chunk_size
    return min(trim, length)


def remove_silence_edges(
    samples: np.ndarray, sample_rate: int, lead_sil_ms: int, trail_sil_ms: int, threshold_db: float
) -> np.ndarray:
    """Trim leading / trailing silence down to lead_sil_ms / trail_sil_ms (int16 in, int16 out;
    a view of the input where no zero padding is needed)."""
    return remove_silence_edges_mapped(samples, sample_rate, lead_sil_ms, trail_sil_ms, threshold_db)[0]


def remove_silence_edges_mapped(
    samples: np.ndarray,
    sample_rate: int,
    lead_sil_ms: int,
    trail_sil_ms: int,
    threshold_db: float,
    layout: "Layout | None" = None,
) -> tuple[np.ndarray, "Layout"]:
    """`remove_silence_edges`, and the layout of its output: `layout` (default: the input itself)
    cut as the samples are. The trailing edge is found on the reversed signal, as pydub does."""
    layout = [(0, len(samples))] if layout is None else layout
    start = max(0, detect_leading_silence(samples, sample_rate, threshold_db) - lead_sil_ms)
    s, e = ms_bounds(len(samples), sample_rate, start, None)
    samples, layout = padded_slice(samples, s, e), layout_slice(layout, s, e)
    rev, n = samples[::-1], len(samples)
    start = max(0, detect_leading_silence(rev, sample_rate, threshold_db) - trail_sil_ms)
    s, e = ms_bounds(n, sample_rate, start, None)
    out = padded_slice(rev, s, e)[::-1]
    # forward: the zeros padded after the reversed slice come first, then samples[n - e : n - s]
    lo = n - min(e, n)
    kept = layout_slice(layout, lo, max(lo, n - s))
    missing = len(out) - layout_length(kept)
    return out, merge_layout(([(None, missing)] if missing > 0 else []) + kept)


def remove_silence_int16(
    samples: np.ndarray,
    sample_rate: int,
    mid_sil_ms: int = 500,
    lead_sil_ms: int = 100,
    trail_sil_ms: int = 100,
    threshold_db: float = SILENCE_THRESHOLD_DB,
) -> np.ndarray:
    """`remove_silence` on the int16 signal itself (int16 [N] -> int16 [N'])."""
    return remove_silence_mapped(samples, sample_rate, mid_sil_ms, lead_sil_ms, trail_sil_ms, threshold_db)[0]


def remove_silence_mapped(
    samples: np.ndarray,
    sample_rate: int,
    mid_sil_ms: int = 500,
    lead_sil_ms: int = 100,
    trail_sil_ms: int = 100,
    threshold_db: float = SILENCE_THRESHOLD_DB,
) -> tuple[np.ndarray, "Layout"]:
    """`remove_silence_int16`, and the layout of its output in the input's samples (which input
    sample each output sample is; see `Layout`)."""
    layout: Layout = [(0, len(samples))]
    if mid_sil_ms > 0:
        bounds = split_on_silence_bounds(samples, sample_rate, mid_sil_ms, threshold_db, mid_sil_ms, seek_step=10)
        layout = merge_layout([seg for s, e in bounds for seg in layout_slice(layout, s, e)])
        parts = [padded_slice(samples, s, e) for s, e in bounds]
        samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
        del parts
    return remove_silence_edges_mapped(samples, sample_rate, lead_sil_ms, trail_sil_ms, threshold_db, layout)


def remove_silence(
    audio: np.ndarray,
    sample_rate: int,
    mid_sil_ms: int = 500,
    lead_sil_ms: int = 100,
    trail_sil_ms: int = 100,
    threshold_db: float = SILENCE_THRESHOLD_DB,
) -> np.ndarray:
    """The reference's `remove_silence` on mono float32 audio [N] -> [N'] float32.

    Inner silences longer than mid_sil_ms are shortened (split_on_silence with keep_silence =
    mid_sil_ms, seek step 10 ms), then edge silences are trimmed to lead_sil_ms / trail_sil_ms.
    mid_sil_ms = 0 skips the inner pass. (pydub would resample for sample rates below 11025 Hz;
    that case is not reproduced.)
    """
    samples = to_int16(np.asarray(audio).reshape(-1))
    return from_int16(remove_silence_int16(samples, sample_rate, mid_sil_ms, lead_sil_ms, trail_sil_ms, threshold_db))
