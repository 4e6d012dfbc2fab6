"""`say` plays without -o, `--play` / `--stream`, and the formats of `-o` (issue 13), on the tiny checkpoint."""

from __future__ import annotations

import io
import shlex
import shutil
import sys

import numpy as np
import pytest
import soundfile as sf
from conftest import ROOT as ROOT_DIR
from conftest import TINY_CKPT, files_in

from omnivoice_cli.media import player as playermod
from omnivoice_cli.media import players as playersmod

RECORDER = """import sys
with open(sys.argv[1], "ab") as f:
    while True:
        data = sys.stdin.buffer.read(4096)
        if not data:
            break
        f.write(data)
"""
TEXT = "The first sentence is short. The second one is a little longer than the first. Third."
FAST = ["--model", TINY_CKPT, "--num-step", "2", "--seed", "11", "--position-temperature", "0"]


@pytest.fixture(autouse=True)
def no_sounddevice(monkeypatch):
    monkeypatch.setattr(playermod, "_sounddevice_problem", lambda: "not installed: pip install 'omnivoice-cli[play]'")


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    out = tmp_path / "played.raw"
    monkeypatch.setenv(
        "OMNIVOICE_PLAYER", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(out))}"
    )
    return out


@pytest.mark.slow
def test_no_output_plays_and_the_player_gets_the_streamed_raw_bytes(invoke, loaded, recorder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke("say", TEXT, *FAST)
    assert r.exit_code == 0, r.stderr
    assert "the player: " in r.stderr.splitlines()[-1]
    played = recorder.read_bytes()
    s = invoke("say", TEXT, *FAST, "--stream", "-o", "-", "--format", "raw")
    assert s.exit_code == 0, s.stderr
    assert played == s.stdout_bytes and len(played) > 0  # the same pieces, in the same order
    assert files_in(tmp_path) == ["played.raw", "recorder.py"]  # nothing written by say


@pytest.mark.slow
def test_play_and_write_a_file(invoke, loaded, recorder, tmp_path):
    out = tmp_path / "x.mp3"
    r = invoke("say", TEXT, *FAST, "--play", "-o", out)
    assert r.exit_code == 0, r.stderr
    played = np.frombuffer(recorder.read_bytes(), dtype="<i2")
    audio, sr = sf.read(str(out), dtype="int16")
    assert sr == 24000 and audio.ndim == 1
    assert abs(len(audio) - len(played)) <= 1728  # mp3: within its frame padding


@pytest.mark.slow
def test_stream_to_stdout_is_a_valid_wav_equal_to_the_streamed_file(invoke, loaded, tmp_path):
    r = invoke("say", TEXT, *FAST, "--stream", "-o", "-")
    assert r.exit_code == 0, r.stderr
    data = r.stdout_bytes
    assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff"  # size unknown while streaming
    f = invoke("say", TEXT, *FAST, "--stream", "-o", tmp_path / "s.wav")
    assert f.exit_code == 0, f.stderr
    file_audio, _ = sf.read(str(tmp_path / "s.wav"), dtype="int16")
    body = data.index(b"data", 36) + 8  # after the header's chunks (the AI mark's LIST/INFO: docs/marking.md)
    assert data[body:] == file_audio.tobytes() and data[body - 4 : body] == b"\xff\xff\xff\xff"


@pytest.mark.slow
def test_the_first_bytes_go_out_before_the_last_piece_is_generated(invoke, loaded, monkeypatch):
    from omnivoice_cli.media.streams import StreamWriter as StreamWriter_
    from omnivoice_cli.ui.progress import StepProgress

    events: list[str] = []
    real_write, real_step = StreamWriter_.write, StepProgress.__call__
    monkeypatch.setattr(StreamWriter_, "write", lambda self, a: (events.append("write"), real_write(self, a))[1])
    monkeypatch.setattr(StepProgress, "__call__", lambda self, d, t: (events.append("step"), real_step(self, d, t))[1])
    r = invoke("say", TEXT, *FAST, "--stream", "-o", "-", "--format", "raw")
    assert r.exit_code == 0, r.stderr
    first_write = events.index("write")
    assert "step" in events[first_write:]  # steps of later pieces came after the first audio went out


@pytest.mark.slow
def test_ctrl_c_while_playing_exits_130_and_writes_nothing(invoke, loaded, recorder, tmp_path, monkeypatch):
    def interrupted(self, audio):
        raise KeyboardInterrupt

    monkeypatch.setattr(playersmod.Player, "play", interrupted)
    r = invoke("say", TEXT, *FAST, "--play", "-o", tmp_path / "x.wav")
    assert r.exit_code == 130, r.stderr
    assert "playback stopped by Ctrl-C; nothing was written" in r.stderr
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.slow
@pytest.mark.parametrize("output", [None, "x.wav"])
def test_ctrl_c_while_the_end_plays_exits_130(invoke, loaded, recorder, tmp_path, monkeypatch, output):
    """All generated (a file written), the last audio playing: Ctrl-C stops it, with its message."""
    players = []

    def interrupted(self):  # Ctrl-C while close() waits for the player to finish
        players.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(playersmod.ProcessPlayer, "_finish", interrupted)
    r = invoke("say", TEXT, *FAST, *(["--play", "-o", tmp_path / output] if output else []))
    assert r.exit_code == 130, r.stderr
    last = r.stderr.splitlines()[-1]
    if output:
        assert last == f"Warning: playback stopped by Ctrl-C after writing {tmp_path / output}"
        assert sf.info(str(tmp_path / output)).frames > 0
    else:
        assert last == "Warning: playback stopped by Ctrl-C"
    [player] = players
    assert player.process.poll() is not None  # the player stopped at once


def test_a_closed_pipe_is_noticed_between_pieces(monkeypatch):
    """`--stream -o - | head -c 1000`: the reader gone is found while the next piece is made."""
    import os

    from omnivoice_cli.app.say.speakstream import watch_ends
    from omnivoice_cli.engine.errors import OmniVoiceError
    from omnivoice_cli.media.streams import StreamWriter

    quieted = []
    monkeypatch.setattr("omnivoice_cli.media.pipes.quiet_stdout", lambda: quieted.append(1))
    r, w = os.pipe()
    try:
        check = watch_ends(None, StreamWriter(w, "wav", 24000))
        check()  # the reader is there
        os.close(r)
        with pytest.raises(OmniVoiceError, match="stdout: the reader of the audio stream went away"):
            check()
        assert quieted == [1]
    finally:
        os.close(w)
    assert watch_ends(None, None) is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("aplay") is None, reason="aplay is not installed")
def test_play_to_aplays_null_device(invoke, loaded, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_PLAYER", "aplay -q -D null -t raw -f S16_LE -r 24000 -c 1")
    r = invoke("say", "Hello there.", *FAST)
    assert r.exit_code == 0, r.stderr


def test_no_player_is_exit_1_naming_what_was_tried(invoke, fake_engine, tmp_path, monkeypatch):
    monkeypatch.delenv("OMNIVOICE_PLAYER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    r = invoke("say", "Hello")
    assert r.exit_code == 1
    [error] = [ln for ln in r.stderr.splitlines() if ln.startswith("Error: ")]
    assert "no way to play audio here: tried" in error and "ffplay" in error and "-o FILE" in error
    assert fake_engine.loads == []  # the player is looked for before the model is loaded
    assert files_in(tmp_path) == []


def test_stream_refuses_a_format_that_cannot_stream(invoke, fake_engine):
    r = invoke("say", "Hi", "--stream", "-o", "-", "--format", "flac")
    assert r.exit_code == 2
    assert "cannot send flac piece by piece" in r.stderr and fake_engine.loads == []


def test_format_must_agree_with_the_extension(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi", "--format", "wav", "-o", tmp_path / "x.mp3")
    assert r.exit_code == 2 and "is mp3 but the format asked is wav" in r.stderr


@pytest.mark.parametrize("ext", ["mp3", "opus", "raw", "pcm", "flac", "ogg"])
def test_files_of_every_format_decode_to_the_wavs_length(invoke, fake_engine, tmp_path, ext):
    assert invoke("say", "Hi", "--seed", "4", "-o", tmp_path / "x.wav").exit_code == 0
    wav, _ = sf.read(str(tmp_path / "x.wav"), dtype="int16")
    r = invoke("say", "Hi", "--seed", "4", "-o", tmp_path / f"x.{ext}")
    assert r.exit_code == 0, r.stderr
    if ext in ("raw", "pcm"):
        assert (tmp_path / f"x.{ext}").read_bytes() == wav.tobytes()  # the wav's sample data
        return
    audio, sr = sf.read(str(tmp_path / f"x.{ext}"), dtype="int16")
    assert sr == 24000 and audio.ndim == 1
    if ext == "mp3":
        assert 0 <= len(audio) - len(wav) <= 1728 or len(audio) == len(wav)
    else:
        assert len(audio) == len(wav)


def test_raw_on_stdout_is_headerless_pcm(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi", "--seed", "4", "-o", "-", "--format", "raw")
    assert r.exit_code == 0, r.stderr
    w = invoke("say", "Hi", "--seed", "4", "-o", "-")
    audio, _ = sf.read(io.BytesIO(w.stdout_bytes), dtype="int16")
    assert r.stdout_bytes == audio.tobytes()


@pytest.mark.slow
def test_say_with_a_broken_player_is_exit_1_with_its_reason(invoke, loaded, tmp_path, monkeypatch):
    """OMNIVOICE_PLAYER=false, and a player that finds no sound device (ffplay's "audio open
    failed", exit 0): `say` is exit 1 with the player's reason, never "played"."""
    import functools

    from helpers.player import NO_DEVICE

    from omnivoice_cli.app.say import speakrun

    ENV_PLAYER = playermod.ENV_PLAYER
    script = tmp_path / "no-device.py"
    script.write_text(NO_DEVICE)
    monkeypatch.chdir(tmp_path)
    for player, words in [
        ("false", f"Error: {ENV_PLAYER} (false) exited with code 1 at start: fix the command, or unset"),
        (f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", "it found no sound device: No more combinations"),
    ]:
        monkeypatch.setenv(ENV_PLAYER, player)
        # `false` exits at once, but a loaded machine may start it after STARTUP_GRACE (0.2 s): its exit is
        # waited for (the no-device player reads to the end: a longer grace would only be waited out)
        grace = 120.0 if player == "false" else playersmod.STARTUP_GRACE
        monkeypatch.setattr(speakrun, "open_player", functools.partial(playermod.open_player, grace=grace))
        r = invoke("say", "Hello.", *FAST)
        assert r.exit_code == 1 and words in r.stderr, r.stderr
        assert "played" not in r.stderr.replace("played nothing", "")


def _say_process(tmp_path, *args, stdout, player):
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR), "OMNIVOICE_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env["OMNIVOICE_PLAYER"] = player
    env.pop("OMNIVOICE_MODEL", None)
    cmd = [sys.executable, "-m", "omnivoice_cli.cli", "say", *map(str, args), *map(str, FAST)]
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=False, env=env, cwd=tmp_path, timeout=300)


def test_say_with_stdout_redirected_to_a_file_and_no_o_is_refused_before_the_model(tmp_path):
    """Before: `say Hello > out.wav` played and left out.wav empty. Refused in one line (exit 2)
    that says what was probably meant, before the model loads; nothing played."""
    played = tmp_path / "played.raw"
    with open(tmp_path / "out.wav", "wb") as f:
        proc = _say_process(tmp_path, "Hello.", stdout=f, player=f"cat > {shlex.quote(str(played))}")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        "Error: stdout is redirected to a file, but without -o the audio is played and nothing is written there: "
        "did you mean -o - (the audio on stdout) or -o FILE? (--play plays it anyway)"
    ]
    assert "loading the model" not in err and not played.exists()


@pytest.mark.slow
def test_say_piped_without_o_still_plays(tmp_path):
    """A pipe (`say Hello | cat`) is not a file: it plays as before, exit 0."""
    import subprocess

    played = tmp_path / "played.raw"
    proc = _say_process(tmp_path, "Hello.", stdout=subprocess.PIPE, player=f"cat > {shlex.quote(str(played))}")
    assert proc.returncode == 0, proc.stderr.decode()
    assert played.stat().st_size > 0 and proc.stdout == b""


@pytest.mark.slow
def test_a_stop_at_the_end_of_a_streamed_file_leaves_a_complete_file_that_the_message_names(
    invoke, loaded, tmp_path, monkeypatch
):
    """The race: a Ctrl-C held while `say --stream -o FILE` wrote its file was raised as the write
    ended, before the run knew the file was written: "nothing was written", exit 130, and the file
    there. Now the stop sent at the very end gives the file whole and the words "after writing"
    (exit 0, a complete run, as `say -o FILE` gives); a stop before it leaves nothing (test_stop)."""
    import os
    import signal

    from omnivoice_cli.media import output as omnivoice_output

    real_write = omnivoice_output._write_blocks

    def write_then_interrupted(file, data, samplerate, *args):
        os.kill(os.getpid(), signal.SIGINT)  # held until the write is done
        return real_write(file, data, samplerate, *args)

    monkeypatch.setattr(omnivoice_output, "_write_blocks", write_then_interrupted)
    out = tmp_path / "x.wav"
    r = invoke("say", TEXT, *FAST, "--stream", "-o", out)
    assert r.exit_code == 0, r.stderr  # a stop is a complete run (0) or nothing written (130)
    assert r.stderr.splitlines()[-1] == f"Warning: stopped by Ctrl-C after writing {out}"
    assert sf.info(str(out)).frames > 0 and sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".wav") == [
        "x.wav"
    ]
