"""Dialogue scripts and the cast: `say --cast NAME=VOICE -f script.txt` (dialogue.py,
commands/dialogue.py). Fast tests on FakeEngine; slow ones on the tiny checkpoint: line i equals
`say` of that line with its voice and seed + i, and the gaps are exact silence."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import soundfile as sf
import torch
import webvtt
from conftest import TINY_CKPT, error_line, files_in

from omnivoice_cli.app.say import dialogue
from omnivoice_cli.app.say.dialogue import Cast, Member
from omnivoice_cli.app.voices.design import voice_prompt
from omnivoice_cli.engine.errors import InvalidRequest

SR = 24000
SCRIPT = """# a two-speaker script
ALICE: Hello there, Bob.

bob: Hi Alice. How are you?
ALICE: Fine, thank you.
"""


@pytest.fixture
def voice_file(tmp_path):
    """A voice file (random codes for the tiny model's 8 codebooks)."""
    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    codes = torch.randint(0, 1024, (8, 40), generator=torch.Generator().manual_seed(0))
    path = tmp_path / "bob.safetensors"
    save_voice(path, VoicePrompt(codes, "This is what Bob said.", 0.05))
    return path


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "script.txt"
    p.write_text(SCRIPT, encoding="utf-8")
    return p


# ------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "spec, member",
    [
        ("ALICE=alice", Member("ALICE", "voice", "alice")),
        (" Dr. Who = ./who.safetensors ", Member("Dr. Who", "voice", "./who.safetensors")),
        ("N=instruct:male, low pitch", Member("N", "instruct", "male, low pitch")),
        ("N=INSTRUCT: female", Member("N", "instruct", "female")),
        ("N=auto", Member("N", "auto", None)),
        ("N=a=b", Member("N", "voice", "a=b")),
    ],
)
def test_parse_member(spec, member):
    assert dialogue.parse_member(spec) == member


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ALICE", "expected NAME=VOICE"),
        ("=alice", "expected NAME=VOICE"),
        ("A=", "expected NAME=VOICE"),
        ("A:B=x", "without ':'"),
        ("A=instruct:", "needs voice-design items"),
    ],
)
def test_bad_members(spec, message):
    with pytest.raises(InvalidRequest, match=message):
        dialogue.parse_member(spec)


def test_cast_names_are_case_insensitive_and_unique():
    cast = Cast.parse(["Alice=auto", "BOB=auto"])
    assert cast.find("ALICE").name == "Alice" and cast.find(" bob ").name == "BOB" and cast.find("Eve") is None
    with pytest.raises(InvalidRequest, match="--cast alice is given twice"):
        Cast.parse(["Alice=auto", "alice=x"])


@pytest.mark.parametrize(
    "text, label",
    [
        ("ALICE: hi", ("ALICE", "hi")),
        ("Dr. Smith:  hi there", ("Dr. Smith", "hi there")),
        ("ALICE:", ("ALICE", "")),
        ("At 10:30 we met", (None, "At 10:30 we met")),
        ("10: ten", (None, "10: ten")),
        ("Note:that", (None, "Note:that")),
        ("no label here", (None, "no label here")),
        ("A" * 41 + ": x", (None, "A" * 41 + ": x")),
    ],
)
def test_split_label(text, label):
    assert dialogue.split_label(text) == label


def test_cue_speakers():
    cast = Cast.parse(["ALICE=auto", "Bob=auto"])
    assert dialogue.cue_speaker("ALICE: hi", None, cast, "x")[0].name == "ALICE"
    assert dialogue.cue_speaker("bob: hi", None, cast, "x") == (cast.find("Bob"), "hi")
    assert dialogue.cue_speaker("Note: hi", None, cast, "x") == (None, "Note: hi")  # text, not a speaker
    assert dialogue.cue_speaker("hi", "Bob", cast, "x") == (cast.find("Bob"), "hi")  # a voice span
    with pytest.raises(InvalidRequest, match=r"x: speaker 'CAROL' is not in the cast \(ALICE, Bob\)"):
        dialogue.cue_speaker("CAROL: hi", None, cast, "x")  # a label in capitals
    with pytest.raises(InvalidRequest, match="speaker 'Eve' is not in the cast"):
        dialogue.cue_speaker("hi", "Eve", cast, "x")
    assert dialogue.cue_speaker("ALICE: hi", None, Cast(), "x") == (None, "ALICE: hi")  # no cast: all text


def test_parse_script():
    cast = Cast.parse(["ALICE=auto", "BOB=auto"])
    lines = dialogue.parse_script(SCRIPT, cast, "s.txt")
    assert [(ln.number, ln.speaker.name, ln.text) for ln in lines] == [
        (2, "ALICE", "Hello there, Bob."),
        (4, "BOB", "Hi Alice. How are you?"),
        (5, "ALICE", "Fine, thank you."),
    ]
    with pytest.raises(
        InvalidRequest, match=r"s.txt: line 2: no speaker: begin the line with NAME: \(the cast: ALICE, BOB\)"
    ):
        dialogue.parse_script("ALICE: hi\njust words\n", cast, "s.txt")
    with pytest.raises(InvalidRequest, match=r"s.txt: line 1: speaker 'Eve' is not in the cast \(ALICE, BOB\)"):
        dialogue.parse_script("Eve: hi\n", cast, "s.txt")
    with pytest.raises(InvalidRequest, match="has no lines to speak"):
        dialogue.parse_script("# nothing\n\n", cast, "s.txt")
    with pytest.raises(InvalidRequest, match=r"s.txt has 20001 lines, more than 20000"):
        dialogue.parse_script("ALICE: x\n" * 20_001, cast, "s.txt")


# ------------------------------------------------------------------------------------ fake engine


def test_dialogue_lines_voices_seeds_and_gaps(invoke, fake_engine, home, script, voice_file, tmp_path):
    out, subs = tmp_path / "show.wav", tmp_path / "show.vtt"
    r = invoke(
        "say",
        "-f",
        script,
        "--cast",
        "ALICE=instruct:female, low pitch",
        "--cast",
        f"BOB={voice_file}",
        "--seed",
        10,
        "-o",
        out,
        "--subtitles",
        subs,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    reqs = fake_engine.requests
    assert [(q.text, q.seed, q.instruct, q.ref is not None) for q in reqs] == [
        ("Hi Alice. How are you?", 11, None, True),
        ("Fine, thank you.", 12, "female, low pitch", True),  # ALICE's voice, cloned by every later line
    ]
    # ALICE's voice: her first line rendered once, as itself (that take is the line: not generated again)
    [render] = fake_engine.rendered
    assert (render.text, render.seed, render.instruct, render.ref) == (
        "Hello there, Bob.",
        10,
        "female, low pitch",
        None,
    )
    audio, rate = sf.read(str(out), dtype="float32")
    gap = round(0.3 * SR)
    assert len(audio) == 3 * SR + 2 * gap  # the fake engine makes 1 s a line
    for i in (0, 1):  # the gaps are silence
        start = (i + 1) * SR + i * gap
        assert not audio[start : start + gap].any()
    report = json.loads(r.stdout)
    alice = [ln["voice_prompt"] for ln in report["lines"] if ln["speaker"] == "ALICE"]
    assert alice[0] == alice[1] == voice_prompt(reqs[1].ref)
    assert [(ln["line"], ln["speaker"], ln["seed"], ln["start_seconds"]) for ln in report["lines"]] == [
        (2, "ALICE", 10, 0.0),
        (4, "BOB", 11, 1.3),
        (5, "ALICE", 12, 2.6),
    ]
    caps = webvtt.read(str(subs)).captions
    assert [(c.voice, c.start, c.end) for c in caps] == [
        ("ALICE", "00:00:00.000", "00:00:01.000"),
        ("BOB", "00:00:01.300", "00:00:02.300"),
        ("ALICE", "00:00:02.600", "00:00:03.600"),
    ]


def test_gap_option(invoke, fake_engine, home, script, tmp_path):
    r = invoke(
        "say", "-f", script, "--cast", "ALICE=auto", "--cast", "BOB=auto", "--gap", "0", "-o", tmp_path / "a.wav"
    )
    assert r.exit_code == 0, r.stderr
    assert len(sf.read(str(tmp_path / "a.wav"))[0]) == 3 * SR


def test_gaps_are_bounded(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "long.txt"
    src.write_text("A: x\n" * 62)
    r = invoke("say", "-f", src, "--cast", "A=auto", "--gap", "60", "-o", tmp_path / "a.wav")
    assert r.exit_code == 2 and "more than 1 h of silence" in error_line(r)
    assert not (tmp_path / "a.wav").exists() and fake_engine.loads == []


def test_dry_run_speaks_nothing(invoke, fake_engine, home, script, tmp_path):
    r = invoke(
        "say",
        "-f",
        script,
        "--cast",
        "ALICE=auto",
        "--cast",
        "BOB=instruct:male",
        "--dry-run",
        "--json",
        "--seed",
        4,
        "-o",
        tmp_path / "a.wav",
    )
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [(x["line"], x["speaker"], x["seed"]) for x in rows] == [(2, "ALICE", 4), (4, "BOB", 5), (5, "ALICE", 6)]
    assert fake_engine.loads == [] and not (tmp_path / "a.wav").exists()


def test_dry_run_shows_the_shared_settings_once_then_a_row_per_line(invoke, fake_engine, home, script, tmp_path):
    """A person's dry run of a script: the settings every line shares once, a row per line with
    what is its own (the cast's voice, the seed), then where the audio goes."""
    out = tmp_path / "show.wav"
    args = ["say", "-f", script, "--cast", "ALICE=auto", "--cast", "BOB=instruct:male, low pitch"]
    r = invoke(*args, "--seed", 4, "--dry-run", "-o", out)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert sum("num_step = 32" in ln for ln in lines) == 1 and sum(ln.startswith("  model = ") for ln in lines) == 1
    rows = [ln for ln in lines if re.match(r"^ +\d+\. (ALICE|BOB) \(", ln)]
    assert [re.match(r" +(\d+)\. (\w+)", ln).groups() for ln in rows] == [("2", "ALICE"), ("4", "BOB"), ("5", "ALICE")]
    assert "instruct='male, low pitch'" in rows[1] and "seed=5" in rows[1] and "instruct" not in rows[0]
    assert lines.index(rows[-1]) < len(lines) - 1 and lines[-1] == f"output: {out}"
    assert len(lines) < 40
    assert fake_engine.loads == [] and not out.exists()


def test_script_from_the_command_line(invoke, fake_engine, home, tmp_path):
    r = invoke("say", "ALICE: Just one line.", "--cast", "ALICE=auto", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["Just one line."]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--cast", "ALICE=auto"],
            "script.txt: line 4: speaker 'bob' is not in the cast (ALICE): add --cast bob=VOICE",
        ),
        (["--cast", "ALICE=auto", "--cast", "BOB=nosuch"], "--cast BOB: unknown voice 'nosuch'"),
        (["--cast", "ALICE=auto", "--cast", "BOB=instruct:purple"], "--cast BOB: unsupported instruct item"),
        (["--cast", "ALICE=auto", "--cast", "BOB=auto", "--gap", "-1"], "--gap must be seconds in 0..60"),
        (["--cast", "ALICE=auto", "--cast", "BOB=auto", "--gap", "nan"], "--gap must be seconds in 0..60"),
        (["--cast", "ALICE=auto", "--cast", "BOB=auto", "--subtitles", "x.txt"], "--subtitles 'x.txt' has extension"),
        (["--cast", "ALICE=auto", "--cast", "BOB=auto", "--num-step", "0"], "--num-step must be"),
        (["--cast", "ALICE=auto", "--cast", "BOB=auto", "--seed", str(2**63 - 2)], "is more than"),
        (["--gap", "1"], "--gap sets the silence between the lines of a dialogue: give --cast too"),
    ],
)
def test_bad_dialogue_writes_nothing(invoke, fake_engine, home, script, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    before = files_in(tmp_path)
    r = invoke("say", "-f", "script.txt", "-o", "a.wav", *args)
    assert r.exit_code == 2, r.stderr
    assert message in error_line(r)
    assert files_in(tmp_path) == before and fake_engine.loads == []


# ------------------------------------------------------------------------------------ real engine (slow)


@pytest.mark.slow
def test_each_line_equals_say(invoke, home, script, voice_file, tmp_path, monkeypatch):
    from omnivoice_cli.engine import pipeline

    engine = pipeline.Engine.load(str(TINY_CKPT))
    monkeypatch.setattr(pipeline, "Engine", type("Loaded", (), {"load": classmethod(lambda cls, *a, **k: engine)}))
    out = tmp_path / "show.wav"
    voices = {"ALICE": ["--instruct", "female, low pitch"], "BOB": ["--voice", str(voice_file)]}
    r = invoke(
        "say",
        "-f",
        script,
        "--cast",
        "ALICE=instruct:female, low pitch",
        "--cast",
        f"BOB={voice_file}",
        "--seed",
        5,
        "--gap",
        "0.25",
        "--num-step",
        4,
        "--model",
        TINY_CKPT,
        "-o",
        out,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    show = sf.read(str(out), dtype="int16")[0]
    pos, gap = 0, round(0.25 * SR)
    lines = json.loads(r.stdout)["lines"]
    # ALICE's voice is her first line as spoken (app/voices/design.py: render_line), that line a design
    # request; every later line of hers clones it
    from omnivoice_cli.app.voices.design import render_line
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.sound.voice import save_voice

    first = next(ln for ln in lines if ln["speaker"] == "ALICE")
    spoken = Request(text=first["text"], instruct="female, low pitch", seed=first["seed"])
    alice = render_line(engine, dataclasses.replace(spoken, generation=GenerationConfig(num_step=4)))[0]
    save_voice(tmp_path / "alice.safetensors", alice)
    assert {ln["voice_prompt"] for ln in lines if ln["speaker"] == "ALICE"} == {voice_prompt(alice)}
    cloned = {"ALICE": ["--voice", str(tmp_path / "alice.safetensors")], "BOB": []}
    for i, line in enumerate(lines):
        solo_path = tmp_path / f"line{i}.wav"
        s = invoke(
            "say",
            line["text"],
            *voices[line["speaker"]],
            *(cloned[line["speaker"]] if line is not first else []),
            "--seed",
            5 + i,
            "--num-step",
            4,
            "--model",
            TINY_CKPT,
            "-o",
            solo_path,
            "-q",
        )
        assert s.exit_code == 0, s.stderr
        solo = sf.read(str(solo_path), dtype="int16")[0]
        assert line["seed"] == 5 + i and round(line["start_seconds"] * SR) == pos
        assert np.array_equal(show[pos : pos + len(solo)], solo), i
        pos += len(solo)
        if i < 2:
            assert not show[pos : pos + gap].any()  # the gap: exact silence
            pos += gap
    assert pos == len(show)
