"""`omnivoice revoice`: a take spoken again in another voice, in its own timing. Its words and
their times become timed cues, spoken through the dub path (app/dub/: each cue's length fixed
by its slot, placed at its start), so every word lands in the slot it had in the take.

    cues, take_ms = take_cues("take.wav", cues_file=None, heard=words)   # words: (word, start, end)
    run = DubRun("take.wav", target, ..., cues=cues, track_ms=take_ms)   # the track as long as the take

Where the cues come from: a subtitle file of the take (`--cues`: its words and times), or the
speech recogniser's words, grouped into cues at the pauses (a gap of PAUSE_SECONDS or more) and
at most CUE_SECONDS long; `--text` then gives the words, timed by the heard ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ...engine.errors import InvalidRequest
from ...media.cues import Cue, read_cues
from .editplan import times_of

PAUSE_SECONDS = 0.35  # a pause at least this long between two words starts a new cue
CUE_SECONDS = 8.0  # a cue at most this long (a longer run of words is cut at its longest pauses)


def take_ms(path: str | Path) -> int:
    """The take's length in ms (by its header); InvalidRequest for a file that is not audio."""
    import soundfile as sf

    try:
        info = sf.info(str(path))
    except Exception as e:  # noqa: BLE001 - missing, unreadable, not audio: one line
        raise InvalidRequest(f"the take {path}: cannot read it as audio ({e})".replace("\n", " ")) from None
    return int(info.frames * 1000 // info.samplerate)


def group_words(words: Sequence[tuple[str, float, float]]) -> list[Cue]:
    """Timed words -> cues: a new cue after a pause of PAUSE_SECONDS, or before a cue would
    pass CUE_SECONDS; each cue from its first word's start to its last word's end."""
    cues: list[Cue] = []
    group: list[tuple[str, float, float]] = []

    def close() -> None:
        if group:
            start, end = round(group[0][1] * 1000), round(group[-1][2] * 1000)
            end = max(end, start + 1)
            cues.append(Cue(len(cues), len(cues) + 1, start, end, " ".join(w for w, _, _ in group)))
            group.clear()

    for word in words:
        if group and (word[1] - group[-1][2] >= PAUSE_SECONDS or word[2] - group[0][1] > CUE_SECONDS):
            close()
        group.append(word)
    close()
    return cues


def take_cues(
    path: str | Path,
    *,
    cues_file: str | None = None,
    heard: Sequence[tuple[str, float, float]] | None = None,
    text: str | None = None,
) -> tuple[list[Cue], int]:
    """The take's timed cues and its length in ms (see the module doc)."""
    length = take_ms(path)
    if cues_file is not None:
        if text is not None:
            raise InvalidRequest("give --text or --cues, not both: a subtitle file holds its own words")
        cues = read_cues(cues_file)
        late = [c for c in cues if c.start_ms >= length]
        if late:
            raise InvalidRequest(
                f"{cues_file}: line {late[0].line}: the cue starts after the end of the take ({length / 1000:.2f} s)"
            )
        return cues, length
    if heard is None:
        raise InvalidRequest("where the words lie is not known: give --cues (a subtitle file of the take)")
    if not heard:
        raise InvalidRequest(f"the speech recogniser heard no words in the take {path}: nothing to revoice")
    if text is not None:
        words = text.split()
        if not words:
            raise InvalidRequest("--text is empty: give the words the take says")
        times = times_of(words, heard, length / 1000)
        heard = [(w, s, e) for w, (s, e) in zip(words, times)]
    return group_words(heard), length
