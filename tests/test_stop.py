"""Stopping a streamed or played render (issue 23, "Nothing crashes"), each way in a real process.

Ctrl-C while playing, the player quitting early, stdout's reader going away, Ctrl-C during
`--stream -o FILE`: each ends with its one-line message and exit code, never with `terminate
called without an active exception` / Aborted (exit 134: the render's thread was still in torch
when the interpreter exited), never a traceback, no temporary file left, the process gone at
once: it spends at most STOP_CPU seconds of CPU from the stop to its end (the rest of the render
would take minutes of CPU), measured in CPU time, not wall time, so a loaded machine (the stop
took over 5 s of wall time at load 5-8) does not fail it. The signal is sent once the process is
generating (audio played, or a progress line).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY_CKPT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the CPU time of a process: /proc (Linux)"),
]

STOP_CPU = 15.0  # CPU seconds the process may spend from the stop to its end (the rest of LONG: minutes)
HUNG = 300.0  # wall seconds after the stop at which the process is taken as hung (only a hang trips it)
LONG = " ".join(f"This is sentence number {i}, and it goes on for a while." for i in range(200))
SHORTER = " ".join(f"This is sentence number {i}, and it goes on for a while." for i in range(60))  # progress sooner
RECORDER = """import os, sys
with open(sys.argv[1], "ab") as f:
    while True:
        data = os.read(0, 4096)
        if not data:
            break
        f.write(data)
        f.flush()
"""
QUITTER = """import os, sys, time
got = 0
while got < int(sys.argv[2]):
    data = os.read(0, 4096)
    if not data:
        break
    got += len(data)
with open(sys.argv[1], "w") as f:
    f.write(str(time.monotonic()))
"""


class Run:
    """`omnivoice say -f LONG --model tiny ARGS` in a child process; stderr read as it comes."""

    def __init__(self, tmp_path: Path, *args: str, env: dict | None = None, stdout=subprocess.DEVNULL, text=LONG):
        path = tmp_path / "long.txt"
        path.write_text(text)
        full_env = {k: v for k, v in os.environ.items() if k not in ("OMNIVOICE_MODEL", "OMNIVOICE_PLAYER")}
        full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        full_env.update(env or {})
        command = [sys.executable, "-m", "omnivoice_cli.cli", "say", "-f", str(path), "--model", str(TINY_CKPT), *args]
        self.proc = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, cwd=tmp_path, env=full_env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait_for(self, predicate, what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                pytest.fail(f"the process ended (rc {self.proc.returncode}) before {what}: {self.stderr}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"no {what} after {timeout} s: {self.stderr}")
            time.sleep(0.02)

    def end(self) -> int:
        """The exit code, once the process has ended having spent at most STOP_CPU seconds of CPU
        from now (the stop) on; one still there HUNG seconds from now is killed (a hang)."""
        at_stop = cpu_seconds(self.proc.pid)
        hung = threading.Event()
        watch = threading.Timer(HUNG, lambda: (hung.set(), self.proc.kill()))
        watch.start()
        try:
            _, status, usage = os.wait4(self.proc.pid, 0)  # its rusage: the CPU it spent, all threads
        finally:
            watch.cancel()
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        if hung.is_set():
            pytest.fail(f"still running {HUNG} s after it was stopped: {self.stderr}")
        self._reader.join(HUNG)
        spent = usage.ru_utime + usage.ru_stime - at_stop
        assert spent <= STOP_CPU, f"{spent:.1f} s of CPU from the stop to the end: {self.stderr}"
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)


def assert_clean(run: Run, message: str) -> None:
    """The one-line message, and nothing of an abort or a traceback."""
    err = run.stderr
    for bad in ("terminate called", "Aborted", "Traceback", "Exception ignored", "core dumped"):
        assert bad not in err, err
    assert [line for line in run.lines if message in line], err
    said = [
        line for line in run.lines if line.startswith(("Error:", "Warning:")) and "slower than real time" not in line
    ]
    assert len(said) == 1, err


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def cpu_seconds(pid: int) -> float:
    """The CPU time a running process has spent so far, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_while_playing(tmp_path):
    played, pid_file = tmp_path / "played.raw", tmp_path / "player.pid"
    player = f"echo $$ > {shlex.quote(str(pid_file))}; exec {script(tmp_path, 'rec.py', RECORDER)} {shlex.quote(str(played))}"
    run = Run(tmp_path, env={"OMNIVOICE_PLAYER": player})
    run.wait_for(lambda: played.exists() and played.stat().st_size > 0, "audio played")
    run.proc.send_signal(signal.SIGINT)
    assert run.end() == 130, run.stderr
    assert_clean(run, "playback stopped by Ctrl-C")
    assert gone(int(pid_file.read_text())), "the player was left running"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.txt", "played.raw", "player.pid", "rec.py"]


def test_the_player_quitting_early(tmp_path):
    quit_at = tmp_path / "quit.at"
    player = f"{script(tmp_path, 'quit.py', QUITTER)} {shlex.quote(str(quit_at))} 20000"
    run = Run(tmp_path, env={"OMNIVOICE_PLAYER": player})
    run.wait_for(quit_at.exists, "the player quitting")
    assert run.end() == 1, run.stderr
    assert_clean(run, "quit before the end of the audio")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.txt", "quit.at", "quit.py"]


def test_the_reader_of_stdout_going_away(tmp_path):
    """`omnivoice say ... --stream -o - | head -c 1000`: the error `say -o -` gives, exit 1."""
    run = Run(tmp_path, "--stream", "-o", "-", stdout=subprocess.PIPE)
    head = run.proc.stdout.read(1000)
    run.proc.stdout.close()
    assert head[:4] == b"RIFF" and len(head) == 1000
    assert run.end() == 1, run.stderr
    assert_clean(run, "Error: stdout: the reader of the audio stream went away")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_stream_to_a_file(tmp_path, signum):
    out = tmp_path / "out"
    out.mkdir()
    run = Run(tmp_path, "--stream", "-o", str(out / "x.wav"), text=SHORTER)  # a line at a quarter of the steps
    run.wait_for(lambda: any(line.startswith("streaming: ") for line in run.lines), "a progress line")
    run.proc.send_signal(signum)
    assert run.end() == 128 + signum, run.stderr
    name = "Ctrl-C" if signum == signal.SIGINT else f"signal {int(signum)}"
    assert_clean(run, f"stopped by {name}; nothing was written")
    assert list(out.iterdir()) == []  # neither the file nor its temporary


def test_signals_after_the_stop_are_ignored():
    """The first signal raises Stop; those that follow while the block cleans up (a second Ctrl-C,
    the copy `timeout` sends to the process group) do not cut the clean-up short."""
    from omnivoice_cli.app.signals import HoldSignals, Stop

    signals = HoldSignals()
    with pytest.raises(Stop) as e:
        signals._handler(signal.SIGINT, None)
    assert e.value.signum == signal.SIGINT
    signals._handler(signal.SIGINT, None)  # ignored
    signals._handler(signal.SIGTERM, None)
    held = HoldSignals()
    with pytest.raises(Stop):
        with held.protect():
            held._handler(signal.SIGTERM, None)  # held until the write is done
            held._handler(signal.SIGINT, None)
    held._handler(signal.SIGINT, None)  # then stopping: ignored
    with held.protect():
        pass
