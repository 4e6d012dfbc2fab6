"""Band-limited resampling equal to `torchaudio.functional.resample` at its defaults.

The reference resamples twice with torchaudio: a reference recording to 24 kHz when it is loaded,
and 24 kHz -> 16 kHz inside the codec encoder before HuBERT. torchaudio is not a dependency here,
so this module re-implements its "sinc_interp_hann" method (lowpass_filter_width 6, rolloff 0.99)
with the same float operations in the same order, so results agree with torchaudio to the last
bit (measured against the reference's stand-in, which is itself bit-identical to torchaudio).

Algorithm, for integer rates reduced by their gcd to `orig` -> `new`:
  * cutoff = min(orig, new) * rolloff, half width = ceil(lowpass_filter_width * orig / cutoff);
  * kernel [new phases, 1, 2*half + orig taps]: for output phase p and input offset j,
    t = clamp(cutoff * (j / orig - p / new), +-width); tap = sinc(pi t) * cos(pi t / (2 width))^2
    * cutoff / orig, computed in the waveform's dtype;
  * the input is zero-padded by (half, half + orig), convolved with stride `orig`, the phases are
    interleaved, and the result is cut to ceil(new * N / orig) samples.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

LOWPASS_FILTER_WIDTH = 6
ROLLOFF = 0.99


def reduced_rates(orig_freq: int, new_freq: int) -> tuple[int, int]:
    """(orig, new) divided by their gcd; rates must be positive integers."""
    for name, v in (("orig_freq", orig_freq), ("new_freq", new_freq)):
        if isinstance(v, bool) or int(v) != v or v <= 0:
            raise ValueError(f"{name} must be a positive integer sample rate, got {v!r}")
    orig_freq, new_freq = int(orig_freq), int(new_freq)
    g = math.gcd(orig_freq, new_freq)
    return orig_freq // g, new_freq // g


def output_length(n: int, orig_freq: int, new_freq: int) -> int:
    """Samples out of `n` samples in: ceil(n * new / orig) (exact integer arithmetic)."""
    if orig_freq == new_freq:
        return n
    orig, new = reduced_rates(orig_freq, new_freq)
    return -((-n * new) // orig)


def _sinc_kernel(orig: int, new: int, dtype: torch.dtype, width_zeros: int, rolloff: float) -> tuple[torch.Tensor, int]:
    """Polyphase kernel [new, 1, 2*half + orig] in `dtype`, and `half`. Same float ops as torchaudio."""
    cutoff = min(orig, new) * rolloff  # in units of the reduced rates
    half = math.ceil(width_zeros * orig / cutoff)  # taps each side, in input samples
    offsets = torch.arange(-half, half + orig, dtype=dtype)[None, None] / orig  # [1, 1, K]
    phases = torch.arange(0, -new, -1, dtype=dtype)[:, None, None] / new  # [new, 1, 1]
    t = phases + offsets  # [new, 1, K]: time of each input tap relative to the output sample
    t *= cutoff
    t = t.clamp_(-width_zeros, width_zeros)
    window = torch.cos(t * math.pi / width_zeros / 2) ** 2  # Hann window over +-width_zeros zeros
    t *= math.pi
    gain = cutoff / orig
    sinc = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    sinc *= window * gain
    return sinc, half


@lru_cache(maxsize=32)
def _cached_kernel(orig: int, new: int, dtype: torch.dtype, width_zeros: int, rolloff: float):
    return _sinc_kernel(orig, new, dtype, width_zeros, rolloff)


def resample_tensor(
    waveform: torch.Tensor,
    orig_freq: int,
    new_freq: int,
    lowpass_filter_width: int = LOWPASS_FILTER_WIDTH,
    rolloff: float = ROLLOFF,
) -> torch.Tensor:
    """Resample a floating tensor [..., N] from orig_freq to new_freq -> [..., ceil(N*new/orig)].

    Equal rates return the input unchanged (the same object), as torchaudio does.
    """
    if not torch.is_tensor(waveform) or not waveform.is_floating_point():
        raise TypeError(f"resample needs a floating-point tensor, got {getattr(waveform, 'dtype', type(waveform))}")
    orig, new = reduced_rates(orig_freq, new_freq)
    if orig_freq == new_freq:
        return waveform
    if lowpass_filter_width <= 0:
        raise ValueError("lowpass_filter_width must be positive")
    kernel, half = _cached_kernel(orig, new, waveform.dtype, int(lowpass_filter_width), float(rolloff))
    kernel = kernel.to(waveform.device)
    shape = waveform.shape
    n = shape[-1]
    flat = waveform.reshape(-1, n)
    padded = F.pad(flat, (half, half + orig))
    phased = F.conv1d(padded[:, None], kernel, stride=orig)  # [rows, new, frames]
    out = phased.transpose(1, 2).reshape(flat.shape[0], -1)  # interleave the phases
    out = out[..., : output_length(n, orig, new)]
    return out.reshape(shape[:-1] + out.shape[-1:])


def resample(
    waveform,
    orig_freq: int,
    new_freq: int,
    lowpass_filter_width: int = LOWPASS_FILTER_WIDTH,
    rolloff: float = ROLLOFF,
):
    """Resample a numpy array or torch tensor along its last axis; returns the same kind.

    numpy input keeps its floating dtype (float32 stays float32); integer arrays are refused.
    """
    if torch.is_tensor(waveform):
        return resample_tensor(waveform, orig_freq, new_freq, lowpass_filter_width, rolloff)
    arr = np.asarray(waveform)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"resample needs floating-point audio, got {arr.dtype}")
    if orig_freq == new_freq:
        reduced_rates(orig_freq, new_freq)  # validates
        return arr
    t = torch.from_numpy(np.ascontiguousarray(arr))
    return resample_tensor(t, orig_freq, new_freq, lowpass_filter_width, rolloff).numpy()
