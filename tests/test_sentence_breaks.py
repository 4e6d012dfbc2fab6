"""Text is never cut inside a token (a time, a decimal, a thousands separator, a dotted
abbreviation): chunks (`say --dry-run --json` pieces), streamed pieces (`--stream`), subtitle
cues (`--subtitles`) and Wyoming's streaming text all keep `21:30`, `3.5`, `1,000` and `U.S.` whole
(engine.chunking.is_sentence_break, the one rule)."""

from __future__ import annotations

import json

import pytest
import soundfile as sf
from helpers.cues import read_cues

TEXT = (
    "The train leaves at 21:30 from platform 4, and a ticket costs 3.5 dollars, or 1,000 yen. "
    "Trade with the U.S. grew by 2.75 percent last year, e.g. in steel, to 12,500,000 tonnes. "
    "At 06:15 the first 2,500 passengers board, and the fare rises by 0.25 dollars. "
    "Mr. Smith from the U.K. said: the line carries 1,250,000 people a year, i.e. 3,400 a day."
)
TOKENS = ["21:30", "3.5", "1,000", "U.S.", "2.75", "e.g.", "12,500,000", "06:15", "2,500", "0.25", "Mr. Smith"]
TOKENS += ["U.K.", "1,250,000", "i.e.", "3,400"]
EVERY_SENTENCE = ["--chunk-threshold", "1", "--chunk-duration", "1"]  # chunks and streamed pieces: every break


def assert_whole(texts: list[str], text: str = TEXT) -> None:
    """`texts` are `text` cut at spaces, each token inside one of them, none ending in a token's middle."""
    assert " ".join(texts) == " ".join(text.split())
    for token in TOKENS:
        assert sum(t.count(token) for t in texts) == text.count(token), (token, texts)


def test_dry_run_pieces_keep_tokens_whole(invoke, fake_engine):
    r = invoke("say", TEXT, "--dry-run", "--json", *EVERY_SENTENCE)
    assert r.exit_code == 0, r.stderr
    pieces = [p["text"] for p in json.loads(r.stdout)["pieces"]]
    assert len(pieces) >= 10  # cut at every sentence and clause break
    assert_whole(pieces)
    assert "The train leaves at 21:30 from platform 4," in pieces and "or 1,000 yen." in pieces
    assert fake_engine.requests == []


def test_subtitle_cues_keep_tokens_whole(invoke, fake_engine, home, tmp_path):
    """A long piece cut into cues at sentences and clauses: never after 'U.S.' or 'Mr.', never inside
    a number."""
    subs = tmp_path / "a.srt"
    r = invoke("say", TEXT, "-o", tmp_path / "a.wav", "--subtitles", subs, "--duration", "30", "-q")
    assert r.exit_code == 0, r.stderr
    cues = [t for _, _, t in read_cues(subs)]
    assert len(cues) > 5
    assert_whole(cues)
    assert not any(c.endswith(("U.S.", "U.K.", "Mr.", "e.g.", "i.e.")) for c in cues), cues


@pytest.mark.slow
def test_streamed_pieces_keep_tokens_whole(invoke, loaded, home, tmp_path):
    """`--stream --json` on the tiny checkpoint, pieces of at most a second (so every sentence and
    clause break is a piece's end): the subtitles of the streamed render are its pieces, each
    whole, and the report counts them."""
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request

    out, subs = tmp_path / "s.wav", tmp_path / "s.srt"
    args = ["--stream", "-o", out, "--subtitles", subs, "--json", "--num-step", "1", "--seed", "2", *EVERY_SENTENCE]
    r = invoke("say", TEXT, *args)
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    request = Request(TEXT, generation=GenerationConfig(audio_chunk_threshold=1, audio_chunk_duration=1))
    pieces = [s.text for s in cut_request(request, StreamConfig()) if s.text]
    assert report["pieces"] == len(pieces) >= 10
    assert_whole([p.strip() for p in pieces])
    cues = read_cues(subs)
    assert_whole([t for _, _, t in cues])
    assert cues[-1][1] == pytest.approx(1000 * sf.info(str(out)).frames / sf.info(str(out)).samplerate, abs=2)


def test_wyoming_stream_speaks_up_to_a_break_only():
    """Wyoming's streamed text: spoken up to its last sentence end with a space after it, never up
    to 'U.S.' or a number's dot (more of it may come in the next chunk)."""
    from omnivoice_cli.app.door.textparts import ready_text, within

    assert ready_text("It costs 3.")[0] == ""  # '5 euros' may follow
    assert ready_text("It costs 3.5 euros. More")[0] == "It costs 3.5 euros."
    assert ready_text("Trade with the U.S. grew")[0] == ""
    assert ready_text("Trade with the U.S. grew. Then")[0] == "Trade with the U.S. grew."
    assert ready_text("At 21:30 we left. At 06:15 we")[0] == "At 21:30 we left."
    parts = within(TEXT, 60)
    assert "".join(parts) == TEXT
    assert_whole([p.strip() for p in parts])


def test_book_parts_are_cut_between_sentences_only():
    """A paragraph longer than a part is cut between sentences: never after 'U.S.' or 'Mr.'."""
    from omnivoice_cli.app.book.bookplan import split_parts

    paragraph = "Trade with the U.S. grew by 2.75 percent. Mr. Smith from the U.K. said so. " * 3
    parts = split_parts(paragraph.strip(), None, limit=60)
    assert len(parts) > 3 and " ".join(parts) == paragraph.strip()
    assert all(p.endswith(".") and not p.endswith(("U.S.", "U.K.", "Mr.")) for p in parts), parts
