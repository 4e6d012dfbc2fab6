"""Playing audio as it is made: s16le mono PCM at 24 kHz, fed piece by piece.

    with open_player(24000) as player:      # PlayerUnavailable if nothing can play
        for piece in pieces:
            player.play(piece.audio)         # float32; or player.write(s16le bytes)
    # leaving the block normally waits until everything has played; an exception (Ctrl-C) stops at once

Which player (the first that works), so that a default install plays on every desktop:
1. `OMNIVOICE_PLAYER`: a shell command that reads s16le 24 kHz mono on stdin
   (e.g. `aplay -q -t raw -f S16_LE -r 24000 -c 1`), when set: then it alone (one that fails,
   `false` included, is an error with its reason, never replaced by another player);
2. `sounddevice` (the optional `play` extra; on Linux it needs the PortAudio library, the
   system package libportaudio2 on Debian/Ubuntu), when it imports and finds an output device;
3. ffplay or mpv, where found on PATH;
4. the platform's own: aplay, paplay, pw-play on Linux (and other Unix systems); afplay on macOS
   (it plays files: the audio goes to it as WAV clips, one after the other, each what was made
   since the last began); the standard library's winsound on Windows (WAV clips in memory).

The players themselves (a thread feeding each, stopping at once): media/players.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Callable, Mapping

from ..engine.errors import OmniVoiceError, install_hint
from ..engine.model.config import SAMPLE_RATE
from .players import (
    STARTUP_GRACE,
    Candidate,
    DevicePlayer,
    FilePlayer,
    Player,
    PlayerFailed,
    ProcessPlayer,
    WinsoundPlayer,
)

ENV_PLAYER = "OMNIVOICE_PLAYER"


class PlayerUnavailable(OmniVoiceError):
    """No way to play audio here (exit 1); the message names what was tried."""


def platform_name(platform: str | None = None) -> str:
    """ "linux", "darwin" or "win32" (sys.platform; other Unix systems count as linux here)."""
    platform = sys.platform if platform is None else platform
    if platform.startswith("win"):
        return "win32"
    return "darwin" if platform == "darwin" else "linux"


def player_commands(sample_rate: int = SAMPLE_RATE, platform: str | None = None) -> list[Candidate]:
    """The players looked for on PATH, in order: ffplay and mpv anywhere, then the platform's own
    (aplay, paplay, pw-play on Linux; afplay on macOS; Windows has winsound, not a command). All
    but afplay read raw s16le mono at sample_rate on stdin; afplay plays a WAV file."""
    sr = str(sample_rate)
    common = [
        Candidate(
            "ffplay", ("ffplay", "-nodisp", "-autoexit", "-loglevel", "error", "-f", "s16le", "-ar", sr, "-i", "-")
        ),
        Candidate(
            "mpv",
            (
                "mpv",
                "--no-terminal",
                "--no-video",
                "--demuxer=rawaudio",
                "--demuxer-rawaudio-format=s16le",
                f"--demuxer-rawaudio-rate={sr}",
                "--demuxer-rawaudio-channels=1",
                "-",
            ),
        ),
    ]
    system = platform_name(platform)
    if system == "darwin":
        return common + [Candidate("afplay", ("afplay",), files=True)]
    if system == "win32":
        return common
    return common + [
        Candidate("aplay", ("aplay", "-q", "-t", "raw", "-f", "S16_LE", "-r", sr, "-c", "1")),
        Candidate("paplay", ("paplay", "--raw", "--format=s16le", f"--rate={sr}", "--channels=1")),
        Candidate("pw-play", ("pw-play", "--format=s16", f"--rate={sr}", "--channels=1", "-")),
    ]


def candidates(
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    sample_rate: int = SAMPLE_RATE,
    platform: str | None = None,
) -> tuple[list[Candidate], list[str]]:
    """The ways to play, in order of preference, and a note for each one passed over."""
    env = os.environ if env is None else env
    found: list[Candidate] = []
    skipped: list[str] = []
    command = (env.get(ENV_PLAYER) or "").strip()
    if command:
        found.append(Candidate(f"{ENV_PLAYER} ({command})", shell=command))
    why = _sounddevice_problem()
    if why is None:
        found.append(Candidate("sounddevice"))
    else:
        skipped.append(f"sounddevice ({why})")
    for c in player_commands(sample_rate, platform):
        argv = c.argv or ("",)  # a command: player_commands gives each its argv
        path = which(argv[0])
        if path:
            found.append(Candidate(c.name, (path, *argv[1:]), files=c.files))
        else:
            skipped.append(f"{c.name} (not on PATH)")
    if platform_name(platform) == "win32":
        try:
            import winsound  # noqa: F401 - the standard library's, on Windows
        except ImportError as e:
            skipped.append(f"winsound ({e})")
        else:
            found.append(Candidate("winsound"))
    return found, skipped


def _sounddevice_problem() -> str | None:
    """Why sounddevice cannot play here, or None when it finds an output device."""
    try:
        import sounddevice as sd
    except ImportError:
        return f"not installed: {install_hint('play')}"
    except OSError as e:  # the module is there but the PortAudio library is not
        return f"{portaudio_hint()} ({e})"
    try:
        sd.query_devices(kind="output")
    except Exception as e:  # sd.PortAudioError, ValueError: no default output device
        return f"no output device: {e}"
    return None


def portaudio_hint(platform: str | None = None) -> str:
    """What to install when sounddevice finds no PortAudio library (its wheels for macOS and
    Windows bring one; on Linux it is a system package)."""
    system = platform_name(platform)
    if system == "darwin":
        return "the PortAudio library is missing: brew install portaudio"
    if system == "win32":
        return "the PortAudio library is missing: pip install --force-reinstall sounddevice"
    return (
        "the PortAudio library is missing: install the system package libportaudio2 "
        "(sudo apt install libportaudio2 on Debian/Ubuntu; portaudio on Fedora and Arch)"
    )


def open_player(
    sample_rate: int = SAMPLE_RATE,
    *,
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    grace: float = STARTUP_GRACE,
    platform: str | None = None,
) -> "Player":
    """Start the first player that works; PlayerUnavailable naming everything tried otherwise."""
    found, notes = candidates(env, which, sample_rate, platform)
    if found and found[0].shell is not None:  # OMNIVOICE_PLAYER: asked for, so never replaced
        try:
            return ProcessPlayer(found[0], sample_rate, grace=grace)
        except PlayerFailed as e:
            raise PlayerUnavailable(
                f"{found[0].name} {e}: fix the command, or unset {ENV_PLAYER} to let omnivoice choose a player"
            ) from None
    for c in found:
        try:
            if c.name == "sounddevice" and c.argv is None:
                return DevicePlayer(sample_rate)
            if c.name == "winsound" and c.argv is None:
                return WinsoundPlayer(sample_rate)
            if c.files:
                return FilePlayer(c, sample_rate)
            return ProcessPlayer(c, sample_rate, grace=grace)
        except PlayerFailed as e:
            notes.append(f"{c.name} ({e})")
    hint = ""
    if platform_name(platform) == "linux":
        hint = " Or install a player: sudo apt install alsa-utils (aplay) on Debian/Ubuntu."
    raise PlayerUnavailable(
        "no way to play audio here: tried "
        + "; ".join(notes)
        + f". Write a file instead with -o FILE, or set {ENV_PLAYER} to a command that plays "
        "s16le 24 kHz mono from stdin." + hint
    )
