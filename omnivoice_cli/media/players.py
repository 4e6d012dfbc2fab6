"""The players: a sink fed s16le mono PCM piece by piece (a command's stdin, WAV clips to a command
or to winsound, a sounddevice stream); which one plays is chosen by media/player.py.

A background thread feeds the player, so `write` never blocks the caller (the generation) while
the player consumes audio at its own pace. `stop()` kills the player process (its whole process
group) or aborts the device stream at once, and waits for the thread. A player that says it
could not open the sound device (SILENT_FAILURES in its stderr) has failed, whatever its exit
code: ffplay without a sound device exits 0 having played nothing.
"""

from __future__ import annotations

import io
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import IO

from ..engine.errors import OmniVoiceError
from .pcm import pcm16
from .pipes import write_all

STARTUP_GRACE = 0.2  # seconds a player process has to fail at start-up before it is trusted
# What players print when they found no sound device but go on (exit code 0, nothing heard):
# ffplay's "audio open failed" (after SDL_OpenAudio's reason), mpv's audio-output line.
SILENT_FAILURES = (
    "audio open failed",
    "audio open error",
    "could not open/initialize audio device",
    "failed to open audio device",
    "couldn't open audio device",
)


class PlayerFailed(OmniVoiceError):
    """The player stopped with an error while playing."""


@dataclass(frozen=True)
class Candidate:
    """A way to play: a command reading s16le on stdin (or playing a WAV file it is given), or a
    module (sounddevice, winsound)."""

    name: str  # what messages call it
    argv: tuple[str, ...] | None = None  # the command (None: the module of that name)
    shell: str | None = None  # a shell command line instead of argv (OMNIVOICE_PLAYER)
    files: bool = False  # the command plays the WAV file named after argv (afplay), not stdin


def wav_bytes(pcm: bytes, sample_rate: int) -> bytes:
    """A whole WAV file (s16le mono) of the PCM bytes."""
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)
    return buf.getvalue()


class Player:
    """Plays s16le mono PCM fed piece by piece; a thread hands the bytes to the sink in order."""

    name = "player"
    clips = False  # the sink plays whole clips: it gets all that was queued at once (see _feed)

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.bytes_played = 0  # bytes handed to the sink so far
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._feed, name=f"omnivoice-{self.name}", daemon=True)
        self._closed = False

    def _start_feeding(self) -> None:
        self._thread.start()

    def play(self, audio) -> None:
        """Queue mono float audio (converted to s16le exactly as the WAV output is)."""
        self.write(pcm16(audio))

    def write(self, pcm: bytes) -> None:
        """Queue s16le bytes; raises PlayerFailed if the player has already failed."""
        self._raise_error()
        if self._closed:
            raise ValueError("the player is closed")
        if pcm:
            self._queue.put(bytes(pcm))

    def check(self) -> None:
        """Raise PlayerFailed if the player has failed (quit before the end, lost its device)."""
        self._raise_error()

    def close(self) -> None:
        """Wait until everything queued has played, then release the player (a Ctrl-C while
        waiting stops it at once)."""
        if not self._closed:
            self._closed = True
            try:
                self._queue.put(None)
                self._thread.join()
                self._finish()
            except BaseException:
                self.stop()
                raise
        self._raise_error()

    def stop(self) -> None:
        """Stop playing now (Ctrl-C): queued audio is dropped and the player ended."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._closed = True
        self._abort()  # unblocks the feeding thread
        self._queue.put(None)
        self._thread.join(timeout=2.0)
        self._release()

    def __enter__(self) -> "Player":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.stop()

    def _feed(self) -> None:
        while True:
            data = self._queue.get()
            if data is None or self._stopped.is_set():
                return
            end = False
            if self.clips:  # one clip of everything queued: the fewer clips, the fewer gaps
                parts = [data]
                while True:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        end = True
                        break
                    parts.append(more)
                data = b"".join(parts)
            try:
                self._sink(data)
                self.bytes_played += len(data)
            except BaseException as e:  # the player died or the device failed
                if not self._stopped.is_set():
                    self._error = e
                return
            if end:
                return

    def _raise_error(self) -> None:
        if self._error is not None and not self._stopped.is_set():
            e = self._error
            raise e if isinstance(e, PlayerFailed) else PlayerFailed(f"{self.name} failed: {e}")

    # a sink implements these
    def _sink(self, data: bytes) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError


class ProcessPlayer(Player):
    """A player command reading s16le on stdin, in its own process group."""

    def __init__(self, candidate: Candidate, sample_rate: int, grace: float = STARTUP_GRACE) -> None:
        self.name = candidate.name
        super().__init__(sample_rate)
        self._stderr = tempfile.TemporaryFile()
        command = candidate.shell if candidate.shell is not None else list(candidate.argv or ())
        try:
            self.process = subprocess.Popen(
                command,
                shell=candidate.shell is not None,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                start_new_session=True,  # Ctrl-C reaches us; we end the player ourselves
            )
        except OSError as e:
            self._stderr.close()
            raise PlayerFailed(f"cannot start: {e.strerror or e}") from None
        try:
            code = self.process.wait(timeout=grace) if grace > 0 else self.process.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:  # gone before it was fed: no sound device, bad arguments, ...
            detail = self._stderr_tail()
            self._stderr.close()
            raise PlayerFailed(f"exited with code {code} at start" + (f": {detail}" if detail else ""))
        silent = self._silent_failure()
        if silent is not None:  # it found no sound device (and may still be running)
            try:
                code = self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
            _kill(self.process)
            self._release()
            if code:
                raise PlayerFailed(f"exited with code {code} at start: {silent}")
            raise PlayerFailed(f"found no sound device: {silent}")
        self._start_feeding()

    def _stdin(self) -> IO[bytes]:
        """The player's stdin (always a pipe: Popen was given stdin=PIPE)."""
        if self.process.stdin is None:
            raise PlayerFailed("has no stdin to write the audio to")
        return self.process.stdin

    def _sink(self, data: bytes) -> None:
        try:
            write_all(self._stdin().fileno(), data)
        except BrokenPipeError:
            code = self.process.wait()
            detail = self._stderr_tail()
            raise PlayerFailed(
                f"{self.name} quit before the end of the audio (exit code {code})" + (f": {detail}" if detail else "")
            ) from None

    def _finish(self) -> None:
        try:
            self._stdin().close()
        except BrokenPipeError:
            pass
        code = self.process.wait()
        silent = self._silent_failure()
        if self._error is None and silent is not None:
            self._error = PlayerFailed(f"{self.name} played nothing, it found no sound device: {silent}")
        elif code != 0 and self._error is None:
            detail = self._stderr_tail()
            self._error = PlayerFailed(f"{self.name} exited with code {code}" + (f": {detail}" if detail else ""))
        self._stderr.close()

    def _abort(self) -> None:
        _kill(self.process)

    def _release(self) -> None:
        for f in (self.process.stdin, self._stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def _silent_failure(self) -> str | None:
        """The line of the player's stderr that says it opened no sound device, or None."""
        try:
            self._stderr.seek(0)
            lines = self._stderr.read(1 << 20).decode("utf-8", "replace").splitlines()
            self._stderr.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return None
        for line in reversed(lines):
            if any(marker in line.lower() for marker in SILENT_FAILURES):
                return " ".join(line.split())[:200]
        return None

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return lines[-1].strip() if lines else ""


def _kill(process: subprocess.Popen) -> None:
    """End a player process now: its whole process group (the shell of OMNIVOICE_PLAYER and its
    children) where there are groups, the process itself on Windows."""
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            raise ProcessLookupError
        killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            process.kill()
        except OSError:
            pass
    process.wait()


class FilePlayer(Player):
    """A command that plays a WAV file (afplay): the audio goes to it as clips, one after the
    other, each a temporary file (removed after it has played)."""

    clips = True

    def __init__(self, candidate: Candidate, sample_rate: int) -> None:
        self.name = candidate.name
        super().__init__(sample_rate)
        self.argv = tuple(candidate.argv or ())
        self.process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._dir = tempfile.mkdtemp(prefix="omnivoice-play-")
        self._start_feeding()

    def _sink(self, data: bytes) -> None:
        path = os.path.join(self._dir, "clip.wav")
        with open(path, "wb") as f:
            f.write(wav_bytes(data, self.sample_rate))
        with self._lock:  # stop() either kills this process or finds none started
            if self._stopped.is_set():
                return
            try:
                self.process = subprocess.Popen(
                    [*self.argv, path],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as e:
                raise PlayerFailed(f"{self.name} cannot start: {e.strerror or e}") from None
        _, err = self.process.communicate()
        code = self.process.returncode
        if code != 0 and not self._stopped.is_set():
            lines = err.decode("utf-8", "replace").strip().splitlines()
            raise PlayerFailed(f"{self.name} exited with code {code}" + (f": {lines[-1].strip()}" if lines else ""))

    def _finish(self) -> None:
        self._release()

    def _abort(self) -> None:
        with self._lock:
            if self.process is not None and self.process.poll() is None:
                _kill(self.process)

    def _release(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class WinsoundPlayer(Player):
    """The standard library's winsound (Windows): the audio as WAV clips in memory, one after the
    other (PlaySound returns when a clip has played)."""

    name = "winsound"
    clips = True

    def __init__(self, sample_rate: int) -> None:
        import winsound

        super().__init__(sample_rate)
        self.winsound = winsound
        self._start_feeding()

    def _sink(self, data: bytes) -> None:
        ws = self.winsound
        try:
            ws.PlaySound(wav_bytes(data, self.sample_rate), ws.SND_MEMORY | ws.SND_NODEFAULT)
        except RuntimeError as e:  # no sound device, the driver refused
            raise PlayerFailed(f"winsound cannot play: {e}") from None

    def _finish(self) -> None:
        pass

    def _abort(self) -> None:
        try:
            self.winsound.PlaySound(None, 0)  # type: ignore[attr-defined]  # stops the clip playing (Windows only)
        except RuntimeError:
            pass

    def _release(self) -> None:
        pass


class DevicePlayer(Player):
    """The default output device through sounddevice (PortAudio)."""

    name = "sounddevice"

    def __init__(self, sample_rate: int) -> None:
        import sounddevice as sd

        super().__init__(sample_rate)
        try:
            self.stream = sd.RawOutputStream(samplerate=sample_rate, channels=1, dtype="int16")
            self.stream.start()
        except Exception as e:  # sd.PortAudioError: the device refused
            raise PlayerFailed(f"cannot open the output device: {e}") from None
        self._start_feeding()

    def _sink(self, data: bytes) -> None:
        self.stream.write(data)

    def _finish(self) -> None:
        self.stream.stop()  # returns when the queued buffers have played
        self.stream.close()

    def _abort(self) -> None:
        try:
            self.stream.abort()
        except Exception:
            pass

    def _release(self) -> None:
        try:
            self.stream.close()
        except Exception:
            pass
