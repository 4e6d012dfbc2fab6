"""app/batch/manifest.py: the batch manifest's records are what `LineRecord` says they are (its keys,
a "done" record's fingerprint of its file)."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from omnivoice_cli.app.batch.manifest import MANIFEST, LineRecord, Status, fingerprint, is_recorded

STATUSES = set(typing.get_args(Status))


def _records(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / MANIFEST).read_text().splitlines()]


def test_every_record_of_a_batch_has_the_fields_of_a_line_record(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "jobs.jsonl"
    rows = [{"text": "First.", "id": "a"}, {"text": "Bad.", "num_step": 0}, {"text": "Third."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    out.mkdir()
    (out / "0003.wav").write_bytes(b"made elsewhere")  # skipped: no record says how it was made
    r = invoke("batch", src, "-o", out, "--seed", "5", "-q")
    assert r.exit_code == 1, r.stderr

    records = _records(out)
    assert [rec["status"] for rec in records] == ["done", "failed", "skipped"]
    required, optional = LineRecord.__required_keys__, LineRecord.__optional_keys__
    for rec in records:
        assert rec["status"] in STATUSES
        assert required <= set(rec) <= required | optional, set(rec) ^ required
    done = records[0]
    assert {k for k in optional if k in done} == {"bytes", "sha256"}  # no --verify: no scores
    assert {"bytes": done["bytes"], "sha256": done["sha256"]} == fingerprint(out / done["output"])
    assert is_recorded(out, done["output"], done) and not is_recorded(out, "0003.wav", records[2])
    assert done["id"] == "a" and done["seed"] == 5 and done["settings"]["num_step"] == 32
