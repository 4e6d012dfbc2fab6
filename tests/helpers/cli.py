"""A command's run read back: its error lines; a JSON-lines input written: test_batch.py, test_book.py,
test_book_hostile.py, test_dub.py, test_hostile.py, test_ray.py."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> Path:
    """Rows are dicts (dumped as JSON) or raw strings (written as they are)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows))
    return path


def errors_of(result) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
