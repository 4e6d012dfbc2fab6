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
from helpers.listening import Heard

from omnivoice_cli.app.listening import listen, verify, words

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


_STAMP = re.compile(r"<(\d\d):(\d\d):(\d\d)\.(\d\d\d)>")


def check_word_vtt(path: Path, text: str, lang: str | None = None) -> list[tuple[int, int, int]]:
    """A word-level VTT read back with webvtt-py: every cue has a timestamp before each of its
    words (nothing spoken before the first), strictly inside the cue and strictly increasing;
    the cues in order, their words the text's. Returns (timestamp, cue start, cue end) in ms."""
    import webvtt

    chars = verify.by_characters(text, lang)
    out, said, last_end = [], [], 0
    for c in webvtt.read(str(path)).captions:
        start, end = c.start_time.in_milliseconds(), c.end_time.in_milliseconds()
        assert last_end <= start < end
        last_end, last = end, start
        pieces = _STAMP.split(c.raw_text)  # text, then (h, m, s, ms, text after the tag) per tag
        assert not verify.units(pieces[0], chars), f"a word without a time: {c.raw_text!r}"
        for k in range(1, len(pieces), 5):
            h, m, sec, ms, after = pieces[k : k + 5]
            t = ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1000 + int(ms)
            assert start < t < end and t > last, (c.raw_text, start, end)
            words = [w for w in after.split() if verify.units(w, chars)]
            assert len(words) == 1 or (chars and len(after.strip()) <= 2), f"words after one time: {after!r}"
            out.append((t, start, end))
            last = t
        said.append(re.sub(r"<[^>]+>", "", c.raw_text))
    assert verify.units(" ".join(said), chars) == verify.units(text, chars)
    return out


@pytest.mark.slow
def test_say_words_and_word_subtitles(invoke, tmp_path, monkeypatch):

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
    stamps = check_word_vtt(vtt, TEXT)
    assert len(stamps) == len(rows)  # a time before every word, the first of each cue too
    assert [s for s, _, _ in stamps] == pytest.approx([round(r["start"] * 1000) for r in rows], abs=2)


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ------------------------------------------------------------------ words inside their pieces


def test_align_pairs_a_repeated_word_with_the_one_at_its_place():
    expected = "the cat saw the dog".split()
    prior = [0.1, 0.3, 0.5, 0.7, 0.9]
    heard_at = [0.72]  # one "the", heard where the second one is
    where = words.align(expected, ["the"], lambda i, j: abs(heard_at[j] - prior[i]))
    assert where == [None, None, None, 0, None]
    assert words.align(expected, ["the"]) in ([0, None, None, None, None], [None, None, None, 0, None])


def test_trusted_keeps_matches_and_word_for_word_stretches_only():
    expected = "a b c d e f".split()
    heard = "a x c q r s t f".split()  # b misheard as x (word for word); d e heard as four words
    where = words.align(expected, heard)
    assert words.trusted(expected, heard, where) == [0, 1, 2, None, None, 7]
    assert words.trusted(["a", "b"], ["x"], words.align(["a", "b"], ["x"])) == [None, None]  # noise only
    assert words.trusted(["a", "b"], ["x", "y"], [0, 1]) == [0, 1]


class Said:
    """Hears the given words at the given times (s, relative to the audio it is given)."""

    def __init__(self, heard: list[tuple[str, float, float]]) -> None:
        self.heard = heard

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        return listen.Transcript(" ".join(w for w, _, _ in self.heard), tuple(listen.Word(*h) for h in self.heard))

    def close(self):
        pass


def check_in_pieces(rows: list[dict], pieces: list, rate: int) -> None:
    """Each row inside its piece's span (seconds of the audio), in order."""
    last = 0.0
    for r in rows:
        _, s, e = pieces[r["piece"]]
        assert s / rate - 1e-3 <= r["start"] <= r["end"] <= e / rate + 1e-3, (r, s / rate, e / rate)
        assert r["start"] >= last
        last = r["start"]


def test_missed_words_are_spread_over_their_piece():
    """The issue's case: a recogniser that hears a few words, none of them right, early in a
    4.3 s piece: every word estimated, spread over the piece's whole time (not squeezed
    between 0.10 and 0.86 s), none outside it."""
    text = "Hello there, this is a test with seven words."
    audio = np.zeros(int(4.5 * 24000), np.float32)
    pieces = [(text, 2400, 2400 + int(4.3 * 24000))]
    rec = Said([("hollow", 0.0, 0.3), ("tear", 0.4, 0.76)])
    rows = [w.as_dict() for w in words.word_timings(rec, audio, 24000, pieces, text)]
    check_words(rows, text, 4.5)
    check_in_pieces(rows, pieces, 24000)
    assert all(r["estimated"] for r in rows)
    assert rows[0]["start"] == pytest.approx(0.1) and rows[-1]["end"] == pytest.approx(4.4, abs=1e-3)
    assert rows[len(rows) // 2]["start"] > 1.5  # spread, by speaking-time weight
    starts = [r["start"] for r in rows]
    assert all(b - a > 0.1 for a, b in zip(starts, starts[1:]))


def test_heard_times_past_the_piece_stay_inside_it():
    text = "One two three."
    audio = np.zeros(48000, np.float32)
    pieces = [(text, 0, 12000), ("Four five.", 24000, 36000)]
    rec = Said([("one", 0.0, 0.2), ("two", 0.2, 0.4), ("three", 0.4, 1.9)])  # ends past its 0.5 s piece
    rows = [w.as_dict() for w in words.word_timings(rec, audio, 24000, pieces, text + " Four five.")]
    check_in_pieces(rows, pieces, 24000)
    assert rows[2]["end"] == pytest.approx(0.5) and not rows[2]["estimated"]
    assert [r["piece"] for r in rows] == [0, 0, 0, 1, 1]
    assert rows[3]["start"] >= 1.0 and rows[3]["estimated"]  # "one two three" again: not its words


def test_a_run_of_missed_words_takes_the_time_between_its_neighbours():
    text = "alpha beta gamma delta epsilon"
    audio = np.zeros(24000 * 3, np.float32)
    rec = Said([("alpha", 0.0, 0.4), ("epsilon", 2.5, 3.0)])
    rows = [w.as_dict() for w in words.word_timings(rec, audio, 24000, None, text)]
    assert [r["estimated"] for r in rows] == [False, True, True, True, False]
    assert rows[1]["start"] == pytest.approx(0.4) and rows[3]["end"] == pytest.approx(2.5)
    assert rows[2]["start"] == pytest.approx(0.4 + 2.1 * 4 / 14)  # beta's 4 letters of the 14


def word_cue_rows(vtt: Path) -> list[tuple[str, int, int, int]]:
    """(word, its time, cue start, cue end) of a word-level VTT, one per time."""
    import webvtt

    out = []
    for c in webvtt.read(str(vtt)).captions:
        parts = _STAMP.split(c.raw_text)
        for k in range(1, len(parts), 5):
            h, m, sec, ms, after = parts[k : k + 5]
            t = ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1000 + int(ms)
            out.append((verify.normalise(after), t, c.start_time.in_milliseconds(), c.end_time.in_milliseconds()))
    return out


LONG = (
    "The first sentence is here and it runs on for quite a while, as first sentences do. "
    "The second one follows it closely and has a good number of words in it as well. "
    "Then a third sentence comes along to make a third piece. And a short fourth."
)


def _spy_pieces(monkeypatch) -> dict:
    seen: dict = {}
    real = words.word_timings

    def spy(rec, audio, rate, pieces, text, lang=None):
        seen.update(pieces=pieces, rate=rate)
        return real(rec, audio, rate, pieces, text, lang)

    monkeypatch.setattr(words, "word_timings", spy)
    return seen


@pytest.mark.slow
def test_say_word_subtitles_of_several_pieces_with_missed_words(invoke, loaded, tmp_path, monkeypatch):
    """Several pieces, a recogniser that misses words in one and hears only noise in another:
    every --words row inside its piece, every cue's words timed inside the cue, in order."""
    args = ["--model", TINY_CKPT, "--num-step", "2", "--seed", "3", "--chunk-threshold", "1", "--chunk-duration", "4"]
    r = invoke("say", LONG, *args, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    texts = [p["text"] for p in json.loads(r.stdout)["pieces"]]
    assert len(texts) >= 3
    said = [" ".join(w for w in t.split() if len(w) > 3) for t in texts]  # short words missed
    said[1] = "noise only"  # nothing right
    rec = Heard(said)
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    seen = _spy_pieces(monkeypatch)
    out, wj, vtt = tmp_path / "o.wav", tmp_path / "o.words.json", tmp_path / "o.vtt"
    r = invoke("say", LONG, *args, "-o", out, "--words", wj, "--subtitles", vtt, "--subtitle-level", "word")
    assert r.exit_code == 0, r.stderr
    audio, rate = sf.read(out)
    rows = json.loads(wj.read_text())["words"]
    check_words(rows, LONG, len(audio) / rate)
    check_in_pieces(rows, seen["pieces"], seen["rate"])
    assert len(seen["pieces"]) == len(texts) and rec.lines == []
    assert {r["piece"] for r in rows if r["estimated"]} == set(range(len(texts)))
    assert all(r["estimated"] for r in rows if r["piece"] == 1)
    stamps = check_word_vtt(vtt, LONG)
    assert len(stamps) == len(rows)
    last, cue = 0, None
    for row, (word, t, start, end) in zip(rows, word_cue_rows(vtt)):
        assert word == row["word"] and start < t < end
        if cue != start:
            last, cue = start, start
        assert abs(t - max(row["start"] * 1000, last + 1)) <= 1  # the row's time (later than the time before)
        last = t
    # each cue inside one piece: its words' piece spans hold it
    cue_pieces: dict = {}
    for row, (_, _, start, end) in zip(rows, word_cue_rows(vtt)):
        cue_pieces.setdefault((start, end), set()).add(row["piece"])
    assert all(len(p) == 1 for p in cue_pieces.values())


@pytest.mark.slow
def test_line_subtitles_with_words_follow_the_words(invoke, loaded, tmp_path, monkeypatch):
    """--words with line-level --subtitles: the cues are moved to where their words are heard."""
    rec = Said([("hello", 0.0, 0.3), ("there", 0.3, 0.5)])  # heard early: the rest spread after them
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    out, wj, srt_path = tmp_path / "o.wav", tmp_path / "o.words.json", tmp_path / "o.srt"
    r = invoke("say", TEXT, "--model", TINY_CKPT, "--num-step", "2", "-o", out, "--words", wj, "--subtitles", srt_path)
    assert r.exit_code == 0, r.stderr
    import srt

    cues = list(srt.parse(srt_path.read_text()))
    rows = json.loads(wj.read_text())["words"]
    i = 0
    for cue in cues:
        n = len(verify.normalise(cue.content).split())
        for row in rows[i : i + n]:
            assert cue.start.total_seconds() - 1e-3 <= row["start"] <= cue.end.total_seconds() + 1e-3
        i += n
    assert i == len(rows)


def test_word_subtitles_of_a_language_without_spaces(tmp_path):
    """Chinese: a time before each character, inside its cue."""

    class Result:
        sample_rate = 24000
        audio = np.zeros(24000 * 3, np.float32)
        pieces = [("你好，世界。今天天气很好。", 2400, 24000 * 3 - 2400)]

    rec = Said([("你好", 0.0, 0.5), ("世界", 0.5, 1.0)])
    timed = words.word_timings(rec, Result.audio, 24000, Result.pieces, Result.pieces[0][0], "zh")
    assert [w.word for w in timed] == list("你好世界今天天气很好")
    vtt = tmp_path / "zh.vtt"
    words.write_word_subtitles(vtt, Result, Result.pieces[0][0], timed, "zh")
    stamps = check_word_vtt(vtt, Result.pieces[0][0], "zh")
    assert len(stamps) == len(timed)


@pytest.mark.slow
def test_word_subtitles_with_the_fixture_recogniser(invoke, loaded, tmp_path, monkeypatch):
    """The real (random, tiny) recogniser hears noise: still a time before every word, inside its
    cue, and every row inside its piece."""
    pytest.importorskip("faster_whisper")
    seen = _spy_pieces(monkeypatch)
    out, wj, vtt = tmp_path / "o.wav", tmp_path / "o.words.json", tmp_path / "o.vtt"
    r = invoke(
        "say",
        LONG,
        "--model",
        TINY_CKPT,
        "--num-step",
        "2",
        "--seed",
        "1",
        "--chunk-threshold",
        "1",
        "--chunk-duration",
        "4",
        "--asr-model",
        ASR_TINY,
        "-o",
        out,
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
    check_words(rows, LONG, len(audio) / rate)
    check_in_pieces(rows, seen["pieces"], seen["rate"])
    assert len(seen["pieces"]) >= 3
    assert len(check_word_vtt(vtt, LONG)) == len(rows)
