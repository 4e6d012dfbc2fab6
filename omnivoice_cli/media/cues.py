"""Subtitle cues read: SRT and WebVTT files (writing subtitles for audio we made: media/subtitles.py).

    cues = read_cues("episode.srt")          # [Cue(index, line, start_ms, end_ms, text, voice)]

Parsing is done by the libraries made for it (`srt` for SRT, `webvtt-py` for WebVTT, both MIT);
this module adds what they leave to the caller: the line number of every cue and of every error
(one line, "FILE: line N: ..."), the checks a dub needs (times in order, nothing unbounded), and
the markup a subtitle carries but a voice must not speak (`<i>`, `<font ...>`, `{\\an8}`, VTT
voice spans and timestamps, HTML entities).
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ..engine.errors import InvalidRequest

MAX_SUBTITLE_BYTES = 10 * 1024 * 1024  # a subtitle file is read up to here (thousands of hours of cues)
SUFFIXES = (".srt", ".vtt")

_TAG_RE = re.compile(r"<[^<>]*>")  # <i>, </i>, <font color=..>, <v Bob>, <c.x>, <00:00:01.000>: linear
_ASS_RE = re.compile(r"\{\\[^{}]*\}")  # {\an8}, {\i1}: ASS override blocks some SRT files carry


@dataclass(frozen=True)
class Cue:
    """One cue of a subtitle file."""

    index: int  # its position among the file's cues, from 0
    line: int  # the line of its timing line, from 1
    start_ms: int  # start time in milliseconds
    end_ms: int  # end time in milliseconds
    text: str  # its words, markup stripped, lines joined by spaces ("" for an empty cue)
    voice: str | None = None  # the speaker of a WebVTT voice span (<v Bob>), if any


def strip_markup(text: str) -> str:
    """The words of a cue's text: tags and ASS overrides removed, entities decoded, whitespace
    (line breaks included) collapsed to single spaces."""
    text = _ASS_RE.sub("", _TAG_RE.sub("", text))
    return " ".join(html.unescape(text).split())


def timestamp(ms: int, sep: str = ".") -> str:
    """HH:MM:SS.mmm (sep "," for SRT)."""
    h, rest = divmod(int(ms), 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, milli = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{milli:03d}"


class _Lines:
    """Line numbers of character offsets in a text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def read_text(path: str | Path, what: str = "subtitle file") -> str:
    """The UTF-8 text of a file, read up to MAX_SUBTITLE_BYTES, line ends made '\\n'."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InvalidRequest(f"{what} '{path}' does not exist")
    if p.is_dir():
        raise InvalidRequest(f"{what} '{path}' is a folder: give a file")
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_SUBTITLE_BYTES + 1)
    except OSError as e:
        raise OSError(e.errno, f"cannot read the {what} '{path}': {e.strerror or e}") from None
    if len(data) > MAX_SUBTITLE_BYTES:
        raise InvalidRequest(f"{what} '{path}' is over {MAX_SUBTITLE_BYTES >> 20} MiB: split it")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InvalidRequest(f"{path}: line {line}: not UTF-8 text (save the file as UTF-8)") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_cues(path: str | Path) -> list[Cue]:
    """The cues of an .srt or .vtt file, in file order, checked (InvalidRequest "FILE: line N: ...")."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        shown = f"extension {suffix!r}" if suffix else "no extension"
        raise InvalidRequest(f"subtitle file '{path}' has {shown}: give an .srt or .vtt file")
    text = read_text(path)
    cues = parse_srt(text, str(path)) if suffix == ".srt" else parse_vtt(text, str(path))
    if not cues:
        raise InvalidRequest(f"subtitle file '{path}' has no cues: nothing to speak")
    for cue in cues:
        if cue.end_ms <= cue.start_ms:
            what = "ends before it starts" if cue.end_ms < cue.start_ms else "ends when it starts"
            raise InvalidRequest(
                f"{path}: line {cue.line}: the cue {what} ({timestamp(cue.start_ms)} --> {timestamp(cue.end_ms)})"
            )
    return cues


def _srt_time_ok(raw: str) -> bool:
    import srt

    m = srt.TS_REGEX.match(raw)
    return m is not None and int(m.group(2)) < 60 and int(m.group(3)) < 60


def parse_srt(text: str, name: str) -> list[Cue]:
    """SRT cues with the `srt` library; the library's own regex (the same matches, in the same
    order) gives each cue's position, hence its line."""
    import srt

    lines, cues, line = _Lines(text), [], 1
    subs = srt.parse(text)
    try:
        for index, match in enumerate(srt.SRT_REGEX.finditer(text)):
            line = lines.of(match.start(2))
            sub = next(subs)  # the same match: raises for anything unparsed before it
            for raw in (match.group(2), match.group(3)):
                if not _srt_time_ok(raw):
                    raise InvalidRequest(
                        f"{name}: line {line}: invalid time {raw.strip()!r}: use HH:MM:SS,mmm "
                        "(minutes and seconds below 60)"
                    )
            cues.append(Cue(index, line, _ms(sub.start), _ms(sub.end), strip_markup(sub.content)))
        for _ in subs:  # the end: anything left unparsed
            pass
    except srt.SRTParseError as e:
        bad = e.unmatched_content
        offset = e.expected_start + len(bad) - len(bad.lstrip())
        shown = bad.strip().splitlines()[0][:60] if bad.strip() else ""
        raise InvalidRequest(
            f"{name}: line {lines.of(offset)}: not an SRT cue ({shown!r}): expected a number, then a "
            "time line like '00:00:01,000 --> 00:00:02,500', then the text"
        ) from None
    except InvalidRequest:
        raise
    except (OverflowError, ValueError):  # a time too large for a timedelta
        raise InvalidRequest(f"{name}: line {line}: invalid time: too large") from None
    return cues


def _ms(td: timedelta) -> int:
    return td // timedelta(milliseconds=1)


def parse_vtt(text: str, name: str) -> list[Cue]:
    """WebVTT cues with `webvtt-py` (strict: a malformed cue block is an error, not skipped)."""
    import webvtt
    from webvtt.errors import MalformedCaptionError, MalformedFileError

    try:
        captions = webvtt.from_string(text, strict=True).captions
    except MalformedFileError:
        raise InvalidRequest(f"{name}: line 1: not a WebVTT file: its first line must be WEBVTT") from None
    except (MalformedCaptionError, ValueError) as e:
        raise InvalidRequest(_vtt_error(text, name, e)) from None
    numbers = _vtt_cue_lines(text, captions)
    return [
        Cue(
            i,
            numbers[i],
            c.start_time.in_milliseconds(),
            c.end_time.in_milliseconds(),
            strip_markup(c.raw_text),
            c.voice.strip() if c.voice else None,
        )
        for i, c in enumerate(captions)
    ]


def _vtt_cue_lines(text: str, captions) -> list[int]:
    """The line of each caption's timing line: the next line, in order, that is a timing line
    with the caption's times (webvtt-py keeps no positions)."""
    from webvtt.models import Timestamp
    from webvtt.vtt import WebVTTCueBlock

    rows = text.split("\n")
    numbers, k = [], 0
    for c in captions:
        want = (c.start_time.to_tuple(), c.end_time.to_tuple())
        while k < len(rows):
            k += 1
            m = re.match(WebVTTCueBlock.CUE_TIMINGS_PATTERN, rows[k - 1])
            try:
                if (
                    m
                    and (Timestamp.from_string(m.group(1)).to_tuple(), Timestamp.from_string(m.group(2)).to_tuple())
                    == want
                ):
                    break
            except Exception:  # a malformed time on a line webvtt-py took for text
                continue
        numbers.append(k)
    return numbers


def _vtt_error(text: str, name: str, error: Exception) -> str:
    """Where a strict parse failed: the first block that fails alone (its bad time's line, else
    its timing line), parsed again block by block with the library."""
    import webvtt

    detail = " ".join(str(error).split())[:120]
    rows = text.split("\n")
    start = 0
    for k in range(len(rows) + 1):
        if k < len(rows) and rows[k] != "":
            continue
        block = rows[start:k]
        if block and start > 0:
            try:
                webvtt.from_string("WEBVTT\n\n" + "\n".join(block), strict=True)
            except Exception:
                bad = re.search(r"'([^']*)'", str(error))
                at = next((j for j, row in enumerate(block) if bad and bad.group(1) and bad.group(1) in row), None)
                at = at if at is not None else next((j for j, row in enumerate(block) if "-->" in row), 0)
                return f"{name}: line {start + at + 1}: not a valid WebVTT cue ({detail})"
        start = k + 1
    return f"{name}: not a valid WebVTT file ({detail})"
