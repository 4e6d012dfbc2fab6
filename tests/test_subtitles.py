"""`--subtitles` in `say` and `batch`: the pieces of the written audio at their real times
(Result.pieces), each cut into cues of two lines / 7 s at most. Fast tests on FakeEngine; slow
ones on the tiny checkpoint check the times against the audio itself and that the audio does not
change."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import srt
import webvtt
from conftest import TINY_CKPT, files_in
from helpers.cues import read_cues

SR = 24000
TEXT = (
    "The first sentence is here. The second one follows it closely. [pause 1s] After a pause, a third "
    "sentence. And a fourth to end."
)
CHUNKED = ["--chunk-threshold", "1", "--chunk-duration", "1"]  # every sentence its own chunk


# ------------------------------------------------------------------------------------ fake engine


def test_say_writes_subtitles_beside(invoke, fake_engine, home, tmp_path):
    r = invoke("say", "Hello there.", "-o", tmp_path / "a.wav", "--subtitles", tmp_path / "a.srt", "--json")
    assert r.exit_code == 0, r.stderr
    assert read_cues(tmp_path / "a.srt") == [(0, 1000, "Hello there.")]  # the fake engine: 1 s, no pieces
    assert json.loads(r.stdout)["subtitles"] == str(tmp_path / "a.srt")


@pytest.mark.parametrize("spec, message", [("a.txt", "has extension '.txt'"), ("no/a.srt", "does not exist")])
def test_say_bad_subtitles_path_writes_nothing(invoke, fake_engine, home, tmp_path, monkeypatch, spec, message):
    monkeypatch.chdir(tmp_path)
    r = invoke("say", "Hello.", "-o", "a.wav", "--subtitles", spec)
    assert r.exit_code == 2 and message in r.stderr
    assert files_in(tmp_path) == [] and fake_engine.loads == []


def test_batch_writes_subtitles_beside_each_file(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("Hello one.\nHello two. [pause 1s] And more.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--subtitles", "vtt", "-q")
    assert r.exit_code == 0, r.stderr
    assert files_in(tmp_path / "out") == ["0001.vtt", "0001.wav", "0002.vtt", "0002.wav", "manifest.jsonl"]
    assert read_cues(tmp_path / "out" / "0002.vtt") == [(0, 1000, "Hello two. And more.")]
    (tmp_path / "out" / "0001.vtt").unlink()
    r = invoke("batch", src, "-o", tmp_path / "out", "--subtitles", "vtt", "-q")  # resumed: skipped, warned
    assert r.exit_code == 0 and "line 1: 0001.wav exists without subtitles" in r.stderr


def test_batch_subtitles_must_not_collide(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text('{"text": "a", "output": "x.wav"}\n{"text": "b", "output": "x.flac"}\n{"text": "c"}\n')
    r = invoke("batch", src, "-o", tmp_path / "out", "--subtitles", "srt", "-q")
    assert r.exit_code == 1
    assert "line 1: output 'x.srt' is also written by line 2" in r.stderr
    assert files_in(tmp_path / "out") == ["0003.srt", "0003.wav", "manifest.jsonl"]


def test_batch_subtitles_format_is_checked(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--subtitles", "ass")
    assert r.exit_code == 2 and "--subtitles must be srt or vtt" in r.stderr
    assert not (tmp_path / "out").exists()


LONG = (
    "A long piece of speech starts here and runs for a while. It has a clause, and then another one; "
    "it keeps going with more words than two lines can hold. Then a short one. And a last sentence that "
    "ends the whole piece."
)


@pytest.mark.parametrize("ext", ["srt", "vtt"])
def test_say_subtitles_of_a_long_piece_are_readable_cues(invoke, fake_engine, home, tmp_path, ext):
    """A piece longer than a cue is cut at sentences, then clauses, into cues of at most two lines
    of 42 columns and 7 s, timed within the piece by its characters (no word timings yet)."""
    subs = tmp_path / f"a.{ext}"
    r = invoke("say", LONG, "-o", tmp_path / "a.wav", "--subtitles", subs, "--duration", "20", "-q")
    assert r.exit_code == 0, r.stderr
    cues = read_cues(subs)
    assert len(cues) > 3 and " ".join(t for _, _, t in cues) == LONG
    assert cues[0][0] == 0 and cues[-1][1] == 20000 and all(a[1] == b[0] for a, b in zip(cues, cues[1:]))
    assert all(e - s <= 7000 for s, e, _ in cues)
    raw = (
        [s.content for s in srt.parse(subs.read_text())]
        if ext == "srt"
        else [c.raw_text for c in webvtt.read(str(subs)).captions]
    )
    assert all(len(body.splitlines()) <= 2 and max(map(len, body.splitlines())) <= 42 for body in raw)
    assert all(t.endswith((".", ",", ";")) for _, _, t in cues[:-1])  # cut at sentences and clauses here


# ------------------------------------------------------------------------------------ real engine (slow)

slow = pytest.mark.slow


def check_cues_against_audio(cues, audio, texts):
    """In order, one per piece, covering every sound, the last ending with the audio (40 ms)."""
    assert [t for _, _, t in cues] == texts
    assert all(s < e for s, e, _ in cues) and all(a[1] <= b[0] for a, b in zip(cues, cues[1:]))
    assert abs(cues[-1][1] - len(audio) * 1000 / SR) <= 40
    inside = np.zeros(len(audio), bool)
    for s, e, _ in cues:
        inside[max(0, s * 24 - 24) : e * 24 + 24] = True  # 1 ms of rounding either side
    assert not audio[~inside].any()  # every sound is inside a cue
    sound = np.flatnonzero(audio)
    assert cues[0][0] * 24 <= sound[0] + 24


@slow
@pytest.mark.parametrize("ext", ["srt", "vtt"])
def test_say_subtitles_follow_the_pieces(invoke, loaded, home, tmp_path, ext):
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request, plan_request

    args = ["--seed", 3, "--num-step", 4, "--model", TINY_CKPT, *CHUNKED, "-q"]
    subs = tmp_path / f"a.{ext}"
    assert invoke("say", TEXT, "-o", tmp_path / "a.wav", "--subtitles", subs, *args).exit_code == 0
    assert invoke("say", TEXT, "-o", tmp_path / "b.wav", *args).exit_code == 0
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()  # the audio does not change
    plan = plan_request(Request(TEXT, generation=GenerationConfig(audio_chunk_threshold=1, audio_chunk_duration=1)))
    assert len(plan.pieces) == 5  # a cue per chunk here, because the audio is cut there
    audio = sf.read(str(tmp_path / "a.wav"), dtype="float32")[0]
    check_cues_against_audio(read_cues(subs), audio, [p.text for p in plan.pieces])


@slow
def test_short_text_is_one_cue_and_pauses_are_between_cues(invoke, loaded, home, tmp_path):
    r = invoke(
        "say",
        "Hello there. [pause 1.5s] Goodbye now.",
        "-o",
        tmp_path / "a.wav",
        "--subtitles",
        tmp_path / "a.srt",
        "--seed",
        1,
        "--num-step",
        4,
        "--model",
        TINY_CKPT,
        "-q",
    )
    assert r.exit_code == 0, r.stderr
    audio = sf.read(str(tmp_path / "a.wav"), dtype="float32")[0]
    cues = read_cues(tmp_path / "a.srt")
    check_cues_against_audio(cues, audio, ["Hello there.", "Goodbye now."])
    assert 1500 <= cues[1][0] - cues[0][1] <= 1502  # the pause, exactly (to the ms)


@slow
def test_batch_subtitles_equal_say_subtitles(invoke, loaded, home, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text(json.dumps({"text": TEXT, "seed": 2, "chunk_threshold": 1, "chunk_duration": 1}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--subtitles", "srt", "--num-step", 4, "--model", TINY_CKPT, "-q")
    assert r.exit_code == 0, r.stderr
    r = invoke(
        "say",
        TEXT,
        "-o",
        tmp_path / "a.wav",
        "--subtitles",
        tmp_path / "a.srt",
        "--seed",
        2,
        "--num-step",
        4,
        "--model",
        TINY_CKPT,
        *CHUNKED,
        "-q",
    )
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "out" / "0001.srt").read_text() == (tmp_path / "a.srt").read_text()


@slow
def test_result_pieces_of_a_cloned_long_text(tiny_engine):
    """With a reference voice every chunk starts at once; the spans still follow the audio."""
    import torch

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    ref = VoicePrompt(torch.randint(0, 1024, (8, 30), generator=torch.Generator().manual_seed(1)), "A reference.", 0.05)
    g = GenerationConfig(num_step=4, audio_chunk_threshold=1, audio_chunk_duration=1)
    [res] = tiny_engine.generate([Request(TEXT, seed=4, ref=ref, generation=g)])
    assert [p[0] for p in res.pieces] == [
        "The first sentence is here.",
        "The second one follows it closely.",
        "After a pause,",
        "a third sentence.",
        "And a fourth to end.",
    ]
    spans = [(s, e) for _, s, e in res.pieces]
    assert all(s < e for s, e in spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    inside = np.zeros(len(res.audio), bool)
    for s, e in spans:
        inside[s:e] = True
    assert not res.audio[~inside].any()
    assert spans[0][0] >= 2400 and len(res.audio) - spans[-1][1] >= 2400  # the padding is no piece's


# ------------------------------------------------------------------------------ word-level cue writing


def test_retime_cues_around_their_words():
    from omnivoice_cli.media.subtitles import retime_cues

    # three cues of a piece 100..5000 ms: words 150-1800, 2000-3100, 3100-4800
    spans = retime_cues([150, 2000, 3100], [1800, 3100, 4800], [3, 4, 5], 100, 5000)
    assert spans == [(100, 1900), (1900, 3100), (3100, 5000)]  # half-way, else at the next's first word
    assert all(a < b for a, b in spans) and spans[0][0] == 100 and spans[-1][1] == 5000
    # words all squeezed at one time: each cue still long enough for a strictly later time a word
    spans = retime_cues([100, 100, 100], [100, 100, 100], [2, 2, 2], 100, 200)
    assert [b - a for a, b in spans][:2] == [3, 3] and spans[-1][1] == 200


def test_word_payload_a_time_before_every_word_strictly_inside():
    from omnivoice_cli.media.subtitles import word_payload

    lines = [[("Hello", 1000), (" there,", 1000), (" you", 1500)], [("&", None), (" <me>", 2600)]]
    assert word_payload(lines, 1000, 2500) == (
        "<00:00:01.001>Hello <00:00:01.002>there, <00:00:01.500>you\n&amp; <00:00:02.499>&lt;me&gt;"
    )
    assert word_payload([[("你", 10), ("好", 10)]], 0, 100) == "<00:00:00.010>你<00:00:00.011>好"
