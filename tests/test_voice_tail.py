"""A reference that ends while still sounding (k2-fsa/OmniVoice#265, #118): short generations come
out distorted after it, so it is padded with silence in the prepared reference, with one note."""

import numpy as np
import soundfile as sf

from omnivoice_cli.engine.sound.voice import (
    TAIL_PAD_SECONDS,
    ends_sounding,
    load_reference,
    prepare_reference,
)

SR = 24000


def _tone(seconds: float, silent_tail: float = 0.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    wav = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    if silent_tail:
        wav[-int(silent_tail * SR) :] = 0
    return wav


def test_a_tone_that_stops_abruptly_is_padded_with_silence_and_noted(tmp_path):
    path = tmp_path / "cut.wav"
    sf.write(str(path), _tone(4.0), SR)
    wav = load_reference(path)
    assert ends_sounding(wav)
    p = prepare_reference(wav, "Some words.", source=f"reference audio {path}")
    [note] = p.warnings
    assert "\n" not in note and note.startswith(f"reference audio {path} ends while still sounding")
    assert "padded" in note
    pad = int(TAIL_PAD_SECONDS * SR) // 960 * 960
    assert len(p.wav) >= 4 * SR // 960 * 960 + pad - 960 and len(p.wav) % 960 == 0
    tail = p.wav[-int(0.15 * SR) :]
    assert not tail.any()  # the prepared reference now ends in silence
    assert not ends_sounding(p.wav)


def test_a_reference_ending_in_silence_is_left_as_it_is():
    wav = _tone(4.0, silent_tail=0.3)
    assert not ends_sounding(wav)
    p = prepare_reference(wav, "Some words.")
    assert p.warnings == ()
    # silence removal keeps 200 ms of the 300 ms at the end; nothing is added
    assert abs(len(p.wav) - (3.7 + 0.2) * SR) <= 960 + SR // 100


def test_as_given_without_preprocessing_nothing_is_padded():
    wav = _tone(4.0)
    p = prepare_reference(wav, "Some words.", preprocess=False)
    assert p.warnings == () and len(p.wav) == len(wav) // 960 * 960
