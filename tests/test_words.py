"""Word timings (words.py): --words FILE.json and --subtitle-level word. Every word of the text
once, in order, start <= end, never decreasing, inside the audio; the VTT and JSON parse back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT

from omnivoice_cli.app import listen, verify, words

TEXT = "Hello there, this is a test. It has two sentences and a few more words."
ASR_TINY = Path(__file__).resolve().parent / "fixtures" / "asr-tiny"


class Timed:
    """Hears the text it is given (less the words in `drop`), its words evenly over the audio."""

    def __init__(self, text: str, drop: set[str] = frozenset()) -> None:
        self.text, self.drop, self.calls = text, drop, 0

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        self.calls += 1
        said = [w for w in self.text.split() if verify.normalise(w) not in self.drop]
        step = len(audio) / sample_rate / max(len(said), 1)
        heard = tuple(listen.Word(w, i * step, (i + 0.8) * step) for i, w in enumerate(said))
        return listen.Transcript(" ".join(said), heard)

    def close(self):
        pass


def check_words(rows: list[dict], text: str, seconds: float) -> None:
    assert [r["word"] for r in rows] == verify.normalise(text).split()
    last = 0.0
    for r in rows:
        assert 0.0 <= r["start"] <= r["end"] <= seconds + 1e-3 and r["start"] >= last
        last = r["start"]


def test_say_words_and_word_subtitles(invoke, tmp_path, monkeypatch):
    import webvtt

    rec = Timed(TEXT, drop={"this", "few"})
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    out, wj, vtt = tmp_path / "o.wav", tmp_path / "o.words.json", tmp_path / "o.vtt"
    r = invoke(
        "say",
        TEXT,
        "--model",
        TINY_CKPT,
        "-o",
        out,
        "--num-step",
        "4",
        "--seed",
        "1",
        "--words",
        wj,
        "--subtitles",
        vtt,
        "--subtitle-level",
        "word",
    )
    assert r.exit_code == 0, r.stderr
    audio, rate = sf.read(out)
    rows = json.loads(wj.read_text())["words"]
    check_words(rows, TEXT, len(audio) / rate)
    assert {r["word"] for r in rows if r["estimated"]} == {"this", "few"}  # missed: interpolated, marked
    assert all(r["piece"] == 0 for r in rows) and rec.calls == 1
    captions = webvtt.read(str(vtt))
    body = " ".join(c.raw_text for c in captions)
    stamps = re.findall(r"<(\d\d:\d\d:\d\d\.\d\d\d)>", body)
    assert len(stamps) >= len(rows) - 3  # a time before (almost) every word but the first of a cue
    assert verify.normalise(re.sub(r"<[^>]+>", "", body)) == verify.normalise(TEXT)


def test_words_on_a_long_text_cover_every_piece(tmp_path):
    """Several pieces: each transcribed in its own stretch, words in order across them."""
    text = "One two three. Four five six."
    audio = np.zeros(48000, np.float32)
    pieces = [("One two three.", 0, 20000), ("Four five six.", 26000, 48000)]
    rows = [w.as_dict() for w in words.word_timings(Timed("a b c"), audio, 24000, pieces, text)]
    check_words(rows, text, 2.0)
    assert [r["piece"] for r in rows] == [0, 0, 0, 1, 1, 1]
    assert not any(r["estimated"] for r in rows)  # a word heard otherwise still gives its place and time
    assert rows[3]["start"] == pytest.approx(26000 / 24000, abs=1e-3) and rows[2]["end"] <= 20000 / 24000 + 1e-3


def test_words_with_the_fixture_recogniser(tmp_path):
    pytest.importorskip("faster_whisper")
    rec = listen.load_recogniser(str(ASR_TINY), "cpu")
    audio, rate = sf.read(Path(__file__).parent / "fixtures" / "golden" / "ref_24k.wav", dtype="float32")
    rows = [w.as_dict() for w in words.word_timings(rec, audio, rate, None, TEXT, "en")]
    check_words(rows, TEXT, len(audio) / rate)
    rec.close()


def test_word_options_are_checked_before_the_model(invoke, tmp_path):
    r = invoke("say", "Hi.", "--model", TINY_CKPT, "-o", tmp_path / "o.wav", "--subtitle-level", "word")
    assert r.exit_code == 2 and "--subtitle-level word needs --subtitles FILE.vtt" in r.stderr
    r = invoke("say", "Hi.", "--model", TINY_CKPT, "-o", tmp_path / "o.wav", "--words", tmp_path / "w.txt")
    assert r.exit_code == 2 and "give a .json file name" in r.stderr
    r = invoke("say", "Hi.", "--model", TINY_CKPT, "-o", tmp_path / "o.wav", "--subtitle-level", "char")
    assert r.exit_code == 2 and "--subtitle-level must be line or word" in r.stderr


def test_batch_words_beside_each_output(invoke, tmp_path, monkeypatch):
    rec = Timed(TEXT)
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "text": TEXT}) + "\n" + json.dumps({"id": "b", "text": "Short one."}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--model", TINY_CKPT, "--num-step", "4", "--words")
    assert r.exit_code == 0, r.stderr
    for rec_ in map(json.loads, (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()):
        wav = tmp_path / "out" / rec_["output"]
        audio, rate = sf.read(wav)
        rows = json.loads(wav.with_name(wav.stem + ".words.json").read_text())["words"]
        check_words(rows, rec_["text"], len(audio) / rate)


# ------------------------------------------------------------------------------------ dub --words

DUB = """1
00:00:01,000 --> 00:00:02,500
<i>Hello</i> there.

2
00:00:03,000 --> 00:00:04,000
ALICE: The second cue.

3
00:00:05,000 --> 00:00:06,000


4
00:00:07,000 --> 00:00:47,000
This is a very long cue. It has several sentences in it. It lasts forty seconds in all, so it must be cut.

5
00:00:48,000 --> 00:00:49,200
The end.
"""


class Heard:
    """Hears the lines it is given, one per call, its words evenly over the audio it is given
    (times relative to that audio); records the length of every call's audio."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.lengths = list(lines), []

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        self.lengths.append(len(audio))
        said = self.lines.pop(0).split()
        step = len(audio) / sample_rate / len(said)
        return listen.Transcript(
            " ".join(said), tuple(listen.Word(w, i * step, (i + 0.8) * step) for i, w in enumerate(said))
        )

    def close(self):
        pass


def test_dub_words_are_timed_on_the_track(invoke, fake_engine, tmp_path, monkeypatch):
    """Each cue's pieces heard where they lie on the track: a word's time is its cue's start plus
    its piece's offset plus its time in the piece; a rerun that reuses every stem gives the same."""
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    srt = tmp_path / "ep.srt"
    srt.write_text(DUB, encoding="utf-8")
    r = invoke("dub", srt, "--seed", 3, "--cast", "ALICE=auto", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    plan = [json.loads(ln) for ln in r.stdout.splitlines()]
    spans = [(c, p) for c in plan if c["action"] == "speak" for p in c["pieces"]]
    assert len(spans) >= 5  # the 40 s cue is cut into pieces
    for rerun in (False, True):
        rec = Heard([p["text"] for _, p in spans])
        monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what, rec=rec: rec)
        out, wj = tmp_path / "ep.wav", tmp_path / "ep.words.json"
        r = invoke(
            "dub",
            srt,
            "-o",
            out,
            "--seed",
            3,
            "--cast",
            "ALICE=auto",
            "--stems",
            tmp_path / "stems",
            "--words",
            wj,
            "--json",
            *(["--force"] if rerun else []),
        )
        assert r.exit_code == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["words"] == str(wj) and report["reused" if rerun else "spoken"] == 4
        audio, rate = sf.read(out)
        rows = json.loads(wj.read_text())["words"]
        check_words(rows, " ".join(p["text"] for _, p in spans), len(audio) / rate)
        assert not any(r["estimated"] for r in rows) and rec.lines == []
        i = 0
        for (cue, piece), length in zip(spans, rec.lengths):
            n = len(piece["text"].split())
            h, m, sec = cue["start"].replace(",", ".").split(":")
            start = int(h) * 3600 + int(m) * 60 + float(sec) + piece["offset_seconds"]  # on the track
            for j, row in enumerate(rows[i : i + n]):
                assert row["cue"] == cue["cue"] and row["piece"] == cue["pieces"].index(piece)
                assert row["start"] == pytest.approx(start + j * length / rate / n, abs=1.5e-3)
            i += n
        if not rerun:
            first = rows
    assert rows == first


def test_dub_words_errors(invoke, fake_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    srt = tmp_path / "ep.srt"
    srt.write_text(DUB, encoding="utf-8")
    r = invoke("dub", srt, "-o", tmp_path / "ep.wav", "--words", tmp_path / "w.txt")
    assert r.exit_code == 2 and "--words writes JSON: give a .json file name" in r.stderr
    not_a_model = tmp_path / "notamodel"
    not_a_model.mkdir()
    r = invoke("dub", srt, "-o", tmp_path / "ep.wav", "--words", tmp_path / "w.json", "--asr-model", not_a_model)
    assert r.exit_code == 2 and "is not a faster-whisper (CTranslate2) model" in r.stderr
    assert fake_engine.loads == [] and not (tmp_path / "ep.wav").exists()  # before the TTS model, nothing written


# ------------------------------------------------------------------------ the server's timestamps


def speech_body(**fields):
    body = {"model": "omnivoice", "input": TEXT, "voice": "auto", "seed": 5, "response_format": "wav"}
    return {**body, **fields}


def test_server_timestamps_with_the_fixture_recogniser(engine):
    """`timestamps: true`: JSON with the audio in base64 (the same bytes as the plain reply) and
    every word once, in order, inside the audio; over a real uvicorn, by the fixture recogniser."""
    import base64

    httpx = pytest.importorskip("httpx")
    pytest.importorskip("faster_whisper")
    from server_util import decode, running_server

    with running_server(engine, asr_model=str(ASR_TINY)) as (url, _, state):
        c = httpx.Client(base_url=url, timeout=300)
        plain = c.post("/v1/audio/speech", json=speech_body(stream=False))
        streamed = c.post("/v1/audio/speech", json=speech_body(stream=True))
        r = c.post("/v1/audio/speech", json=speech_body(timestamps=True))
        assert plain.status_code == 200 and r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json" and r.headers["x-omnivoice-seed"] == "5"
        body = r.json()
        assert (body["format"], body["sample_rate"], body["seed"]) == ("wav", 24000, 5)
        data = base64.b64decode(body["audio"])
        assert data == plain.content  # the same file as without timestamps (whole, as with stream false)
        audio, rate = decode(data)
        assert np.array_equal(audio, decode(streamed.content)[0])
        assert body["audio_seconds"] == round(len(audio) / rate, 4)
        check_words(body["words"], TEXT, len(audio) / rate)
        assert set(body["words"][0]) == {"word", "start", "end", "piece", "estimated"}
        raw = c.post("/v1/audio/speech", json=speech_body(timestamps=True, response_format="pcm")).json()
        pcm = np.frombuffer(base64.b64decode(raw["audio"]), "<i2")
        assert np.array_equal(pcm, sf.read(__import__("io").BytesIO(data), dtype="int16")[0])
        assert raw["words"] == body["words"]  # the same audio, heard the same
        assert state.recogniser is not None


def test_server_timestamps_refusals(engine, tmp_path, monkeypatch):
    """Streaming cannot carry words timed on the whole audio: 400 naming the field; a server
    without its recogniser: 501 (the extra, or its model offline) / 500 (a folder that is not
    one), in the CLI's words, before anything is generated."""
    import sys

    httpx = pytest.importorskip("httpx")
    from server_util import running_server

    from omnivoice_cli.engine.errors import install_hint

    with running_server(engine) as (url, _, state):
        c = httpx.Client(base_url=url, timeout=120)
        for fields, said in (
            ({"stream": True}, "leave out 'stream' true"),
            ({"stream_format": "sse"}, "leave out stream_format 'sse'"),
            ({"timestamps": "yes"}, "field 'timestamps' must be true or false, got 'yes'"),
        ):
            r = c.post("/v1/audio/speech", json=speech_body(**{"timestamps": True, **fields}))
            assert r.status_code == 400 and said in r.json()["error"]["message"], r.text
            assert r.json()["error"]["param"] == "timestamps"
        monkeypatch.setitem(sys.modules, "faster_whisper", None)  # the asr extra absent
        forwards = state.service.stats()["forwards"]
        for field in ("timestamps", "verify"):
            r = c.post("/v1/audio/speech", json=speech_body(**{field: True}))
            error = r.json()["error"]
            assert r.status_code == 501 and error["code"] == "no_recogniser" and error["param"] == field
            assert (
                error["message"]
                == f"field '{field}' needs faster-whisper, which is not installed: {install_hint('asr')}"
            )
        assert state.service.stats()["forwards"] == forwards  # refused before it was generated
    monkeypatch.delitem(sys.modules, "faster_whisper")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    not_a_model = tmp_path / "notamodel"
    not_a_model.mkdir()
    for spec, status, said in (
        ("someone/whisper-x", 501, "someone/whisper-x is not in the Hugging Face cache"),
        (str(not_a_model), 500, "<asr-model>: the folder is not a faster-whisper (CTranslate2) model"),
    ):
        with running_server(engine, asr_model=spec) as (url, _, _s):
            r = httpx.post(url + "/v1/audio/speech", json=speech_body(timestamps=True), timeout=120)
            assert r.status_code == status and said in r.json()["error"]["message"], r.text
            assert str(tmp_path) not in r.text  # no server path in a reply
