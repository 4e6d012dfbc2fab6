"""A render that is all silence (a broken checkpoint's, its silence trimmed to nothing) is a
failure said in one line (exit 1), and no file is written (app/deliver.check_not_silent)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import error_line


@pytest.fixture(params=[0, 24000], ids=["trimmed-to-nothing", "a-second-of-zeros"])
def silent_engine(request, fake_engine, monkeypatch):
    """The fake engine, its audio replaced by `param` samples of silence."""
    made = fake_engine.generate

    def generate(self, requests, on_step=None, on_result=None, **kw):
        out = [dataclasses.replace(r, audio=np.zeros(request.param, np.float32)) for r in made(self, requests, on_step)]
        for i, r in enumerate(out):
            if on_result is not None:
                on_result(i, r)
        return out

    monkeypatch.setattr(fake_engine, "generate", generate)
    return request.param / 24000


def test_say_writes_no_file_of_silence(invoke, silent_engine, tmp_path):
    out = tmp_path / "s.wav"
    r = invoke("say", "Hello.", "-o", out, "--subtitles", tmp_path / "s.srt")
    assert r.exit_code == 1, r.stderr
    assert error_line(r) == (
        f"Error: the speech came out silent ({silent_engine:.2f} s of silence after trimming): nothing was "
        f"written to {out}; the model (--model) may be broken"
    )
    assert list(tmp_path.iterdir()) == []  # neither the audio nor its subtitles
    r = invoke("say", "Hello.", "-o", "-")
    assert r.exit_code == 1 and r.stdout_bytes == b"", r.stderr
    assert "the speech came out silent" in error_line(r)


def test_a_silent_batch_line_fails_alone(invoke, silent_engine, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\n")
    r = invoke("batch", lines, "-o", tmp_path / "out")
    assert r.exit_code == 1, r.stderr
    [record] = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert record["status"] == "failed" and "the speech came out silent" in record["error"]
    assert not (tmp_path / "out" / "0001.wav").exists()
