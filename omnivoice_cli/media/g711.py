"""G.711 telephony audio (ITU-T G.711): 16-bit PCM to 8-bit mu-law and A-law, and back.

    ulaw = mulaw_encode(int16_samples)      # [N] int16 -> [N] uint8 (bytes of `-o x.ulaw`)
    alaw = alaw_encode(int16_samples)
    pcm = mulaw_decode(ulaw)                # [N] uint8 -> [N] int16

The encoders are the standard segment (exponent, mantissa) coding of G.711 as Sun's g711.c and
CPython's audioop write it, vectorised: mu-law biases the magnitude by 0x84 (132) and clips it at
32635 before finding its segment; A-law codes the 13-bit magnitude and inverts the even bits
(XOR 0x55). The bytes equal audioop.lin2ulaw / lin2alaw of the same 16-bit samples for every one
of the 65536 inputs (tests/test_g711.py). Each sample is coded on its own, so a stream's pieces
coded one by one are the whole coded at once.
"""

from __future__ import annotations

import numpy as np

MULAW_BIAS = 0x84
MULAW_CLIP = 32635  # (8159 on the 14-bit magnitude)


def _segment(magnitude: np.ndarray, ends: tuple[int, ...]) -> np.ndarray:
    """[N] int32 -> [N] int32: how many segment ends each magnitude is above (0..8)."""
    seg = np.zeros(magnitude.shape, dtype=np.int32)
    for end in ends:
        seg += (magnitude > end).astype(np.int32)
    return seg


_MULAW_ENDS = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)  # on the 14-bit magnitude
_ALAW_ENDS = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)  # on the 13-bit magnitude


def mulaw_encode(pcm: np.ndarray) -> np.ndarray:
    """[N] int16 samples -> [N] uint8 mu-law codes."""
    x = np.asarray(pcm, dtype=np.int32) >> 2  # 14-bit
    mask = np.where(x < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(x), MULAW_CLIP >> 2) + (MULAW_BIAS >> 2)  # [N] in 33..8192
    seg = _segment(magnitude, _MULAW_ENDS)
    code = np.where(seg >= 8, 0x7F, (np.minimum(seg, 7) << 4) | ((magnitude >> (np.minimum(seg, 7) + 1)) & 0x0F))
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def alaw_encode(pcm: np.ndarray) -> np.ndarray:
    """[N] int16 samples -> [N] uint8 A-law codes."""
    x = np.asarray(pcm, dtype=np.int32) >> 3  # 13-bit
    negative = x < 0
    magnitude = np.where(negative, -x - 1, x)  # one's complement of the negatives, as g711.c
    mask = np.where(negative, 0x55, 0xD5)
    seg = _segment(magnitude, _ALAW_ENDS)
    mantissa = np.where(seg < 2, magnitude >> 1, magnitude >> np.maximum(seg, 1)) & 0x0F
    code = np.where(seg >= 8, 0x7F, (np.minimum(seg, 7) << 4) | mantissa)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """[N] uint8 mu-law codes -> [N] int16 samples."""
    u = ~np.asarray(codes, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + MULAW_BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, MULAW_BIAS - t, t - MULAW_BIAS).astype(np.int16)


def alaw_decode(codes: np.ndarray) -> np.ndarray:
    """[N] uint8 A-law codes -> [N] int16 samples."""
    a = np.asarray(codes, dtype=np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    t = np.where(seg == 0, t + 8, np.where(seg == 1, t + 0x108, (t + 0x108) << np.maximum(seg - 1, 0)))
    return np.where(a & 0x80, t, -t).astype(np.int16)


ENCODERS = {"ULAW": mulaw_encode, "ALAW": alaw_encode}  # by the soundfile subtype of the format


def encode_pcm16(data: bytes, subtype: str) -> bytes:
    """s16le bytes -> the G.711 bytes of `subtype` ('ULAW' or 'ALAW')."""
    return ENCODERS[subtype](np.frombuffer(data, dtype="<i2")).tobytes()
