"""`--dry-run`: what would be spoken, never loading the model; the text options of issue 14."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import GOLDEN, ROOT


def dry(invoke, *args):
    r = invoke("say", *args, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout), r


def test_plain_text(invoke, fake_engine):
    report, r = dry(invoke, "Hello there.", "--seed", "7")
    assert report["text"] == "Hello there." and report["lang"] is None and report["seed"] == 7
    assert [p["text"] for p in report["pieces"]] == ["Hello there."]
    assert report["pieces"][0]["seconds"] > 0 and report["pauses"] == [0.0, 0.0]
    assert report["settings"]["num_step"] == {"value": 32, "from": "default"}
    assert report["settings"]["seed"] == {"value": 7, "from": "flag"}
    assert fake_engine.loads == [] and fake_engine.requests == []


def test_a_long_text_shows_its_chunks(invoke, fake_engine):
    text = " ".join(f"Sentence number {i} goes on for a little while, as sentences do." for i in range(30))
    report, _ = dry(invoke, text, "--chunk-duration", "10")
    assert len(report["pieces"]) > 2
    assert " ".join(p["text"] for p in report["pieces"]) == text
    assert all(p["seconds"] <= 30 for p in report["pieces"])
    assert report["settings"]["chunk_duration"] == {"value": 10.0, "from": "flag"}


def test_pauses_and_duration(invoke, fake_engine):
    report, _ = dry(invoke, "First part. [pause 1.5s] Second part. [pause 500ms]")
    assert [p["text"] for p in report["pieces"]] == ["First part.", "Second part."]
    assert report["pauses"] == [0.0, 1.5, 0.5]
    report, _ = dry(invoke, "Exactly two seconds.", "--duration", "2")
    assert report["pieces"][0]["seconds"] == 2.0


def test_normalised_text_and_language_tag(invoke, fake_engine):
    pytest.importorskip("kaldifst")
    report, _ = dry(invoke, "I have 23 apples [laughter].", "--normalize", "--lang", "en-US")
    assert report["text"] == "I have twenty three apples [laughter]."
    assert report["lang"] == "en"
    assert report["settings"]["normalize"] == {"value": True, "from": "flag"}
    report, _ = dry(invoke, "I have 23 apples.")
    assert report["text"] == "I have 23 apples."  # off by default


def test_preset_driven(invoke, fake_engine, tmp_path):
    preset = tmp_path / "mine.toml"
    preset.write_text('num_step = 12\nlang = "German"\n')
    report, _ = dry(invoke, "Guten Tag.", "--preset", preset, "--num-step", "10")
    assert report["lang"] == "de"
    assert report["settings"]["num_step"] == {"value": 10, "from": "flag"}
    assert report["settings"]["lang"] == {"value": "German", "from": "preset mine"}


def test_human_readable_dry_run(invoke, fake_engine):
    r = invoke("say", "Hello. [pause 1s] Bye.", "--dry-run", "--preset", "fast")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("text: Hello. [pause 1s] Bye.\nlang: none")
    assert "pauses: 1 s" in r.stdout and "num_step = 16  (preset fast)" in r.stdout
    assert fake_engine.loads == []


def test_batch_dry_run_writes_nothing(invoke, fake_engine, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text('{"text": "One.", "num_step": 4}\n{"text": "Two.", "num_step": 0}\n{"text": "Three."}\n')
    r = invoke("batch", src, "-o", tmp_path / "out", "--dry-run", "--json", "--seed", "3")
    assert r.exit_code == 1  # line 2 is bad
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["line"], x["output"], x["seed"]) for x in rows] == [(1, "0001.wav", 3), (3, "0003.wav", 5)]
    assert rows[0]["settings"]["num_step"] == {"value": 4, "from": "line 1"}
    assert "line 2: field 'num_step' must be an integer in 1..64, got 0" in r.stderr
    assert not (tmp_path / "out").exists() and fake_engine.loads == []


@pytest.mark.slow
def test_dry_run_imports_no_torch(tmp_path):
    code = (
        "import sys\n"
        "from omnivoice_cli.cli import main\n"
        "sys.argv = ['omnivoice', 'say', 'Hello. [pause 1s] Bye.', '--dry-run', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('TORCH', 'torch' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNIVOICE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(out.stdout)["pauses"] == [0.0, 1.0, 0.0], out.stderr
    assert "TORCH False" in out.stderr


def test_ssml_warns_and_breaks_become_pauses(invoke, fake_engine, tmp_path):
    text = '<speak>Hello <break time="500ms"/> <emphasis>world</emphasis>.</speak>'
    report, r = dry(invoke, text)
    assert report["text"] == "Hello [pause 500ms] world."
    assert report["pauses"] == [0.0, 0.5, 0.0]
    assert any("SSML" in w for w in report["warnings"])


def test_markdown_is_read_as_words(invoke, fake_engine):
    report, _ = dry(invoke, "Read **this** and [the docs](https://example.com).", "--markdown")
    assert report["text"] == "Read this and the docs."


def test_a_short_transcript_warns_and_the_fixtures_do_not(invoke, fake_engine, tmp_path):
    ref = GOLDEN / "ref_24k.wav"
    clone = json.loads((GOLDEN / "clone.json").read_text())
    real = clone["generate_kwargs"]["ref_text"]
    r = invoke("say", "Hi.", "--ref", ref, "--ref-text", real, "--dry-run")
    assert r.exit_code == 0 and "Warning" not in r.stderr, r.stderr
    r = invoke("say", "Hi.", "--ref", ref, "--ref-text", "Hi", "--dry-run")
    assert r.exit_code == 0
    assert "is the transcript complete?" in r.stderr


def test_dry_run_with_stream_shows_the_pieces_stream_runs(invoke, fake_engine):
    """--stream cuts at sentences: its dry run shows those pieces, not the whole render's chunk."""
    text = "The first sentence is short. The second one is a little longer than the first. And a third one to end."
    whole, _ = dry(invoke, text)
    streamed, r = dry(invoke, text, "--stream")
    assert len(whole["pieces"]) == 1 and whole["render"] == "whole"
    assert streamed["render"] == "streamed" and len(streamed["pieces"]) > 1
    assert " ".join(p["text"] for p in streamed["pieces"]) == text
    shown = invoke("say", text, "--stream", "--dry-run").stdout
    assert "--stream: a piece per sentence" in shown and "  2. " in shown
