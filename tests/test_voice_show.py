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


def test_a_lone_surrogate_in_a_files_words_is_shown_escaped(invoke, home):
    """JSON takes "\\ud800" (a voice file's metadata is JSON): shown as its escape, not a crash; a
    file name's undecodable byte (os.fsdecode's \\udcff) as the byte."""
    assert voices.printable("x\ud800y") == "x\\ud800y" and voices.printable("x\udcffy") == "x\\xffy"
    prompt = VoicePrompt(torch.zeros(8, 50, dtype=torch.int64), "Hello", 0.05)
    voices.save("odd", prompt, model="mXXXXXX", lang="en")
    (path,) = voices.voice_dir().glob("odd.*")
    data = path.read_bytes()  # the header's JSON given the escape itself (same length: 6 characters)
    path.write_bytes(data.replace(b"XXXXXX", b"\\ud800", 1))
    r = invoke("voice", "show", "odd")
    assert r.exit_code == 0 and "m\\ud800" in r.stdout, r.stderr
