"""media/marks.py through the encoders: every format of the table carries the AI mark in its
container's own metadata (read back by libsndfile or mutagen, not by our code), whole and streamed,
and nothing without a mark; the audio is the same with or without it."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import soundfile as sf
from helpers.audio import tone
from helpers.marks import NO_CONTAINER, mark_of

from omnivoice_cli.app.marking import model_label, run_mark
from omnivoice_cli.media.formats import AUDIO_FORMATS, writable_formats
from omnivoice_cli.media.marks import SOURCE_TYPE, Mark, parse_mark
from omnivoice_cli.media.output import encode
from omnivoice_cli.media.sndpieces import id3v2_size
from omnivoice_cli.media.streams import StreamEncoder, StreamWriter

pytest.importorskip("mutagen", reason="the marks are read back by mutagen (the test extra)")

SR = 24000
MARK = Mark("k2-fsa/OmniVoice", "2026-08-02", "9.9.9")
WRITABLE = [n for n in AUDIO_FORMATS if n in writable_formats()]
STREAMED = [n for n in WRITABLE if AUDIO_FORMATS[n].streams]


def whole(name: str, mark: Mark | None, audio=None) -> bytes:
    f = AUDIO_FORMATS[name]
    return encode(tone(0.5) if audio is None else audio, SR, f.sf_format, f.subtype, mark)


def stream_of(name: str, mark: Mark | None, pieces=3) -> bytes:
    enc = StreamEncoder(name, SR, mark)
    a = tone(0.9)
    out = b"".join(enc.feed(p) for p in np.array_split(a, pieces))
    return out + enc.finish()


def test_the_marks_text_is_machine_readable():
    fields = parse_mark(MARK.text())
    assert fields == {
        "generator": "omnivoice 9.9.9",
        "model": "OmniVoice",
        "checkpoint": "k2-fsa/OmniVoice",
        "date": "2026-08-02",
        "digitalSourceType": SOURCE_TYPE,
    }
    assert parse_mark("a comment") is None and parse_mark(None) is None


@pytest.mark.parametrize("name", WRITABLE)
def test_every_format_carries_the_mark_in_its_container(name):
    data = whole(name, MARK)
    if name in NO_CONTAINER:
        assert mark_of(data, name) is None and AUDIO_FORMATS[name].encoder.marked_in == ""
        assert data == whole(name, None)  # nothing added to headerless samples
        return
    assert mark_of(data, name) == parse_mark(MARK.text())
    assert mark_of(whole(name, None), name) is None


@pytest.mark.parametrize("name", [n for n in WRITABLE if not AUDIO_FORMATS[n].lossy and n not in NO_CONTAINER])
def test_the_mark_leaves_the_samples_as_they_were(name):
    a = tone(0.5)
    marked, plain = (sf.read(io.BytesIO(whole(name, m, a)), dtype="int16")[0] for m in (MARK, None))
    assert np.array_equal(marked, plain)


@pytest.mark.parametrize("name", STREAMED)
def test_a_stream_carries_the_mark_at_its_start(name):
    data = stream_of(name, MARK)
    if name in NO_CONTAINER:
        assert data == stream_of(name, None)
        return
    assert mark_of(data, name) == parse_mark(MARK.text())
    assert mark_of(stream_of(name, None), name) is None


def test_an_mp3_stream_is_lames_id3_tags_around_the_stream_without_them():
    """The info frame's placeholder is still left out after LAME's ID3v2 tag (sndpieces.SndfilePieces):
    the stream is the tag, the unmarked stream's frames, then LAME's 128-byte ID3v1 tag."""
    marked, plain = stream_of("mp3", MARK), stream_of("mp3", None)
    tag = id3v2_size(marked)
    assert tag and marked[:3] == b"ID3" and marked[-128:-125] == b"TAG"
    assert marked[tag:-128] == plain


def test_a_wav_streams_header_holds_the_mark_and_its_samples_are_the_files():
    data = stream_of("wav", MARK)
    got, rate = sf.read(io.BytesIO(data), dtype="int16")
    want, _ = sf.read(io.BytesIO(whole("wav", None, tone(0.9))), dtype="int16")
    assert rate == SR and np.array_equal(got, want)
    assert data[4:8] == b"\xff\xff\xff\xff" and data.index(b"LIST") < data.index(b"data")


def test_a_wav_stream_in_a_regular_file_gets_its_real_sizes_behind_the_mark(tmp_path):
    path = tmp_path / "s.wav"
    a = tone(0.7)
    with open(path, "wb") as out, StreamWriter(out, "wav", SR, MARK) as w:
        for p in np.array_split(a, 4):
            w.write(p)
    data = path.read_bytes()
    with sf.SoundFile(path) as s:
        assert s.frames == len(a) and s.comment == MARK.text()
    assert int.from_bytes(data[4:8], "little") == len(data) - 8


def test_a_local_checkpoint_is_named_by_a_hash_of_its_path_a_hub_id_as_it_is(tmp_path):
    assert model_label("k2-fsa/OmniVoice") == "k2-fsa/OmniVoice"
    label = model_label(str(tmp_path))
    assert label.startswith("sha256:") and len(label) == 7 + 16 and os.fsdecode(tmp_path.name) not in label
    assert run_mark({"mark": False, "model": "x"}) is None
    assert run_mark({"mark": True, "model": "k2-fsa/OmniVoice"}).model == "k2-fsa/OmniVoice"
