"""`omnivoice edit`'s plan, made without the model: which stretches of a take change, and the
canvas that fills them (the run: editrun.py; the method: docs/edit.md).

    take = read_take("take.wav")                       # the take as the codec will see it
    plan = plan_edit(take, "the new transcript", ref_text="what it says", spans=[(1.2, 1.9)])
    plan.target(codes, mask_id)                          # [C, T'] the known codes, MASK to fill
    plan.record()                                        # --dry-run --json

The changed words are found by aligning the two transcripts word by word (difflib); each change
lies in the take where its old words were said: the recogniser's word times (`--words`), or the
spans given by hand (`--span START:END`, one per change, in order). A span's old frames
[a, b) are masked and replaced by as many frames as its new words take at the take's own rate
(the frames of the words it replaces per unit of the engine's duration weight; an insertion:
the take's frames per unit over its whole transcript). The codes
outside every span are kept as they are.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ...engine.errors import InvalidRequest
from ...engine.text.duration import text_weight

if TYPE_CHECKING:
    import torch

    from ...engine.sound.voice import PreparedReference

FRAME_RATE = 25.0  # codec frames a second (24 kHz, a hop of 960)
HOP = 960
MAX_CHANGE = 0.5  # an edit may change at most this share of the take's frames
_SPAN_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*:\s*(\d+(?:\.\d*)?|\.\d+)\s*$")
_WORD_EDGES = re.compile(r"^\W+|\W+$")


@dataclass(frozen=True)
class Recording:
    """The take as the codec encodes it: mono at 24 kHz, levelled to RMS 0.1 when quieter (the
    reference's preparation, silences kept: its timing is the edit's), cut to whole frames."""

    path: str
    sample_rate: int  # the file's own rate (the output keeps it)
    prepared: PreparedReference

    @property
    def frames(self) -> int:
        return len(self.prepared.wav) // HOP

    @property
    def seconds(self) -> float:
        return self.frames / FRAME_RATE


@dataclass(frozen=True)
class Change:
    """One stretch that changes: its old frames [start, end) in the take, its new length."""

    start: int
    end: int
    new_frames: int
    old_words: str
    new_words: str

    def record(self) -> dict[str, object]:
        return {
            "start_seconds": round(self.start / FRAME_RATE, 4),
            "end_seconds": round(self.end / FRAME_RATE, 4),
            "old_frames": [self.start, self.end],
            "new_frames": self.new_frames,
            "change_frames": self.new_frames - (self.end - self.start),
            "old_words": self.old_words,
            "new_words": self.new_words,
        }


@dataclass(frozen=True)
class EditPlan:
    """An edit: the take, the whole new transcript, and its changes (in order, apart)."""

    take: Recording
    text: str
    old_text: str
    changes: tuple[Change, ...]

    @property
    def target_frames(self) -> int:
        """T': the take's frames plus every change's difference."""
        return self.take.frames + sum(c.new_frames - (c.end - c.start) for c in self.changes)

    def layout(self) -> list[tuple[str, int, int, int]]:
        """The target's stretches in order: ("known", out_start, out_end, take_start) and
        ("masked", out_start, out_end, -1), in frames; empty stretches left out."""
        out, pos, at = [], 0, 0
        for c in self.changes:
            if c.start > at:
                out.append(("known", pos, pos + c.start - at, at))
                pos += c.start - at
            if c.new_frames:
                out.append(("masked", pos, pos + c.new_frames, -1))
                pos += c.new_frames
            at = c.end
        if self.take.frames > at:
            out.append(("known", pos, pos + self.take.frames - at, at))
        return out

    def ranges(self, kind: str) -> list[list[int]]:
        return [[s, e] for k, s, e, _ in self.layout() if k == kind]

    def target(self, codes: torch.Tensor, mask_id: int) -> torch.Tensor:
        """The edit's target [C, T']: the take's codes [C, T] where known, mask_id where filled."""
        import torch

        if codes.shape[-1] != self.take.frames:
            raise ValueError(f"the take encodes to {codes.shape[-1]} frames, planned {self.take.frames}")
        parts = []
        for kind, s, e, t in self.layout():
            if kind == "known":
                parts.append(codes[:, t : t + e - s])
            else:
                parts.append(torch.full((codes.shape[0], e - s), mask_id, dtype=codes.dtype, device=codes.device))
        return torch.cat(parts, dim=1)

    def record(self) -> dict[str, object]:
        """What --dry-run --json shows: the take, the changes, and the canvas the model fills."""
        return {
            "take": self.take.path,
            "sample_rate": self.take.sample_rate,
            "take_seconds": round(self.take.seconds, 4),
            "take_frames": self.take.frames,
            "output_seconds": round(self.target_frames / FRAME_RATE, 4),
            "text": self.text,
            "ref_text": self.old_text,
            "changes": [c.record() for c in self.changes],
            "canvas": {
                "text": self.text,
                "prompt": None,  # no reference part: the take's own known codes are the voice (docs/edit.md)
                "target_frames": self.target_frames,
                "known": self.ranges("known"),
                "masked": self.ranges("masked"),
            },
        }


def read_take(path: str | Path) -> Recording:
    """The take read and prepared as the codec will encode it; a take without speech (nothing
    above -50 dBFS), too short (0.5 s) or too long (60 s) is refused."""
    import numpy as np
    import soundfile as sf

    from ...engine.model.config import SAMPLE_RATE
    from ...engine.sound import audio as audio_ops
    from ...engine.sound import voice as vmod

    source = f"the take {path}"
    wav = vmod.load_reference(path)  # mono at the codec's rate (InvalidRequest names an unreadable file)
    rate = sf.info(str(path)).samplerate
    if not np.any(audio_ops.remove_silence(wav, SAMPLE_RATE, mid_sil_ms=200, lead_sil_ms=0, trail_sil_ms=0)):
        raise InvalidRequest(f"{source} holds no speech (nothing above -50 dBFS): nothing to edit")
    prepared = vmod.prepare_reference(wav, None, preprocess=False, source=source)
    return Recording(str(path), int(rate), prepared)


def parse_span(value: str) -> tuple[float, float]:
    """`--span START:END` in seconds (START < END)."""
    m = _SPAN_RE.match(value)
    if not m:
        raise InvalidRequest(f"--span {value!r}: expected START:END in seconds, e.g. --span 1.25:1.9")
    start, end = float(m.group(1)), float(m.group(2))
    if end <= start:
        raise InvalidRequest(f"--span {value}: its end must come after its start")
    return start, end


def words_of(text: str) -> list[str]:
    return text.split()


def _key(word: str) -> str:
    return _WORD_EDGES.sub("", word).casefold()


def changed_words(old: str, new: str) -> list[tuple[int, int, int, int]]:
    """Where the two transcripts differ, word by word (case and the punctuation at a word's ends
    ignored): (i1, i2, j1, j2), old words [i1, i2) become new words [j1, j2)."""
    a, b = [_key(w) for w in words_of(old)], [_key(w) for w in words_of(new)]
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def stretch(times: Sequence[tuple[float, float]], i1: int, i2: int, seconds: float) -> tuple[float, float]:
    """The seconds of old words [i1, i2) (their first start to their last end); an insertion
    (i1 == i2): the pause between the words around it (the take's start or end at its edges)."""
    if i2 > i1:
        return times[i1][0], times[i2 - 1][1]
    before = times[i1 - 1][1] if i1 > 0 else 0.0
    after = times[i1][0] if i1 < len(times) else seconds
    return before, max(before, after)


def plan_edit(
    take: Recording,
    text: str,
    *,
    ref_text: str | None,
    spans: Sequence[tuple[float, float]] = (),
    word_times: Sequence[tuple[str, float, float]] | None = None,
) -> EditPlan:
    """The edit of `take` into `text` (see the module doc). `ref_text`: what the take says (None:
    the heard words of `word_times`); `spans`: the changes' seconds by hand, one per change, in
    order; `word_times`: (word, start, end) of every old word, heard by the recogniser."""
    text = " ".join(text.split())
    if not text:
        raise InvalidRequest("--text is empty: give the whole new transcript of the take")
    if ref_text is None and word_times is not None:
        ref_text = " ".join(w for w, _, _ in word_times)
    if ref_text is None or not ref_text.strip():
        raise InvalidRequest(
            '--ref-text "the words the take says" is needed to find what changed (or --words, to hear them)'
        )
    ref_text = " ".join(ref_text.split())
    for start, end in spans:
        if end > take.seconds + 0.5 / FRAME_RATE:
            raise InvalidRequest(
                f"--span {start:g}:{end:g} runs past the end of {take.path} ({take.seconds:.2f} s long)"
            )
    diffs = changed_words(ref_text, text)
    if not diffs:
        raise InvalidRequest("--text is what the take says already (--ref-text): nothing to change")
    old_words, new_words = words_of(ref_text), words_of(text)
    if spans:
        if len(spans) != len(diffs):
            shown = "; ".join(_described(old_words, new_words, d) for d in diffs[:4])
            raise InvalidRequest(
                f"the transcripts differ in {len(diffs)} place{'s' * (len(diffs) != 1)} ({shown}) but "
                f"{len(spans)} --span {'was' if len(spans) == 1 else 'were'} given: give one span per change, in order"
            )
        seconds = list(spans)
    elif word_times is not None:
        times = times_of(old_words, word_times, take.seconds)
        seconds = [stretch(times, i1, i2, take.seconds) for i1, i2, _, _ in diffs]
    else:
        raise InvalidRequest(
            "where the words changed is not known: give --span START:END (seconds) for each change, "
            "or --words to hear the take with the speech recogniser (the asr extra)"
        )
    rate = take.frames / max(text_weight(ref_text), 1e-6)  # the take's frames per unit of weight
    changes: list[Change] = []
    for (i1, i2, j1, j2), (s, e) in zip(diffs, seconds):
        a = max(0, min(take.frames, math.floor(s * FRAME_RATE)))
        b = max(a, min(take.frames, math.ceil(e * FRAME_RATE)))
        new, old = " ".join(new_words[j1:j2]), " ".join(old_words[i1:i2])
        if not new:
            n = 0
        elif b > a and text_weight(old) > 0:  # the pace of the words it replaces, where they were said
            n = round((b - a) * text_weight(new) / text_weight(old))
        else:  # an insertion: the take's pace over its whole transcript
            n = round(text_weight(new) * rate)
        if changes and a < changes[-1].end:
            if a < changes[-1].start:
                raise InvalidRequest("the spans must be in the order of the changes and apart")
            last = changes.pop()  # two changes in touching stretches: one change
            joined = f"{last.new_words} {new}".strip()
            changes.append(
                Change(
                    last.start,
                    max(b, last.end),
                    last.new_frames + n,
                    f"{last.old_words} {' '.join(old_words[i1:i2])}".strip(),
                    joined,
                )
            )
            continue
        changes.append(Change(a, b, n, " ".join(old_words[i1:i2]), new))
    plan = EditPlan(take, text, ref_text, tuple(changes))
    _check_size(plan)
    return plan


def _check_size(plan: EditPlan) -> None:
    changed = sum(max(c.end - c.start, c.new_frames) for c in plan.changes)
    if changed > MAX_CHANGE * plan.take.frames:
        raise InvalidRequest(
            f"the edit changes {changed / FRAME_RATE:.2f} s of the {plan.take.seconds:.2f} s take, more than "
            f"half of it: speak the new text in the take's voice instead (omnivoice say TEXT --ref {plan.take.path})"
        )
    if not any(c.new_frames or c.end > c.start for c in plan.changes):
        raise InvalidRequest("the change is between two words said without a pause: give its --span by hand")


def _described(old: list[str], new: list[str], d: tuple[int, int, int, int]) -> str:
    i1, i2, j1, j2 = d
    return f"{' '.join(old[i1:i2]) or '(nothing)'} -> {' '.join(new[j1:j2]) or '(nothing)'}"


def times_of(words: list[str], heard: Sequence[tuple[str, float, float]], seconds: float) -> list[tuple[float, float]]:
    """Each transcript word's (start, end) from the heard words, paired by a word alignment; a
    word the recogniser missed lies between its neighbours."""
    a, b = [_key(w) for w in words], [_key(w) for w, _, _ in heard]
    pairs: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            pairs.update({i1 + k: j1 + k for k in range(i2 - i1)})
    out: list[tuple[float, float] | None] = [
        (heard[pairs[i]][1], heard[pairs[i]][2]) if i in pairs else None for i in range(len(words))
    ]
    for i, t in enumerate(out):
        if t is None:
            before = next((x[1] for x in reversed(out[:i]) if x is not None), 0.0)
            after = next((x[0] for x in out[i + 1 :] if x is not None), seconds)
            out[i] = (before, max(before, after))
    return [t for t in out if t is not None]
