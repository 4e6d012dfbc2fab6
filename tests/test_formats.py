"""media/formats.py: one table of formats, each row with its encoder object; the checks, the
server's list, the help and the docs' table are read from it, and nothing dispatches on a name."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers.audio import tone

from omnivoice_cli.app.deliver import write_stream
from omnivoice_cli.media import encoders, g711
from omnivoice_cli.media.encoders import G711, Aac, Sndfile, Wav
from omnivoice_cli.media.formats import (
    AUDIO_FORMATS,
    BY_EXTENSION,
    MAX_SAMPLES,
    check_available,
    formats_table,
    served_formats,
    usual_extensions,
    writable_formats,
)
from omnivoice_cli.media.output import check_output, encode
from omnivoice_cli.media.pcm import pcm16
from omnivoice_cli.media.streams import StreamEncoder
from omnivoice_cli.server.speech import RESPONSE_FORMATS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "omnivoice_cli"
SR = 24000


def test_nothing_dispatches_on_a_format_or_encoder_name():
    """What a format is and how it is written are the row's data: no `encoder ==` and no
    `fmt.name == "..."` / `format.name == "..."` anywhere in the package."""
    pattern = re.compile(r"""\bencoder\s*==|\b(fmt|format)\.name\s*(==|!=|in)\s*["'(]""")
    found = [
        f"{p.relative_to(PACKAGE)}:{i}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_every_row_holds_its_encoder_object():
    kinds = {name: type(f.encoder) for name, f in AUDIO_FORMATS.items()}
    assert kinds == {
        "wav": Wav,
        "flac": Sndfile,
        "ogg": Sndfile,
        "opus": Sndfile,
        "mp3": Sndfile,
        "raw": Sndfile,
        "aac": Aac,
        "m4a": Aac,
        "mulaw": G711,
        "alaw": G711,
    }
    for f in AUDIO_FORMATS.values():
        assert (f.sf_format, f.subtype) == (f.encoder.sf_format, f.encoder.subtype)
        assert f.sf_options()["format"] == f.sf_format and f.extension == f.extensions[0]
    assert MAX_SAMPLES == {"wav": (0xFFFFFFFF - 36) // 2}  # the one header with a size limit


def test_a_rows_encoder_writes_the_file_its_format_names():
    """Whole files through each writable row's encoder read back as what the row says."""
    a = tone(9000 / SR, 330, 0.3)
    for name in writable_formats():
        fmt = AUDIO_FORMATS[name]
        data = encode(a, SR, fmt.sf_format, fmt.subtype)
        if isinstance(fmt.encoder, G711):
            assert data == g711.encode_pcm16(pcm16(a), fmt.subtype)  # ours: one byte a sample
        elif isinstance(fmt.encoder, Sndfile) and fmt.sf_format != "RAW":
            info = sf.info(io.BytesIO(data))
            assert (info.format, info.subtype, info.samplerate, info.channels) == (fmt.sf_format, fmt.subtype, SR, 1)
        elif fmt.sf_format == "RAW":
            assert data == pcm16(a)


def test_streams_are_the_rows_that_stream_and_refuse_the_others():
    for name, fmt in AUDIO_FORMATS.items():
        if fmt.streams:
            enc = StreamEncoder(name, SR)
            assert enc.format is fmt and isinstance(enc.feed(tone(100 / SR, 330, 0.3)) + enc.finish(), bytes)
        else:
            with pytest.raises(Exception, match="cannot be streamed"):
                StreamEncoder(name, SR)


def test_a_book_folders_g711_file_is_the_same_bytes_as_say_writes(tmp_path):
    """write_stream (a book's chapter files) writes through the row's encoder too: G.711 is our
    coder there as well (it was libsndfile's, which rounds some samples differently)."""
    a = tone(50000 / SR, 330, 0.3)
    for name in ("mulaw", "alaw", "ogg", "flac"):
        fmt = AUDIO_FORMATS[name]
        path = tmp_path / ("x" + fmt.extension)
        write_stream(path, iter([a[:7], a[7:30000], a[30000:]]), SR, fmt, len(a))
        whole = encode(a, SR, fmt.sf_format, fmt.subtype)
        if name == "ogg":  # a random stream serial: compare the samples
            back = sf.read(path, dtype="float32")[0]
            assert np.array_equal(back, sf.read(io.BytesIO(whole), dtype="float32")[0])
        else:
            assert path.read_bytes() == whole


def test_what_cannot_be_written_here_is_the_encoders_word(monkeypatch, tmp_path):
    monkeypatch.setattr(encoders, "aac_encoder", lambda: None)
    assert [n for n in AUDIO_FORMATS if n not in writable_formats()] == ["aac", "m4a"]
    with pytest.raises(encoders.EncoderMissing, match="format m4a \\(AAC\\) needs an AAC encoder"):
        check_available(AUDIO_FORMATS["m4a"])
    check_available(AUDIO_FORMATS["mulaw"])  # ours: always


def test_the_server_lists_the_tables_served_formats_openais_first():
    assert list(served_formats()) == ["mp3", "opus", "aac", "flac", "wav", "pcm", "ogg", "mulaw", "alaw"]
    assert RESPONSE_FORMATS == served_formats() and RESPONSE_FORMATS["pcm"] is AUDIO_FORMATS["raw"]
    assert "m4a" not in RESPONSE_FORMATS  # a file format (its index is written at the end)


def test_the_docs_show_the_tables_formats():
    say = (ROOT / "docs" / "say.md").read_text(encoding="utf-8")
    shown = re.search(r"<!-- formats-table -->\n(.*?)<!-- /formats-table -->", say, re.S)
    assert shown is not None and shown.group(1) == formats_table()  # python tools/docs_formats.py
    server = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    row = next(ln for ln in server.splitlines() if ln.startswith("| `response_format` |"))
    assert re.findall(r"`(\w+)`", row.split("|")[2]) == list(served_formats())


def test_help_and_checks_name_every_extension(tmp_path):
    assert usual_extensions().split() == [f.extension for f in AUDIO_FORMATS.values()]
    for ext, fmt in BY_EXTENSION.items():
        if fmt.name in writable_formats():
            assert check_output(str(tmp_path / ("x" + ext))).audio_format is fmt
