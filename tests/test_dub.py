"""`omnivoice dub`: cues to requests, placement on the track, stems, resume, bad input.

Fast tests run on FakeEngine (conftest.py: seeded noise exactly as long as the request's duration).
Tests marked slow run the tiny real checkpoint: each cue's audio equals `omnivoice say` of its text
with --duration set to the cue's length and --seed S + its index, sample for sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT, error_line, fake_audio, files_in

from omnivoice_cli.app.dub import dubplan
from omnivoice_cli.media import tracks

SR = 24000

# gaps, an overlap (cues 2 and 3), an empty cue (4), a 40 s cue (5), markup and a speaker label
EPISODE = """1
00:00:01,000 --> 00:00:02,500
<i>Hello</i> there.

2
00:00:03,000 --> 00:00:04,000
ALICE: {\\an8}The second cue.

3
00:00:03,500 --> 00:00:05,000
<b>Overlapping</b> it.

4
00:00:06,000 --> 00:00:07,000


5
00:00:08,000 --> 00:00:48,000
This is a very long cue. It has several sentences in it. It lasts forty seconds in all, so it must be cut.

6
00:00:49,000 --> 00:00:50,200
BOB: The end.
"""


def wav16(x: np.ndarray) -> np.ndarray:
    """As a 16-bit WAV file written by the tool holds it."""
    import io

    from omnivoice_cli.media.output import encode

    return sf.read(io.BytesIO(encode(x, SR)), dtype="int16")[0]


@pytest.fixture
def episode(tmp_path) -> Path:
    p = tmp_path / "episode.srt"
    p.write_text(EPISODE, encoding="utf-8")
    return p


def read16(path) -> np.ndarray:
    data, rate = sf.read(str(path), dtype="int16")
    assert rate == SR
    return data


# ------------------------------------------------------------------------------------ fake engine


def test_dub_places_every_cue(invoke, fake_engine, home, episode, tmp_path):
    out, stems = tmp_path / "track.wav", tmp_path / "stems"
    r = invoke(
        "dub",
        episode,
        "-o",
        out,
        "--seed",
        100,
        "--cast",
        "ALICE=auto",
        "--cast",
        "BOB=instruct:male",
        "--stems",
        stems,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    track = read16(out)
    assert len(track) == 50_200 * 24  # the last end, to the sample
    # BOB's one cue designs his voice: generated once, as its render (FakeEngine keeps it apart)
    reqs = sorted(fake_engine.requests + fake_engine.rendered, key=lambda q: q.seed)
    # one request per cue, two or more for the 40 s cue; empty cue 4 skipped; markup and labels gone
    assert [q.text for q in reqs][:3] == ["Hello there.", "The second cue.", "Overlapping it."]
    assert reqs[-1].text == "The end." and reqs[-1].instruct == "male"
    long = [q for q in reqs if q.seed == 104]
    assert len(long) >= 2 and all(q.duration <= 30 for q in long)
    assert round(sum(q.duration for q in long), 3) == 40.0 and " ".join(q.text for q in long) == (
        "This is a very long cue. It has several sentences in it. It lasts forty seconds in all, so it must be cut."
    )
    assert [q.seed for q in reqs if q.seed != 104] == [100, 101, 102, 105]  # cue i: seed + i
    assert [q.duration for q in reqs if q.seed != 104] == [1.5, 1.0, 1.5, 1.2]
    assert "cues 2 and 3 (lines 6 and 10)" in r.stderr  # the overlap is named
    cues = report["cues"]
    assert [c["status"] for c in cues] == ["done", "done", "done", "empty", "done", "done"]
    assert [c["speaker"] for c in cues] == [None, "ALICE", None, None, None, "BOB"]
    assert report["seed"] == 100 and report["audio_seconds"] == 50.2
    # every cue's audio starts at its start sample; stems equal their regions; silence elsewhere
    covered = np.zeros(len(track), bool)
    for c in cues:
        if c["status"] == "empty":
            assert c["output"] is None
            continue
        stem = read16(stems / c["output"])
        start = round(c["start_seconds"] * SR)
        covered[start : start + len(stem)] = True
        if c["cue"] not in (2, 3):  # not mixed with another cue
            assert np.array_equal(track[start : start + len(stem)], stem[: len(track) - start]), c["cue"]
    assert not track[~covered].any()
    # the stem of a single-piece cue is that request's audio
    assert np.array_equal(read16(stems / "0001.wav"), wav16(fake_audio(100, 1.5)))
    # the long cue: each piece at the start of its share of the slot
    pos = 8000 * 24
    for q in long:
        n = int(q.duration * SR)
        assert np.array_equal(track[pos : pos + n], wav16(fake_audio(104, q.duration)))
        pos += tracks.ms_to_samples(round(q.duration * 1000), SR)
    # overlapping cues are summed (each as its 16-bit stem holds it), then clipped
    mix = np.zeros(3 * SR, np.float32)
    mix[:SR] += sf.read(str(stems / "0002.wav"), dtype="float32")[0]
    mix[SR // 2 : SR // 2 + int(1.5 * SR)] += sf.read(str(stems / "0003.wav"), dtype="float32")[0]
    assert np.array_equal(track[3 * SR : 6 * SR], wav16(mix))
    assert np.abs(mix).max() > 1  # (the fake engine's noise does clip here)
    assert files_in(stems) == ["0001.wav", "0002.wav", "0003.wav", "0005.wav", "0006.wav", "manifest.jsonl"]


def test_the_track_is_cut_at_the_last_end(invoke, fake_engine, home, tmp_path, monkeypatch):
    """Audio running past the last end (here: a fake engine making 2 s for a 1 s cue) is cut."""
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:00,500 --> 00:00:01,500\nHi.\n")
    real = fake_engine.generate

    def longer(self, requests, on_step=None, on_result=None):
        import dataclasses

        return real(self, [dataclasses.replace(q, duration=2.0) for q in requests], on_step, on_result)

    monkeypatch.setattr(fake_engine, "generate", longer)
    r = invoke("dub", src, "-o", tmp_path / "t.wav", "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    track = read16(tmp_path / "t.wav")
    assert len(track) == 1500 * 24
    assert np.array_equal(track[12000:], wav16(fake_audio(1, 2.0))[:24000])


def test_vtt_voice_spans_pick_the_cast(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "a.vtt"
    src.write_text(
        "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Ann>Hi Bob.\n\n00:02.000 --> 00:03.000\n"
        "<v Bob>Hi Ann.\n\n00:03.000 --> 00:04.000\nNote: nobody.\n"
    )
    r = invoke(
        "dub", src, "--cast", "ann=instruct:female", "--cast", "BOB=auto", "--instruct", "male", "-q", "--seed", "0"
    )
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "a.wav").exists()  # the default output: beside the input
    # a designed voice's first cue is generated once, as its render (FakeEngine keeps it apart)
    reqs = sorted(fake_engine.requests + fake_engine.rendered, key=lambda q: q.seed)
    assert [(q.text, q.instruct) for q in reqs] == [
        ("Hi Bob.", "female"),
        ("Hi Ann.", None),
        ("Note: nobody.", "male"),
    ]


def test_a_reference_recording_for_cues_without_a_speaker(invoke, fake_engine, home, tmp_path):
    import shutil

    from conftest import GOLDEN

    shutil.copy(GOLDEN / "ref_24k.wav", tmp_path / "me.wav")
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:00,000 --> 00:00:01,000\nHi.\n\n2\n00:00:01,000 --> 00:00:02,000\nBOB: Hello.\n")
    r = invoke("dub", src, "--ref", tmp_path / "me.wav", "--ref-text", "What I said.", "--cast", "BOB=auto", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.encoder_loads == 1 and len(fake_engine.encoded) == 1  # encoded once
    assert [(q.text, q.ref is not None) for q in fake_engine.requests] == [("Hi.", True), ("Hello.", False)]


def test_stdout_and_json_on_stderr(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:00,000 --> 00:00:01,000\nHi.\n")
    r = invoke("dub", src, "-o", "-", "--json", "--seed", 3)
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes[:4] == b"RIFF"
    report = json.loads(r.stderr.strip().splitlines()[-1])
    assert report["path"] == "stdout" and report["cues"][0]["seed"] == 3


def test_rerun_with_stems_resumes(invoke, fake_engine, home, episode, tmp_path):
    out, stems = tmp_path / "t.wav", tmp_path / "stems"
    args = ("dub", episode, "-o", out, "--cast", "ALICE=auto", "--cast", "BOB=auto", "--stems", stems, "-q")
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    first, n = out.read_bytes(), len(fake_engine.requests)
    (stems / "0002.wav").unlink()
    fake_engine.requests.clear()
    r = invoke(*args)  # no --seed: the seed of the stems is kept; the track that exists is replaced
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["The second cue."]
    assert out.read_bytes() == first
    records = [json.loads(ln) for ln in (stems / "manifest.jsonl").read_text().splitlines()]
    assert [rec["status"] for rec in records] == ["reused", "done", "reused", "empty", "reused", "reused"]
    # a changed cue is spoken again; the others are reused
    episode.write_text(EPISODE.replace("</b> it.", "</b> that."))
    fake_engine.requests.clear()
    assert invoke(*args).exit_code == 0
    assert [q.text for q in fake_engine.requests] == ["Overlapping that."]
    fake_engine.requests.clear()
    assert invoke(*args, "--overwrite").exit_code == 0
    assert len(fake_engine.requests) == n
    fake_engine.requests.clear()
    assert invoke(*args, "--seed", 7).exit_code == 0  # another seed: every cue again
    assert len(fake_engine.requests) == n


def test_interrupted_dub_keeps_stems_and_writes_no_track(invoke, fake_engine, home, episode, tmp_path, monkeypatch):
    from omnivoice_cli.app.signals import Stop

    real = fake_engine.generate

    def stopped(self, requests, on_step=None, on_result=None):
        real(self, requests[:1], on_step, on_result)
        raise Stop(15)

    monkeypatch.setattr(fake_engine, "generate", stopped)
    r = invoke(
        "dub",
        episode,
        "-o",
        tmp_path / "t.wav",
        "--cast",
        "ALICE=auto",
        "--cast",
        "BOB=auto",
        "--stems",
        tmp_path / "stems",
        "--seed",
        1,
    )
    assert r.exit_code == 143
    assert "the track was not written" in error_line(r)
    assert not (tmp_path / "t.wav").exists()
    records = [json.loads(ln) for ln in (tmp_path / "stems" / "manifest.jsonl").read_text().splitlines()]
    assert [rec["status"] for rec in records] == ["done", "pending", "pending", "empty", "pending", "pending"]


CAST = ("--cast", "ALICE=auto", "--cast", "BOB=auto")


@pytest.mark.parametrize(
    "edit, args, message",
    [
        (
            lambda s: s.replace("00:00:03,000 --> 00:00:04,000", "00:00:03,000 => 00:00:04,000"),
            CAST,
            "episode.srt: line 5: not an SRT cue",
        ),
        (
            lambda s: s.replace("00:00:04,000", "00:00:02,000"),
            CAST,
            "episode.srt: line 6: the cue ends before it starts",
        ),
        (lambda s: s.replace("00:00:04,000", "00:00:61,000"), CAST, "episode.srt: line 6: invalid time '00:00:61,000'"),
        (
            lambda s: s,
            ("--cast", "ALICE=auto"),
            "episode.srt: line 22: speaker 'BOB' is not in the cast (ALICE): add --cast BOB=VOICE",
        ),
        (lambda s: s, (*CAST, "--cast", "CAROL=nosuch"), "--cast CAROL: unknown voice 'nosuch'"),
        (
            lambda s: s,
            (*CAST, "--cast", "CAROL=./missing.safetensors"),
            "--cast CAROL: voice file './missing.safetensors'",
        ),
        (lambda s: s, (*CAST, "--cast", "CAROL=instruct:purple"), "--cast CAROL: unsupported instruct item"),
        (lambda s: s, (*CAST, "--cast", "bob=auto"), "--cast bob is given twice"),
        (lambda s: s, ("--cast", "ALICE"), "--cast 'ALICE': expected NAME=VOICE"),
        (lambda s: s, ("--voice", "nosuch", *CAST), "--voice: unknown voice 'nosuch'"),
        (
            lambda s: s.replace("Hello</i> there.", "Hello [pause 1s] there."),
            CAST,
            "episode.srt: line 2: [pause] tags cannot be used in a cue",
        ),
        (lambda s: s.replace("00:00:50,200", "05:00:50,200"), CAST, "more than 4 h"),
        (lambda s: "", CAST, "has no cues"),
        (
            lambda s: s.replace("BOB: The end.", "BOB: " + "Far too many words for a second. " * 40),
            CAST,
            "episode.srt: line 22: the cue's words take about",
        ),
        (lambda s: s, (*CAST, "--seed", str(2**63 - 2)), "is more than"),
    ],
)
def test_bad_input_writes_nothing(invoke, fake_engine, home, episode, tmp_path, edit, args, message):
    episode.write_text(edit(EPISODE))
    before = files_in(tmp_path)
    r = invoke("dub", episode, "-o", tmp_path / "t.wav", "--stems", tmp_path / "stems", *args)
    assert r.exit_code == 2, r.stderr
    assert message in error_line(r)
    assert files_in(tmp_path) == before  # no track, no stems folder
    assert fake_engine.loads == []


@pytest.mark.parametrize("name, message", [("a.txt", "give an .srt or .vtt file"), ("missing.srt", "does not exist")])
def test_bad_input_file(invoke, fake_engine, home, tmp_path, name, message):
    if name == "a.txt":
        (tmp_path / name).write_text(EPISODE)
    r = invoke("dub", tmp_path / name, "-o", tmp_path / "t.wav")
    assert r.exit_code == 2 and message in error_line(r)


def test_the_number_of_cues_is_bounded(invoke, fake_engine, home, tmp_path, monkeypatch):
    monkeypatch.setattr(dubplan, "MAX_CUES", 3)
    src = tmp_path / "a.srt"
    src.write_text("".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},500\nHi.\n\n" for i in range(1, 5)))
    r = invoke("dub", src, "-o", tmp_path / "t.wav")
    assert r.exit_code == 2 and "4 cues, more than 3 in one dub" in error_line(r)


def test_bad_output_fails_before_reading(invoke, fake_engine, home, episode, tmp_path):
    r = invoke("dub", episode, "-o", tmp_path / "t.mp4")
    assert r.exit_code == 2 and "'.mp4'" in error_line(r)


def test_a_presets_speed_and_chunks_do_not_apply(invoke, fake_engine, home, episode, tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("speed = 1.5\nchunk_threshold = 5.0\nnum_step = 7\n")
    r = invoke("dub", episode, "-o", tmp_path / "t.wav", *CAST, "--preset", preset, "-q")
    assert r.exit_code == 0, r.stderr
    assert "ignored" not in r.stderr  # no "speed is ignored" warnings
    q = fake_engine.requests[0]
    assert (q.speed, q.generation.num_step, q.generation.audio_chunk_threshold) == (None, 7, 30.0)


def test_warnings_are_shown_once(invoke, fake_engine, home, episode, tmp_path):
    fake_engine.result_warnings = ["something odd"]
    r = invoke("dub", episode, "-o", tmp_path / "t.wav", *CAST, "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("Warning: something odd") == 1
    r = invoke("dub", episode, "-o", tmp_path / "t.wav", *CAST, "--lang", "xx-nowhere", "-q")
    assert r.exit_code == 2 and "unknown language 'xx-nowhere'" in r.stderr  # refused: --lang none for any


def test_unused_cast_member_is_a_warning(invoke, fake_engine, home, episode, tmp_path):
    r = invoke("dub", episode, "-o", tmp_path / "t.wav", *CAST, "--cast", "CAROL=auto", "-q")
    assert r.exit_code == 0, r.stderr
    assert "Warning: --cast CAROL speaks no cue" in r.stderr


@pytest.mark.slow
def test_help_does_not_import_torch():
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import sys; from omnivoice_cli.cli import app\ntry: app(['dub', '--help'])\nexcept SystemExit: pass\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "COLUMNS": "100"},
    )
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr


def test_cue_pieces_fill_the_slot():
    text = "This is the first sentence of a long cue. It goes on and on for a while, with more words. The end."
    for ms in (30_000, 40_000, 61_000, 100_000):
        pieces = tracks.cue_pieces(text, ms)
        assert sum(p for _, p in pieces) == ms and all(0 < p <= 30_000 for _, p in pieces)
        assert " ".join(t for t, _ in pieces).split() == text.split()
    assert tracks.cue_pieces("Hello", 45_000) == [("Hello", 30_000)]  # one word: the rest is silent


def test_overlaps():
    assert tracks.overlaps([(0, 0, 10), (1, 5, 15), (2, 15, 20), (3, 20, 30)]) == ([(0, 1)], 1)
    assert tracks.overlaps([(0, 0, 100), (1, 10, 20), (2, 30, 40)]) == ([(0, 1), (0, 2)], 2)
    assert tracks.overlaps([(2, 0, 10), (0, 0, 30), (1, 5, 15)]) == ([(0, 2), (0, 1), (1, 2)], 3)  # found in time order
    many = [(i, 0, 1000) for i in range(20_000)]  # 200 million pairs: counted, not listed
    assert tracks.overlaps(many, limit=3) == ([(0, 1), (0, 2), (1, 2)], 20_000 * 19_999 // 2)


# ------------------------------------------------------------------------------------ real engine (slow)

slow = pytest.mark.slow
STEPS = "4"


def say_audio(invoke, tmp_path, name, text, seconds, seed) -> np.ndarray:
    path = tmp_path / "say" / name
    path.parent.mkdir(exist_ok=True)
    r = invoke(
        "say",
        text,
        "--duration",
        f"{seconds:g}",
        "--seed",
        seed,
        "--num-step",
        STEPS,
        "--model",
        TINY_CKPT,
        "-o",
        path,
        "-q",
    )
    assert r.exit_code == 0, r.stderr
    return read16(path)


@slow
def test_each_cue_equals_say(invoke, loaded, home, episode, tmp_path):
    out, stems = tmp_path / "track.wav", tmp_path / "stems"
    r = invoke(
        "dub",
        episode,
        "-o",
        out,
        "--seed",
        40,
        *CAST,
        "--stems",
        stems,
        "--num-step",
        STEPS,
        "--model",
        TINY_CKPT,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    track, report = read16(out), json.loads(r.stdout)
    assert len(track) == 50_200 * 24
    covered = np.zeros(len(track), bool)
    for c in report["cues"]:
        if c["status"] == "empty":
            continue
        start = round(c["start_seconds"] * SR)
        stem = read16(stems / c["output"])
        assert c["seed"] == 40 + c["index"]
        for piece in c["pieces"]:  # each piece is `say` of its words, its length, seed + index
            solo = say_audio(
                invoke,
                tmp_path,
                f"{c['cue']}-{piece['offset_seconds']}.wav",
                piece["text"],
                piece["seconds"],
                c["seed"],
            )
            at = round(piece["offset_seconds"] * SR)
            if len(c["pieces"]) == 1:
                assert np.array_equal(stem, solo), c["cue"]
            else:  # pieces of the long cue meet where one's padding ends and the next one's starts
                own = slice(at, at + len(solo))
                assert np.array_equal(stem[own][2400:-2400], solo[2400:-2400]), (c["cue"], piece)
        covered[start : start + len(stem)] = True
        if c["cue"] not in (2, 3):
            end = min(len(track), start + len(stem))
            assert np.array_equal(track[start:end], stem[: end - start]), c["cue"]
        assert len(stem) <= round((c["end_seconds"] - c["start_seconds"]) * SR) + 2 * 2400 + 1  # at most 0.2 s over
    assert not track[~covered].any()  # gaps are silent


@slow
def test_long_cue_pieces_equal_say_exactly(invoke, loaded, home, tmp_path):
    """A 40 s cue alone: its pieces, each `say` of its words, sum into its stem (mixed only where
    one piece's trailing padding meets the next one's leading padding)."""
    src = tmp_path / "long.srt"
    src.write_text(
        "1\n00:00:02,000 --> 00:00:42,000\nThe first half is this sentence here. And the second half "
        "is this other sentence.\n"
    )
    r = invoke(
        "dub",
        src,
        "-o",
        tmp_path / "t.wav",
        "--seed",
        9,
        "--num-step",
        STEPS,
        "--model",
        TINY_CKPT,
        "--json",
        "--stems",
        tmp_path / "stems",
    )
    assert r.exit_code == 0, r.stderr
    [cue] = json.loads(r.stdout)["cues"]
    assert len(cue["pieces"]) == 2
    mix = np.zeros(50 * SR, np.float64)
    for i, piece in enumerate(cue["pieces"]):
        solo = say_audio(invoke, tmp_path, f"{i}.wav", piece["text"], piece["seconds"], 9)
        at = round(piece["offset_seconds"] * SR)
        mix[at : at + len(solo)] += solo
    stem = read16(tmp_path / "stems" / "0001.wav")
    assert np.array_equal(stem, mix[: len(stem)].astype(np.int16))
    assert not mix[len(stem) :].any()


# ------------------------------------------------------------------ issue 23: fast cues, dry run, overwrite


def test_fast_cues_are_warned_about(invoke, fake_engine, home, tmp_path):
    """A cue whose words must be said over 2x faster than their natural pace (text.speech_seconds
    against its length) is named in one warning; its speed is in --json."""
    from omnivoice_cli.engine.text.duration import speech_seconds

    words = "These words take well over a second to say at a natural pace."
    src = tmp_path / "a.srt"
    src.write_text(f"1\n00:00:00,000 --> 00:00:01,000\n{words}\n\n2\n00:00:02,000 --> 00:00:09,000\n{words}\n")
    r = invoke("dub", src, "-o", tmp_path / "a.wav", "--json")
    assert r.exit_code == 0, r.stderr
    speed = speech_seconds(words)
    assert speed > 2 and speed / 7 < 2
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("Warning: ")]
    assert warnings == [
        f"Warning: {src}: the cue at line 2 must be spoken {speed:.1f}x faster than its natural pace "
        "to fit its times: shorten its words or lengthen it"
    ]
    report = json.loads(r.stdout)
    assert [c["speed"] for c in report["cues"]] == [round(speed, 2), round(speed / 7, 2)]
    src.write_text("".join(f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{words}\n\n" for i in range(7)))
    r = invoke("dub", src, "-o", tmp_path / "b.wav", "-q")
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("Warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith(f"Warning: {src}: 7 cues must be spoken over 2x faster")
    assert "line 2 (" in warnings[0] and "and 2 more;" in warnings[0]


def test_dry_run_loads_no_model_and_writes_nothing(invoke, fake_engine, home, episode, tmp_path):
    from omnivoice_cli.engine.text.duration import speech_seconds

    before = files_in(tmp_path)
    r = invoke(
        "dub",
        episode,
        "--seed",
        100,
        "--cast",
        "ALICE=instruct:female",
        "--cast",
        "BOB=auto",
        "--dry-run",
        "--stems",
        tmp_path / "stems",
    )
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [] and files_in(tmp_path) == before
    rows = r.stdout.splitlines()
    assert rows[0] == f"{episode}: 6 cues (1 empty) -> {tmp_path / 'episode.wav'}, 00:00:50.200 long, seed 100"
    speed = f"{speech_seconds('Hello there.') / 1.5:.2f}x"
    assert rows[1].split() == ["1", "00:00:01.000", "-->", "00:00:02.500", speed, "auto", "Hello", "there."]
    assert "ALICE=instruct:female" in rows[2] and "The second cue." in rows[2]
    assert rows[4].endswith("[skip (empty)]") and "BOB=auto" in rows[6]
    r = invoke("dub", episode, "--seed", 100, "--cast", "ALICE=auto", "--cast", "BOB=auto", "--dry-run", "--json")
    cues = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [c["cue"] for c in cues] == [1, 2, 3, 4, 5, 6] and [c["seed"] for c in cues][:3] == [100, 101, 102]
    assert [c["action"] for c in cues] == ["speak"] * 3 + ["skip (empty)"] + ["speak"] * 2
    assert cues[0]["voice"] == "auto" and cues[1]["speaker"] == "ALICE" and cues[4]["seconds"] == 40.0
    assert len(cues[4]["pieces"]) == 3 and cues[0]["speed"] == round(speech_seconds("Hello there.") / 1.5, 2)
    assert fake_engine.loads == []


def test_dry_run_tells_which_stems_a_rerun_reuses(invoke, fake_engine, home, episode, tmp_path):
    args = (
        "dub",
        episode,
        "-o",
        tmp_path / "t.wav",
        "--cast",
        "ALICE=auto",
        "--cast",
        "BOB=auto",
        "--stems",
        tmp_path / "stems",
        "--seed",
        4,
    )
    assert invoke(*args, "-q").exit_code == 0
    (tmp_path / "stems" / "0002.wav").unlink()
    r = invoke(*args, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert "exists" not in r.stderr  # an existing track is replaced, as say replaces its file
    actions = [json.loads(ln)["action"] for ln in r.stdout.splitlines()]
    assert actions == ["reuse its stem", "speak", "reuse its stem", "skip (empty)", "reuse its stem", "reuse its stem"]
    r = invoke(*args, "--dry-run", "--json", "--overwrite")
    assert [json.loads(ln)["action"] for ln in r.stdout.splitlines()].count("speak") == 5


def test_an_existing_track_is_replaced_as_every_output_is(invoke, fake_engine, home, episode, tmp_path):
    """One policy for existing outputs (docs/say.md#existing-outputs): running the same command
    again replaces the track (dub refused without --force before); --force is still accepted."""
    default = tmp_path / "episode.wav"  # beside the input, when no -o
    for extra in ((), ("--force",), ("--overwrite",)):
        default.write_bytes(b"mine")
        r = invoke("dub", episode, "--cast", "ALICE=auto", "--cast", "BOB=auto", *extra, "-q")
        assert r.exit_code == 0, r.stderr
        assert default.read_bytes()[:4] == b"RIFF"
    r = invoke("dub", episode, "--cast", "ALICE=auto", "--cast", "BOB=auto", "-o", "-", "-q")  # stdout: nothing to keep
    assert r.exit_code == 0 and r.stdout_bytes[:4] == b"RIFF"


def test_stems_are_lossless_files_the_track_format_where_it_is_one():
    from omnivoice_cli.app.dub.dubbing import stems_format

    assert [stems_format(f) for f in ("wav", "flac", "ogg", "mp3", "opus", "raw", "mulaw")] == [
        "wav",
        "flac",
        "flac",
        "flac",
        "flac",
        "flac",
        "flac",
    ]


def test_one_cue_is_one_cue(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "one.srt"
    src.write_text("1\n00:00:01,000 --> 00:00:02,500\nHello there.\n", encoding="utf-8")
    r = invoke("dub", src, "-o", tmp_path / "t.wav", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert ": 1 cue (0 empty) -> " in r.stdout and "1 cues" not in r.stdout
    r = invoke("dub", src, "-o", tmp_path / "t.wav")
    assert r.exit_code == 0, r.stderr
    assert ", 1 cue: 1 spoken, " in r.stderr.strip().splitlines()[-1]
