"""`omnivoice voice show` of a voice whose metadata was written by someone else (an imported file,
a shared store): every value and key is printed with its control characters as escapes, as
`voice list` prints them, so nothing in a file can act on the terminal."""

from __future__ import annotations

import torch

from omnivoice_cli.app.voices import voices
from omnivoice_cli.engine.sound.voice import VoicePrompt

HOSTILE = "\x1b]0;pwned\x07\x9b31m\u202e"  # OSC (window title), CSI in one character, a bidi override


def test_voice_show_escapes_what_the_file_says(invoke, home, tmp_path):
    prompt = VoicePrompt(torch.zeros(8, 50, dtype=torch.int64), "Hello" + HOSTILE, 0.05)
    voices.save("evil", prompt, model="m" + HOSTILE, lang="en", **{"note" + HOSTILE: "x" + HOSTILE})
    for args in (("voice", "show", "evil"), ("voice", "list")):
        r = invoke(*args)
        assert r.exit_code == 0, r.stderr
        printed = r.stdout + r.stderr
        assert not any(c in printed for c in "\x1b\x07\x9b\u202e"), repr(printed)
    shown = invoke("voice", "show", "evil").stdout
    assert "\\x1b]0;pwned\\x07" in shown and "\\x9b31m" in shown  # escaped, still readable


def test_voice_show_escapes_a_prompt_files_transcript(invoke, home, tmp_path):
    path = tmp_path / "evil.pt"
    codes = torch.zeros(8, 50, dtype=torch.int64)
    torch.save({"format_version": 1, "ref_audio_tokens": codes, "ref_text": "Hi" + HOSTILE, "ref_rms": 0.05}, str(path))
    r = invoke("voice", "show", path)
    assert r.exit_code == 0, r.stderr
    assert not any(c in r.stdout for c in "\x1b\x07\x9b\u202e") and "\\x9b31m" in r.stdout
