"""Sleep when idle, wake on demand (--idle-unload), and Kubernetes' probes (/health/live,
/health/ready, --warmup): the Speaker's idle watcher, the server's /health, a real `serve` process
whose memory goes back."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
from server_util import TINY_CKPT, hold_loop, ready_url, running_server, wait_for

from omnivoice_cli.app.door.idle import idle_seconds
from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
from omnivoice_cli.engine.errors import InvalidRequest

pytestmark = pytest.mark.usefixtures("home")

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
SEEDED = {"input": "Hello there.", "num_step": 4, "seed": 7, "response_format": "wav", "stream": False}


def test_idle_seconds_reads_durations():
    assert [idle_seconds(s) for s in ("3s", "5m", "1h", "500ms", "90", "1.5S", "never", None)] == [
        3.0,
        300.0,
        3600.0,
        0.5,
        90.0,
        1.5,
        None,
        None,
    ]
    for bad in ("3x", "", "-1s", "0", "s", "1e12"):
        with pytest.raises(InvalidRequest, match="--idle-unload must be a duration above 0 such as 30s"):
            idle_seconds(bad)


def test_a_bad_idle_unload_is_a_usage_error(invoke):
    for command in (("serve",), ("wyoming",), ("mcp", "--root", ".")):
        r = invoke(*command, "--idle-unload", "soon")
        assert r.exit_code == 2, (command, r.stderr)
        assert "--idle-unload must be a duration above 0" in r.stderr and "'soon'" in r.stderr


def _speaker(engine, idle: float) -> tuple[Speaker, list[int]]:
    loads: list[int] = []

    def load():
        loads.append(1)
        return engine

    return Speaker(SpeakerOptions(layers=(), idle_unload=idle), load=load), loads


def _wait_asleep(speaker: Speaker) -> None:
    wait_for(lambda: speaker.phase == "asleep", what="the idle unload")


def _looks(speaker: Speaker, monkeypatch) -> list[float]:
    """When the idle watcher (or an unload) looks at how long the speaker has been unused
    (Speaker._idle_for), in time.monotonic() seconds, from now on."""
    looks: list[float] = []
    real = speaker._idle_for

    def idle_for():
        looks.append(time.monotonic())
        return real()

    monkeypatch.setattr(speaker, "_idle_for", idle_for)
    return looks


def _looked_past(looks: list[float], since: float, idle: float) -> None:
    """Once the watcher has looked three times `idle` seconds or more after `since`: at each, a
    speaker unused since then would be unloaded (the third look follows any unload the first began).
    Not a delay: a loaded machine's late watcher is waited for."""
    wait_for(lambda: sum(t >= since + idle for t in looks) >= 3, what="the idle watcher's looks past the idle time")


@pytest.mark.slow
def test_the_speaker_sleeps_when_idle_and_wakes_on_the_next_request(engine, monkeypatch):
    speaker, loads = _speaker(engine, 0.2)
    built = speaker.build("Hello there.", settings={"num_step": 4, "seed": 3})
    try:
        first, _ = speaker.render(built.request)
        _wait_asleep(speaker)
        assert speaker.running is None and speaker.unloads == 1 and len(loads) == 1
        looks = _looks(speaker, monkeypatch)
        with speaker.hold():  # a holder (a request, a socket) keeps it loaded past the idle time
            # (held from before the render: a loaded machine's pause after it may pass the idle time)
            again, _ = speaker.render(built.request)  # loads again, then speaks
            assert len(loads) == 2 and speaker.loads == 2 and speaker.load_seconds is not None
            assert (again == first).all()  # the same samples for the same seed
            _looked_past(looks, time.monotonic(), 0.2)
            assert speaker.phase == "loaded" and speaker.unloads == 1
        _wait_asleep(speaker)
    finally:
        speaker.stop()


@pytest.mark.slow
def test_a_request_in_flight_is_never_unloaded_under_it(engine, monkeypatch):
    speaker, _ = _speaker(engine, 0.2)
    built = speaker.build("A request that waits in the engine.", settings={"num_step": 4, "seed": 1})
    try:
        result: list = []
        thread = threading.Thread(target=lambda: result.append(speaker.render(built.request)))
        with speaker.hold():  # until the request is open (a loaded machine's pause may pass the idle time)
            gate = hold_loop(speaker.start())  # the engine loop blocked: the request stays open
            thread.start()
            wait_for(lambda: speaker.running is not None and speaker.running.open == 1, what="the open request")
        _looked_past(_looks(speaker, monkeypatch), time.monotonic(), 0.2)  # idle spells pass, the request open
        assert speaker.phase == "loaded" and speaker.unloads == 0
        gate.set()
        thread.join(120)
        audio, summary = result[0]
        assert len(audio) == summary.samples > 0
        _wait_asleep(speaker)  # then quiet: it sleeps
    finally:
        speaker.stop()


@pytest.mark.slow
def test_health_says_asleep_and_the_next_request_wakes_it(engine, monkeypatch):
    with running_server(engine, idle_unload=0.3) as (url, _, state):
        c = httpx.Client(base_url=url, timeout=120)
        first = c.post("/v1/audio/speech", json=SEEDED)
        assert first.status_code == 200
        wait_for(lambda: c.get("/health").json()["status"] == "asleep", what="asleep")
        health = c.get("/health")
        assert health.status_code == 200 and health.json()["engine"] == "asleep" and health.json()["loads"] == 1
        assert c.get("/health/ready").status_code == 200  # asleep is ready: a request wakes it
        again = c.post("/v1/audio/speech", json=SEEDED)
        assert again.status_code == 200 and again.content == first.content
        assert c.get("/health").json()["loads"] == 2
        metrics = c.get("/metrics").text
        assert "omnivoice_model_load_seconds_count 2.0" in metrics and "omnivoice_model_loads_total 2.0" in metrics
        wait_for(lambda: c.get("/health").json()["status"] == "asleep", what="asleep again")
        from websockets.sync.client import connect

        with connect(url.replace("http", "ws") + "/tts/ws") as ws:  # an open socket wakes it and holds it
            wait_for(lambda: state.speaker.phase == "loaded", what="the socket's wake")
            _looked_past(_looks(state.speaker, monkeypatch), time.monotonic(), 0.3)
            assert state.speaker.phase == "loaded"
            ws.close()
        wait_for(lambda: c.get("/health").json()["status"] == "asleep", what="asleep after the socket")


def test_asleep_is_said_once_the_memory_is_given_back(engine, monkeypatch):
    """/health says "asleep" (and the unload is counted) only once the memory is freed: a reader
    that waits for it may measure the process (it said so while the engine loop was still stopping).
    A request that comes meanwhile waits for the unload, then loads the model again: served."""
    from concurrent.futures import ThreadPoolExecutor

    from omnivoice_cli.app.door import speaker as speaker_module

    freeing, freed = threading.Event(), threading.Event()

    def free_memory():
        freeing.set()
        assert freed.wait(120)

    monkeypatch.setattr(speaker_module, "free_memory", free_memory)
    with running_server(engine, idle_unload=0.2) as (url, _, state):
        try:
            assert freeing.wait(120)  # the idle watcher is giving the memory back
            health = httpx.get(url + "/health", timeout=120).json()
            assert (health["status"], health["engine"]) == ("ready", "unloading") and state.speaker.unloads == 0
            with ThreadPoolExecutor(1) as pool:
                reply = pool.submit(httpx.post, url + "/v1/audio/speech", json=SEEDED, timeout=120)
                wait_for(lambda: state.speaking == 1 or reply.done(), what="the request at the door")
                freed.set()
                assert reply.result().status_code == 200, reply.result().text
        finally:
            freed.set()
        assert state.speaker.loads == 2  # loaded again once the unload was done (and may be asleep again by now)
        wait_for(lambda: httpx.get(url + "/health", timeout=120).json()["status"] == "asleep", what="asleep")
        assert state.speaker.unloads == 2 and state.speaker.phase == "asleep"


def test_live_and_ready_probes_while_loading(engine):
    loading = threading.Event()

    def load():
        loading.wait(60)
        return engine

    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.run import make_server
    from omnivoice_cli.server.state import ServerState

    state = ServerState(ServeOptions(host="127.0.0.1", port=0, quiet=True, warmup=True), load=load)
    server = make_server(state)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, what="the server")
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        c = httpx.Client(base_url=f"http://{host}:{port}", timeout=60)
        assert c.get("/health/live").status_code == 200  # at once, the model still loading
        ready = c.get("/health/ready")
        assert ready.status_code == 503 and ready.json()["reason"] == "the model is loading"
        loading.set()
        wait_for(lambda: c.get("/health/ready").status_code == 200, what="ready")
        assert state.warmed and c.get("/health/ready").json()["warmed"] is True
        assert state.speaker.running is not None and state.speaker.running.served == 1  # the warm-up request
    finally:
        loading.set()
        server.should_exit = True
        thread.join(30)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _metric(text: str, name: str) -> float:
    return next(float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="RSS is read from /proc")
def test_serve_idle_unload_gives_the_memory_back(tmp_path):
    env = {**os.environ, "OMNIVOICE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "omnivoice_cli.cli", "serve", "--model", str(TINY_CKPT), "--port", "0"]
    proc = subprocess.Popen([*command, "--idle-unload", "1s"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = ready_url(proc)
        c = httpx.Client(base_url=url, timeout=120)
        first = c.post("/v1/audio/speech", json=SEEDED)
        assert first.status_code == 200
        wait_for(lambda: c.get("/health").json()["status"] == "asleep", what="asleep")
        before = _metric(c.get("/metrics").text, "omnivoice_resident_bytes_before_load")
        assert _rss(proc.pid) - before < 150 * MB
        again = c.post("/v1/audio/speech", json=SEEDED)
        assert again.status_code == 200 and again.content == first.content
        assert c.get("/health").json()["loads"] == 2  # loaded again (it may be asleep again by now: 1 s)
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.mark.slow
def test_wyoming_sleeps_between_connections_and_wakes_for_the_next(engine, monkeypatch):
    pytest.importorskip("wyoming")
    import asyncio

    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    from omnivoice_cli.app.settings.layers import FLAG_SOURCE
    from omnivoice_cli.server.wyoming.wyoming import WyomingOptions, WyomingServer

    flags = {"num_step": 4, "seed": 5}
    speaker = Speaker(SpeakerOptions(layers=((FLAG_SOURCE, flags),), idle_unload=0.3), load=lambda: engine)
    speaker.start()
    server = WyomingServer(speaker, WyomingOptions(uri="tcp://127.0.0.1:0", quiet=True))
    ready, loop = threading.Event(), asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve(lambda _: ready.set())), daemon=True)
    thread.start()
    assert ready.wait(60)
    port = int(server.address.rsplit(":", 1)[1])

    async def speak(client) -> bytes:
        await client.write_event(Synthesize(text="Hello there.").event())
        audio = b""
        while (event := await client.read_event()) is not None and event.type != "audio-stop":
            assert event.type != "error", event
            if AudioChunk.is_type(event.type):
                audio += AudioChunk.from_event(event).audio
        return audio

    async def session(hold: bool) -> bytes:
        async with AsyncTcpClient("127.0.0.1", port, connect_timeout=10, read_timeout=120) as client:
            audio = await speak(client)
            if hold:  # the connection stays open past the idle time: the model stays loaded
                await asyncio.to_thread(_looked_past, _looks(speaker, monkeypatch), time.monotonic(), 0.3)
                assert speaker.phase == "loaded"
            return audio

    try:
        first = asyncio.run(session(hold=True))
        _wait_asleep(speaker)
        assert asyncio.run(session(hold=False)) == first and speaker.loads == 2  # woken, the same audio
    finally:
        loop.call_soon_threadsafe(server.close)
        thread.join(30)
