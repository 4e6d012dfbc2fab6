"""Recognisers with scripted transcripts (listen.RECOGNISER is the seam) and the text they are tried
on: test_verify.py, test_book.py; one that times its words: test_words.py, test_revoice.py."""

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


class Heard:
    """Hears the lines it is given, one per call, its words evenly over the audio it is given
    (times relative to that audio); records the length of every call's audio. `first`: what the
    first call hears instead (a take's words at their own times)."""

    def __init__(self, lines: list[str], first: listen.Transcript | None = None) -> None:
        self.lines, self.lengths, self.first = list(lines), [], first

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        self.lengths.append(len(audio))
        if self.first is not None:
            first, self.first = self.first, None
            return first
        said = self.lines.pop(0).split()
        step = len(audio) / sample_rate / len(said)
        return listen.Transcript(
            " ".join(said), tuple(listen.Word(w, i * step, (i + 0.8) * step) for i, w in enumerate(said))
        )

    def close(self):
        pass
