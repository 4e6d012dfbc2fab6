"""A recogniser with scripted transcripts (listen.RECOGNISER is the seam) and the text it is tried
on: test_verify.py, test_book.py."""

from __future__ import annotations

import numpy as np

from omnivoice_cli.app.listening import listen

TEXT = "Hello there, this is a test."


class Scripted:
    """A recogniser that hears what it is told to, in order (then the last line again)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.heard = list(lines), []

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        assert sample_rate == 24000 and audio.dtype == np.float32 and audio.ndim == 1 and len(audio) > 0
        self.heard.append(np.asarray(audio).copy())
        line = self.lines.pop(0) if len(self.lines) > 1 else self.lines[0]
        return listen.Transcript(line)

    def close(self):
        pass
