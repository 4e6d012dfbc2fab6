"""The batch manifest, `OUT/manifest.jsonl`: one JSON record per input line.

While a run goes, one record is appended (and flushed to disk) per line as it finishes, fails or
is skipped; when the run ends, normally or by Ctrl-C / SIGTERM, the file is rewritten atomically
with exactly one record per input line, in input order. After a hard kill (SIGKILL, power loss)
the file holds the earlier records followed by the new ones: the latest record for a line wins,
and the next run rewrites the file. Statuses: done, failed, skipped, pending.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

MANIFEST = "manifest.jsonl"
MAX_RECORD_BYTES = 4 * 1024 * 1024  # a longer line in an old manifest is not a record of ours


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """The records of an existing manifest (lines that do not parse, e.g. torn by a kill, are ignored)."""
    records: list[dict[str, Any]] = []
    try:
        f = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError):
        return records
    with f:
        for raw in iter(lambda: f.readline(MAX_RECORD_BYTES), b""):
            try:
                rec = json.loads(raw.decode("utf-8", errors="replace"))
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


def done_records(path: Path) -> dict[str, dict[str, Any]]:
    """The latest "done" record of each output (case-folded name) in an existing manifest."""
    earlier: dict[str, dict[str, Any]] = {}
    for rec in read_manifest(path):
        if rec.get("status") == "done" and isinstance(rec.get("output"), str):
            earlier[rec["output"].casefold()] = rec
    return earlier


class ManifestWriter:
    """Appends records (one JSON line each, flushed to disk); `rewrite` replaces the file atomically.

    The manifest is never written through a symbolic link (it could point outside the output
    folder): a link in its place is an error."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = None

    def _open(self):
        if self.path.is_symlink():
            raise OSError(40, f"{self.path} is a symbolic link: remove it (the manifest is never written through a link)")
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
        self._f = os.fdopen(os.open(self.path, flags, 0o666), "a", encoding="utf-8")
        if needs_newline:
            self._f.write("\n")

    def append(self, record: Mapping[str, Any]) -> None:
        if self._f is None:
            self._open()
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def rewrite(self, records: list[Mapping[str, Any]]) -> None:
        from .output import replace_atomically

        self.close()
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        replace_atomically(self.path, lambda f: f.write(data))
