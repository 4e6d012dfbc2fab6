"""A book's work folder (`novel.m4b.parts/`, `out/.parts/`): the parts (KEY.flac, each with its
KEY.pieces.json: where each piece of its text is in its audio, for the subtitles), book.json (the
key of each output written), and the batch run's manifest. Everything in it is read bounded,
never through a link, and checked: a part is used only when the manifest vouches for it.
`PartSink` is how the book hears of its parts from the batch run that speaks them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ...engine.text.pauses import split_pauses
from ...media.atomic import replace_atomically
from ..batch.batchinput import Line
from ..batch.manifest import MANIFEST, done_records, is_recorded, open_regular
from .bookplan import KEY_CHARS, PART_FORMAT, PartLine
from .booktrack import Tracker

if TYPE_CHECKING:
    from ...engine.planning import Result

STATE = "book.json"  # in the work folder: the key of each output written
MAX_STATE_BYTES = 16 * 1024 * 1024  # book.json and a part's .pieces.json are read up to here
Json = object  # a JSON value as json.loads gives it (checked before use)


class PartPieces(TypedDict):
    """A part's .pieces.json, checked (`read_pieces`): where each piece of its text is in its audio."""

    samples: int  # the part's length
    sample_rate: int
    pieces: list[tuple[str, int, int]]  # (text, start, end) in samples, 0 <= start <= end <= samples


class State(TypedDict):
    """book.json: each output written, by file name: {"key", "size", "sha256", "duration",
    "loudness"} (an entry read back is checked field by field before use, as bookassembly.py does)."""

    outputs: dict[str, dict[str, object]]


def pieces_name(part: str) -> str:
    return part[: -len(PART_FORMAT) - 1] + ".pieces.json"


def _read_json(path: Path) -> Json:
    """A JSON file of the work folder, or None: read only when a regular file (never through a
    symbolic link), at most MAX_STATE_BYTES, and None for anything that does not parse."""
    f = open_regular(path)
    if f is None:
        return None
    with f:
        raw = f.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        return None
    try:
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None


def read_pieces(path: Path) -> PartPieces | None:
    """A part's .pieces.json, checked: {"samples": int, "sample_rate": int, "pieces": [[text,
    start, end], ...]} with 0 <= start <= end <= samples; None when it is anything else."""
    record = _read_json(path)
    if not isinstance(record, dict):
        return None
    samples, rate, pieces = record.get("samples"), record.get("sample_rate"), record.get("pieces")
    if not (isinstance(samples, int) and isinstance(rate, int) and rate > 0 and isinstance(pieces, list)):
        return None
    checked: list[tuple[str, int, int]] = []
    for p in pieces:
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str)):
            return None
        text, start, end = p
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in p[1:]) or not 0 <= start <= end <= samples:
            return None
        checked.append((text, start, end))
    return {"samples": samples, "sample_rate": rate, "pieces": checked}


def write_json(path: Path, data: Json) -> None:
    raw = (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8", "surrogatepass")

    def write(f) -> None:
        f.write(raw)

    replace_atomically(path, write)


def read_state(path: Path) -> State:
    data = _read_json(path)  # bounded, never through a link; anything that does not parse: no state
    if isinstance(data, dict) and isinstance(outputs := data.get("outputs"), dict):
        return {"outputs": {k: v for k, v in outputs.items() if isinstance(v, dict)}}
    return {"outputs": {}}


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.is_symlink() or path.is_file():
            try:
                path.unlink()
            except OSError:
                pass


def check_parts(work: Path | None, lines: list[PartLine], *, remove: bool) -> set[str]:
    """The parts in the work folder that are what the manifest says was written (a regular
    file inside the folder, its size and sha256 those of its "done" record:
    manifest.is_recorded) with a readable .pieces.json (read_pieces). With `remove`, every
    other file or link in a part's place (and its pieces) is deleted, so it is spoken again:
    a part replaced, truncated, linked elsewhere or without a record is never used."""
    if work is None or not work.is_dir():
        return set()
    records = done_records(work / MANIFEST)
    good: set[str] = set()
    for line in lines:
        name = line.name
        if not name:
            continue
        ok = is_recorded(work, name, records.get(name.casefold()))
        if ok and read_pieces(work / pieces_name(name)) is not None:
            good.add(name)
        elif remove:
            _remove(work / name, work / pieces_name(name))
    return good


def remove_old_parts(work: Path, lines: list[PartLine]) -> None:
    """The parts of an earlier version of the book (no longer any chapter's) are deleted."""
    keep = {p.name for p in lines}
    keep |= {pieces_name(n) for n in keep}
    pattern = re.compile(rf"^[0-9a-f]{{{KEY_CHARS}}}\.(?:{PART_FORMAT}|pieces\.json)$")
    for path in work.iterdir():
        if pattern.match(path.name) and path.name not in keep:
            _remove(path)


def _spoken(text: str) -> str:
    return " ".join(split_pauses(text)[0])


class PartSink:
    """The batch run's LineSink for a book: a warning names the part's chapter, each part's
    pieces are written before its audio (a part always has its pieces, for the subtitles), and
    the tracker hears of each part that ends."""

    def __init__(self, work: Path, tracker: Tracker | None = None) -> None:
        self.work, self.tracker = work, tracker

    def where(self, line: Line) -> str:
        return f"chapter {line.chapter}" if isinstance(line, PartLine) else f"line {line.number}"

    def before_write(self, line: Line, result: Result) -> str | None:
        request = line.built.request if line.built is not None else None
        text = _spoken(request.text) if request is not None else ""
        samples = len(result.audio)
        pieces = result.pieces or [(text, 0, samples)]
        record: PartPieces = {"samples": samples, "sample_rate": result.sample_rate, "pieces": pieces}
        path = self.work / pieces_name(line.name or "")
        try:
            write_json(path, record)
        except OSError as e:
            return f"cannot write {path}: {e.strerror or e}"
        return None

    def ended(self, line: Line) -> None:
        if self.tracker is not None and line.status in ("done", "failed"):
            self.tracker.finished(line, line.status)
