"""Listening back (listen.py, the asr extra): a reference without a transcript is transcribed by
the speech recogniser, and what we report is the library's own transcription of the same prepared
audio with the same options (tests/fixtures/asr-tiny: a random-weight Whisper in faster-whisper's
format, built by tools/make_asr_fixture.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASR_TINY = ROOT / "tests" / "fixtures" / "asr-tiny"
REF = ROOT / "tests" / "fixtures" / "golden" / "ref_24k.wav"

faster_whisper = pytest.importorskip("faster_whisper")


def library_transcript(path: Path, lang: str | None = None) -> str:
    """faster-whisper's own transcription of the prepared reference, with listen's options."""
    from faster_whisper import WhisperModel

    from omnivoice_cli.app.listening import listen
    from omnivoice_cli.engine.model.config import SAMPLE_RATE
    from omnivoice_cli.engine.sound import voice as vmod

    prepared = vmod.prepare_reference(vmod.load_reference(path), None)
    model = WhisperModel(str(ASR_TINY), device="cpu", compute_type="int8")
    segments, _ = model.transcribe(listen.to_16k(prepared.wav, SAMPLE_RATE), language=lang, **listen.TRANSCRIBE_OPTIONS)
    return " ".join("".join(s.text for s in segments).split())


@pytest.fixture
def bare_ref(tmp_path) -> Path:
    """A recording with no .txt beside it."""
    ref = tmp_path / "me.wav"
    shutil.copy(REF, ref)
    return ref


@pytest.mark.slow
def test_say_ref_without_transcript_is_transcribed(invoke, fake_engine, bare_ref, tmp_path):
    out = tmp_path / "out.wav"
    r = invoke(
        "say",
        "Hi, it is me.",
        "--ref",
        bare_ref,
        "--asr-model",
        ASR_TINY,
        "--model",
        "owner/x",
        "-o",
        out,
        "--json",
        "--lang",
        "en",
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    heard = library_transcript(bare_ref, "en")
    assert heard and report["ref_text"] == heard and report["ref_text_source"] == "asr"
    assert fake_engine.encoded == [(str(bare_ref), heard)]  # the voice is encoded with that transcript
    assert f"--ref: transcribed as {json.dumps(heard, ensure_ascii=False)}" in r.stderr
    # a transcript given wins, and says where it came from
    r = invoke(
        "say",
        "Hi.",
        "--ref",
        bare_ref,
        "--ref-text",
        "Given words.",
        "--asr-model",
        "/nonexistent",
        "--model",
        "owner/x",
        "-o",
        out,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["ref_text_source"] == "ref_text" and "transcribed as" not in r.stderr
    bare_ref.with_suffix(".txt").write_text("Words in a file.")
    r = invoke(
        "say", "Hi.", "--ref", bare_ref, "--asr-model", "/nonexistent", "--model", "owner/x", "-o", out, "--json"
    )
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["ref_text"] == "Words in a file." and json.loads(r.stdout)["ref_text_source"] == "file"


@pytest.mark.slow
def test_voice_add_without_transcript_stores_the_recognisers_words(
    invoke, fake_engine, bare_ref, tmp_path, monkeypatch
):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OMNIVOICE_ASR_MODEL", str(ASR_TINY))  # the setting's environment variable
    r = invoke("voice", "add", "alice", "--ref", bare_ref, "--model", "owner/x")
    assert r.exit_code == 0, r.stderr
    heard = library_transcript(bare_ref)
    assert fake_engine.encoded == [(str(bare_ref), heard)]
    from omnivoice_cli.app.voices import voices

    saved = voices.load_voice_file(voices.resolve_voice("alice", None))
    assert heard.rstrip(".") in saved.text  # the stored transcript (the model's punctuation added)


def test_recogniser_is_freed_before_the_tts_model_loads(invoke, fake_engine, bare_ref, tmp_path, monkeypatch):
    from omnivoice_cli.app.listening import listen

    events = []

    class Stub:
        def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
            events.append("transcribe")
            return listen.Transcript("stub words")

        def close(self):
            events.append("close")

    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: events.append("load") or Stub())
    real_load = fake_engine.load
    monkeypatch.setattr(
        fake_engine, "load", classmethod(lambda cls, *a, **k: events.append("tts") or real_load.__func__(cls, *a, **k))
    )
    r = invoke("say", "Hi.", "--ref", bare_ref, "--model", "owner/x", "-o", tmp_path / "o.wav", "--json")
    assert r.exit_code == 0, r.stderr
    assert events == ["load", "transcribe", "close", "tts"]


def test_asr_model_errors(invoke, fake_engine, bare_ref, tmp_path, monkeypatch):
    not_a_model = tmp_path / "notamodel"
    not_a_model.mkdir()
    r = invoke(
        "say", "Hi.", "--ref", bare_ref, "--asr-model", not_a_model, "--model", "owner/x", "-o", tmp_path / "o.wav"
    )
    assert r.exit_code == 2 and "is not a faster-whisper (CTranslate2) model: it lacks model.bin" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    r = invoke(
        "say",
        "Hi.",
        "--ref",
        bare_ref,
        "--asr-model",
        "someone/whisper-x",
        "--model",
        "owner/x",
        "-o",
        tmp_path / "o.wav",
    )
    assert r.exit_code == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "someone/whisper-x is not in the Hugging Face cache" in lines[0], r.stderr
    assert "offline: HF_HUB_OFFLINE is set" in lines[0] and not (tmp_path / "o.wav").exists()


@pytest.mark.slow
def test_help_and_the_core_path_never_import_the_recogniser(tmp_path):
    code = (
        "import sys\n"
        "from omnivoice_cli.app import request\n"
        "from omnivoice_cli.app.say import speak\n"
        "from omnivoice_cli.app.settings import layers\n"
        "from omnivoice_cli.app.batch import batch\n"
        "from omnivoice_cli.app.listening import listen\n"
        "from omnivoice_cli.engine import pipeline, pieces\n"
        "from omnivoice_cli.engine.stream import run\n"
        "from omnivoice_cli.cli import main\n"
        "sys.argv = ['omnivoice', 'say', '--help-all']\n"  # --asr-model is an advanced option
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('faster_whisper', 'ctranslate2', 'transformers'))\n"
        "print('LOADED', bad)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "--asr-model" in proc.stdout and "LOADED []" in proc.stdout, proc.stdout + proc.stderr


def test_the_fixture_is_in_the_librarys_format():
    from omnivoice_cli.app.listening import listen

    rec = listen.load_recogniser(str(ASR_TINY), "cpu")
    try:
        assert rec.model.model.n_mels == 128  # large-v3 / turbo's features
        assert len(json.loads((ASR_TINY / "vocabulary.json").read_text())) == 51866
        import numpy as np

        heard = rec.transcribe(np.zeros(24000, np.float32) + 0.01, 24000, "en", max_tokens=8)
        assert all(w.start <= w.end for w in heard.words)
    finally:
        rec.close()


@pytest.mark.slow
def test_verify_and_word_times_hear_what_the_library_hears():
    """--verify's transcript of a take is faster-whisper's own of that audio with listen's options
    (no word times, the decode capped to the text); --words' words and times are the library's."""
    import soundfile as sf
    from faster_whisper import WhisperModel

    from omnivoice_cli.app.listening import listen, verify
    from omnivoice_cli.engine.pieces import PieceTake

    audio, rate = sf.read(REF, dtype="float32")
    text = "Hello there, this is a test."
    cap = verify.max_tokens(text, "en")
    model = WhisperModel(str(ASR_TINY), device="cpu", compute_type="int8")

    def library(**options):
        segments, _ = model.transcribe(
            listen.to_16k(audio, rate), language="en", **{**listen.TRANSCRIBE_OPTIONS, "max_new_tokens": cap, **options}
        )
        return list(segments)

    rec = listen.load_recogniser(str(ASR_TINY), "cpu")
    try:
        check = verify.Verifier(rec, 0.25, 2).for_request("en")
        check.check(PieceTake(0, text, 0, 7, audio, rate))
        heard = " ".join("".join(s.text for s in library(word_timestamps=False)).split())
        assert heard and check.report()[0]["transcript"] == heard
        got = rec.transcribe(audio, rate, "en", max_tokens=cap)
        timed = [(w.word.strip(), w.start, w.end) for s in library() for w in s.words]
        assert timed and [(w.text, w.start, w.end) for w in got.words] == timed
    finally:
        rec.close()


@pytest.mark.parametrize("breakage", ["tokenizer", "empty tokenizer", "model.bin"])
def test_a_broken_recogniser_folder_is_one_line_exit_1(invoke, fake_engine, bare_ref, tmp_path, breakage):
    """Before: a broken tokenizer.json gave tokenizers' traceback ("Model missing." and kin).
    Every failure to load the recogniser is one line naming the folder, exit 1, nothing written."""
    broken = tmp_path / "broken-asr"
    shutil.copytree(ASR_TINY, broken)
    if breakage == "tokenizer":
        (broken / "tokenizer.json").write_text('{"nope": 1')
    elif breakage == "empty tokenizer":
        (broken / "tokenizer.json").write_text("{}")
    else:
        (broken / "model.bin").write_bytes((ASR_TINY / "model.bin").read_bytes()[:1000])
    out = tmp_path / "o.wav"
    r = invoke("say", "Hi.", "--ref", bare_ref, "--asr-model", broken, "--model", "owner/x", "-o", out)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1, r.stderr
    assert f"--asr-model {broken}: the speech recogniser cannot be loaded from {broken} (" in lines[0]
    assert "Traceback" not in r.stderr and not out.exists()


def test_a_recogniser_that_fails_on_audio_is_a_typed_error():
    import numpy as np

    from omnivoice_cli.app.listening import listen

    rec = listen.load_recogniser(str(ASR_TINY), "cpu")

    class Failing:
        supported_languages = ("en",)

        def transcribe(self, *a, **k):
            raise RuntimeError("CUDA failed with error out of memory\nat line 2")

    rec.model = Failing()
    with pytest.raises(listen.RecogniserFailed) as e:
        rec.transcribe(np.zeros(16000, dtype=np.float32), 16000, "en")
    assert str(e.value) == (
        f"the speech recogniser ({ASR_TINY}) failed: RuntimeError: CUDA failed with error out of memory at line 2"
    )


def test_a_ref_without_transcript_with_no_network_says_what_to_do(invoke, fake_engine, bare_ref, tmp_path, monkeypatch):
    """Before: the hub's raw LocalEntryNotFoundError, cut at 120 characters. One line: the
    recogniser cannot be had, and the ways out (--ref-text, a .txt, a local --asr-model)."""
    import huggingface_hub as hf
    from huggingface_hub.errors import LocalEntryNotFoundError

    from omnivoice_cli.engine.checkpoint import hub

    def no_network(*a, **k):
        raise LocalEntryNotFoundError(
            "An error happened while trying to locate the files on the Hub and we cannot find the appropriate"
            " snapshot folder for the specified revision on the local disk. Please check your internet connection"
        )

    monkeypatch.setattr(hf, "snapshot_download", no_network)
    monkeypatch.setattr(hub, "offline_reason", lambda: None)
    out = tmp_path / "o.wav"
    r = invoke("say", "Hi.", "--ref", bare_ref, "--model", "owner/x", "-o", out)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1, r.stderr
    assert (
        "LocalEntryNotFoundError" not in lines[0]
        and "the Hugging Face hub cannot be reached (no connection)" in lines[0]
    )
    assert 'give --ref-text "the words spoken in it"' in lines[0] and "--asr-model a local model folder" in lines[0]
    assert fake_engine.loads == [] and not out.exists()
