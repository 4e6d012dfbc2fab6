"""The batch manifest, `OUT/manifest.jsonl`: one JSON record per input line.

While a run goes, one record is appended (and flushed to disk) per line as it finishes, fails or
is skipped; when the run ends, normally or by Ctrl-C / SIGTERM, the file is rewritten atomically
with exactly one record per input line, in input order. After a hard kill (SIGKILL, power loss)
the file holds the earlier records followed by the new ones: the latest record for a line wins,
and the next run rewrites the file. Statuses: done, failed, skipped, pending.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO, Literal, Mapping, Sequence, TypedDict

from ...media.atomic import replace_atomically

if TYPE_CHECKING:
    from ..listening.verify import VerifySummary
    from ..settings.setting import Value

MANIFEST = "manifest.jsonl"
MAX_RECORD_BYTES = 4 * 1024 * 1024  # a longer line in an old manifest is not a record of ours
MAX_MANIFEST_BYTES = 1 << 30  # an old manifest is read up to here


def open_regular(path: Path) -> BinaryIO | None:
    """The manifest opened for reading, or None: absent, a folder, a symbolic link (never
    followed: it could lead anywhere, /dev/zero included) or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


class Fingerprint(TypedDict):
    """What a "done" record says of the file it wrote."""

    bytes: int  # its size
    sha256: str  # hex digest of its content


Status = Literal["done", "failed", "skipped", "pending"]  # a line's, in its record


class _LineRecord(TypedDict):
    line: int  # the input line's number (from 1)
    id: str | None  # a JSON line's id
    status: Status
    output: str | None  # the file, relative to the output folder
    text: str | None  # the line's text, its lines joined
    audio_seconds: float | None
    seconds: float | None  # from the start of the line's group to its file being written
    seed: int | None
    settings: dict[str, Value] | None  # every resolved setting (None: the line was not planned)
    ref: str | None  # the line's own `ref` and `ref_text` fields
    ref_text: str | None
    voice_prompt: str | None  # the sha256 of the voice prompt the line cloned (None: a fresh voice)
    warnings: list[str]
    error: str | None  # "line N: ..." (failed), or why a pending line was not spoken


class LineRecord(_LineRecord, total=False):
    """A batch line's record in the manifest, as written (docs/batch.md lists the fields)."""

    bytes: int  # a "done" record: its file's `Fingerprint`
    sha256: str
    verify: VerifySummary  # --verify: the line's scores (verify.RequestCheck.summary)


# A record as read back from a manifest line: a JSON object whose values are not trusted (each
# reader checks the type of a value before it uses it, as is_recorded does).
Record = dict[str, object]


def fingerprint(path: Path) -> Fingerprint:
    """{"bytes", "sha256"} of a file just written: what a "done" record says of its output, so a
    later run can tell the file is still the one written (`is_recorded`)."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"bytes": size, "sha256": h.hexdigest()}


def is_recorded(folder: Path, name: str, record: Mapping[str, object] | None) -> bool:
    """Whether `folder/name` is the very file `record` (a "done" record with `fingerprint`'s
    fields) says was written: a regular file directly in `folder` (not a symbolic link, its
    resolved path inside the folder: nothing outside it is ever read), of the recorded size and
    sha256. False for anything else (missing, replaced, truncated, a record without them)."""
    if not record:
        return False
    expected, digest = record.get("bytes"), record.get("sha256")
    if not isinstance(digest, str) or not isinstance(expected, int):
        return False
    path = folder / name
    try:
        if path.parent.resolve() != folder.resolve() or Path(name).name != name:
            return False
    except (OSError, RuntimeError):
        return False
    f = open_regular(path)
    if f is None:
        return False
    h, size = hashlib.sha256(), 0
    with f:
        if os.fstat(f.fileno()).st_size != expected:
            return False
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
            if size > expected:
                return False
    return size == expected and h.hexdigest() == digest


def read_manifest(path: Path) -> list[Record]:
    """The records of an existing manifest (lines that do not parse, e.g. torn by a kill, are
    ignored; at most MAX_MANIFEST_BYTES are read)."""
    records: list[Record] = []
    f = open_regular(path)
    if f is None:
        return records
    read = 0
    with f:
        for raw in iter(lambda: f.readline(MAX_RECORD_BYTES), b""):
            read += len(raw)
            if read > MAX_MANIFEST_BYTES:
                break
            try:
                rec = json.loads(raw.decode("utf-8", errors="replace"))
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


def done_records(path: Path) -> dict[str, Record]:
    """The latest "done" record of each output (case-folded name) in an existing manifest."""
    earlier: dict[str, Record] = {}
    for rec in read_manifest(path):
        output = rec.get("output")
        if rec.get("status") == "done" and isinstance(output, str):
            earlier[output.casefold()] = rec
    return earlier


class ManifestWriter:
    """Appends records (one JSON line each, flushed to disk); `rewrite` replaces the file atomically.

    The manifest is never written through a symbolic link (it could point outside the output
    folder): a link in its place is an error."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: IO[str] | None = None

    def check(self) -> None:
        """Before a run: OSError when the manifest's place holds a link or something not a file."""
        if self.path.is_symlink():
            raise OSError(
                40, f"{self.path} is a symbolic link: remove it (the manifest is never written through a link)"
            )
        if self.path.exists() and not self.path.is_file():
            raise OSError(21, f"{self.path} is not a regular file: remove it or use another output folder")

    def _open(self) -> IO[str]:
        self.check()
        needs_newline = False
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() > 0:
                    f.seek(-1, os.SEEK_END)
                    needs_newline = f.read(1) != b"\n"  # a record torn by a kill
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        # backslashreplace: a lone surrogate (a bad line's text) can only sit inside a JSON string,
        # where it is written as the JSON escape \\udXXX and reads back as the same text
        out = os.fdopen(os.open(self.path, flags, 0o666), "a", encoding="utf-8", errors="backslashreplace")
        if needs_newline:
            out.write("\n")
        self._f = out
        return out

    def append(self, record: Mapping[str, object]) -> None:
        out = self._f if self._f is not None else self._open()
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def rewrite(self, records: Sequence[Mapping[str, object]]) -> None:
        self.close()
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8", "backslashreplace")

        def write(f: BinaryIO) -> None:
            f.write(data)

        replace_atomically(self.path, write)
