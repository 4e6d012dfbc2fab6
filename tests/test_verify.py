"""--verify: each piece transcribed, a piece over the limit retaken with seed + k + 1000 x attempt,
the best take kept (verify.py, the engine's per-piece check in engine/pieces.py). The recogniser
is a stub with scripted transcripts (listen.RECOGNISER is the seam), the TTS the tiny checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT
from helpers.listening import TEXT, Scripted

from omnivoice_cli.app.listening import listen, verify


@pytest.fixture
def scripted(monkeypatch):
    def install(lines):
        rec = Scripted(lines)
        monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
        return rec

    return install


def say_report(invoke, tmp_path, name, *args):
    out = tmp_path / name
    r = invoke("say", TEXT, "--model", TINY_CKPT, "-o", out, "--json", "--num-step", "4", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout), sf.read(out, dtype="float32")[0], r.stderr


@pytest.mark.slow
def test_a_piece_failing_twice_takes_three_attempts_and_its_seed_reproduces_it(invoke, tmp_path, scripted):
    rec = scripted(["garbled words", "hello hello hello", TEXT])
    report, audio, stderr = say_report(invoke, tmp_path, "v.wav", "--seed", "7", "--verify")
    [row] = report["verify"]
    assert row["attempts"] == 3 and row["kept"] == 3 and row["ok"] and row["error"] == 0.0
    assert row["seed"] == 7 + 0 + 1000 * 2 and row["transcript"] == TEXT and len(rec.heard) == 3
    assert not np.array_equal(rec.heard[0], rec.heard[2])  # each retake is a new generation
    _, alone, _ = say_report(invoke, tmp_path, "alone.wav", "--seed", str(row["seed"]))
    assert np.array_equal(alone, audio)  # the kept take, reproduced by `say --seed`


@pytest.mark.slow
def test_every_first_take_passing_gives_the_audio_of_a_run_without_verify(invoke, tmp_path, scripted):
    scripted([TEXT.upper() + "!"])  # case and punctuation do not count
    report, audio, _ = say_report(invoke, tmp_path, "v.wav", "--seed", "3", "--verify")
    assert [r["attempts"] for r in report["verify"]] == [1] and report["verify"][0]["error"] == 0.0
    plain, plain_audio, _ = say_report(invoke, tmp_path, "p.wav", "--seed", "3")
    assert "verify" not in plain and np.array_equal(audio, plain_audio)


@pytest.mark.slow
def test_a_piece_still_over_the_limit_is_kept_with_a_warning(invoke, tmp_path, scripted):
    rec = scripted(["hello there this is", "nothing like it", "hello there this is a tent"])
    report, _, stderr = say_report(invoke, tmp_path, "v.wav", "--seed", "1", "--verify", "--verify-max-error", "0.1")
    [row] = report["verify"]
    assert row["attempts"] == 3 and len(rec.heard) == 3  # the default of 2 retries
    assert row["kept"] == 3 and row["seed"] == 2001 and not row["ok"]  # 1/6 wrong: the least error
    assert row["error"] == pytest.approx(1 / 6, abs=1e-4)
    assert "piece 1 still reads 17% wrong after 3 takes (kept take 3, seed 2001)" in stderr
    report, _, _ = say_report(invoke, tmp_path, "w.wav", "--seed", "1", "--verify", "--verify-retries", "0")
    assert report["verify"][0]["attempts"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["--stream"]], ids=["plain", "stream"])
def test_retakes_add_their_steps_to_the_bar(invoke, tmp_path, scripted, monkeypatch, mode):
    """A piece taken three times (4 steps each): the bar's total grows by each retake's steps when
    it is queued, so it is never passed and never reached before the last step."""
    from omnivoice_cli.ui.progress import StepProgress

    seen: list[tuple[int, int]] = []
    orig = StepProgress.__call__

    def spy(self, done, total):
        orig(self, done, total)
        seen.append((self.completed, self.total))

    monkeypatch.setattr(StepProgress, "__call__", spy)
    scripted(["garbled words", "hello hello hello", TEXT])
    report, _, _ = say_report(invoke, tmp_path, "v.wav", "--seed", "7", "--verify", *mode)
    assert report["verify"][0]["attempts"] == 3
    assert [c for c, _ in seen] == list(range(1, 13))  # every step of the three takes, in order
    assert seen[-1] == (12, 12) and all(c < t for c, t in seen[:-1])  # 100 % at the last step only
    assert [t for _, t in seen] == sorted(t for _, t in seen) and {t for _, t in seen} == {4, 8, 12}


@pytest.mark.slow
def test_streamed_steps_count_a_retake_as_done_and_to_do(engine):
    """stream.render.stream's on_progress: a take sent back counts as done, its retake's steps are
    added to the total: the steps never go back, the total is reached at the last step only."""
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.stream.render import stream

    class TwiceBack:
        def check(self, take):
            return 1.0, take.attempt < 2

        def kept(self, piece, attempt, seed):
            pass

    seen: list[tuple[int, int]] = []
    req = Request(TEXT, seed=1, generation=GenerationConfig(num_step=4))
    stream(engine, req, lambda piece: None, on_progress=lambda d, t: seen.append((d, t)), check=TwiceBack())
    assert [d for d, _ in seen] == list(range(1, 13)) and seen[-1] == (12, 12)
    assert all(d < t for d, t in seen[:-1])


@pytest.mark.slow
def test_batch_steps_count_retakes(invoke, tmp_path, scripted, monkeypatch):
    """batch's steps bar takes the engine's totals, which hold the retakes queued."""
    from omnivoice_cli.ui.progress import BatchProgress

    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(BatchProgress, "step", lambda self, d, t: seen.append((d, t)))
    scripted(["garbled", "garbled", TEXT])
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "text": TEXT, "verify": True, "seed": 5}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--model", TINY_CKPT, "--num-step", "4")
    assert r.exit_code == 0, r.stderr
    assert [d for d, _ in seen] == list(range(1, 13)) and seen[-1] == (12, 12)
    assert all(d < t for d, t in seen[:-1])


def test_error_rate():
    assert verify.error_rate("Hello, World!", "hello world") == 0.0
    assert verify.error_rate("one two three four", "one three four") == 0.25
    assert verify.error_rate("one two", "one two two two") == 1.0
    assert verify.error_rate("[laughter] Don't stop.", "don't stop") == 0.0
    assert verify.error_rate("你好世界", "你好世", "zh") == 0.25  # characters for Chinese
    assert verify.error_rate("你好世界", "你好世") == 0.25  # ... found by its script too
    assert verify.error_rate("", "") == 0.0 and verify.error_rate("", "uh") == 1.0


@pytest.mark.slow
def test_batch_verify_per_line_in_the_manifest(invoke, tmp_path, scripted):
    scripted(["garbled", TEXT])
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"id": "a", "text": TEXT, "verify": True, "seed": 5})
        + "\n"
        + json.dumps({"id": "b", "text": TEXT, "seed": 5})
        + "\n"
    )
    r = invoke("batch", src, "-o", tmp_path / "out", "--model", TINY_CKPT, "--num-step", "4")
    assert r.exit_code == 0, r.stderr
    records = {
        rec["id"]: rec for rec in map(json.loads, (tmp_path / "out" / "manifest.jsonl").read_text().splitlines())
    }
    line = records["a"]["verify"]
    [row] = line["pieces"]
    assert set(line) == set(verify.VerifySummary.__annotations__) and set(row) == set(verify.PieceRow.__annotations__)
    assert row["attempts"] == 2 and row["kept"] == 2 and row["seed"] == 1005 and row["ok"]
    assert (line["error"], line["worst"], line["attempts"], line["retakes"], line["passed"]) == (0.0, 0.0, 2, 1, True)
    assert "verify" not in records["b"]
    a, _ = sf.read(tmp_path / "out" / records["a"]["output"], dtype="float32")
    b, _ = sf.read(tmp_path / "out" / records["b"]["output"], dtype="float32")
    assert not np.array_equal(a, b)  # a is its retake (seed 1005), b the first take (seed 5)


@pytest.mark.slow
def test_batch_verify_line_score_weights_its_pieces_by_their_words(invoke, tmp_path, scripted):
    """A line of two pieces (6 words, then 3): the line's error is all edits over all words; its
    worst piece, takes in all and whether every piece passed are beside the per-piece rows."""
    scripted([TEXT, "second part", "nothing at all", "second part"])  # piece 1 misses a word each time
    src = tmp_path / "in.jsonl"
    line = {"id": "a", "text": TEXT + " [pause 0.3s] Second part here.", "verify": True, "seed": 2}
    src.write_text(json.dumps({**line, "verify_max_error": 0.2}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--model", TINY_CKPT, "--num-step", "4")
    assert r.exit_code == 0, r.stderr
    [record] = map(json.loads, (tmp_path / "out" / "manifest.jsonl").read_text().splitlines())
    score = record["verify"]
    assert [p["attempts"] for p in score["pieces"]] == [1, 3] and [p["kept"] for p in score["pieces"]] == [1, 1]
    assert score["error"] == pytest.approx((6 * 0 + 3 * (1 / 3)) / 9, abs=1e-4)  # 1 edit in 9 words
    assert score["worst"] == pytest.approx(1 / 3, abs=1e-4) and score["attempts"] == 4 and score["retakes"] == 2
    assert score["passed"] is False  # piece 2 is over the line's 0.2
    assert "piece 2 still reads 33% wrong after 3 takes" in r.stderr


def test_verify_with_stream_hands_a_piece_out_after_its_check(invoke, tmp_path, scripted):
    rec = scripted(["garbled", TEXT])
    report, audio, _ = say_report(invoke, tmp_path, "s.wav", "--seed", "9", "--verify", "--stream")
    [row] = report["verify"]
    assert row["attempts"] == 2 and row["seed"] == 1009 and len(rec.heard) == 2
    _, alone, _ = say_report(invoke, tmp_path, "alone.wav", "--seed", "1009", "--stream")
    assert np.array_equal(alone, audio)


@pytest.mark.slow
def test_server_verify_field_and_header(engine, scripted):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    from server_util import running_server

    rec = scripted(["garbled", TEXT])
    with running_server(engine) as (url, _, _s):
        c = httpx.Client(base_url=url, timeout=120)
        body = {
            "model": "omnivoice",
            "input": TEXT,
            "voice": "auto",
            "seed": 11,
            "verify": True,
            "stream": False,
            "response_format": "wav",
        }
        r = c.post("/v1/audio/speech", json=body)
        assert r.status_code == 200, r.text
        [row] = json.loads(r.headers["x-omnivoice-verify"])
        assert row["attempts"] == 2 and row["seed"] == 1011 and row["ok"] and len(rec.heard) == 2
        alone = c.post("/v1/audio/speech", json={**body, "verify": False, "seed": 1011})
        assert "x-omnivoice-verify" not in alone.headers and alone.content == r.content  # the kept take alone


@pytest.mark.slow
def test_server_upload_without_ref_text_is_transcribed(engine, scripted, tmp_path, monkeypatch):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    from pathlib import Path

    from server_util import running_server

    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    scripted(["These are the words heard."])
    wav = (Path(__file__).parent / "fixtures" / "golden" / "ref_24k.wav").read_bytes()
    with running_server(engine) as (url, _, _s):
        r = httpx.post(url + "/v1/audio/voices", data={"name": "heard"}, files={"file": ("a.wav", wav)}, timeout=120)
        assert r.status_code == 201, r.text
        assert r.json()["text_source"] == "asr" and "These are the words heard" in r.json()["text"]
