"""AAC: PyAV (the `aac` extra: FFmpeg's libraries in a wheel), else an ffmpeg command on PATH
(`encoders.Aac` picks which; `encoders.aac_encoder` says what is here).

ADTS (aac) has no length field: decoders give the encoder's 1024 priming samples first and pad
the end to a whole frame; MP4 (m4a) records both, so players trim them.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import Any

from ..engine.errors import OmniVoiceError
from .pcm import WRITE_BLOCK, prepare_audio

AAC_BITRATE = 64000  # bits a second: as the mp3's, clear speech at 24 kHz mono


def aac_bytes(
    audio, sample_rate: int, muxer: str, pyav: bool, tags: dict[str, str] | None = None, id3: bool = False
) -> bytes:
    """The bytes of a whole AAC file of mono float `audio` in FFmpeg's `muxer` (adts, or ipod: an
    .m4a MP4) with the metadata `tags` (FFmpeg's keys; `id3`: in an ID3v2 tag before the frames, the
    muxer's `write_id3v2`), by PyAV or else an ffmpeg on PATH."""
    a = prepare_audio(audio)
    options = {"write_id3v2": "1"} if tags and id3 else {}
    return (_aac_pyav if pyav else _aac_ffmpeg)(a, int(sample_rate), muxer, dict(tags or {}), options)


def _aac_pyav(a: Any, sample_rate: int, muxer: str, tags: dict[str, str], options: dict[str, str]) -> bytes:
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=muxer, options=options) as out:
        out.metadata.update(tags)
        stream = out.add_stream("aac", rate=sample_rate, layout="mono")
        stream.bit_rate = AAC_BITRATE
        for i in range(0, len(a), WRITE_BLOCK):
            frame = av.AudioFrame.from_ndarray(a[None, i : i + WRITE_BLOCK], format="flt", layout="mono")
            frame.sample_rate = sample_rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def _aac_ffmpeg(a: Any, sample_rate: int, muxer: str, tags: dict[str, str], options: dict[str, str]) -> bytes:
    import shutil
    import subprocess

    ffmpeg = shutil.which("ffmpeg") or "ffmpeg"
    with tempfile.TemporaryDirectory(prefix="omnivoice-aac-") as folder:
        target = os.path.join(folder, "out")  # MP4 seeks back to write its index: a file, not a pipe
        cmd = [
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "f32le",
            "-ar",
            str(sample_rate),
            "-ac",
            "1",
            "-i",
            "pipe:0",
            "-c:a",
            "aac",
            "-b:a",
            str(AAC_BITRATE),
            *(arg for key, value in tags.items() for arg in ("-metadata", f"{key}={value}")),
            *(arg for key, value in options.items() for arg in (f"-{key}", value)),
            "-f",
            muxer,
        ]
        try:
            done = subprocess.run([*cmd, "-y", target], input=a.astype("<f4").tobytes(), capture_output=True)
        except OSError as e:
            raise OmniVoiceError(f"cannot run {ffmpeg} to encode AAC: {e.strerror or e}") from None
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise OmniVoiceError(
                f"{ffmpeg} could not encode AAC (exit {done.returncode}): {said[-1] if said else 'no message'}"
            )
        with open(target, "rb") as f:
            return f.read()
