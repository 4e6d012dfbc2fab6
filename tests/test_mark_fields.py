"""The AI mark's text (media/marks.py) from a hostile model name: control characters, newlines,
the text's own separator, lone surrogates and a huge length come out as one bounded line of
printable ASCII (an HTTP header, an ID3 or INFO field), and no field can be forged."""

import pytest

from omnivoice_cli.app.say.replycheck import reply_meta
from omnivoice_cli.media.marks import Mark, parse_mark
from omnivoice_cli.server.replies import MARK_HEADER

MAX_FIELD = 256  # a checkpoint name `say --server` takes back (app/say/replycheck.py)
HOSTILE = [
    "org/model\r\nX-Evil: 1",
    "org/model; date=1999-01-01; digitalSourceType=human",
    "a\x00b\x1b[31m\x85\x9f\x7f",
    "m" * 100_000,
    "caf\u00e9/\udc80mod\u2028el",
    "%41%",
]


@pytest.mark.parametrize("model", HOSTILE)
def test_a_hostile_model_name_is_one_bounded_printable_line(model):
    text = Mark(model, "2026-08-02", "9.9.9").text()
    assert text.isascii() and text.isprintable()
    assert len(text) < 2 * MAX_FIELD + 300
    fields = parse_mark(text)
    assert fields is not None
    assert fields["date"] == "2026-08-02"
    assert fields["digitalSourceType"].startswith("http://cv.iptc.org/")
    assert 0 < len(fields["checkpoint"]) <= MAX_FIELD
    assert not any(c in fields["checkpoint"] for c in ";\r\n")


def test_an_ordinary_model_name_is_as_it_was():
    fields = parse_mark(Mark("k2-fsa/OmniVoice", "2026-08-02", "9.9.9").text())
    assert fields is not None and fields["checkpoint"] == "k2-fsa/OmniVoice"
    assert parse_mark(Mark("sha256:0123456789abcdef", "2026-08-02").text())["checkpoint"] == "sha256:0123456789abcdef"


@pytest.mark.parametrize("model", HOSTILE)
def test_say_server_takes_the_header_the_server_sends(model):
    """`say --server` reads the mark's header back (replycheck): what the server sends is taken."""
    text = Mark(model, "2026-08-02", "9.9.9").text()
    meta = reply_meta({MARK_HEADER: text, "X-OmniVoice-Seed": "5"})
    assert meta.checkpoint
