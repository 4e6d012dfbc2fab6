"""Test signals: a sine and a speech-like voiced sound, float32 at the model's rate by default."""

from __future__ import annotations

import numpy as np

SR = 24000  # the model's sample rate


def tone(seconds: float, freq: float = 440.0, amp: float = 0.5, rate: int = SR, phase: float = 0.0) -> np.ndarray:
    """`seconds` of a sine of `freq` Hz at amplitude `amp` (starting at `phase`), float32."""
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32)


def speechlike(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    """A voiced sound: harmonics of a gliding pitch (its glide set by `seed`) under a syllable-rate
    envelope, float32 at SR."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = 140 + 40 * np.sin(2 * np.pi * (0.7 + 0.1 * seed) * t)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    return (0.25 * voiced * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)


def wav_sizes(data: bytes) -> tuple[int, int, int]:
    """A WAV's (RIFF size, data chunk's size, where its samples start), its chunks walked (the AI
    mark's LIST/INFO may come before the data)."""
    import struct

    at = 12
    while at + 8 <= len(data):
        tag, size = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        if tag == b"data":
            return struct.unpack("<I", data[4:8])[0], size, at + 8
        at += 8 + size + (size % 2)
    raise AssertionError("no data chunk")
