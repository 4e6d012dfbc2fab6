"""Subtitle files read back with the library of their format: test_subtitles.py, test_sentence_breaks.py."""

from __future__ import annotations

import srt
import webvtt

from omnivoice_cli.media.cues import strip_markup


def read_cues(path) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) parsed back with the library of the format."""
    if str(path).endswith(".srt"):
        return [
            (s.start // srt.timedelta(milliseconds=1), s.end // srt.timedelta(milliseconds=1), strip_markup(s.content))
            for s in srt.parse(path.read_text())
        ]
    return [
        (c.start_time.in_milliseconds(), c.end_time.in_milliseconds(), strip_markup(c.raw_text))
        for c in webvtt.read(str(path)).captions
    ]
