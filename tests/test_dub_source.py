"""`dub --source-audio` (app/dub/sourcevoices.py): each speaker's reference is cut from the
original track at that speaker's cues, a cue with no speaker from its own stretch, on a
synthetic track where every speaker is a tone of their own."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from omnivoice_cli.app.dub.sourcevoices import GAP_SECONDS, SourceVoices
from omnivoice_cli.app.listening import listen
from omnivoice_cli.app.say.dialogue import Cast
from omnivoice_cli.media.cues import read_cues

RATE = 16000
# (start s, end s, Hz, the cue's text): ALICE 300 Hz, BOB 700 Hz, a cue without a speaker 1100 Hz
CUES = [
    (0.5, 2.0, 300, "ALICE: Bonjour tout le monde."),
    (2.5, 3.5, 700, "BOB: Salut."),
    (4.0, 5.0, 300, "ALICE: Ça va bien?"),
    (6.0, 7.5, 1100, "Merci beaucoup."),
]


def srt_time(s: float) -> str:
    ms = round(s * 1000)
    return f"00:00:{ms // 1000:02d},{ms % 1000:03d}"


@pytest.fixture
def episode(tmp_path):
    t = np.arange(int(8.0 * RATE)) / RATE
    track = np.zeros_like(t)
    for start, end, hz, _ in CUES:
        inside = (t >= start) & (t < end)
        track[inside] = 0.3 * np.sin(2 * np.pi * hz * t[inside])
    sf.write(str(tmp_path / "original.wav"), track.astype(np.float32), RATE)
    srt = "\n".join(f"{i + 1}\n{srt_time(s)} --> {srt_time(e)}\n{text}\n" for i, (s, e, _, text) in enumerate(CUES))
    (tmp_path / "ep.srt").write_text(srt, encoding="utf-8")
    return tmp_path


def peak_hz(audio: np.ndarray, rate: int) -> int:
    spectrum = np.abs(np.fft.rfft(audio))
    return int(round(np.fft.rfftfreq(len(audio), 1 / rate)[int(spectrum.argmax())], -2))


def test_each_speakers_reference_is_cut_at_their_cues(episode):
    cues = read_cues(str(episode / "ep.srt"))
    voices = SourceVoices(episode / "original.wav")
    try:
        cast = voices.cast_with(cues, Cast())
        assert set(cast.members) == {"alice", "bob"}
        for name, hz, ranges in (("alice", 300, [(500, 2000), (4000, 5000)]), ("bob", 700, [(2500, 3500)])):
            member = cast.members[name]
            assert member.kind == "ref" and voices.clips[member.spec[len("ref:") :]] == tuple(ranges)
            audio, rate = sf.read(member.value, dtype="float32")
            assert rate == RATE
            expected = sum(e - s for s, e in ranges) * RATE // 1000 + (len(ranges) - 1) * int(GAP_SECONDS * RATE)
            assert len(audio) == expected and peak_hz(audio, rate) == hz
        lone = voices.cue_member(cues[3])
        audio, _ = sf.read(lone.value, dtype="float32")
        assert peak_hz(audio, RATE) == 1100 and len(audio) == 1.5 * RATE
        assert voices.clips[lone.spec[len("ref:") :]] == ((6000, 7500),)
    finally:
        voices.close()
    assert voices.folder is None  # the temporary clips are gone


def test_a_speaker_in_the_cast_keeps_that_voice(episode):
    cues = read_cues(str(episode / "ep.srt"))
    voices = SourceVoices(episode / "original.wav")
    try:
        cast = voices.cast_with(cues, Cast.parse(["BOB=auto"]))
        assert cast.members["bob"].kind == "auto" and cast.members["alice"].kind == "ref"
    finally:
        voices.close()


class ToneHearer:
    """A recogniser that 'hears' the tone a clip holds: 'tone HZ'."""

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        return listen.Transcript(f"tone {peak_hz(np.asarray(audio), sample_rate)}")

    def close(self):
        pass


def test_dub_speaks_each_cue_in_the_voice_cut_from_the_original(invoke, fake_engine, episode, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_HOME", str(episode / "home"))
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: ToneHearer())
    out = episode / "fr.wav"
    args = ("dub", episode / "ep.srt", "-o", out, "--seed", "1", "--source-audio", episode / "original.wav")
    r = invoke(*args, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    shown = [json.loads(line)["voice"] for line in r.stdout.splitlines()]
    assert shown == ["ref:speaker-ALICE.wav", "ref:speaker-BOB.wav", "ref:speaker-ALICE.wav", "ref:cue-4.wav"]
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    heard = [req.ref.text for req in fake_engine.requests]  # each cue's voice: the tone of its speaker
    assert heard == ["tone 300.", "tone 700.", "tone 300.", "tone 1100."]
    assert out.is_file()


def test_source_audio_errors(invoke, fake_engine, episode):
    r = invoke("dub", episode / "ep.srt", "--source-audio", episode / "missing.wav", "--dry-run")
    assert r.exit_code == 2 and "--source-audio" in r.stderr and len(r.stderr.strip().splitlines()) == 1
