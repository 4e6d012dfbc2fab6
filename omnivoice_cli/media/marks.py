"""The mark that says a file or stream is AI-made (the EU AI Act's Art. 50(2) asks that synthetic
audio be marked in a machine-readable way): one `Mark` (the generator, the model, the day), put
in each container's own metadata by the encoder that writes it (media/encoders.py):

- WAV: `LIST/INFO` (ICMT the mark's text, ISFT the software, ICRD the day), by libsndfile; a
  stream's header holds the same chunk (libsndfile's header, its sizes unknown);
- FLAC, Ogg Vorbis, Ogg Opus: Vorbis comments (COMMENT, SOFTWARE or ENCODER, DATE), by libsndfile,
  in the stream's first pages too;
- MP3: an ID3v2.3 tag at the start (COMM the text, TDRC the day), by LAME through libsndfile (LAME
  adds the v2 tag, and a v1 tag at the end, because the text is longer than ID3v1's 30 characters),
  so a stream carries it in its first bytes;
- AAC (ADTS, which has no metadata of its own): an ID3v2.4 tag at the start (TXXX:comment the text,
  TDRC the day), by FFmpeg's ADTS muxer (`write_id3v2`; PyAV, or an ffmpeg on PATH);
- M4A and M4B: iTunes `ilst` atoms (©cmt and desc the text, ©too the software, ©day the day), by
  FFmpeg's muxer (PyAV, or an ffmpeg on PATH); an .m4b keeps the book's own comment and year;
- raw PCM, mu-law and A-law have no container: nothing can carry a mark there.

The text is machine-readable, the same in every container: `key=value` fields joined by "; ",
starting with "AI-generated speech" and naming IPTC's digital source type for media made by a
trained model (`parse_mark` reads it back); each value is one line of printable ASCII (`field_value`:
percent-escaped, at most MAX_FIELD characters), so a model's name cannot break a header or forge a field. A mark with `provenance` also has a C2PA manifest
signed into whole WAV, MP3 and M4A files (media/provenance.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from ..engine.errors import InvalidRequest

# IPTC's digital source type of media created by a trained algorithmic model (what C2PA uses too)
SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
HEADLINE = "AI-generated speech"
MODEL_FAMILY = "OmniVoice"
MAX_FIELD = 256  # characters of one field's value in the text (a header's, an ID3 frame's)
# what a field's value keeps as it is: printable ASCII but the text's separator and the escape's own sign
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in ";%")
_CUT_ESCAPE = re.compile(r"%[0-9A-F]?\Z")


def field_value(value: str) -> str:
    """`value` as a field of the text: control characters, newlines, ';', '%' and what is not
    ASCII percent-escaped (so the text stays one printable ASCII line: an HTTP header, an ID3
    frame, no field forged by a model's name), at most MAX_FIELD characters."""
    shown = quote(value[:MAX_FIELD], safe=_SAFE, errors="surrogateescape")[:MAX_FIELD]
    return _CUT_ESCAPE.sub("", shown)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("omnivoice-cli")
    except PackageNotFoundError:  # run from a source tree
        return "dev"


@dataclass(frozen=True)
class Provenance:
    """The C2PA signer's files (media/provenance.py): a PEM certificate chain, end-entity first,
    and its private key (PEM)."""

    cert: str
    key: str

    def read(self) -> tuple[bytes, bytes]:
        out = []
        for flag, path in (("--c2pa-cert", self.cert), ("--c2pa-key", self.key)):
            try:
                with open(path, "rb") as f:
                    out.append(f.read(1 << 20))
            except OSError as e:
                raise InvalidRequest(f"{flag} {path!r}: cannot read it ({e.strerror or e})") from None
        return out[0], out[1]


@dataclass(frozen=True)
class Mark:
    """What a written file says of itself: made by omnivoice with OmniVoice `model` (a hub id, or
    "sha256:..." of a local checkpoint's path: no user's folder names in a file) on `date`."""

    model: str
    date: str  # ISO 8601 day (UTC)
    version: str = ""  # omnivoice's version ("": looked up)
    provenance: Provenance | None = None  # a C2PA manifest signed into whole WAV, MP3, M4A files (provenance.py)

    @property
    def software(self) -> str:
        return f"omnivoice {self.version or _version()}"

    def text(self) -> str:
        """The machine-readable text: 'AI-generated speech; generator=omnivoice 0.1.0; ...'."""
        fields = {
            "generator": self.software,
            "model": MODEL_FAMILY,
            "checkpoint": self.model,
            "date": self.date,
            "digitalSourceType": SOURCE_TYPE,
        }
        return "; ".join([HEADLINE, *(f"{k}={field_value(v)}" for k, v in fields.items())])

    def strings(self) -> dict[str, str]:
        """libsndfile's strings (WAV INFO, Vorbis comments, MP3's ID3 by LAME)."""
        return {"comment": self.text(), "software": self.software, "date": self.date}

    def ffmpeg(self) -> dict[str, str]:
        """FFmpeg's metadata keys: an MP4's iTunes atoms, the ID3v2 tag of its ADTS muxer."""
        return {"comment": self.text(), "description": self.text(), "encoding_tool": self.software, "date": self.date}


def parse_mark(text: str | None) -> dict[str, str] | None:
    """The fields of a mark's text ({'generator': ..., 'model': ..., ...}), or None when `text` is
    not a mark."""
    if not text or not text.startswith(HEADLINE + ";"):
        return None
    fields = {}
    for part in text[len(HEADLINE) + 1 :].split(";"):
        key, eq, value = part.strip().partition("=")
        if eq:
            fields[key] = value
    return fields
