"""`omnivoice serve --ray`: the server's app as a Ray Serve application, a model per replica
(server/ray/rayserve.py). The slow test starts a local Ray head (2 CPUs) and `serve --ray ADDRESS
--replicas 2` with the tiny checkpoint: 20 concurrent seeded requests all answer 200, both
replicas answer some, each reply equals a plain `serve`'s for the same seed; the key, /metrics
and the socket go through Ray Serve's proxy as they do on a plain server; a replica killed under
load leaves no request hanging and none answered 500 (the front: server/ray/rayfront.py)."""

from __future__ import annotations

import base64
import collections
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra

import httpx
from server_util import TINY_CKPT, free_port, wait_for

from omnivoice_cli.engine.errors import InvalidRequest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
ENV.pop("RAY_ADDRESS", None)
ENV["RAY_memory_monitor_refresh_ms"] = "0"  # other jobs share the machine's memory (as test_ray.py)
# this cluster's own token (as test_ray.py): a Ray that finds ~/.ray/auth_token or a token mode set
# elsewhere on the machine then neither refuses the head nor the clients
ENV.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)})
KEY = "s3cret"
AUTH = {"Authorization": f"Bearer {KEY}"}


def test_serve_ray_without_ray_serve_names_the_extra(invoke, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ImportError
    r = invoke("serve", "--ray", "auto", "--replicas", "2", "--model", TINY_CKPT)
    assert r.exit_code == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "omnivoice serve --ray needs Ray Serve (ray[serve])" in lines[0]
    assert "omnivoice-cli[ray]" in lines[0]


def test_replica_options_are_checked(invoke):
    from omnivoice_cli.server.ray.rayserve import RayOptions

    r = invoke("serve", "--replicas", "2")
    assert r.exit_code == 2 and "need --ray" in r.stderr
    assert RayOptions("auto", 2).scaling() == {"num_replicas": 2}
    scaled = RayOptions("auto", 1, 0, 4).scaling()["autoscaling_config"]
    assert (scaled["min_replicas"], scaled["max_replicas"], scaled["initial_replicas"]) == (0, 4, 1)
    with pytest.raises(InvalidRequest, match=r"--min-replicas \(3\) must not be above --max-replicas \(2\)"):
        RayOptions("auto", 1, 3, 2)


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head on this machine (2 CPUs, its own ports and folder), stopped at the end: its address."""
    pytest.importorskip("ray.serve")  # the ray extra's ray[serve]
    folder = tempfile.mkdtemp(prefix="ovray")  # short: Ray's socket paths must fit
    port = free_port()
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--num-cpus", "2"]
    command += ["--port", str(port), "--ray-client-server-port", str(free_port()), "--include-dashboard", "false"]
    command += ["--dashboard-agent-listen-port", str(free_port()), "--temp-dir", folder, "--disable-usage-stats"]
    head = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, start_new_session=True
    )
    try:
        seen = []
        while not any("Ray runtime started" in line for line in seen):
            seen.append(head.stdout.readline())
            assert seen[-1], "".join(seen)
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)  # --block: stops what it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def _speech(url: str, seed: int, headers=AUTH) -> httpx.Response:
    body = {"input": "Hello there.", "num_step": 4, "seed": seed, "response_format": "wav", "stream": False}
    return httpx.post(url + "/v1/audio/speech", json=body, headers=headers, timeout=300)


@contextmanager
def serving(*args: str, env: dict):
    """`omnivoice serve ARGS --port P` in a process, until ready: its URL (the ready line's); SIGTERM
    at the end (exit 0). A plain serve binds a port of its own (--port 0: none picked here that another
    process may take before it binds); Ray Serve's proxy is given one, free a moment ago."""
    port = free_port() if "--ray" in args else 0
    command = [sys.executable, "-m", "omnivoice_cli.cli", "serve", *args, "--port", str(port)]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines: list[str] = []
        while not any(line.startswith("omnivoice serve:") and "ready" in line for line in lines):
            lines.append(proc.stderr.readline())
            assert lines[-1], "".join(lines)
        ready = next(line for line in lines if line.startswith("omnivoice serve:") and "ready" in line)
        yield next(word for word in ready.split() if word.startswith("http://"))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rest = proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0 and "Traceback" not in rest and "stopped" in rest


@pytest.mark.slow
def test_two_replicas_on_ray_serve_answer_as_a_plain_serve(ray_head, tmp_path):
    env = {**ENV, "OMNIVOICE_HOME": str(tmp_path)}
    flags = (
        "--model",
        str(TINY_CKPT),
        "--num-step",
        "4",
        "--threads",
        "1",
        "--api-key",
        KEY,
    )  # the same threads: the same sums
    seeds = [n % 5 for n in range(20)]
    with serving(*flags, env=env) as plain:
        expected = {s: _speech(plain, s).content for s in set(seeds)}
    with serving("--ray", ray_head, "--replicas", "2", *flags, env=env) as url:
        with ThreadPoolExecutor(20) as pool:
            replies = list(pool.map(lambda s: _speech(url, s), seeds))
        assert [r.status_code for r in replies] == [200] * 20, [r.text for r in replies if r.status_code != 200]
        served = collections.Counter(r.headers["x-omnivoice-replica"] for r in replies)
        assert len(served) == 2, served  # both replicas answered some
        assert all(r.content == expected[s] for r, s in zip(replies, seeds))
        assert _speech(url, 1, {}).status_code == 401  # the key, as on a plain server
        metrics = httpx.get(url + "/metrics", headers=AUTH, timeout=60)
        assert metrics.status_code == 200 and "omnivoice_requests_total" in metrics.text
        health = httpx.get(url + "/health", timeout=60).json()
        assert health["status"] == "ready" and health["replica"] in served
        _socket_speaks(url)
        _a_replica_killed(url, health)


def _a_replica_killed(url: str, health: dict) -> None:
    """A replica's process killed with requests in flight: none hangs (each a whole answer within
    30 s: 200, from the other replica or tried there again by the front, or a clean 503 naming the
    lost replica), and Ray Serve brings a new replica, which serves."""
    text = " ".join(f"Sentence {n} of a longer text to speak." for n in range(6))

    def one(seed: int) -> int:
        body = {"input": text, "num_step": 4, "seed": seed, "response_format": "wav", "stream": False}
        reply = httpx.post(url + "/v1/audio/speech", json=body, headers=AUTH, timeout=30)
        if reply.status_code == 200:
            assert reply.content.startswith(b"RIFF")
        else:
            assert reply.json()["error"]["code"] == "replica_lost", reply.text
        return reply.status_code

    with ThreadPoolExecutor(8) as pool:
        answers = [pool.submit(one, seed) for seed in range(8)]
        os.kill(health["pid"], signal.SIGKILL)
        statuses = [a.result() for a in answers]  # httpx's timeout: none past 30 s
    assert set(statuses) <= {200, 503}, statuses
    seen: set[str | None] = set()

    def both_answer() -> bool:  # both replicas answer again, one of them new
        seen.add(_speech(url, 0).headers.get("x-omnivoice-replica"))
        return len(seen - {health["replica"], None}) >= 2

    wait_for(both_answer, timeout=300, what="Ray Serve's new replica")


def _socket_speaks(url: str) -> None:
    """/tts/ws through Ray Serve's proxy: audio, then the final event."""
    from websockets.sync.client import connect

    with connect(url.replace("http://", "ws://") + "/tts/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "config", "data": {}}))
        assert json.loads(ws.recv(timeout=60))["data"]["event_type"] == "config_accepted"
        ws.send(json.dumps({"type": "text", "data": {"text": "Hello there."}}))
        ws.send(json.dumps({"type": "flush"}))
        audio = 0
        while True:
            m = ws.recv(timeout=120)
            if isinstance(m, bytes):
                audio += len(m)
                continue
            m = json.loads(m)
            if m["type"] == "audio":
                audio += len(base64.b64decode(m["data"]["audio"]))
            elif m["type"] == "event" and m["data"]["event_type"] == "final":
                break
            assert m["type"] != "error", m
        assert audio > 0
