"""A real `omnivoice serve` app under uvicorn on 127.0.0.1 (a free port), in a thread, for tests."""

from __future__ import annotations

import io
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

TINY_CKPT = Path(__file__).resolve().parent / "fixtures" / "tiny" / "ckpt"


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (for a server in another process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(engine, **options):
    """Yield (url, server, state): the app over `engine` (already loaded) on a free port."""
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE
    from omnivoice_cli.server.config import ServeOptions, load_voice_map
    from omnivoice_cli.server.run import make_server
    from omnivoice_cli.server.state import ServerState

    base = ServeOptions(
        host="127.0.0.1",
        port=0,
        voice_map=load_voice_map(),
        model=str(TINY_CKPT),
        quiet=True,
        layers=((FLAG_SOURCE, {"num_step": 4}),),
    )
    state = ServerState(replace(base, **options), load=lambda: engine)
    server = make_server(state)
    thread = threading.Thread(target=server.run, name="test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not (server.started and state.loaded.is_set()):
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{host}:{port}", server, state
    finally:
        server.should_exit = True
        thread.join(120)


def hold_loop(service):
    """Block the service's engine loop (a call that waits) until the returned event is set."""
    gate, entered = threading.Event(), threading.Event()

    def wait(engine):
        entered.set()
        gate.wait(120)

    service.call(wait)
    assert entered.wait(120)  # the loop is inside the call: what is submitted now is taken at once
    return gate


def hold_engine(state):
    """hold_loop of a running server's service."""
    return hold_loop(state.service)


def ready_url(proc) -> str:
    """The URL a `serve` started as a subprocess (stderr a text pipe, --port 0) prints, read once it
    says it is ready; its stderr so far in the failure if it exits first."""
    lines: list[str] = []
    while not any("ready" in line for line in lines):
        lines.append(proc.stderr.readline())
        assert lines[-1], "".join(lines)
    return next(line for line in lines if "listening on" in line).split("listening on ")[1].split()[0]


def wait_for(predicate, timeout=120.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wav_samples(data: bytes) -> np.ndarray:
    """int16 samples of a 16-bit mono WAV (sized or with unknown-size fields) at 24 kHz."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", data[:16]
    pos = 12
    while pos + 8 <= len(data):
        kind, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "little")
        if kind == b"fmt ":
            channels, rate = (
                int.from_bytes(data[pos + 10 : pos + 12], "little"),
                int.from_bytes(data[pos + 12 : pos + 16], "little"),
            )
            assert (channels, rate) == (1, 24000)
        if kind == b"data":
            end = len(data) if size == 0xFFFFFFFF else pos + 8 + size
            return np.frombuffer(data[pos + 8 : end], dtype="<i2")
        pos += 8 + size
    raise AssertionError("no data chunk")


def decode(data: bytes) -> tuple[np.ndarray, int]:
    import soundfile as sf

    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    return audio, rate
