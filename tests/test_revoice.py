"""`omnivoice revoice` (app/edit/revoice.py, through dub's run): the take's words become timed
cues, every word of the output lands within its slot in the take (dub's own placement), the
output is as long as the take; a subtitle file of the take gives the cues outright."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from helpers.listening import Heard

from omnivoice_cli.app.edit.revoice import group_words
from omnivoice_cli.app.listening import listen

# (word, start, end) as heard in the take: two phrases apart by a pause
HEARD = [("Hello", 0.30, 0.60), ("there.", 0.70, 1.00), ("How", 1.80, 2.10), ("are", 2.20, 2.40), ("you?", 2.50, 2.90)]
PAD = 0.2  # what dub's placement may run past a cue's end (its 0.1 s fade-out and 0.1 s silence)


TAKE = listen.Transcript(" ".join(w for w, _, _ in HEARD), tuple(listen.Word(*w) for w in HEARD))


@pytest.fixture
def take(tmp_path):
    rate = 16000
    t = np.arange(int(3.5 * rate)) / rate
    sf.write(str(tmp_path / "take.wav"), (0.1 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), rate)
    return tmp_path / "take.wav"


def test_words_are_grouped_into_cues_at_the_pauses():
    cues = group_words(HEARD)
    assert [(c.start_ms, c.end_ms, c.text) for c in cues] == [(300, 1000, "Hello there."), (1800, 2900, "How are you?")]
    many = [(f"w{i}", i * 0.5, i * 0.5 + 0.4) for i in range(40)]  # no pause: cut by length
    assert all(c.end_ms - c.start_ms <= 8000 for c in group_words(many))


def test_revoice_speaks_every_word_within_its_slot(invoke, fake_engine, take, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    rec = Heard(["Hello there.", "How are you?"], first=TAKE)  # the take's words; then each cue's (--words)
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    out, wj = tmp_path / "alice.wav", tmp_path / "alice.words.json"
    r = invoke("revoice", take, "--instruct", "female", "-o", out, "--seed", "2", "--words", wj, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    slots = [(c["start_seconds"], c["end_seconds"]) for c in report["cues"]]
    assert slots == [(0.3, 1.0), (1.8, 2.9)]
    # the first cue designs the voice: generated once, as its render (FakeEngine keeps it apart)
    reqs = sorted(fake_engine.requests + fake_engine.rendered, key=lambda q: q.seed)
    assert [req.duration for req in reqs] == [pytest.approx(0.7), pytest.approx(1.1)]
    audio, rate = sf.read(out)
    assert len(audio) / rate == pytest.approx(3.5, abs=1e-3)  # as long as the take
    rows = json.loads(wj.read_text())["words"]
    assert [row["word"] for row in rows] == ["hello", "there", "how", "are", "you"]
    for row in rows:
        start, end = slots[row["cue"] - 1]
        assert start <= row["start"] <= row["end"] <= end + PAD, row


def test_revoice_with_a_subtitle_file_and_its_errors(invoke, fake_engine, take, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    srt = tmp_path / "take.srt"
    srt.write_text("1\n00:00:00,300 --> 00:00:01,000\nHello there.\n\n2\n00:00:01,800 --> 00:00:02,900\nHow are you?\n")
    r = invoke("revoice", take, "--cues", srt, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    cues = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(c["start"], c["end"], c["text"]) for c in cues] == [
        ("00:00:00.300", "00:00:01.000", "Hello there."),
        ("00:00:01.800", "00:00:02.900", "How are you?"),
    ]
    srt.write_text("1\n00:00:05,000 --> 00:00:06,000\nLate.\n")
    out = tmp_path / "o.wav"
    r = invoke("revoice", take, "--cues", srt, "-o", out)
    assert r.exit_code == 2 and "after the end of the take" in r.stderr and not out.exists()
    r = invoke("revoice", tmp_path / "missing.wav", "--cues", srt, "-o", out)
    assert r.exit_code == 2 and "cannot read it as audio" in r.stderr and not out.exists()


def test_revoice_takes_dubs_shared_options_with_the_same_refusals(invoke, take, tmp_path):
    """revoice is a dub of the take's words: every option of dub's it shares (the settings, -o,
    --words, --dry-run, --json, --preset, -q) is declared alike and refused alike."""
    import typer.main

    from omnivoice_cli.cli import app
    from omnivoice_cli.commands.edit import REVOICE_SETTINGS

    group = typer.main.get_command(app)

    def options(name):
        cmd = group.get_command(None, name)
        return {p.name: p for p in cmd.params}

    dub, revoice = options("dub"), options("revoice")
    shared = {*REVOICE_SETTINGS, "output", "words_file", "dry_run", "json_out", "preset", "quiet"}
    assert shared <= dub.keys() and shared <= revoice.keys()
    for name in shared:
        a, b = dub[name], revoice[name]
        assert (a.opts, a.secondary_opts, a.metavar, a.is_flag) == (b.opts, b.secondary_opts, b.metavar, b.is_flag)
        assert a.rich_help_panel == b.rich_help_panel, name
        if name in REVOICE_SETTINGS or name in ("preset", "quiet"):
            assert a.help == b.help, name
    srt = tmp_path / "take.srt"
    srt.write_text("1\n00:00:00,300 --> 00:00:01,000\nHello there.\n")
    for bad, said in ((["--words", tmp_path / "w.txt"], "--words writes JSON"), (["--seed", "x"], "--seed")):
        dubbed = invoke("dub", srt, "-o", tmp_path / "d.wav", *bad)
        revoiced = invoke("revoice", take, "--cues", srt, "-o", tmp_path / "r.wav", *bad)
        assert dubbed.exit_code == revoiced.exit_code == 2
        assert said in dubbed.stderr and dubbed.stderr == revoiced.stderr.replace("omnivoice revoice", "omnivoice dub")
