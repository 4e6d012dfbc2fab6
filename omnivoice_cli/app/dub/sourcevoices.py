"""`dub --source-audio ORIGINAL`: each speaker spoken in their own voice, cut from the original
track at their cues' times (a translation spoken by the voices of the original).

    voices = SourceVoices("original.wav", folder=None)     # a temporary folder for the clips
    cast = voices.cast_with(cues, cast)                    # a member NAME=<clip> per speaker
    member = voices.cue_member(cue)                        # a cue with no speaker: its own clip
    voices.close()

A cue's speaker is its VTT voice (`<v Bob>`) or its `NAME:` label. A speaker given by --cast
keeps that voice; every other speaker's reference is the original's audio at that speaker's
cues, in order, each stretch apart by GAP_SECONDS of silence, up to REF_SECONDS; a cue with no
speaker is spoken in the voice of its own stretch. The clips are files (`NAME.wav`) cloned as
any `--ref` recording is: its transcript is heard by the speech recogniser (the asr extra: the
original's words are not the subtitles' when they are a translation).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from ...engine.errors import InvalidRequest
from ...media.cues import Cue
from ..say.dialogue import Cast, Member, split_label

REF_SECONDS = 10.0  # a speaker's reference at most (3-10 s clones best)
GAP_SECONDS = 0.2  # silence between two cues' stretches in a reference
MIN_SECONDS = 0.5  # a speaker's reference at least (its cues' stretches are widened to it)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def speaker_of(cue: Cue) -> str | None:
    """The speaker a cue names: its VTT voice, else its `NAME:` label (None: none)."""
    if cue.voice:
        return cue.voice.strip() or None
    return split_label(cue.text)[0]


class SourceVoices:
    """The original track, and the references cut from it (see the module doc)."""

    def __init__(self, source: str | Path, folder: Path | None = None) -> None:
        import soundfile as sf

        self.source = Path(source).expanduser()
        try:
            info = sf.info(str(self.source))
        except Exception as e:  # noqa: BLE001 - unreadable, missing, not audio: one line
            raise InvalidRequest(f"--source-audio {source}: cannot read it as audio ({e})".replace("\n", " ")) from None
        self.rate, self.frames = int(info.samplerate), int(info.frames)
        self.given = folder  # where the clips go (None: a temporary folder), made on the first cut
        self.folder: Path | None = None
        self.clips: dict[str, tuple[tuple[int, int], ...]] = {}  # file name -> the ms stretches it was cut from

    def ranges_for(self, cues: Sequence[Cue]) -> list[tuple[int, int]]:
        """The stretches (ms) of `cues` a reference takes, in order, up to REF_SECONDS in all."""
        out, total = [], 0
        end_ms = self.frames * 1000 // self.rate
        for cue in cues:
            start, end = max(0, cue.start_ms), min(cue.end_ms, end_ms)
            if end <= start:
                continue
            end = min(end, start + int(REF_SECONDS * 1000) - total)
            out.append((start, end))
            total += end - start
            if total >= REF_SECONDS * 1000:
                break
        if not out:
            where = cues[0].start_ms / 1000 if cues else 0.0
            raise InvalidRequest(
                f"--source-audio {self.source}: it ends at {end_ms / 1000:.2f} s, before the cue at {where:.2f} s"
            )
        if total < MIN_SECONDS * 1000:  # too short to clone: widened around its first stretch
            s, e = out[0]
            pad = (int(MIN_SECONDS * 1000) - total + 1) // 2
            out[0] = (max(0, s - pad), min(end_ms, e + pad))
        return out

    def cut(self, name: str, ranges: Sequence[tuple[int, int]]) -> Path:
        """The clip `name`.wav: the original at `ranges` (ms), mono, at its own rate."""
        import numpy as np
        import soundfile as sf

        parts = []
        gap = np.zeros(int(GAP_SECONDS * self.rate), dtype=np.float32)
        for k, (start, end) in enumerate(ranges):
            data, _ = sf.read(
                str(self.source),
                start=start * self.rate // 1000,
                stop=end * self.rate // 1000,
                dtype="float32",
                always_2d=True,
            )
            parts += [gap] * (k > 0) + [data.mean(axis=1)]
        if self.folder is None:
            self.folder = self.given or Path(tempfile.mkdtemp(prefix="omnivoice-source-"))
            self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{_UNSAFE.sub('_', name).strip('_') or 'speaker'}.wav"
        sf.write(str(path), np.concatenate(parts), self.rate)
        self.clips[path.name] = tuple(ranges)
        return path

    def cast_with(self, cues: Sequence[Cue], cast: Cast) -> Cast:
        """The cast with a member for every speaker of `cues` that it does not name: the
        speaker's voice cut from the original at its cues (its first REF_SECONDS)."""
        spoken: dict[str, tuple[str, list[Cue]]] = {}
        for cue in cues:
            name = speaker_of(cue)
            if name is not None and cue.text.strip() and cast.members.get(name.casefold()) is None:
                spoken.setdefault(name.casefold(), (name, []))[1].append(cue)
        members = list(cast.members.values())
        for name, said in spoken.values():
            members.append(Member(name, "ref", str(self.cut(f"speaker-{name}", self.ranges_for(said)))))
        return Cast(members)

    def cue_member(self, cue: Cue) -> Member:
        """A cue with no speaker: spoken in the voice of its own stretch of the original."""
        name = f"cue {cue.index + 1}"
        return Member(name, "ref", str(self.cut(f"cue-{cue.index + 1}", self.ranges_for([cue]))))

    def close(self) -> None:
        """The clips removed (a temporary folder: with it)."""
        if self.given is None and self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
