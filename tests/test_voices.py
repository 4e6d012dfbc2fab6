"""Voice cloning in the CLI: `say --ref/--voice`, `omnivoice voice add/list/show/rm/import`.

Fast tests run against FakeEngine (conftest.py), whose voice_from_audio prepares the recording
for real (so errors and warnings are the engine's) and makes up the codes. Tests marked slow run
the real engine on the tiny checkpoint: a saved voice, a `.pt` prompt of the reference
implementation and `--ref` all give the same bytes for the same seed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch
from conftest import GOLDEN, ROOT, TINY_CKPT, error_line, files_in
from helpers.audio import tone

from omnivoice_cli.app.settings.schema import DEFAULT_MODEL
from omnivoice_cli.app.voices import voices
from omnivoice_cli.app.voices.design import BUILTIN_SEED, voice_prompt

REF_TEXT = "This is the reference voice for the test"
SR = 24000


def saved_rows(result) -> list[str]:
    """The rows of `voice list` that are saved voices (not the built-in ones)."""
    return [row for row in result.stdout.splitlines() if row.split()[1:2] != ["built-in"]]


def warnings_of(result) -> list[str]:
    return [ln for ln in result.stderr.splitlines() if ln.startswith("Warning: ")]


@pytest.fixture
def ref(tmp_path):
    """The golden 3 s reference recording, in a folder of its own."""
    folder = tmp_path / "refs"
    folder.mkdir()
    shutil.copy(GOLDEN / "ref_24k.wav", folder / "me.wav")
    return folder / "me.wav"


def tone_file(path, seconds: float, amp: float = 0.3, sr: int = SR):
    """A 220 Hz tone written to `path`."""
    sf.write(str(path), tone(seconds, 220, amp, sr), sr)
    return path


def write_pt(path, codes, text, rms, version=1):
    """A prompt as the reference's VoiceClonePrompt.save writes it."""
    torch.save({"format_version": version, "ref_audio_tokens": codes, "ref_text": text, "ref_rms": rms}, str(path))
    return path


# ------------------------------------------------------------------------------------ names


def test_voice_dir_is_in_the_user_home(home):
    from omnivoice_cli.engine.checkpoint.hub import user_home

    assert voices.voice_dir() == user_home() / "voices" == home / "voices"


@pytest.mark.parametrize("name", ["alice", "Bob_2", "narrator-1", "v1.2", "élodie", "x"])
def test_good_names(name):
    assert voices.check_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        " ",
        "a/b",
        "../x",
        "a\\b",
        ".hidden",
        "-dash",
        "x.",
        "my voice",
        "x.safetensors",
        "x.pt",
        "~me",
        "a" * 65,
        "tab\there",
        "_under",
    ],
)
def test_bad_names(name):
    from omnivoice_cli.engine.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="voice name"):
        voices.check_name(name)


@pytest.mark.parametrize(
    "spec,is_path",
    [
        ("alice", False),
        ("v1.2", False),
        ("./alice", True),
        ("voices/a", True),
        ("a.safetensors", True),
        ("A.PT", True),
        ("~/v", True),
        ("/abs/v", True),
    ],
)
def test_name_or_path(spec, is_path):
    assert voices.is_voice_path(spec) is is_path


# ------------------------------------------------------------------------------------ voice add / list / show / rm


def test_add_list_show_rm(invoke, fake_engine, home, ref, tmp_path):
    r = invoke("voice", "add", "alice", "--ref", ref, "--ref-text", REF_TEXT, "--model", "some/model", "--threads", 2)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert fake_engine.loads == [{"model": "some/model", "device": "auto", "dtype": "auto", "threads": 2}]
    assert fake_engine.encoded == [(str(ref), REF_TEXT)]
    path = home / "voices" / "alice.safetensors"
    assert files_in(home) == ["voices/alice.safetensors"]
    assert "voice 'alice': 2.76 s of audio" in r.stderr and str(path) in r.stderr

    from omnivoice_cli.engine.sound.voice import load_voice
    from omnivoice_cli.engine.sound.voicefile import read_voice_metadata

    meta = read_voice_metadata(path)
    assert meta["name"] == "alice" and meta["source"] == str(ref.resolve()) and meta["model"] == "some/model"
    assert meta["seconds"] == "2.76" and meta["frames"] == "69" and meta["created"].endswith("Z")
    voice = load_voice(path)
    assert voice.text == REF_TEXT + "." and voice.codes.shape == (8, 69) and voice.rms == pytest.approx(0.05)

    r = invoke("voice", "add", "bob", "--ref", ref, "--ref-text", "Bob speaking.")
    assert r.exit_code == 0, r.stderr
    r = invoke("voice", "list")
    assert r.exit_code == 0, r.stderr
    rows = saved_rows(r)
    assert [row.split()[0] for row in rows] == ["alice", "bob"]
    assert "2.76 s" in rows[0] and REF_TEXT in rows[0] and meta["created"][:10] in rows[0]
    assert f"voices: {home / 'voices'}" in r.stderr

    r = invoke("voice", "show", "alice")
    assert r.exit_code == 0, r.stderr
    shown = dict(line.split(":", 1) for line in r.stdout.splitlines())
    shown = {k: v.strip() for k, v in shown.items()}
    assert shown["name"] == "alice" and shown["text"] == REF_TEXT + "." and shown["source"] == str(ref.resolve())
    assert shown["model"] == "some/model" and shown["seconds"] == "2.76" and shown["format version"] == "1"
    r = invoke("voice", "show", path)  # a file works too
    assert r.exit_code == 0 and "alice" in r.stdout

    r = invoke("voice", "rm", "alice")
    assert r.exit_code == 0, r.stderr
    assert files_in(home) == ["voices/bob.safetensors"]
    r = invoke("voice", "list")
    assert [row.split()[0] for row in saved_rows(r)] == ["bob"]


def test_list_when_empty(invoke, home):
    r = invoke("voice", "list")
    assert r.exit_code == 0 and saved_rows(r) == []
    assert [row.split()[0] for row in r.stdout.splitlines()] == list(voices.builtin_voices())  # the built-in ones
    assert "no saved voices yet" in r.stderr


def test_add_uses_the_transcript_beside_the_recording(invoke, fake_engine, home, ref):
    ref.with_suffix(".txt").write_text("The words\nof me.wav \n")
    r = invoke("voice", "add", "me", "--ref", ref)
    assert r.exit_code == 0, r.stderr
    assert fake_engine.encoded == [(str(ref), "The words of me.wav")]
    r = invoke("voice", "add", "me2", "--ref", ref, "--ref-text", "Given text wins.")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.encoded[-1] == (str(ref), "Given text wins.")


def test_existing_name_needs_force(invoke, fake_engine, home, ref):
    assert invoke("voice", "add", "alice", "--ref", ref, "--ref-text", "One.").exit_code == 0
    before = (home / "voices" / "alice.safetensors").read_bytes()
    for name in ("alice", "ALICE"):  # names differing only in case would share a file on some systems
        r = invoke("voice", "add", name, "--ref", ref, "--ref-text", "Two.")
        assert r.exit_code == 2
        assert "voice 'alice' already exists" in error_line(r) and "--force" in error_line(r)
    assert len(fake_engine.loads) == 1  # refused before the model
    assert (home / "voices" / "alice.safetensors").read_bytes() == before
    r = invoke("voice", "add", "Alice", "--ref", ref, "--ref-text", "Two.", "--force")
    assert r.exit_code == 0, r.stderr
    assert files_in(home) == ["voices/Alice.safetensors"]  # replaced, not doubled

    from omnivoice_cli.engine.sound.voice import load_voice

    assert load_voice(home / "voices" / "Alice.safetensors").text == "Two."


def _silent(path):
    sf.write(str(path), np.zeros(3 * SR, np.float32), SR)


def _mostly_silence(path):  # 0.1 s of sound in 3 s of silence: too short once the silences go
    wav = np.zeros(3 * SR, np.float32)
    t = np.arange(SR // 10) / SR
    wav[SR : SR + SR // 10] = 0.3 * np.sin(2 * np.pi * 220 * t)
    sf.write(str(path), wav, SR)


def _header_only(path):
    shutil.copy(GOLDEN / "ref_24k.wav", path)
    path.write_bytes(path.read_bytes()[:44])


def _truncated(path):
    shutil.copy(GOLDEN / "ref_24k.wav", path)
    path.write_bytes(path.read_bytes()[:30])


def _truncated_flac(path):
    audio, sr = sf.read(str(GOLDEN / "ref_24k.wav"))
    sf.write(str(path), audio, sr, format="FLAC")
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


BAD_REFS = {
    # name: (file name, how to make it, transcript args, message fragment)
    "missing file": ("nope.wav", None, ["--ref-text", "Hi."], "nope.wav' does not exist"),
    "a folder": ("folder.wav", lambda p: p.mkdir(), ["--ref-text", "Hi."], "is a folder, not a recording"),
    "not audio": (
        "text.wav",
        lambda p: p.write_text("hello, not audio"),
        ["--ref-text", "Hi."],
        "cannot read reference audio",
    ),
    "truncated header": ("cut.wav", _truncated, ["--ref-text", "Hi."], "cannot read reference audio"),
    "truncated flac": ("cut.flac", _truncated_flac, ["--ref-text", "Hi."], "cannot read reference audio"),
    "empty": ("empty.wav", _header_only, ["--ref-text", "Hi."], "is empty"),
    "silent": ("silent.wav", _silent, ["--ref-text", "Hi."], "is silent: nothing is left after silence removal"),
    "short after silence removal": ("blip.wav", _mostly_silence, ["--ref-text", "Hi."], "is too short"),
    "stereo 16 kHz silence": (
        "st.flac",
        lambda p: sf.write(str(p), np.zeros((16000, 2), np.float32), 16000),
        ["--ref-text", "Hi."],
        "is silent",
    ),
    "too short": ("short.wav", lambda p: tone_file(p, 0.3), ["--ref-text", "Hi."], "is too short"),
    "empty transcript": ("ok.wav", lambda p: tone_file(p, 2), ["--ref-text", "  "], "--ref-text is empty"),
    "no transcript": ("ok.wav", lambda p: tone_file(p, 2), [], "no transcript for the reference audio"),
    "empty transcript file": (
        "ok.wav",
        lambda p: (tone_file(p, 2), p.with_suffix(".txt").write_text("\n \n")),
        [],
        "ok.txt is empty",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REFS))
@pytest.mark.parametrize("command", ["say", "voice add"])
def test_bad_reference(invoke, fake_engine, home, tmp_path, case, command, monkeypatch):
    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # no speech recogniser (the asr extra absent)
    """Each bad recording: exit 2, one line, before the model, nothing written."""
    name, make, text_args, message = BAD_REFS[case]
    src = tmp_path / "src"
    src.mkdir()
    path = src / name
    if make:
        make(path)
    out = tmp_path / "out"
    out.mkdir()
    if command == "say":
        r = invoke("say", "Hello.", "--ref", path, *text_args, "-o", out / "x.wav")
    else:
        r = invoke("voice", "add", "alice", "--ref", path, *text_args)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert message in error_line(r)
    assert fake_engine.loads == []
    assert files_in(out) == [] and not (home / "voices").exists()
    assert r.stdout == ""


def test_no_transcript_says_how_to_give_one(invoke, fake_engine, home, ref, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # no speech recogniser (the asr extra absent)
    r = invoke("say", "Hello.", "--ref", ref, "-o", tmp_path / "x.wav")
    line = error_line(r)
    assert "--ref-text" in line and str(ref.with_suffix(".txt")) in line and "install a speech recogniser" in line


@pytest.mark.parametrize(
    "name,message",
    [
        ("a/b", "voice name 'a/b' is not allowed"),
        ("../up", "voice name '../up' is not allowed"),
        (".hidden", "is not allowed"),
        ("two words", "is not allowed"),
        ("alice.safetensors", "is not allowed"),
        ("x" * 65, "is too long"),
    ],
)
def test_add_bad_name(invoke, fake_engine, home, ref, name, message):
    r = invoke("voice", "add", name, "--ref", ref, "--ref-text", REF_TEXT)
    assert r.exit_code == 2
    assert message in error_line(r)
    assert fake_engine.loads == [] and not (home / "voices").exists()


def test_rm_unknown_deletes_nothing(invoke, fake_engine, home, ref):
    assert invoke("voice", "add", "alice", "--ref", ref, "--ref-text", REF_TEXT).exit_code == 0
    r = invoke("voice", "rm", "alice", "alicia")
    assert r.exit_code == 2
    assert "unknown voice 'alicia' (did you mean 'alice'?); known voices: alice" in error_line(r)
    assert files_in(home) == ["voices/alice.safetensors"]


def test_long_reference_warns_once(invoke, fake_engine, home, tmp_path):
    long = tone_file(tmp_path / "long.wav", 22.0)
    r = invoke("say", "Hello.", "--ref", long, "--ref-text", "A long recording.", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    long_warning, padded, transcript_warning = warnings_of(r)  # each once; the short transcript is checked too
    assert "is 22.0s long (>20s)" in long_warning and "3-10s" in long_warning
    assert "ends while still sounding" in padded  # a tone cut off: padded with silence
    assert "is the transcript complete?" in transcript_warning
    r = invoke("voice", "add", "long", "--ref", long, "--ref-text", "A long recording.")
    assert r.exit_code == 0, r.stderr
    assert len(warnings_of(r)) == 3


# ------------------------------------------------------------------------------------ say --ref / --voice


def test_say_ref_and_voice_map_to_the_request(invoke, fake_engine, home, ref, tmp_path):
    ref.with_suffix(".txt").write_text(REF_TEXT)
    r = invoke("say", "Hi.", "--ref", ref, "-o", tmp_path / "a.wav", "--json", "--no-denoise")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ref"] == str(ref) and report["ref_text"] == REF_TEXT
    [req] = fake_engine.requests
    assert req.ref.text == REF_TEXT + "." and req.ref.codes.shape == (8, 69) and req.generation.denoise is False

    assert invoke("voice", "add", "alice", "--ref", ref).exit_code == 0
    r = invoke("say", "Hi.", "--voice", "alice", "-o", tmp_path / "b.wav", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["voice_file"] == str(home / "voices" / "alice.safetensors")
    assert json.loads(r.stdout)["settings"]["voice"] == "alice"
    saved = fake_engine.requests[-1].ref
    assert torch.equal(saved.codes, req.ref.codes) and saved.text == req.ref.text and saved.rms == req.ref.rms
    assert len(fake_engine.encoded) == 2  # say --voice encodes nothing

    r = invoke("say", "Hi.", "--voice", home / "voices" / "alice.safetensors", "-o", tmp_path / "c.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert torch.equal(fake_engine.requests[-1].ref.codes, req.ref.codes)
    # the same seed: the same request, so the same audio
    assert (tmp_path / "a.wav").exists()


def test_ref_beats_a_presets_voice(invoke, fake_engine, home, ref, tmp_path):
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "p.toml").write_text('voice = "nobody"\n')
    r = invoke("say", "Hi.", "--preset", "p", "--ref", ref, "--ref-text", REF_TEXT, "-o", tmp_path / "x.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[0].ref.text == REF_TEXT + "."


BAD_SAY = [
    (["--ref", "{ref}", "--voice", "alice"], "give either --ref or --voice, not both"),
    (["--ref-text", "Hello."], "--ref-text needs --ref, the recording it transcribes"),
    (["--voice", "zed"], "unknown voice 'zed'; known voices: alice, bob; built in: alloy, ash,"),
    (["--voice", "alise"], "unknown voice 'alise' (did you mean 'alice'?); known voices: alice, bob"),
    (["--voice", "./nope.safetensors"], "voice file './nope.safetensors' ("),
    (["--voice", "{tmp}/other.safetensors"], "is a voice file of format version '2'; this omnivoice reads version 1"),
    (["--voice", "{tmp}/notvoice.safetensors"], "notvoice.safetensors is not an omnivoice voice file"),
    (["--voice", "{tmp}/garbage.safetensors"], "garbage.safetensors is not a voice file"),
    (["--voice", "{tmp}/old.pt"], "has prompt format version 0; supported: 1"),
    (["--voice", "{tmp}/evil.pt"], "is not a saved reference prompt"),
    (["--voice", "{tmp}/wide.pt"], "this model needs [8, frames]"),
    (["--voice", "{tmp}/big.pt"], "the voice's codes are out of range"),
]


@pytest.mark.parametrize("args,message", BAD_SAY, ids=[m for _, m in BAD_SAY])
def test_bad_voice_in_say(invoke, fake_engine, home, ref, tmp_path, args, message):
    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    (home / "voices").mkdir(parents=True)
    codes = torch.arange(80).reshape(8, 10)
    for name in ("alice", "bob"):
        save_voice(home / "voices" / f"{name}.safetensors", VoicePrompt(codes, "Hi.", 0.1))
    _other_version(tmp_path / "other.safetensors")
    (tmp_path / "notvoice.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (tmp_path / "garbage.safetensors").write_bytes(b"garbage")
    write_pt(tmp_path / "old.pt", codes, "Hi.", 0.1, version=0)
    torch.save({"format_version": 1, "payload": _Evil()}, str(tmp_path / "evil.pt"))
    write_pt(tmp_path / "wide.pt", torch.zeros(4, 10, dtype=torch.long), "Hi.", 0.1)
    write_pt(tmp_path / "big.pt", torch.full((8, 10), 5000), "Hi.", 0.1)
    args = [a.replace("{ref}", str(ref)).replace("{tmp}", str(tmp_path)) for a in args]
    out = tmp_path / "out"
    out.mkdir()
    r = invoke("say", "Hello.", *args, "-o", out / "x.wav")
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert message in error_line(r)
    assert fake_engine.loads == [] and files_in(out) == []


class _Evil:
    """Unpickling this would run code: weights_only loading must refuse it."""

    def __reduce__(self):
        return (print, ("this must never run",))


def _other_version(path):
    from safetensors.torch import save_file

    meta = {"format": "omnivoice-voice", "version": "2", "text": "Hi.", "rms": "0.1"}
    save_file({"codes": torch.zeros(8, 10, dtype=torch.long)}, str(path), metadata=meta)


def test_broken_voice_in_the_list(invoke, home):
    (home / "voices").mkdir(parents=True)
    _other_version(home / "voices" / "old.safetensors")
    r = invoke("voice", "list")
    assert r.exit_code == 0
    assert r.stdout.startswith("old") and "(broken: " in r.stdout and "format version '2'" in r.stdout
    assert "Warning: " in r.stderr
    r = invoke("voice", "show", "old")
    assert r.exit_code == 2 and "format version '2'" in error_line(r)
    assert invoke("voice", "rm", "old").exit_code == 0  # a broken voice can still be removed


@pytest.mark.parametrize(
    "name, spec",
    [
        ("alice.flac", "alice.flac"),  # no '/': would be looked up as a saved voice's name
        ("alice.flac", "./alice.flac"),  # a path: read as a voice file, a header-length error before
        ("take 2.wav", "take 2.wav"),
        ("bob", "./bob"),  # no extension: known by how the file begins (RIFF)
    ],
)
def test_a_recording_given_to_voice_says_how_to_clone_it(invoke, fake_engine, tmp_path, monkeypatch, name, spec):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    sf.write(name, np.zeros(SR, np.float32), SR, format="FLAC" if name.endswith(".flac") else "WAV")
    r = invoke("say", "Hi", "--voice", spec, "-o", "out.wav")
    assert r.exit_code == 2
    quoted = f"'{spec}'" if " " in spec else spec
    assert error_line(r) == (
        f"Error: --voice: '{spec}' is a recording, not a saved voice or voice file: clone it with --ref {quoted} "
        f"(or save it as a voice once: omnivoice voice add NAME --ref {quoted})"
    )
    assert fake_engine.loads == []


def test_a_saved_voice_file_is_still_a_voice(invoke, fake_engine, tmp_path, monkeypatch):
    import torch

    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    monkeypatch.chdir(tmp_path)
    save_voice(tmp_path / "v.safetensors", VoicePrompt(torch.zeros(8, 10, dtype=torch.int64), "Hello.", 0.1))
    r = invoke("say", "Hi", "--voice", "./v.safetensors", "-o", "out.wav")
    assert r.exit_code == 0, r.stderr


def test_say_shows_the_short_reference_warning(invoke, fake_engine, tmp_path):
    ref = tone_file(tmp_path / "me.wav", 2.0)
    r = invoke("say", "Hi", "--ref", ref, "--ref-text", "Hello there.", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert f"Warning: reference audio {ref} is only 2.0 s long: under 3 s the voice is poorly captured" in r.stderr


# ------------------------------------------------------------------------------------ voice import


def test_import_reference_prompt(invoke, fake_engine, home, tmp_path):
    codes = (torch.arange(8 * 50).reshape(8, 50) * 7) % 1024
    pt = write_pt(tmp_path / "my_voice.pt", codes, "Imported words.", 0.07)
    r = invoke("voice", "import", pt, "--name", "bob")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == []  # no model needed
    from omnivoice_cli.engine.sound.voice import load_voice
    from omnivoice_cli.engine.sound.voicefile import read_voice_metadata

    voice = load_voice(home / "voices" / "bob.safetensors")
    assert torch.equal(voice.codes, codes) and voice.text == "Imported words." and voice.rms == 0.07
    meta = read_voice_metadata(home / "voices" / "bob.safetensors")
    assert meta["source"] == str(pt.resolve()) and meta["imported"] == "reference prompt" and meta["seconds"] == "2.00"
    r = invoke("voice", "import", pt)  # the name defaults to the file's
    assert r.exit_code == 0, r.stderr
    assert sorted(voices.voice_index()) == ["bob", "my_voice"]
    # a voice file (someone else's) imports too
    r = invoke("voice", "import", home / "voices" / "bob.safetensors", "--name", "bob2")
    assert r.exit_code == 0, r.stderr
    assert torch.equal(load_voice(home / "voices" / "bob2.safetensors").codes, codes)
    # say --voice with the .pt directly, and with the imported voice: the same prompt
    for spec in (str(pt), "bob"):
        r = invoke("say", "Hello.", "--voice", spec, "-o", tmp_path / "x.wav", "-q")
        assert r.exit_code == 0, r.stderr
        assert torch.equal(fake_engine.requests[-1].ref.codes, codes) and fake_engine.requests[-1].ref.rms == 0.07


@pytest.mark.parametrize(
    "make,args,message",
    [
        (None, ["--name", "x"], "voice file '{f}' does not exist"),
        (
            lambda p: write_pt(p, torch.zeros(8, 5, dtype=torch.long), "Hi.", 0.1, version=2),
            ["--name", "x"],
            "has prompt format version 2; supported: 1",
        ),
        (lambda p: torch.save([1, 2, 3], str(p)), ["--name", "x"], "no format_version"),
        (
            lambda p: torch.save({"format_version": 1, "x": _Evil()}, str(p)),
            ["--name", "x"],
            "is not a saved reference prompt",
        ),
        (lambda p: p.write_bytes(b"garbage"), ["--name", "x"], "is not a saved reference prompt"),
        (
            lambda p: write_pt(p, torch.zeros(8, 5, dtype=torch.long), "  ", 0.1),
            ["--name", "x"],
            "ref_text is missing or empty",
        ),
        (lambda p: write_pt(p, torch.zeros(8, 5), "Hi.", 0.1), ["--name", "x"], "must be an integer tensor"),
        (lambda p: write_pt(p, torch.full((8, 5), -1), "Hi.", 0.1), ["--name", "x"], "negative values"),
        (
            lambda p: write_pt(p, torch.zeros(8, 5, dtype=torch.long), "Hi.", 0.1),
            ["--name", "a/b"],
            "voice name 'a/b' is not allowed",
        ),
        (
            lambda p: write_pt(p, torch.zeros(8, 5, dtype=torch.long), "Hi.", 0.1),
            [],
            "the file's name 'my voice' cannot name a voice: give --name NAME",
        ),
    ],
)
def test_import_refuses(invoke, home, tmp_path, make, args, message, capfd):
    f = tmp_path / "my voice.pt"
    if make:
        make(f)
    r = invoke("voice", "import", f, *args)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert message.replace("{f}", str(f)) in error_line(r)
    assert not (home / "voices").exists() or files_in(home / "voices") == []
    assert "this must never run" not in capfd.readouterr().out + r.stdout


def test_import_existing_name(invoke, home, tmp_path):
    pt = write_pt(tmp_path / "v.pt", torch.zeros(8, 5, dtype=torch.long), "Hi.", 0.1)
    assert invoke("voice", "import", pt, "--name", "bob").exit_code == 0
    r = invoke("voice", "import", pt, "--name", "bob")
    assert r.exit_code == 2 and "voice 'bob' already exists" in error_line(r)
    assert invoke("voice", "import", pt, "--name", "bob", "--force").exit_code == 0


# ------------------------------------------------------------------------------------ built-in voices


def test_builtin_voices_are_the_servers_table():
    from omnivoice_cli.server.config import load_voice_map

    table = voices.builtin_voices()
    assert table == load_voice_map() and table["alloy"] == "female, young adult, moderate pitch"
    assert {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse"} <= set(
        table
    )


@pytest.mark.parametrize("name", sorted(voices.builtin_voices()))
def test_say_speaks_every_builtin_voice(invoke, fake_engine, home, tmp_path, name):
    r = invoke("say", "Hi.", "--voice", name.upper(), "-o", tmp_path / "a.wav", "--json")
    assert r.exit_code == 0, r.stderr
    [req], [render] = fake_engine.requests, fake_engine.rendered
    # its voice rendered once (fixed seed and sentence, its items) and cloned: app/voices/design.py
    assert (render.instruct, render.seed) == (voices.builtin_voices()[name], BUILTIN_SEED)
    assert req.instruct == voices.builtin_voices()[name] and req.ref is not None
    assert req.ref.text == render.text and json.loads(r.stdout)["voice_prompt"] == voice_prompt(req.ref)
    assert json.loads(r.stdout)["settings"]["instruct"] == voices.builtin_voices()[name]


def test_instruct_replaces_a_builtin_voices_items_of_its_categories(invoke, fake_engine, home, tmp_path):
    r = invoke("say", "Hi.", "--voice", "alloy", "--instruct", "male, whisper", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.requests[-1].instruct == "male, young adult, moderate pitch, whisper"
    r = invoke("say", "Hi.", "--voice", "alloy", "--instruct", "deep", "-o", tmp_path / "b.wav", "-q")
    assert r.exit_code == 0 and fake_engine.requests[-1].instruct == "female, young adult, low pitch"
    r = invoke("say", "Hi.", "--voice", "alloy", "--instruct", "robotic", "-o", tmp_path / "c.wav")
    assert r.exit_code == 2 and "--instruct: unsupported instruct item in 'robotic'" in error_line(r)


def test_a_saved_voice_of_a_builtin_name_wins(invoke, fake_engine, home, tmp_path):
    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    (home / "voices").mkdir(parents=True)
    save_voice(home / "voices" / "Alloy.safetensors", VoicePrompt(torch.arange(80).reshape(8, 10), "Mine.", 0.1))
    r = invoke("say", "Hi.", "--voice", "alloy", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    req = fake_engine.requests[-1]
    assert req.ref is not None and req.ref.text == "Mine." and req.instruct is None
    r = invoke("voice", "list")
    names = [row.split()[0] for row in r.stdout.splitlines()]
    assert names[0] == "Alloy" and "alloy" not in names and "ash" in names  # the saved one, not both
    assert "saved voices replace the built-in alloy" in r.stderr
    assert invoke("voice", "show", "alloy").stdout.startswith("name:")
    assert "Mine." in invoke("voice", "show", "alloy").stdout
    assert invoke("voice", "rm", "alloy").exit_code == 0  # the saved one; the built-in one is back
    assert invoke("say", "Hi.", "--voice", "alloy", "-o", tmp_path / "b.wav", "-q").exit_code == 0
    assert fake_engine.requests[-1].instruct == "female, young adult, moderate pitch"


def test_voice_list_show_and_rm_of_builtin_voices(invoke, home):
    r = invoke("voice", "list")
    rows = {row.split()[0]: row for row in r.stdout.splitlines()}
    assert rows["onyx"].split(None, 2)[1:] == ["built-in", "male, middle-aged, very low pitch"]
    r = invoke("voice", "show", "Onyx")
    assert r.exit_code == 0 and "built-in" in r.stdout and "instruct: male, middle-aged, very low pitch" in r.stdout
    r = invoke("voice", "rm", "onyx")
    assert r.exit_code == 2 and "voice 'onyx' is built in" in error_line(r)
    r = invoke("voice", "show", "onyxx")
    assert r.exit_code == 2 and "unknown voice 'onyxx' (did you mean 'onyx'?)" in error_line(r)


def test_builtin_voice_in_a_cast(invoke, fake_engine, home, tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("A: Hello there.\nB: Hi.\n")
    r = invoke("say", "-f", script, "--cast", "A=shimmer", "--cast", "B=instruct:man", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    shimmer = voices.builtin_voices()["shimmer"]
    assert [q.instruct for q in fake_engine.requests] == [shimmer]  # cloning shimmer's voice, rendered apart
    assert [q.instruct for q in fake_engine.rendered] == [shimmer, "man"]  # B's line rendered as itself, once


def test_builtin_voice_in_a_batch_line(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text(
        json.dumps({"text": "a", "voice": "echo"})
        + "\n"
        + json.dumps({"text": "b", "voice": "nova", "instruct": "whisper"})
    )
    r = invoke("batch", src, "-o", tmp_path / "out", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.instruct for q in fake_engine.requests] == [
        voices.builtin_voices()["echo"],
        "female, middle-aged, high pitch, whisper",
    ]


# ------------------------------------------------------------------------------------ batch


def test_batch_voice_by_name_and_flag(invoke, fake_engine, home, ref, tmp_path):
    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    (home / "voices").mkdir(parents=True)
    codes = torch.arange(80).reshape(8, 10)
    save_voice(home / "voices" / "alice.safetensors", VoicePrompt(codes, "Alice.", 0.1))
    save_voice(home / "voices" / "bob.safetensors", VoicePrompt(codes + 1, "Bob.", 0.1))
    ref.with_suffix(".txt").write_text("The words\nin me.wav")
    src = tmp_path / "refs" / "jobs.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(row)
            for row in [
                {"text": "a"},
                {"text": "b", "voice": "alice"},
                {"text": "c", "ref": "me.wav"},  # transcript from me.txt
                {"text": "d\nsecond line", "ref": "me.wav", "ref_text": "Other\nwords."},
            ]
        )
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--voice", "bob", "-q")
    assert r.exit_code == 0, r.stderr
    a, b, c, d = fake_engine.requests
    assert torch.equal(a.ref.codes, codes + 1) and torch.equal(b.ref.codes, codes)
    assert c.ref.text == "The words in me.wav." and d.ref.text == "Other words." and d.text == "d second line"
    assert fake_engine.encoded == [(str(ref), "The words in me.wav"), (str(ref), "Other words.")]


def test_batch_speed_and_chunk_flags(invoke, fake_engine, home, tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text(json.dumps({"text": "a"}) + "\n" + json.dumps({"text": "b", "chunk_duration": 5}) + "\n")
    r = invoke(
        "batch",
        src,
        "-o",
        tmp_path / "out",
        "-q",
        "--threads",
        "2",
        "--quantize",
        "int8",
        "--chunk-duration",
        "8",
        "--chunk-threshold",
        "12",
    )
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [
        {"model": DEFAULT_MODEL, "device": "auto", "dtype": "auto", "threads": 2, "quantize": "int8"}
    ]
    a, b = fake_engine.requests
    assert (a.generation.audio_chunk_duration, a.generation.audio_chunk_threshold) == (8.0, 12.0)
    assert (b.generation.audio_chunk_duration, b.generation.audio_chunk_threshold) == (5.0, 12.0)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--threads", "0"], "--threads must be an integer >= 1, got 0"),
        (["--quantize", "fp8"], "--quantize must be int8, auto or none, got 'fp8'"),
        (["--quantize", "int8", "--compile"], "--quantize int8 and --compile cannot be combined"),
        (["--chunk-threshold", "40"], "--chunk-threshold must be seconds in (0, 30], got 40.0"),
    ],
)
def test_batch_bad_speed_flags(invoke, fake_engine, home, tmp_path, args, message):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", *args)
    assert r.exit_code == 2, r.stderr
    assert message in error_line(r)
    assert fake_engine.loads == [] and not (tmp_path / "out").exists()


def test_batch_line_preset_leaves_engine_options_to_the_run(invoke, fake_engine, home, tmp_path):
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "q.toml").write_text('quantize = "int8"\n')
    src = tmp_path / "jobs.jsonl"
    src.write_text(json.dumps({"text": "a"}) + "\n" + json.dumps({"text": "b", "preset": "q"}) + "\n")
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert len(fake_engine.loads) == 1 and "quantize" not in fake_engine.loads[0]  # loaded once, as the run says


# ------------------------------------------------------------------------------------ real engine (slow)

slow = pytest.mark.slow


def say(invoke, path, *args):
    r = invoke(
        "say", "I can speak in your voice.", "--model", TINY_CKPT, "--seed", 7, "--num-step", 8, "-o", path, "-q", *args
    )
    assert r.exit_code == 0, r.stderr
    return path.read_bytes()


@slow
def test_saved_voice_equals_ref(invoke, loaded, tiny_engine, home, ref, tmp_path):
    """voice add + say --voice == say --ref, byte for byte; and both == the engine with that prompt."""
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.media.output import encode

    r = invoke("voice", "add", "alice", "--ref", ref, "--ref-text", REF_TEXT, "--model", TINY_CKPT)
    assert r.exit_code == 0, r.stderr
    by_ref = say(invoke, tmp_path / "ref.wav", "--ref", ref, "--ref-text", REF_TEXT, "--no-mark")
    by_voice = say(invoke, tmp_path / "voice.wav", "--voice", "alice", "--no-mark")  # as encode() writes it
    assert by_voice == by_ref
    prompt = tiny_engine.voice_from_audio(str(ref), REF_TEXT)
    [alone] = tiny_engine.generate(
        [Request(text="I can speak in your voice.", seed=7, ref=prompt, generation=GenerationConfig(num_step=8))]
    )
    assert encode(alone.audio, alone.sample_rate) == by_voice
    assert say(invoke, tmp_path / "auto.wav", "--no-mark") != by_voice  # the voice matters


@slow
def test_reference_pt_prompt_equals_saved_voice(invoke, loaded, tiny_engine, home, ref, tmp_path):
    """A reference .pt prompt imports and speaks exactly like a voice added from the same codes."""
    prompt = tiny_engine.voice_from_audio(str(ref), REF_TEXT)
    pt = write_pt(tmp_path / "my_voice.pt", prompt.codes.clone(), prompt.text, prompt.rms)
    assert invoke("voice", "import", pt, "--name", "bob").exit_code == 0
    r = invoke("voice", "add", "alice", "--ref", ref, "--ref-text", REF_TEXT, "--model", TINY_CKPT)
    assert r.exit_code == 0, r.stderr
    alice = say(invoke, tmp_path / "alice.wav", "--voice", "alice")
    assert say(invoke, tmp_path / "bob.wav", "--voice", "bob") == alice
    assert say(invoke, tmp_path / "pt.wav", "--voice", pt) == alice


@pytest.mark.slow
def test_voice_list_and_show_import_no_torch(invoke, fake_engine, home, ref):
    assert invoke("voice", "add", "alice", "--ref", ref, "--ref-text", REF_TEXT).exit_code == 0
    code = (
        "import sys\n"
        "import typer.main\n"
        "import omnivoice_cli.cli as cli\n"
        "cmd = typer.main.get_command(cli.app)\n"
        "for args in (['voice', 'list'], ['voice', 'show', 'alice']):\n"
        "    cmd.main(args, prog_name='omnivoice', standalone_mode=False)\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNIVOICE_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("alice ") and "text: " in out.stdout
    assert "TORCH False" in out.stdout


def test_model_load_time_includes_the_encoder_when_cloning(invoke, fake_engine, home, ref, tmp_path):
    r = invoke("say", "Hi", "--ref", ref, "--ref-text", REF_TEXT, "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.encoder_loads == 1  # loaded with the model, inside "model loaded in"
    r = invoke("say", "Hi", "-o", tmp_path / "y.wav")
    assert fake_engine.encoder_loads == 1  # not without a recording
