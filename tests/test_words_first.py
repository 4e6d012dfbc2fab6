"""`say --words` (and --subtitle-level word) loads the speech recogniser before the TTS model:
a recogniser that cannot be had (not cached and not downloadable, broken) fails before anything
is generated, as --verify's and `dub --words`' do (app/speakplain.PlainRun.words_recogniser)."""

from __future__ import annotations

from conftest import error_line

from omnivoice_cli.app.listening import listen
from omnivoice_cli.engine.errors import ModelUnavailable

GONE = (
    "speech recogniser Systran/faster-whisper-large-v3 is not in the Hugging Face cache and the Hugging Face hub "
    "cannot be reached (no connection); connect once to fetch it, or give --asr-model a local model folder"
)


def test_a_recogniser_that_cannot_be_had_fails_before_the_model(invoke, fake_engine, tmp_path, monkeypatch):
    asked = []

    def unavailable(spec, device, what):
        asked.append((what, len(fake_engine.loads), len(fake_engine.requests)))
        raise ModelUnavailable(GONE)

    monkeypatch.setattr(listen, "RECOGNISER", unavailable)
    for extra in (["--words", tmp_path / "o.json"], ["--subtitles", tmp_path / "o.vtt", "--subtitle-level", "word"]):
        r = invoke("say", "Hello there.", "-o", tmp_path / "o.wav", *extra)
        assert r.exit_code == 1, r.stderr
        assert error_line(r) == "Error: " + GONE
    assert asked == [("--words / --subtitle-level word", 0, 0)] * 2  # asked for before the model loaded
    assert fake_engine.loads == [] and fake_engine.requests == []  # nothing generated in vain
    assert list(tmp_path.iterdir()) == []


def test_the_recogniser_loaded_first_times_the_words_and_is_let_go(invoke, fake_engine, tmp_path, monkeypatch):
    events = []

    class Deaf:
        """Hears nothing (the fake engine speaks noise): the words are then placed by the text."""

        def transcribe(self, audio, sample_rate, lang=None, **kw):
            events.append("transcribe")
            return listen.Transcript("")

        def close(self):
            events.append("close")

    def loaded(spec, device, what):
        events.append(("load", len(fake_engine.loads)))
        return Deaf()

    monkeypatch.setattr(listen, "RECOGNISER", loaded)
    r = invoke("say", "Hello there.", "-o", tmp_path / "o.wav", "--words", tmp_path / "o.json")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "o.json").is_file()
    assert events[0] == ("load", 0)  # before the TTS model
    assert events.count(("load", 0)) == 1 and events[-1] == "close"  # one recogniser, let go at the end
    assert "transcribe" in events and len(fake_engine.loads) == 1
