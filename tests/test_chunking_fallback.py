"""A long text with no sentence end is spoken, not refused: the cutter falls back to clause marks,
then spaces, then characters (never inside a grapheme cluster) for a sentence longer than one
generation holds (engine/text/overlong.py, chunk_text's `longest`, the streamed cut's
`cut_stretches`), while punctuated text is cut exactly as before."""

from __future__ import annotations

import json
import random
import unicodedata
from dataclasses import replace
from types import SimpleNamespace

import pytest
import soundfile as sf
from conftest import AGENT_REPLY, GOLDEN

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.forwardfit import check_sizes, fit_sizes
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.planning import Request, VoiceShape, plan_request
from omnivoice_cli.engine.stream.cut import (
    Segment,
    StreamConfig,
    cut_request,
    cut_streamed,
    cut_stretches,
    estimated_seconds,
)
from omnivoice_cli.engine.stream.render import StreamedPieces
from omnivoice_cli.engine.text.chunking import chunk_len_for, chunk_text, cut_to_length
from omnivoice_cli.engine.text.duration import resolve_target_len
from omnivoice_cli.engine.text.overlong import cut_overlong, graphemes

_WORDS = "the quick brown fox jumps over a lazy dog while people walk around town and talk about music".split()
LIMIT = 30 * 25  # one generation's frames at most (max_target_seconds at 25 frames a second)


def _unpunctuated(chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    text = ""
    while len(text) < chars:
        text += rng.choice(_WORDS) + " "
    return text[:chars].rsplit(" ", 1)[0]


ENGLISH = _unpunctuated(4000)  # an LLM's reply or a transcript with no punctuation at all
CHINESE = "".join(
    random.Random(1).choice("今天天气很好我们一起去公园散步吧你说的对这个问题很有意思") for _ in range(3000)
)


def test_an_unpunctuated_english_text_is_cut_at_words_within_the_chunk_length():
    assert len(ENGLISH) > 3990 and not any(c in ENGLISH for c in ".!?,;:")
    assert chunk_text(ENGLISH, 250) == [ENGLISH]  # the reference's cut: one sentence, kept whole
    chunks = chunk_text(ENGLISH, 250, longest=250)
    assert len(chunks) >= 16 and all(len(c) <= 250 for c in chunks)
    assert [w for c in chunks for w in c.split()] == ENGLISH.split()  # joined: the text, every cut between words
    assert min(len(c) for c in chunks) > 200  # of about even length, no stub of a word at the end


def test_clauses_come_before_words():
    commas = ", ".join(_unpunctuated(60, seed) for seed in range(70))  # clauses, no sentence end
    chunks = chunk_text(commas, 250, longest=250)
    assert all(c.endswith(",") for c in chunks[:-1]) and all(len(c) <= 250 for c in chunks)
    assert " ".join(chunks) == commas
    dashes = " — ".join(_unpunctuated(60, seed) for seed in range(70))  # marks the reference does not split at
    chunks = chunk_text(dashes, 250, longest=250)
    assert all(c.endswith("—") for c in chunks[:-1]) and all(len(c) <= 250 for c in chunks)
    assert " ".join(chunks) == dashes
    japanese = "、".join(["今日はとても良い天気なので公園を散歩しましょう"] * 100)  # 、 only
    chunks = chunk_text(japanese, 100, longest=100)
    assert all(c.endswith("、") for c in chunks[:-1]) and "".join(chunks) == japanese
    lines = [_unpunctuated(60, seed) for seed in range(70)]
    chunks = chunk_text("\n".join(lines), 200, longest=200)
    assert [line for c in chunks for line in c.split("\n")] == lines  # cut at line breaks only
    assert cut_overlong("1–5 2–6 " * 40, 50)[0].endswith(" ")  # a range's dash is no clause mark


def test_text_without_spaces_is_cut_by_characters():
    chunks = chunk_text(CHINESE, 100, longest=100)
    assert len(chunks) == 30 and all(len(c) == 100 for c in chunks) and "".join(chunks) == CHINESE
    word = "a" * 5000  # one absurdly long word: cut hard
    chunks = chunk_text(word, 333, longest=333)
    assert len(chunks) == 16 and all(len(c) <= 333 for c in chunks) and "".join(chunks) == word
    thai = "สวัสดีครับวันนี้อากาศดีมาก" * 100  # Thai: no spaces, vowel signs that combine
    chunks = chunk_text(thai, 77, longest=77)
    assert "".join(chunks) == thai and all(len(c) <= 77 for c in chunks)
    assert not any(unicodedata.category(c[0]).startswith("M") for c in chunks)


CLUSTERS = [
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # a family: four people joined by ZWJ
    "\U0001f1e9\U0001f1ea",  # a flag: two regional indicators
    "e\u0301",  # e and a combining acute accent
    "\U0001f44d\U0001f3fd",  # a thumbs up with a skin tone
    "\u2764\ufe0f",  # a heart with its emoji variation selector
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland's flag (tag characters)
    "\u1100\u1161\u11a8",  # a Hangul syllable of three conjoining jamo
    "\u0915\u093f",  # Devanagari ki: a consonant and its vowel sign
    "\ud83d\ude00",  # a surrogate pair left as two code points (decoded with surrogatepass)
    "a",
]


@pytest.mark.parametrize("max_len", [1, 2, 3, 7, 11])
def test_grapheme_clusters_are_never_split(max_len):
    rng = random.Random(max_len)
    clusters = [rng.choice(CLUSTERS) for _ in range(600)]
    text = "".join(clusters)
    assert graphemes(text) == clusters
    ends = {sum(len(c) for c in clusters[:i]) for i in range(len(clusters) + 1)}  # where a cut may fall
    pieces = cut_overlong(text, max_len)
    assert "".join(pieces) == text and len(pieces) > 1
    pos = 0
    for piece in pieces:
        pos += len(piece)
        assert pos in ends, (max_len, piece)
        # over max_len only as one cluster longer than it
        assert len(piece) <= max_len or piece in CLUSTERS, (max_len, piece)


def test_a_bracketed_tag_is_never_cut():
    text = ("word " * 30 + "[B EY1 S] [laughter] ") * 20
    pieces = cut_to_length(text, 40)
    assert all(p.count("[") == p.count("]") for p in pieces) and " ".join(pieces).split() == text.split()


@pytest.mark.parametrize("chunk_len", [40, 80, 200, 400])
def test_punctuated_text_is_cut_as_the_reference_cuts_it(chunk_len):
    """Sentences no longer than `longest`: exactly the reference's chunks (chunk_text without it)."""
    assert chunk_text(AGENT_REPLY, chunk_len, longest=2 * chunk_len) == chunk_text(AGENT_REPLY, chunk_len)
    assert chunk_text(AGENT_REPLY, chunk_len, longest=110) == chunk_text(AGENT_REPLY, chunk_len)


def test_a_punctuated_reply_is_planned_and_streamed_as_before():
    text = " ".join([AGENT_REPLY] * 4)  # long enough to be chunked
    target, _ = resolve_target_len(text, None, None, None, None, 25.0)
    plan = plan_request(Request(text=text))
    assert [p.text for p in plan.pieces] == chunk_text(text, chunk_len_for(text, target))  # the reference's chunks
    req = Request(text=text)
    assert cut_streamed(req, StreamConfig()) == cut_request(req, StreamConfig())


def test_the_plan_cuts_an_unpunctuated_text_into_generations_it_can_make():
    for text in (ENGLISH, CHINESE):
        plan = plan_request(Request(text=text))
        assert len(plan.pieces) > 5 and max(plan.frames) <= LIMIT
        assert "".join(p.text for p in plan.pieces).replace(" ", "") == text.replace(" ", "")


def test_the_streamed_cut_cuts_an_unpunctuated_text():
    req = Request(text="Hello there. " + ENGLISH)
    assert len(cut_request(req, StreamConfig())) == 2  # cut at its one sentence end only
    segments = cut_streamed(req, StreamConfig())
    assert "".join(s.text or "" for s in segments) == req.text  # the pieces are the text, cut
    assert segments[0].text == "Hello there. " and len(segments) > 20
    assert all(estimated_seconds(s.text or "") <= StreamConfig().sentence_seconds for s in segments)
    assert [w for s in segments for w in (s.text or "").split()] == req.text.split()  # at words
    slow = cut_streamed(Request(text=ENGLISH, speed=0.5), StreamConfig())  # at half speed: each piece still fits
    assert max(estimated_seconds(s.text or "") for s in slow) / 0.5 <= 30


def test_the_server_fits_a_piece_over_one_generation_and_refuses_what_it_cannot_cut():
    cfg = ModelConfig()
    slow = Request(text=_unpunctuated(400), speed=0.3)  # one piece of about 80 s: fits one forward, not a generation
    fitted = fit_sizes(slow, [Segment(slow.text)], cfg)
    assert len(fitted) > 2 and " ".join(s.text or "" for s in fitted).split() == slow.text.split()
    check_sizes(slow, fitted, cfg)
    tag = Request(text="[" + "x" * 3000 + "]")  # one bracketed tag: no place to cut it
    with pytest.raises(InvalidRequest, match="over the 30 s one generation may be: add spaces or punctuation"):
        check_sizes(tag, fit_sizes(tag, [Segment(tag.text)], cfg), cfg)
    with pytest.raises(InvalidRequest, match="has no space or mark to cut it at: one generation is at most 30 s"):
        plan_request(tag)


def test_say_stream_dry_run_shows_pieces_one_generation_each(invoke, fake_engine):
    r = invoke("say", ENGLISH, "--stream", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    pieces = json.loads(r.stdout)["pieces"]
    assert len(pieces) > 20 and max(p["seconds"] for p in pieces) <= 30
    assert [w for p in pieces for w in p["text"].split()] == ENGLISH.split()


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_say_speaks_a_long_unpunctuated_text(invoke, loaded, home, tmp_path, stream):
    out = tmp_path / "long.wav"
    r = invoke("say", ENGLISH, "-o", out, "--num-step", "1", "--seed", "3", "-q", *(["--stream"] if stream else []))
    assert r.exit_code == 0, r.stderr
    info = sf.info(str(out))
    assert info.frames / info.samplerate > 200  # about 240 s of speech, spoken in pieces


@pytest.mark.slow
def test_the_http_speech_endpoint_speaks_a_long_unpunctuated_text(engine, home):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")  # the serve extra
    from server_util import running_server

    with running_server(engine) as (url, _, _s):
        c = httpx.Client(base_url=url, timeout=120)
        body = {"input": ENGLISH, "num_step": 1, "response_format": "pcm", "stream": True}
        with c.stream("POST", "/v1/audio/speech", json=body) as r:
            assert r.status_code == 200, r.read()
            got = 0
            for data in r.iter_bytes():
                got += len(data)
                if got > 24000 * 2 * 20:  # 20 s of 16-bit audio: past the first pieces, then leave
                    break
            assert got > 24000 * 2 * 20


def _engine_frames(segments: list[Segment], speed: float | None, voice: tuple | None = None) -> list[int]:
    """Frames of each spoken segment as Engine.prepare estimates them: against `voice` (transcript,
    frames), else piece 0 against the yardstick and the others against piece 0 at its rate."""
    frames: list[int] = []
    texts = [s.text for s in segments if s.text is not None]
    for k, text in enumerate(texts):
        if voice is not None:
            frames.append(resolve_target_len(text, voice[0], voice[1], speed)[0])
        elif k == 0:
            frames.append(resolve_target_len(text, None, None, speed)[0])
        else:  # piece 0's codes already speak at the speed: the others against it at speed 1
            frames.append(resolve_target_len(text, texts[0].strip(), frames[0])[0])
    return frames


SLOW_VOICE = ("Hello there.", 3 * 25)  # a transcript short for its 3 s of audio: about 4x the yardstick's length


@pytest.mark.parametrize("text", [ENGLISH[:1500], "Hi. " + ENGLISH[:1500]])  # "Hi." alone: a slow piece 0 voice
@pytest.mark.parametrize("speed", [None, 0.25])
@pytest.mark.parametrize("voiced", [False, True])
def test_the_streamed_cut_fits_each_piece_to_one_generation_in_its_voice_and_speed(text, speed, voiced):
    voice = VoiceShape(*SLOW_VOICE) if voiced else None
    req = Request(text=text, speed=speed)
    segments = cut_streamed(req, StreamConfig(), voice=voice)
    assert "".join(s.text or "" for s in segments) == text  # the pieces are the text, cut
    frames = _engine_frames(segments, speed, SLOW_VOICE if voiced else None)
    assert max(frames) <= LIMIT and len(frames) > 4


def test_a_text_that_streams_in_its_voice_is_cut_as_before():
    req = Request(text="Hello there. " + ENGLISH)
    assert cut_streamed(req, StreamConfig(), voice=VoiceShape("Hello there, how are you doing today?", 50)) == (
        cut_stretches(req, cut_request(req, StreamConfig()), StreamConfig())
    )


def test_a_smaller_generation_limit_of_the_checkpoint_cuts_smaller():
    """The streamed render (StreamedPieces) cuts to its engine's max_target_seconds, not the default's."""
    req = Request(text=ENGLISH[:1500])

    def pieces(seconds: float) -> list[str]:
        engine = SimpleNamespace(cfg=replace(ModelConfig(), max_target_seconds=seconds), sample_rate=24000)
        return [s.text or "" for s in StreamedPieces(engine, req, StreamConfig()).segments]  # type: ignore[arg-type]

    default, small = pieces(30.0), pieces(3.0)
    assert len(small) > len(default) and "".join(small) == req.text
    assert max(_engine_frames([Segment(t) for t in small], None)) <= 3 * 25
    assert max(_engine_frames([Segment(t) for t in default], None)) > 3 * 25


SLOW_REF = ["--ref", GOLDEN / "ref_24k.wav", "--ref-text", "Hello"]  # a transcript short for its 3 s: a slow voice


@pytest.mark.parametrize("args", [["--speed", "0.25"], SLOW_REF])
def test_say_stream_dry_run_fits_a_slow_voice_or_speed(invoke, fake_engine, args):
    from omnivoice_cli.engine.sound.voice import load_reference, prepare_reference

    r = invoke("say", ENGLISH[:1500], "--stream", "--dry-run", "--json", *args)
    assert r.exit_code == 0, r.stderr
    pieces = [p["text"] for p in json.loads(r.stdout)["pieces"]]
    assert [w for p in pieces for w in p.split()] == ENGLISH[:1500].split()
    if args[0] == "--speed":
        assert max(_engine_frames([Segment(p) for p in pieces], 0.25)) <= LIMIT
    else:  # against the reference as it is prepared (its length in frames)
        prepared = prepare_reference(load_reference(GOLDEN / "ref_24k.wav"), "Hello")
        voice = VoiceShape.of_recording(len(prepared.wav), "Hello")
        assert max(resolve_target_len(p, voice.text, voice.frames)[0] for p in pieces) <= LIMIT


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--speed", "0.25"], SLOW_REF])
def test_say_stream_speaks_a_long_text_in_a_slow_voice_or_speed(
    invoke, loaded, tiny_engine, tmp_path, monkeypatch, args
):
    """Locally (no server) every piece is within one generation: none is refused mid-stream."""
    targets: list[int] = []
    prepare = tiny_engine.prepare

    def spy(*a, **kw):
        job = prepare(*a, **kw)
        targets.append(job.canvas.target_len)
        return job

    monkeypatch.setattr(tiny_engine, "prepare", spy)
    out = tmp_path / "slow.wav"
    r = invoke("say", ENGLISH[:500], "--stream", "-o", out, "--num-step", "1", "--seed", "3", "-q", *args)
    assert r.exit_code == 0, r.stderr
    assert len(targets) > 2 and max(targets) <= LIMIT
    info = sf.info(str(out))
    assert info.frames / info.samplerate > 60  # about 2 min of slow speech, spoken in pieces


def test_the_server_cuts_to_its_checkpoints_generation_limit_keeping_a_short_first_piece():
    """With fitting on, the service cuts a stretch over its engine's max_target_seconds as `say`
    cuts it (the first piece short, for the first audio), not only at words to fit."""
    from omnivoice_cli.engine.service import Service

    cfg = replace(ModelConfig(), max_target_seconds=6.0)
    engine = SimpleNamespace(cfg=cfg, sample_rate=24000)
    req = Request(text=ENGLISH[:400])  # about 23 s: within the default 30 s, over this checkpoint's 6 s
    ticket = Service(engine, fit=True).submit(req, lambda event: None)  # type: ignore[arg-type]
    spoken = [s.text or "" for s in ticket.pieces.segments if s.text]
    assert [w for t in spoken for w in t.split()] == req.text.split()
    assert estimated_seconds(spoken[0]) <= StreamConfig().first_seconds
    assert max(_engine_frames([Segment(t) for t in spoken], None)) <= 6 * 25


def test_a_voice_too_slow_to_cut_is_refused_before_streaming_as_the_plan_refuses_it():
    req = Request(text=ENGLISH[:500])
    crawl = VoiceShape("Hi.", 20 * 25)  # two letters in 20 s: a generation would hold about 4 characters
    with pytest.raises(InvalidRequest, match="at this speed and voice: one generation is at most 30 s"):
        cut_streamed(req, StreamConfig(), voice=crawl)
    with pytest.raises(InvalidRequest, match="at this speed and voice: one generation is at most 30 s"):
        plan_request(req, voice=crawl)
