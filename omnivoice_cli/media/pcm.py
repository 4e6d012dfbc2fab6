"""Float samples as the encoders take them: mono, finite, clipped to [-1, 1], written in blocks;
`pcm16`: their s16le bytes, exactly the sample data of the WAV (and raw) output."""

from __future__ import annotations

import io
from typing import Any

from ..engine.model.config import SAMPLE_RATE


def prepare_audio(audio: Any) -> Any:
    """A 1-D float32 copy of `audio`, NaN/inf replaced and clipped to [-1, 1]."""
    import numpy as np

    a = np.asarray(audio, dtype=np.float32)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    a = np.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0)
    return np.clip(a, -1.0, 1.0)


WRITE_BLOCK = 1 << 18  # samples prepared and written at a time: a long file needs no full-size copies


def mono(audio):
    import numpy as np

    a = np.asarray(audio)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {a.shape}")
    return a


def write_piece(out, audio, wav_samples: bool = False) -> None:
    """One block of float audio into a soundfile; `wav_samples`: as the WAV's own 16-bit samples
    (FLAC: libsndfile's FLAC encoder rounds floats differently, by one step)."""
    import numpy as np

    a = prepare_audio(audio)
    if wav_samples:
        a = np.frombuffer(pcm16(a), dtype="<i2")
    out.write(a)


RAW_PCM16: dict[str, str | float] = {"format": "RAW", "subtype": "PCM_16"}  # headerless s16le, libsndfile's


def blocks_of(blocks, size: int):
    """Float blocks of any sizes re-cut to `size` samples (the last one shorter), so what is
    written does not depend on how the audio came in; a block is copied only to join a remainder."""
    import numpy as np

    carry = None
    for block in blocks:
        a = np.asarray(block)
        if carry is not None and len(carry):
            a = np.concatenate([carry, a.astype(np.float32, copy=False)])
        whole = len(a) - len(a) % size
        for i in range(0, whole, size):
            yield a[i : i + size]
        carry = a[whole:]
    if carry is not None and len(carry):
        yield carry


def pcm16(audio) -> bytes:
    """s16le bytes of mono float `audio`: exactly the sample data of the WAV (and raw) output
    (libsndfile's RAW PCM_16, written in the blocks a file is)."""
    import soundfile as sf

    a = mono(audio)
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=SAMPLE_RATE, channels=1, **RAW_PCM16) as out:  # the rate is not stored
        for i in range(0, max(len(a), 1), WRITE_BLOCK):
            write_piece(out, a[i : i + WRITE_BLOCK])
    return buf.getvalue()
