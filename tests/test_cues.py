"""cues.py and subtitles.py: SRT / WebVTT reading (line numbers, markup, bad files) and subtitle writing."""

from __future__ import annotations

import pytest
import srt
import webvtt

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media import cues, subtitles
from omnivoice_cli.media.subtitles import Subtitle

SRT = """1
00:00:01,000 --> 00:00:02,500
<i>Hello</i> {\\an8}there &amp; you

2
00:00:03,000 --> 00:00:04,000
ALICE: second
line

3
00:00:05,000 --> 00:00:06,000


4
00:01:07,250 --> 00:01:08,000
<font color="red">last</font>
"""

VTT = """WEBVTT - a header

NOTE a comment --> with an arrow

intro
00:00:01.000 --> 00:00:02.500 align:start
<v Bob>Hello <b>there</b></v>

00:03.000 --> 00:04.000
<v.loud Alice Smith>Hi &lt;3 <00:00:03.500>again

00:00:05.000 --> 00:00:06.000
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_srt_cues_lines_times_and_markup(tmp_path):
    got = cues.read_cues(write(tmp_path, "a.srt", SRT))
    assert [(c.index, c.line, c.start_ms, c.end_ms, c.text) for c in got] == [
        (0, 2, 1000, 2500, "Hello there & you"),
        (1, 6, 3000, 4000, "ALICE: second line"),
        (2, 11, 5000, 6000, ""),
        (3, 15, 67250, 68000, "last"),
    ]


def test_srt_with_crlf_and_bom(tmp_path):
    p = tmp_path / "a.srt"
    p.write_bytes(b"\xef\xbb\xbf" + SRT.replace("\n", "\r\n").encode())
    assert [c.line for c in cues.read_cues(p)] == [2, 6, 11, 15]


def test_vtt_cues_voices_and_lines(tmp_path):
    got = cues.read_cues(write(tmp_path, "a.vtt", VTT))
    assert [(c.index, c.line, c.start_ms, c.end_ms, c.text, c.voice) for c in got] == [
        (0, 6, 1000, 2500, "Hello there", "Bob"),
        (1, 9, 3000, 4000, "Hi <3 again", "Alice Smith"),
        (2, 12, 5000, 6000, "", None),
    ]


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "a.srt",
            SRT.replace("00:00:03,000 --> 00:00:04,000", "00:00:03,000 -> 00:00:04,000"),
            "line 5: not an SRT cue",
        ),
        ("a.srt", SRT.replace("00:00:03,000", "00:00:63,000"), "line 6: invalid time '00:00:63,000'"),
        ("a.srt", SRT.replace("00:00:04,000", "00:00:02,000"), "line 6: the cue ends before it starts"),
        ("a.srt", SRT.replace("00:00:04,000", "00:00:03,000"), "line 6: the cue ends when it starts"),
        ("a.srt", SRT.replace("00:01:07,250", "99999999999999999:00:00,000"), "line 15: invalid time: too large"),
        ("a.srt", "just words\n", "line 1: not an SRT cue ('just words')"),
        ("a.srt", "\n\n", "has no cues"),
        ("a.vtt", VTT.replace("00:03.000 --> 00:04.000", "00:03.000 --> 00:0x.000"), "line 9: not a valid WebVTT cue"),
        ("a.vtt", VTT.replace("00:00:05.000 -->", "00:00:75.000 -->"), "line 12: not a valid WebVTT cue"),
        ("a.vtt", VTT.replace("\n00:00:05.000", "00:00:05.000"), "line 9: not a valid WebVTT cue"),
        ("a.vtt", VTT.replace("00:00:06.000", "00:00:04.000"), "line 12: the cue ends before it starts"),
        ("a.vtt", "hello\n", "line 1: not a WebVTT file"),
        ("a.vtt", "WEBVTT\n", "has no cues"),
        ("a.txt", SRT, "give an .srt or .vtt file"),
    ],
)
def test_bad_files_name_the_line(tmp_path, name, text, message):
    p = write(tmp_path, name, text)
    with pytest.raises(InvalidRequest) as e:
        cues.read_cues(p)
    assert message in str(e.value)
    assert "\n" not in str(e.value)
    if "line" in message:
        assert str(e.value).startswith(f"{p}: line ")


def test_not_utf8_names_the_line(tmp_path):
    p = tmp_path / "a.srt"
    p.write_bytes(SRT.encode().replace(b"second", b"sec\xffond"))
    with pytest.raises(InvalidRequest, match=r"a.srt: line 7: not UTF-8"):
        cues.read_cues(p)


def test_size_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(cues, "MAX_SUBTITLE_BYTES", 100)
    with pytest.raises(InvalidRequest, match="is over"):
        cues.read_cues(write(tmp_path, "a.srt", SRT))


def test_strip_markup_is_linear_and_keeps_lone_brackets():
    assert cues.strip_markup("a < b and c") == "a < b and c"
    assert cues.strip_markup("x <i>y</i>\n  z {\\pos(1,2)}w") == "x y z w"
    assert cues.strip_markup("<" * 200_000 + "a") == "<" * 200_000 + "a"  # quick: no backtracking


def test_written_subtitles_parse_back(tmp_path):
    subs = [
        Subtitle(0, 1500, "Hello there, this is a longer line of text that should wrap somewhere.", "ALICE"),
        Subtitle(1500, 3000, "a --> b & <c>"),
        Subtitle(3_600_000, 3_600_250, "an hour in"),
    ]
    back = list(srt.parse(subtitles.subtitles_text(subs, "srt")))
    assert [(b.start.total_seconds(), b.end.total_seconds()) for b in back] == [(0, 1.5), (1.5, 3), (3600, 3600.25)]
    assert cues.strip_markup(back[0].content) == "ALICE: " + subs[0].text
    assert max(len(ln) for ln in back[0].content.splitlines()) <= subtitles.WRAP
    vtt = webvtt.from_string(subtitles.subtitles_text(subs, "vtt"), strict=True)
    assert [c.voice for c in vtt.captions] == ["ALICE", None, None]
    assert [cues.strip_markup(c.raw_text) for c in vtt.captions] == [subs[0].text, "a -> b & <c>", "an hour in"]
    path = tmp_path / "x.vtt"
    subtitles.write_subtitles(path, subs)
    assert [c.start for c in webvtt.read(str(path)).captions] == ["00:00:00.000", "00:00:01.500", "01:00:00.000"]


def test_subtitles_from_pieces_and_finish():
    pieces = [("First.", 2400, 26400), ("", 30000, 31000), ("Second.", 26400, 26400), ("Third  one.", 40000, 64000)]
    subs = subtitles.subtitles_from_pieces(pieces, 24000, offset=2400)
    assert subs == [Subtitle(200, 1200, "First."), Subtitle(1767, 2767, "Third one.")]  # empty ones dropped
    done = subtitles.finish_subtitles(subs + [Subtitle(2700, 2900, "x")], 3000)
    assert done == [Subtitle(200, 1200, "First."), Subtitle(1767, 2767, "Third one."), Subtitle(2767, 3000, "x")]


@pytest.mark.parametrize("spec, message", [("out.txt", "has extension '.txt'"), ("nodir/out.srt", "does not exist")])
def test_check_subtitles_path(tmp_path, monkeypatch, spec, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRequest, match=message):
        subtitles.check_subtitles_path(spec)
    assert subtitles.check_subtitles_path("ok.VTT").name == "ok.VTT"


# ------------------------------------------------------------------ cues of two lines / 7 s (issue 23)

LONG = (
    "This is the first sentence of a long piece. It goes on, and on, with a clause or two; then it "
    "stops. A short one. And here is a rather longer sentence without any commas that must be cut "
    "somewhere between its words because it does not fit in two lines."
)


def test_wrap_lines_standard_width():
    text = "Hello there, this is a longer line of text that should wrap somewhere."
    lines = subtitles.wrap_lines(text)
    assert len(lines) == 2 and all(len(ln) <= subtitles.WRAP for ln in lines) and " ".join(lines) == text
    assert abs(len(lines[0]) - len(lines[1])) <= 2  # even, not one full line and a stub
    assert subtitles.wrap_lines("It goes on and on, with a clause or two, then it stops here.") == [
        "It goes on and on, with a clause or two,",
        "then it stops here.",
    ]  # after the clause, as it fits
    wide = subtitles.wrap_lines("今天天气很好，我们去公园散步吧。公园里有很多花，非常漂亮。")
    assert len(wide) == 2 and all(len(ln) * 2 <= subtitles.WRAP for ln in wide) and wide[0].endswith("。")
    assert subtitles.wrap_lines("see https://example.com/" + "x" * 60) == ["see", "https://example.com/" + "x" * 60]


def test_a_long_piece_is_cut_into_readable_cues():
    from omnivoice_cli.engine.text.duration import text_weight

    subs = subtitles.cut_cue(Subtitle(1000, 21000, LONG, "ALICE"))
    assert " ".join(s.text for s in subs) == LONG and all(s.speaker == "ALICE" for s in subs)
    assert subs[0].start_ms == 1000 and subs[-1].end_ms == 21000
    assert all(a.end_ms == b.start_ms for a, b in zip(subs, subs[1:]))  # contiguous, in order
    whole = sum(text_weight(s.text) for s in subs)
    for s in subs:
        assert len(subtitles.wrap_lines(f"ALICE: {s.text}")) <= 2
        assert s.end_ms - s.start_ms <= subtitles.MAX_CUE_MS
        share = 20000 * text_weight(s.text) / whole  # the time by the characters' weights
        assert abs((s.end_ms - s.start_ms) - share) <= 1
    assert [s.text for s in subs] == [
        "This is the first sentence of a long piece.",  # sentences, as many as fit
        "It goes on, and on, with a clause or two; then it stops. A short one.",
        "And here is a rather longer sentence without any commas that must be",  # no clause: between words,
        "cut somewhere between its words because it does not fit in two lines.",  # in even parts
    ]


def test_a_short_piece_is_one_cue():
    sub = Subtitle(0, 3000, "Hello there. How are you?")
    assert subtitles.cut_cue(sub) == [sub]
    slow = Subtitle(0, 20000, "Short but slow.")  # over 7 s, but no sentence or clause to cut at: kept whole
    assert subtitles.cut_cue(slow) == [slow]
    two = subtitles.cut_cue(Subtitle(0, 16000, "Short but slow, and then some more words."))  # cut at the clause
    assert [s.text for s in two] == ["Short but slow,", "and then some more words."]
