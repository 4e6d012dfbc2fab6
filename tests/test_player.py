"""omnivoice_cli.media.player and players: choosing a player, feeding it every byte in order, stopping it at once."""

from __future__ import annotations

import shlex
import shutil
import sys
import threading
import time
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers.audio import tone
from helpers.player import NO_DEVICE

from omnivoice_cli.media import player as playermod
from omnivoice_cli.media import players as playersmod
from omnivoice_cli.media.pcm import pcm16
from omnivoice_cli.media.player import ENV_PLAYER, PlayerUnavailable, candidates, open_player
from omnivoice_cli.media.players import DevicePlayer, PlayerFailed, ProcessPlayer

SR = 24000
RECORDER = "import shutil, sys\nwith open(sys.argv[1], 'wb') as f:\n    shutil.copyfileobj(sys.stdin.buffer, f)\n"
NOTHING = lambda name: None  # noqa: E731  (no command on PATH)


@pytest.fixture(autouse=True)
def no_sounddevice(monkeypatch):
    """Tests choose among commands unless they bring their own sounddevice."""
    monkeypatch.setattr(playermod, "_sounddevice_problem", lambda: "not installed: pip install 'omnivoice-cli[play]'")


def recorder(tmp_path, name="got.raw"):
    """A stand-in player command that writes what it reads on stdin to a file."""
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    out = tmp_path / name
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(out))}", out


def test_the_order_of_choice():
    found, skipped = candidates(
        {ENV_PLAYER: "my-player --raw"},
        which=lambda n: f"/usr/bin/{n}" if n in ("aplay", "mpv") else None,
        platform="linux",
    )
    assert [c.name for c in found] == [f"{ENV_PLAYER} (my-player --raw)", "mpv", "aplay"]
    assert found[0].shell == "my-player --raw"
    assert found[2].argv == ("/usr/bin/aplay", "-q", "-t", "raw", "-f", "S16_LE", "-r", "24000", "-c", "1")
    assert skipped == [
        "sounddevice (not installed: pip install 'omnivoice-cli[play]')",
        "ffplay (not on PATH)",
        "paplay (not on PATH)",
        "pw-play (not on PATH)",
    ]


@pytest.mark.parametrize("name", ["ffplay", "mpv", "aplay", "paplay", "pw-play"])
def test_every_command_reads_raw_s16le_24k_mono_on_stdin(name):
    [c] = [c for c in playermod.player_commands(SR, "linux") if c.name == name]
    line = " ".join(c.argv)
    assert "24000" in line and "s16" in line.lower()
    assert "mono" in line or "-c 1" in line or "channels=1" in line or name == "ffplay"  # ffplay's s16le is mono
    reads_stdin = {"ffplay": "-i -", "mpv": " -", "pw-play": " -"}  # aplay and paplay read stdin without
    assert line.endswith(reads_stdin.get(name, line[-3:]))
    assert name != "ffplay" or "-autoexit" in line  # ffplay would otherwise wait after the end


def test_the_recording_player_gets_every_byte(tmp_path):
    command, out = recorder(tmp_path)
    pieces = [tone(0.3, 440.0, 0.4), tone(0.01, 220, 0.4), np.zeros(0, np.float32), tone(1.2, 330, 0.4)]
    with open_player(SR, env={ENV_PLAYER: command}, which=NOTHING) as p:
        assert isinstance(p, ProcessPlayer) and p.name.startswith(ENV_PLAYER)
        for piece in pieces:
            p.play(piece)
        p.write(b"\x01\x02")
    assert out.read_bytes() == b"".join(pcm16(x) for x in pieces) + b"\x01\x02"
    assert p.bytes_played == out.stat().st_size


HUNG = 120.0  # seconds after which a call that should return at once is taken as hung (only a hang trips it)


def returns(call) -> bool:
    """Whether `call()` returns (in a thread; one still in it HUNG seconds on never would)."""
    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(HUNG)
    return not t.is_alive()


def test_write_does_not_wait_for_the_player(tmp_path):
    """A player that does not read does not hold up the caller: the bytes are queued (a write
    that waited for the player would never return)."""
    script = tmp_path / "deaf.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")  # never reads
    p = open_player(SR, env={ENV_PLAYER: f"exec {sys.executable} {script}"}, which=NOTHING)

    def write():
        for _ in range(20):
            p.write(b"\0" * 48000)  # 20 s of audio, far more than a pipe holds

    assert returns(write)
    p.stop()
    assert p.process.poll() is not None


def test_stop_kills_the_player_at_once(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")  # never reads, never ends
    p = open_player(SR, env={ENV_PLAYER: f"exec {sys.executable} {script}"}, which=NOTHING)
    p.write(b"\0" * 480000)
    assert returns(p.stop)  # a stop that waited for the player (it never reads, never ends) never would
    assert p.process.poll() is not None
    p.stop()  # twice is harmless


def test_ctrl_c_inside_the_block_stops_the_player(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    with pytest.raises(KeyboardInterrupt):
        with open_player(SR, env={ENV_PLAYER: f"{sys.executable} {script}"}, which=NOTHING) as p:
            p.write(b"\0" * 1000)
            raise KeyboardInterrupt
    assert p.process.poll() is not None  # the shell and the player in it are gone


def test_a_player_that_dies_while_playing_is_an_error(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text("import sys\nsys.stdin.buffer.read(10)\nsys.stderr.write('device lost\\n')\nsys.exit(4)\n")
    p = open_player(SR, env={ENV_PLAYER: f"{sys.executable} {script}"}, which=NOTHING)
    with pytest.raises(PlayerFailed, match=r"quit before the end of the audio \(exit code 4\): device lost"):
        for _ in range(200):
            p.write(b"\0" * 48000)
            time.sleep(0.01)
        p.close()
    p.stop()


def test_nothing_to_play_with_names_what_was_tried():
    with pytest.raises(PlayerUnavailable) as e:
        open_player(SR, env={}, which=NOTHING, platform="linux")
    msg = str(e.value)
    for name in ("sounddevice", "ffplay", "mpv", "aplay", "paplay", "pw-play"):
        assert name in msg
    assert "-o FILE" in msg and ENV_PLAYER in msg


def test_a_player_failing_at_start_falls_through_to_the_next(tmp_path, monkeypatch):
    script = tmp_path / "nocard.py"
    script.write_text(
        "import sys\nsys.stderr.write('aplay: main:831: audio open error: No such file or directory\\n')\nsys.exit(1)\n"
    )
    command, out = recorder(tmp_path)
    # the failing player's start (a Python) is given HUNG seconds to fail, not STARTUP_GRACE's 0.2: a
    # loaded machine's slow start would otherwise be taken for a player that works
    with pytest.raises(PlayerUnavailable, match=r"exited with code 1 at start: aplay: main:831: audio open error"):
        open_player(SR, env={ENV_PLAYER: f"{sys.executable} {script}"}, which=NOTHING, grace=HUNG)
    # a broken "aplay" on PATH is passed over for the next command that works
    stand_ins = {"aplay": (sys.executable, str(script)), "paplay": tuple(shlex.split(command))}
    real = playermod.player_commands
    monkeypatch.setattr(
        playermod,
        "player_commands",
        lambda sr, platform=None: [replace(c, argv=stand_ins.get(c.name, c.argv)) for c in real(sr, platform)],
    )
    waited = lambda c, sr, grace: ProcessPlayer(c, sr, grace=HUNG if c.name == "aplay" else grace)  # noqa: E731
    monkeypatch.setattr(playermod, "ProcessPlayer", waited)  # (the working one keeps the short grace: it never exits)
    with open_player(SR, env={}, which=lambda n: n if n == sys.executable else None, platform="linux") as p:
        assert p.name == "paplay"
        p.play(tone(0.1, 440.0, 0.4))
    assert out.read_bytes() == pcm16(tone(0.1, 440.0, 0.4))


class FakeStream:
    def __init__(self, samplerate, channels, dtype):
        assert (samplerate, channels, dtype) == (SR, 1, "int16")
        self.data, self.state = bytearray(), "new"
        FakeSounddevice.streams.append(self)

    def start(self):
        self.state = "started"

    def write(self, data):
        self.data += bytes(data)

    def stop(self):
        self.state = "stopped"

    def abort(self):
        self.state = "aborted"

    def close(self):
        self.state += "+closed"


class FakeSounddevice(types.ModuleType):
    streams: list = []

    def __init__(self, devices=True):
        super().__init__("sounddevice")
        self.devices = devices
        self.RawOutputStream = FakeStream

    def query_devices(self, kind=None):
        if not self.devices:
            raise ValueError("No output device")
        return {"name": "fake"}


@pytest.mark.parametrize("devices", [True, False])
def test_sounddevice_when_it_finds_a_device(monkeypatch, devices):
    monkeypatch.undo()  # the real _sounddevice_problem, over a fake module
    monkeypatch.setitem(sys.modules, "sounddevice", FakeSounddevice(devices))
    FakeSounddevice.streams = []
    if not devices:
        found, skipped = candidates({}, which=NOTHING)
        assert found == [] and skipped[0] == "sounddevice (no output device: No output device)"
        return
    with open_player(SR, env={}, which=NOTHING) as p:
        assert isinstance(p, DevicePlayer)
        p.play(tone(0.2, 440.0, 0.4))
    [stream] = FakeSounddevice.streams
    assert bytes(stream.data) == pcm16(tone(0.2, 440.0, 0.4)) and stream.state == "stopped+closed"


def test_sounddevice_stop_aborts(monkeypatch):
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "sounddevice", FakeSounddevice())
    FakeSounddevice.streams = []
    p = open_player(SR, env={}, which=NOTHING)
    p.stop()
    assert FakeSounddevice.streams[0].state == "aborted+closed"


@pytest.mark.skipif(shutil.which("aplay") is None, reason="aplay is not installed")
def test_aplay_plays_to_its_null_device():
    with open_player(SR, env={ENV_PLAYER: "aplay -q -D null -t raw -f S16_LE -r 24000 -c 1"}, which=NOTHING) as p:
        p.play(tone(0.5, 440.0, 0.4))
    assert p.process.returncode == 0 and p.bytes_played == 2 * len(tone(0.5, 440.0, 0.4))


# --- the platform's own player, on a default install (issue 23, item 7) -------------------------

AFPLAY = """#!{python}
import sys, wave
with wave.open(sys.argv[-1], "rb") as w:
    assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
    frames = w.readframes(w.getnframes())
with open({out!r}, "ab") as f:
    f.write(frames)
with open({out!r} + ".clips", "a") as f:
    f.write(sys.argv[-1] + "\\n")
"""


def stand_in_afplay(tmp_path, body=None):
    """An executable named like afplay that appends the frames of the WAV file it is given."""
    out = tmp_path / "afplay.raw"
    path = tmp_path / "afplay"
    path.write_text(body or AFPLAY.format(python=sys.executable, out=str(out)))
    path.chmod(0o755)
    return str(path), out


@pytest.mark.parametrize(
    "platform, names",
    [
        ("linux", ["ffplay", "mpv", "aplay", "paplay", "pw-play"]),
        ("darwin", ["ffplay", "mpv", "afplay"]),
        ("win32", ["ffplay", "mpv", "winsound"]),
    ],
)
def test_each_platform_tries_its_own_player(monkeypatch, platform, names):
    """Without the play extra: ffplay or mpv where installed, else what the system has."""
    monkeypatch.setitem(sys.modules, "winsound", FakeWinsound())
    found, notes = candidates({}, which=lambda n: f"/bin/{n}", platform=platform)
    assert [c.name for c in found] == names
    assert notes == ["sounddevice (not installed: pip install 'omnivoice-cli[play]')"]
    assert [c.name for c in found if c.files] == (["afplay"] if platform == "darwin" else [])  # a file, not stdin


def test_without_any_command_each_platform_names_what_it_tried(monkeypatch):
    monkeypatch.delitem(sys.modules, "winsound", raising=False)
    monkeypatch.setattr(
        sys, "meta_path", [Refuse("winsound", ImportError("No module named 'winsound'")), *sys.meta_path]
    )
    for platform, tried in [
        ("darwin", "afplay (not on PATH)"),
        ("win32", "winsound (No module named 'winsound')"),
        ("linux", "pw-play (not on PATH)"),
    ]:
        with pytest.raises(PlayerUnavailable) as e:
            open_player(SR, env={}, which=NOTHING, platform=platform)
        assert tried in str(e.value) and "-o FILE" in str(e.value)
        assert ("alsa-utils" in str(e.value)) == (platform == "linux")
    assert playermod.platform_name("win32") == "win32" and playermod.platform_name("freebsd13") == "linux"


def test_afplay_gets_the_audio_as_wav_clips_in_order(tmp_path):
    path, out = stand_in_afplay(tmp_path)
    pieces = [tone(0.3, 440.0, 0.4), tone(0.2, 220, 0.4), tone(0.5, 330, 0.4)]
    with open_player(SR, env={}, which=lambda n: path if n == "afplay" else None, platform="darwin") as p:
        assert isinstance(p, playersmod.FilePlayer) and p.name == "afplay"
        clip_dir = p._dir
        for piece in pieces:
            p.play(piece)
    assert out.read_bytes() == b"".join(pcm16(x) for x in pieces)
    clips = (tmp_path / "afplay.raw.clips").read_text().split()
    assert 1 <= len(clips) <= len(pieces) and all(c.startswith(clip_dir) for c in clips)
    assert not Path(clip_dir).exists()  # its temporary files are gone


def test_afplay_is_stopped_at_once_and_its_files_removed(tmp_path):
    path, _ = stand_in_afplay(tmp_path, f"#!{sys.executable}\nimport time\nwhile True:\n    time.sleep(1)\n")
    p = open_player(SR, env={}, which=lambda n: path if n == "afplay" else None, platform="darwin")
    p.play(tone(1.0, 440.0, 0.4))
    wait_until(lambda: p.process is not None)
    assert returns(p.stop)  # a stop that waited for the clip to end (it never does) never would
    assert p.process.poll() is not None
    assert not Path(p._dir).exists() and not p._thread.is_alive()


def test_a_failing_afplay_is_an_error(tmp_path):
    path, _ = stand_in_afplay(
        tmp_path, f"#!{sys.executable}\nimport sys\nsys.stderr.write('no device\\n')\nsys.exit(2)\n"
    )
    p = open_player(SR, env={}, which=lambda n: path if n == "afplay" else None, platform="darwin")
    p.play(tone(0.1, 440.0, 0.4))
    with pytest.raises(PlayerFailed, match="afplay exited with code 2: no device"):
        p.close()


class FakeWinsound(types.ModuleType):
    SND_MEMORY, SND_NODEFAULT = 4, 2

    def __init__(self, block=None):
        super().__init__("winsound")
        self.calls, self.block = [], block

    def PlaySound(self, sound, flags):  # noqa: N802 - winsound's name
        self.calls.append((sound, flags))
        if sound is None and self.block is not None:
            self.block.set()  # PlaySound(None, 0) stops the sound playing in the other thread
        elif self.block is not None:
            self.block.wait(10)


def test_winsound_plays_wav_clips_from_memory(monkeypatch):
    import io
    import wave

    ws = FakeWinsound()
    monkeypatch.setitem(sys.modules, "winsound", ws)
    pieces = [tone(0.2, 440.0, 0.4), tone(0.4, 220, 0.4)]
    with open_player(SR, env={}, which=NOTHING, platform="win32") as p:
        assert isinstance(p, playersmod.WinsoundPlayer)
        for piece in pieces:
            p.play(piece)
    frames = b""
    for sound, flags in ws.calls:
        assert flags == ws.SND_MEMORY | ws.SND_NODEFAULT
        with wave.open(io.BytesIO(sound), "rb") as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SR)
            frames += w.readframes(w.getnframes())
    assert frames == b"".join(pcm16(x) for x in pieces)


def test_winsound_stop_ends_the_sound_playing(monkeypatch):
    ws = FakeWinsound(block=threading.Event())
    monkeypatch.setitem(sys.modules, "winsound", ws)
    p = open_player(SR, env={}, which=NOTHING, platform="win32")
    p.play(tone(5.0, 440.0, 0.4))
    wait_until(lambda: len(ws.calls) == 1)
    p.stop()
    assert ws.calls[-1] == (None, 0) and not p._thread.is_alive()


class Refuse:
    """A meta path finder that makes importing `name` raise `error` (a module whose library is missing)."""

    def __init__(self, name, error):
        self.name, self.error = name, error

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        raise self.error

    def exec_module(self, module):
        pass


def test_portaudio_missing_names_the_system_package(monkeypatch):
    """sounddevice installed without the PortAudio library (its import raises OSError)."""
    monkeypatch.undo()  # the real _sounddevice_problem
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(
        sys, "meta_path", [Refuse("sounddevice", OSError("PortAudio library not found")), *sys.meta_path]
    )
    monkeypatch.setattr(playermod.sys, "platform", "linux")
    with pytest.raises(PlayerUnavailable) as e:
        open_player(SR, env={}, which=NOTHING, platform="linux")
    msg = str(e.value)
    assert "sounddevice (the PortAudio library is missing: install the system package libportaudio2" in msg
    assert "sudo apt install libportaudio2" in msg and "(PortAudio library not found)" in msg
    for name in ("aplay", "paplay", "pw-play", "ffplay", "mpv"):
        assert f"{name} (not on PATH)" in msg
    assert "brew install portaudio" in playermod.portaudio_hint("darwin")


def test_killing_a_player_without_process_groups(tmp_path, monkeypatch):
    """Windows has no os.killpg: the player process itself is killed."""
    script = tmp_path / "forever.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    p = open_player(SR, env={ENV_PLAYER: f"exec {sys.executable} {script}"}, which=NOTHING)
    monkeypatch.delattr(playermod.os, "killpg")
    p.stop()
    assert p.process.poll() is not None and not p._thread.is_alive()


def wait_until(predicate, timeout=HUNG):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_broken_omnivoice_player_is_an_error_never_replaced(tmp_path):
    """Before: OMNIVOICE_PLAYER=false was passed over for the next player and `say` said it
    played. The player asked for is the only one tried: its reason, and what to do."""
    command, out = recorder(tmp_path)
    stand_in = lambda n: command.split()[0] if n == "aplay" else None  # noqa: E731 - another player is there
    for broken, reason in [("false", "exited with code 1 at start"), ("no-such-player-x", "exited with code 127")]:
        with pytest.raises(PlayerUnavailable) as e:  # (its exit waited for: a slow start is no working player)
            open_player(SR, env={ENV_PLAYER: broken}, which=stand_in, platform="linux", grace=HUNG)
        assert str(e.value).startswith(f"{ENV_PLAYER} ({broken}) {reason}"), str(e.value)
        assert str(e.value).endswith(f"fix the command, or unset {ENV_PLAYER} to let omnivoice choose a player")


def test_a_player_that_finds_no_sound_device_has_failed_though_it_exits_0(tmp_path, monkeypatch):
    """ffplay with no sound device reads its input, prints "audio open failed" and exits 0:
    a PlayerFailed with its line, not a run that says it played."""
    script = tmp_path / "ffplay-no-device.py"
    script.write_text(NO_DEVICE)
    real = playermod.player_commands
    monkeypatch.setattr(
        playermod,
        "player_commands",
        lambda sr, platform=None: [
            replace(c, argv=(sys.executable, str(script))) for c in real(sr, platform) if c.name == "ffplay"
        ],
    )
    with pytest.raises(
        PlayerFailed,
        match="ffplay played nothing, it found no sound device: No more combinations to try, audio open failed",
    ):
        with open_player(SR, env={}, which=lambda n: n, platform="linux") as p:
            assert p.name == "ffplay"
            p.play(tone(0.1, 440.0, 0.4))
