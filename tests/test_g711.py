"""G.711 (media/g711.py): our numpy coders equal CPython's audioop on every 16-bit sample."""

import warnings

import numpy as np
import pytest

from omnivoice_cli.media import g711
from omnivoice_cli.media.formats import format_named
from omnivoice_cli.media.output import encode
from omnivoice_cli.media.pcm import pcm16
from omnivoice_cli.media.streams import StreamEncoder

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    audioop = pytest.importorskip("audioop")  # audioop-lts on Python 3.13+

ALL = np.arange(-32768, 32768, dtype=np.int16)


def test_encoders_equal_audioop_on_every_sample():
    data = ALL.astype("<i2").tobytes()
    assert g711.mulaw_encode(ALL).tobytes() == audioop.lin2ulaw(data, 2)
    assert g711.alaw_encode(ALL).tobytes() == audioop.lin2alaw(data, 2)


def test_decoders_equal_audioop_on_every_code():
    codes = np.arange(256, dtype=np.uint8)
    assert np.array_equal(g711.mulaw_decode(codes), np.frombuffer(audioop.ulaw2lin(codes.tobytes(), 2), "<i2"))
    assert np.array_equal(g711.alaw_decode(codes), np.frombuffer(audioop.alaw2lin(codes.tobytes(), 2), "<i2"))


@pytest.mark.parametrize("name,decode", [("mulaw", "ulaw2lin"), ("alaw", "alaw2lin")])
def test_the_formats_file_and_stream(name, decode):
    """-o x.ulaw / x.alaw and a stream of pieces: one byte a sample, the codes of the WAV's samples."""
    x = (np.random.RandomState(1).randn(8000) * 0.3).astype(np.float32)
    fmt = format_named(name)
    whole = encode(x, 8000, fmt.sf_format, fmt.subtype)
    enc = StreamEncoder(fmt, 8000)
    streamed = enc.feed(x[:123]) + enc.feed(x[123:]) + enc.finish()
    assert len(whole) == len(x) and streamed == whole
    back = np.frombuffer(getattr(audioop, decode)(whole, 2), "<i2").astype(np.float64)
    ref = np.frombuffer(pcm16(x), "<i2").astype(np.float64)
    assert np.corrcoef(back, ref)[0, 1] > 0.999
    assert format_named(".ulaw" if name == "mulaw" else ".alaw") is fmt
