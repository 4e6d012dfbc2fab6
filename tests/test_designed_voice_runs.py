"""A designed voice's first line generated once in `batch`, `book` and `dub` (app/request.py's
References.render_line): the line that designs the voice is its render, not generated again as a
clone of itself, and the later lines clone that render (the tiny model end to end)."""

from __future__ import annotations

import json

import pytest
from conftest import TINY_CKPT

pytestmark = pytest.mark.slow

FAST = ("--model", str(TINY_CKPT), "--num-step", "2")
INSTRUCT = "female, low pitch"


def _once_each(generated) -> None:
    """No request is generated twice (the render and the clone of a first line are the same words
    and seed), and some line cloned a designed voice (the path under test was taken)."""
    keys = [(g.text, g.seed) for g in generated]
    assert len(set(keys)) == len(keys), keys
    assert any(g.ref is not None for g in generated)


def _jobs(tmp_path, rows: list[dict]):
    """`rows` written as a batch's JSONL file; its path."""
    src = tmp_path / "jobs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


def _batch(invoke, src, out) -> None:
    r = invoke("batch", src, "-o", out, *FAST, "-q")
    assert r.exit_code == 0, r.stderr


def _dub(invoke, tmp_path, srt: str) -> list[dict]:
    """`srt` dubbed with BOB's designed voice, its stems kept in tmp_path / "stems" (a second call
    resumes from them): the cues' records (--json)."""
    (tmp_path / "ep.srt").write_text(srt, encoding="utf-8")
    cast = ("--cast", f"BOB=instruct:{INSTRUCT}", "--stems", tmp_path / "stems", "--json")
    r = invoke("dub", tmp_path / "ep.srt", "-o", tmp_path / "t.wav", "--seed", "40", *cast, *FAST)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["cues"]


def _records(out) -> dict:
    """The batch manifest's records by line number."""
    return {(rec := json.loads(ln))["line"]: rec for ln in (out / "manifest.jsonl").read_text().splitlines()}


def test_batch_generates_a_designed_voices_first_line_once(invoke, loaded, generated, home, tmp_path):
    rows = [
        {"text": "The first line designs the voice.", "instruct": INSTRUCT, "seed": 5},
        {"text": "A plain line in the model's own voice.", "seed": 6},
        {"text": "The second line clones it.", "instruct": INSTRUCT, "seed": 7},
    ]
    src, out = _jobs(tmp_path, rows), tmp_path / "out"
    _batch(invoke, src, out)
    assert len(generated) == 3, [g.text for g in generated]  # the render and its clone were 4
    _once_each(generated)
    recs = _records(out)
    assert recs[1]["voice_prompt"] == recs[3]["voice_prompt"] is not None and recs[2]["voice_prompt"] is None


def test_book_generates_a_designed_voices_first_part_once(invoke, loaded, generated, home, tmp_path):
    src = tmp_path / "tale.txt"
    src.write_text("Chapter One\n\nThe wind rose over the hill.\n\nChapter Two\n\nShe lit the lamp and waited.\n")
    args = ("--no-titles", "--instruct", INSTRUCT, "--format", "wav", "-q")  # each part one piece, as render_line needs
    r = invoke("book", src, "-o", tmp_path / "dir", *FAST, *args)
    assert r.exit_code == 0, r.stderr
    assert len(generated) == 2, [g.text for g in generated]  # the render and its clone were 3
    _once_each(generated)


def test_dub_generates_a_designed_speakers_first_cue_once(invoke, loaded, generated, home, tmp_path):
    srt = tmp_path / "ep.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:02,500\nBOB: Hello there.\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\nANN: The second cue.\n\n"
        "3\n00:00:05,000 --> 00:00:06,500\nBOB: And the third.\n",
        encoding="utf-8",
    )
    cast = ("--cast", f"BOB=instruct:{INSTRUCT}", "--cast", "ANN=auto")
    r = invoke("dub", srt, "-o", tmp_path / "track.wav", "--seed", "40", *cast, *FAST, "--json")
    assert r.exit_code == 0, r.stderr
    assert len(generated) == 3, [g.text for g in generated]  # the render and its clone were 4
    _once_each(generated)
    cues = json.loads(r.stdout)["cues"]
    assert cues[0]["voice_prompt"] == cues[2]["voice_prompt"] is not None and cues[1]["voice_prompt"] is None


def test_a_resumed_batch_clones_the_voice_a_whole_run_gives(invoke, loaded, home, tmp_path):
    """The designing line done by an earlier run (skipped now): the lines spoken now clone the
    voice its take gave a run from the start (rendered from that line again), not render(design)'s."""
    rows = [
        {"text": "The first line designs the voice.", "instruct": INSTRUCT, "seed": 5},
        {"text": "The second line clones it.", "instruct": INSTRUCT, "seed": 7},
    ]
    src, out = _jobs(tmp_path, rows), tmp_path / "out"

    _batch(invoke, src, out)
    whole = _records(out)
    (out / str(whole[2]["output"])).unlink()  # the second line to speak again; the first is done
    _batch(invoke, src, out)
    resumed = _records(out)
    assert resumed[1] == whole[1] and resumed[2]["status"] == "done"  # the first line's record reused
    assert resumed[2]["voice_prompt"] == whole[2]["voice_prompt"] == whole[1]["voice_prompt"] is not None


def test_a_resumed_dub_clones_the_voice_a_whole_run_gives(invoke, loaded, home, tmp_path):
    """A speaker's designing cue reused from an earlier run's stems: the cues spoken now clone the
    voice that cue's take gave a run from the start, not render(design)'s."""
    srt = tmp_path / "ep.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:02,500\nBOB: Hello there.\n\n"
        "2\n00:00:03,000 --> 00:00:04,500\nBOB: And the second.\n",
        encoding="utf-8",
    )
    stems = tmp_path / "stems"
    args = ("dub", srt, "-o", tmp_path / "t.wav", "--seed", "40", "--cast", f"BOB=instruct:{INSTRUCT}")
    r = invoke(*args, *FAST, "--stems", stems, "--json")
    assert r.exit_code == 0, r.stderr
    whole = json.loads(r.stdout)["cues"]
    (stems / "0002.wav").unlink()  # the second cue to speak again; the first is reused
    r = invoke(*args, *FAST, "--stems", stems, "--json")
    assert r.exit_code == 0, r.stderr
    resumed = json.loads(r.stdout)["cues"]
    assert [c.get("status") for c in resumed] == ["reused", "done"], resumed
    assert resumed[1]["voice_prompt"] == whole[1]["voice_prompt"] == whole[0]["voice_prompt"] is not None


def _alone(engine, like) -> str:
    """voice_prompt of the first piece of the request `like` (its words as its plan cuts them, its
    frames as its plan gives them), generated alone with no voice, with its seed and settings."""
    import dataclasses

    from omnivoice_cli.app.voices.design import voice_prompt
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    plan = engine.plan(like)
    text = plan.pieces[0].text
    alone = dataclasses.replace(like, text=text, ref=None)
    if (
        like.duration is not None
    ):  # the frames the whole line's plan gives piece 0 (half a frame over: no rounding down)
        alone = dataclasses.replace(alone, duration=(plan.frames[0] + 0.5) / engine.cfg.frame_rate)
    [result] = engine.generate([alone])
    return voice_prompt(VoicePrompt(result.tokens, text, None))


def test_a_designing_line_of_several_pieces_is_generated_once(invoke, loaded, takes, tiny_engine, home, tmp_path):
    """A designing line of two pieces (a pause tag) is generated once, as itself with no voice: its
    first piece's codes and words are the voice (its second piece and the later line clone it), and
    its audio is that one generation's, both pieces joined (no render of a default sentence apart)."""
    import soundfile as sf

    first, second = "The first part designs the voice.", "And the second part clones it."
    rows = [
        {"text": f"{first} [pause 0.3s] {second}", "instruct": INSTRUCT, "seed": 5},
        {"text": "A later line clones the first part.", "instruct": INSTRUCT, "seed": 7},
    ]
    src, out = _jobs(tmp_path, rows), tmp_path / "out"
    _batch(invoke, src, out)
    assert [req.text for req, _ in takes] == [rows[0]["text"], rows[1]["text"]]  # were 3: a default sentence first
    (line, result), (later, _) = takes
    assert line.ref is None and later.ref is not None and len(result.pieces) == 2
    recs = _records(out)
    assert recs[1]["voice_prompt"] == recs[2]["voice_prompt"] == _alone(tiny_engine, line)
    audio, _ = sf.read(out / recs[1]["output"], dtype="float32")
    assert len(audio) == len(result.audio)


def test_a_cast_members_first_line_of_several_pieces_is_generated_once(invoke, loaded, takes, tiny_engine, tmp_path):
    """say --cast: BOB's first line, two pieces, is spoken once; its first piece is BOB's voice."""
    script = tmp_path / "script.txt"
    script.write_text("BOB: Good morning. [pause 0.2s] How are you?\nBOB: I am fine, thanks.\n")
    r = invoke(
        "say", "-f", script, "--cast", f"BOB=instruct:{INSTRUCT}", "--seed", "7", *FAST,
        "-o", tmp_path / "d.wav", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert len(takes) == 2, [req.text for req, _ in takes]  # the render and its clone were 3
    lines = json.loads(r.stdout)["lines"]
    assert lines[0]["voice_prompt"] == lines[1]["voice_prompt"] == _alone(tiny_engine, takes[0][0])


def test_a_resumed_batch_speaks_a_done_designing_lines_first_piece_alone(invoke, loaded, takes, home, tmp_path):
    """The designing line of two pieces done by an earlier run: the resumed run generates its first
    piece alone for the voice (not the whole line again), and the line spoken now clones the voice
    a run from the start gave it."""
    rows = [
        {
            "text": "The first part designs the voice. [pause 0.3s] And the second part.",
            "instruct": INSTRUCT,
            "seed": 5,
        },
        {"text": "The second line clones it.", "instruct": INSTRUCT, "seed": 7},
    ]
    src, out = _jobs(tmp_path, rows), tmp_path / "out"

    _batch(invoke, src, out)
    whole = _records(out)
    (out / str(whole[2]["output"])).unlink()
    takes.clear()
    _batch(invoke, src, out)
    assert [len(result.pieces) for _, result in takes] == [1, 1]  # the voice's piece 0, then line 2
    assert _records(out)[2]["voice_prompt"] == whole[2]["voice_prompt"] == whole[1]["voice_prompt"] is not None


def test_a_verified_designing_line_is_generated_once_and_resumes_with_its_kept_take(
    invoke, loaded, takes, tiny_engine, home, tmp_path, monkeypatch
):
    """batch --verify: the designing line is spoken once, with its check (a retake asked for, seed
    5 + 1000), and the take kept is the voice the later line clones (not a render apart, then a
    clone); a resumed run renders that voice again from the kept take's seed."""
    import dataclasses

    from helpers.listening import TEXT, Scripted

    from omnivoice_cli.app.listening import listen

    def scripted(lines: list[str]) -> Scripted:
        rec = Scripted(lines)
        monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
        return rec

    later = "The second line clones it."
    rows = [
        {"text": TEXT, "instruct": INSTRUCT, "seed": 5, "verify": True},
        {"text": later, "instruct": INSTRUCT, "seed": 7, "verify": True},
    ]
    src, out = _jobs(tmp_path, rows), tmp_path / "out"

    rec = scripted(["garbled", TEXT, later])
    _batch(invoke, src, out)
    assert [req.text for req, _ in takes] == [TEXT, later] and len(rec.heard) == 3  # were 3 generated: a render first
    whole = _records(out)
    assert whole[1]["verify"]["pieces"][0]["seed"] == 1005
    kept = _alone(tiny_engine, dataclasses.replace(takes[0][0], seed=1005))
    assert whole[1]["voice_prompt"] == whole[2]["voice_prompt"] == kept
    (out / str(whole[2]["output"])).unlink()
    takes.clear()
    scripted([later])
    _batch(invoke, src, out)
    assert [(req.text, req.seed) for req, _ in takes] == [(TEXT, 1005), (later, 7)]
    assert _records(out)[2]["voice_prompt"] == kept


def test_book_with_titles_generates_its_first_part_once(invoke, loaded, generated, home, tmp_path):
    """A chapter read with its title is more than one piece (the title, a pause, the text): the
    first still designs the voice in one generation (its title the voice), the second clones it."""
    src = tmp_path / "tale.txt"
    src.write_text("Chapter One\n\nThe wind rose over the hill.\n\nChapter Two\n\nShe lit the lamp and waited.\n")
    r = invoke("book", src, "-o", tmp_path / "dir", *FAST, "--instruct", INSTRUCT, "--format", "wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert len(generated) == 2, [g.text for g in generated]  # a default sentence rendered apart made 3
    assert generated[0].ref is None and generated[1].ref is not None


@pytest.mark.parametrize("stretch", [0.5, 1.5])  # the designing line fitted to half / 1.5x its natural length
def test_a_later_line_keeps_its_pace_when_the_designing_line_has_a_duration(
    invoke, loaded, tiny_engine, home, tmp_path, stretch
):
    """A designing line with a `duration` speaks at the rate that fits it (its voice's rate: its
    first piece's effective speed): a later line cloning that voice, with no speed or duration of
    its own, is as long as when the designing line has no duration, not sped up or slowed again."""
    import soundfile as sf

    from omnivoice_cli.engine.planning import Request

    first = "The first line designs the voice, and it says a good many words."
    later = "A later line clones it, and it too says a good many words, at its own pace."
    cfg = tiny_engine.cfg
    natural = tiny_engine.plan(Request(text=first)).frames[0]
    target = round(natural * stretch)  # its frames (the duration half a frame over: no rounding down)

    def lengths(name: str, duration: float | None) -> tuple[int, int]:
        row = {"text": first, "instruct": INSTRUCT, "seed": 5} | ({} if duration is None else {"duration": duration})
        src = tmp_path / f"{name}.jsonl"
        src.write_text(json.dumps(row) + "\n" + json.dumps({"text": later, "instruct": INSTRUCT, "seed": 7}) + "\n")
        r = invoke("batch", src, "-o", tmp_path / name, *FAST, "-q")
        assert r.exit_code == 0, r.stderr
        recs = {
            (rec := json.loads(ln))["line"]: rec for ln in (tmp_path / name / "manifest.jsonl").read_text().splitlines()
        }
        assert recs[1]["voice_prompt"] == recs[2]["voice_prompt"] is not None
        return sf.info(tmp_path / name / recs[1]["output"]).frames, sf.info(tmp_path / name / recs[2]["output"]).frames

    (fitted, later_fitted), (free, later_free) = (
        lengths("fitted", (target + 0.5) / cfg.frame_rate),
        lengths("free", None),
    )
    assert fitted - free == (target - natural) * cfg.codec.hop_length  # the line was fitted
    assert later_fitted == later_free


def test_dub_a_designing_cue_of_several_pieces_is_generated_once_and_resumes(
    invoke, loaded, takes, tiny_engine, home, tmp_path
):
    """dub: BOB's first cue, 40 s, is two requests (dub's pieces, 20 s each): its first piece is
    generated once, with no voice, and is BOB's voice (the first piece generated alone), which its
    second piece and BOB's later cue clone; a dub resumed from its stems (the long cue reused) speaks
    that first piece again for the voice, and the later cue clones the same voice."""
    srt = (
        "1\n00:00:01,000 --> 00:00:41,000\nBOB: The first half is this sentence here. And the second half "
        "is this other sentence.\n\n"
        "2\n00:00:42,000 --> 00:00:44,000\nBOB: And a later cue.\n"
    )
    whole = _dub(invoke, tmp_path, srt)
    assert len(whole[0]["pieces"]) == 2
    texts = [p["text"] for p in whole[0]["pieces"]] + ["And a later cue."]
    assert [req.text for req, _ in takes] == texts  # the render and its clone were 4: a render first
    assert [req.ref is None for req, _ in takes] == [True, False, False]
    voice = _alone(tiny_engine, takes[0][0])
    assert whole[0]["voice_prompt"] == whole[1]["voice_prompt"] == voice
    (tmp_path / "stems" / "0002.wav").unlink()  # the later cue to speak again; the long one is reused
    takes.clear()
    resumed = _dub(invoke, tmp_path, srt)
    assert [c.get("status") for c in resumed] == ["reused", "done"], resumed
    assert [req.text for req, _ in takes] == [texts[0], texts[2]]  # the voice's piece, then the later cue
    assert resumed[1]["voice_prompt"] == voice


def test_dub_a_designing_cue_cut_at_its_tags_is_generated_once_and_resumes(
    invoke, loaded, takes, tiny_engine, home, tmp_path
):
    """dub: BOB's first cue holds two non-verbal tags, so its one request is two engine pieces
    (cut between the tags), fitted to the cue's time: it is generated once, its first piece the
    voice BOB's later cue clones (that piece generated alone, at its planned frames); a resumed dub
    speaks that piece alone again (the cue reused) and the later cue clones the same voice."""
    srt = (
        "1\n00:00:01,000 --> 00:00:04,000\nBOB: [laughter] Well, hello there my friend. [sigh] It is late now.\n\n"
        "2\n00:00:05,000 --> 00:00:07,000\nBOB: And a later cue.\n"
    )
    whole = _dub(invoke, tmp_path, srt)
    assert [len(result.pieces) for _, result in takes] == [2, 1]  # the cue once , then the later cue
    (line, _), (later, _) = takes
    assert line.ref is None and later.ref is not None
    voice = _alone(tiny_engine, line)
    assert whole[0]["voice_prompt"] == whole[1]["voice_prompt"] == voice
    (tmp_path / "stems" / "0002.wav").unlink()
    takes.clear()
    resumed = _dub(invoke, tmp_path, srt)
    assert [c.get("status") for c in resumed] == ["reused", "done"], resumed
    assert [len(result.pieces) for _, result in takes] == [1, 1]  # the voice's piece alone, then the later cue
    assert resumed[1]["voice_prompt"] == voice
