"""The server under pressure: keys, CORS, body limits, uploads that are not audio, loading, a full
queue, clients that leave, SIGTERM with requests in flight, 100 requests from 20 clients."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
import numpy as np
from helpers.service import Forwards
from server_util import TINY_CKPT, decode, hold_engine, ready_url, running_server, wait_for, wav_samples

pytestmark = pytest.mark.usefixtures("home")  # every test: an empty OMNIVOICE_HOME (conftest)

ROOT = Path(__file__).resolve().parent.parent
SHORT = {"input": "Hello there.", "num_step": 2, "response_format": "wav", "stream": False}


def envelope(r, status):
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "\n" not in error["message"]
    return error


# --- the gate -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_api_key_cors_and_body_limits(engine):
    with running_server(engine, api_key="s3cret", cors=("http://app.example",), max_input_chars=50) as (url, _, _s):
        c = httpx.Client(base_url=url, timeout=120)
        assert c.get("/health").status_code == 200  # no key needed
        missing = c.get("/v1/models")
        assert envelope(missing, 401)["code"] == "missing_api_key" and missing.headers["www-authenticate"] == "Bearer"
        assert (
            envelope(c.get("/v1/models", headers={"Authorization": "Bearer nope"}), 401)["message"] == "wrong API key"
        )
        assert envelope(c.get("/v1/models", headers={"Authorization": "Basic s3cret"}), 401)
        key = {"Authorization": "Bearer s3cret"}
        assert c.get("/v1/models", headers=key).status_code == 200
        pre = c.options(
            "/v1/audio/speech",
            headers={
                "Origin": "http://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://app.example"
        other = c.get("/v1/models", headers={**key, "Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        big = c.post("/v1/audio/speech", headers=key, content=b"{" + b" " * 200_000 + b"}")
        assert envelope(big, 413)["code"] == "body_too_large"
        chunks = (b" " * 65536 for _ in range(4))  # no Content-Length: counted as it comes
        assert envelope(
            c.post("/v1/audio/speech", headers={**key, "Content-Type": "application/json"}, content=chunks), 413
        )
        long = c.post("/v1/audio/speech", headers=key, json={"input": "x" * 51})
        assert envelope(long, 400)["code"] == "input_too_long"


@pytest.mark.slow
def test_no_cors_header_without_cors_and_errors_over_http(engine):
    with running_server(engine) as (url, _, _s):
        c = httpx.Client(base_url=url, timeout=120)
        r = c.get("/v1/models", headers={"Origin": "http://app.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        e = envelope(c.post("/v1/audio/speech", content=b"{oops"), 400)
        assert e["type"] == "invalid_request_error" and e["message"].startswith("the body is not valid JSON")
        e = envelope(c.post("/v1/audio/speech", json={"input": "Hi", "num_step": 99}), 400)
        assert (e["param"], e["message"]) == ("num_step", "field 'num_step' must be an integer in 1..64, got 99")
        # an unpunctuated stretch at speed 0.1: the CLI's plan cuts it at words, and so does the
        # server (test_speaker.py: what the plan takes the server takes, what it refuses in its words)
        with c.stream("POST", "/v1/audio/speech", json={"input": "word " * 800, "speed": 0.1, "stream": True}) as r:
            assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"
            assert next(r.iter_bytes())  # its first piece's audio; leaving cancels the rest
        assert envelope(c.get("/v1/audio/speech"), 405)
        assert envelope(c.get("/v1/models/gpt-5"), 404)["code"] == "model_not_found"


@pytest.mark.slow
def test_uploads_that_are_wrong(engine, tmp_path):
    with running_server(engine, upload_limit=2_000_000) as (url, _, _s):
        c = httpx.Client(base_url=url, timeout=120)
        wav = (Path(__file__).parent / "fixtures" / "golden" / "ref_24k.wav").read_bytes()

        def up(data=None, files=None):
            return c.post("/v1/audio/voices", data=data or {}, files=files)

        e = envelope(
            up({"name": "x", "ref_text": "Words."}, {"file": ("notes.txt", b"just some text", "text/plain")}), 400
        )
        assert "the uploaded file 'notes.txt' is not audio" in e["message"] and e["param"] == "file"
        assert str(tmp_path) not in e["message"] and "/tmp" not in e["message"]
        assert (
            envelope(up({"name": "x", "ref_text": " "}, {"file": ("a.wav", wav[:40000])}), 400)["param"] == "ref_text"
        )
        assert envelope(up({"name": "x"}, {"ref_text": (None, "Hi")}), 400)["param"] == "file"  # multipart, no file
        assert (
            envelope(up({"name": "../etc", "ref_text": "Hi"}, {"file": ("a.wav", wav[:40000])}), 400)["param"] == "name"
        )
        e = envelope(up({"name": "x", "ref_text": "Hi", "nmae": "y"}, {"file": ("a.wav", wav[:40000])}), 400)
        assert "field 'nmae' is not a known field (did you mean 'name'?)" in e["message"]
        assert envelope(up({"name": "x", "ref_text": "Hi"}, {"file": ("a.wav", wav * 40)}), 413)  # over 2 MB
        e = envelope(c.post("/v1/audio/voices", json={"name": "x"}), 400)
        assert "multipart/form-data" in e["message"]
        silent = _wav(np.zeros(24000 * 3, dtype=np.float32))
        e = envelope(up({"name": "quiet", "ref_text": "Nothing."}, {"file": ("s.wav", silent)}), 400)
        assert "silent" in e["message"] or "empty" in e["message"]
        long = _wav(np.zeros(8000 * 61, dtype=np.float32), rate=8000)  # 61 s at 8 kHz: under 2 MB
        e = envelope(up({"name": "long", "ref_text": "Long."}, {"file": ("l.wav", long)}), 400)
        assert "is 61 s long: at most 60 s" in e["message"]


def _wav(audio, rate=24000):
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, audio, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def test_503_while_the_model_loads():
    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.run import make_server
    from omnivoice_cli.server.state import ServerState

    go = threading.Event()

    def slow_load():
        go.wait(120)
        raise RuntimeError("no model here")

    state = ServerState(ServeOptions(port=0, quiet=True), slow_load)
    server = make_server(state)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="the server")
    port = server.servers[0].sockets[0].getsockname()[1]
    c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
    h = c.get("/health")
    assert h.status_code == 503 and h.json()["status"] == "loading"
    r = c.post("/v1/audio/speech", json={"input": "Hi"})
    assert envelope(r, 503)["code"] == "loading" and r.headers["retry-after"] == "5"
    assert c.get("/v1/audio/voices").status_code == 200  # listing needs no model
    go.set()
    thread.join(120)
    assert not thread.is_alive() and server.exit_code == 1 and state.error == "no model here"


# --- a full queue, clients that leave, stopping -------------------------------------------------


def _send_and_leave(url: str, body: dict, leave: threading.Event) -> None:
    """Send a speech request on a raw socket and close it before any reply, once `leave` is set."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )
        leave.wait(120)  # (only a hung test waits that long)


@pytest.mark.slow
def test_a_full_queue_says_503_and_a_client_that_leaves_frees_its_place(engine):
    with running_server(engine, max_queue=1) as (url, _, state):
        c = httpx.Client(base_url=url, timeout=120)
        gate = hold_engine(state)
        leave = threading.Event()
        leaver = threading.Thread(target=_send_and_leave, args=(url, {**SHORT, "input": "I will leave early."}, leave))
        leaver.start()
        wait_for(lambda: state.service.open == 1, what="the first request")
        full = c.post("/v1/audio/speech", json=SHORT)
        assert envelope(full, 503)["code"] == "server_busy" and int(full.headers["retry-after"]) >= 1
        leave.set()  # the first client leaves only now: its place was held while the second asked
        leaver.join()
        wait_for(lambda: state.service.open == 0, what="the place to be freed")
        gate.set()
        r = c.post("/v1/audio/speech", json=SHORT)
        assert r.status_code == 200 and len(wav_samples(r.content)) > 0
        assert state.service.stats()["served"] == 1  # the one that left was never finished


@pytest.mark.slow
def test_a_drain_finishes_requests_in_flight_and_refuses_new_ones(engine):
    with running_server(engine, grace=600) as (url, server, state):  # only a hang outlasts it
        c = httpx.Client(base_url=url, timeout=120)
        gate = hold_engine(state)
        with ThreadPoolExecutor(2) as pool:
            inflight = [pool.submit(c.post, "/v1/audio/speech", json={**SHORT, "seed": n}) for n in range(2)]
            wait_for(lambda: state.service.open == 2, what="two requests in flight")
            server.handle_exit(signal.SIGTERM, None)  # as the signal handler does
            refused = c.post("/v1/audio/speech", json=SHORT)
            assert envelope(refused, 503)["code"] == "shutting_down" and "retry-after" in refused.headers
            h = c.get("/health")
            assert h.status_code == 503 and h.json()["status"] == "stopping"
            gate.set()
            for f in inflight:
                r = f.result()
                assert r.status_code == 200 and len(wav_samples(r.content)) > 0
        wait_for(lambda: server.should_exit, what="the server to exit")
        assert server.exit_code == 0


@pytest.mark.slow
def test_a_drain_past_its_grace_cuts_requests_with_503(engine):
    with running_server(engine, grace=0.2) as (url, server, state):
        c = httpx.Client(base_url=url, timeout=120)
        gate = hold_engine(state)
        with ThreadPoolExecutor(1) as pool:
            f = pool.submit(c.post, "/v1/audio/speech", json=SHORT)
            wait_for(lambda: state.service.open == 1, what="a request in flight")
            server.handle_exit(signal.SIGTERM, None)
            # the engine held until the grace is over and the drain has stopped the service (not for
            # a fixed 1 s: a loaded machine could pass it before the drain looked)
            wait_for(lambda: state.service._stopping, what="the drain to cut the request short")
            gate.set()
            assert envelope(f.result(), 503)["code"] == "shutting_down"


@pytest.mark.slow
def test_load_100_requests_from_20_clients_with_a_queue_of_8(engine):
    with running_server(engine, max_queue=8) as (url, _, state):
        peak = []
        state.service.observe(Forwards(lambda slots: peak.append(state.service.open)))

        def client(n):
            out = []
            with httpx.Client(base_url=url, timeout=120) as c:
                for i in range(5):
                    r = c.post("/v1/audio/speech", json={**SHORT, "input": f"Request {n} {i}.", "seed": n * 5 + i})
                    out.append((r.status_code, r.headers.get("retry-after"), r.content))
            return out

        with ThreadPoolExecutor(20) as pool:
            replies = [r for rs in pool.map(client, range(20)) for r in rs]
        assert len(replies) == 100
        print("load test:", {s: [r[0] for r in replies].count(s) for s in (200, 503)}, "peak open", max(peak))
        statuses = [s for s, _, _ in replies]
        assert set(statuses) <= {200, 503} and statuses.count(200) >= 8 and statuses.count(503) > 0
        for status, retry, content in replies:
            if status == 200:
                assert len(wav_samples(content)) > 2400 and decode(content)[1] == 24000
            else:
                assert retry is not None and int(retry) >= 1 and json.loads(content)["error"]["code"] == "server_busy"
        assert max(peak) <= 8
        assert state.service.open == 0
        r = httpx.post(url + "/v1/audio/speech", json=SHORT, timeout=120)  # and then serves normally
        assert r.status_code == 200


# --- the command --------------------------------------------------------------------------------


def test_serve_refuses_an_open_address_without_a_key_unless_allowed(invoke, monkeypatch):
    from omnivoice_cli.commands import serve as cmd

    seen = []
    monkeypatch.setattr(cmd, "_run", lambda state, quiet: seen.append(state.options))
    r = invoke("serve", "--host", "0.0.0.0", "--model", TINY_CKPT)
    assert r.exit_code == 2 and not seen and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--host 0.0.0.0 is reachable from other machines and the server has no API key" in r.stderr
    assert "--api-key" in r.stderr and "OMNIVOICE_API_KEY" in r.stderr and "--allow-no-key" in r.stderr
    r = invoke("serve", "--host", "0.0.0.0", env={"OMNIVOICE_ALLOW_NO_KEY": "1"})
    assert r.exit_code == 0 and "Warning: listening on 0.0.0.0 without --api-key" in r.stderr
    r = invoke(
        "serve", "--host", "0.0.0.0", "--allow-no-key", "--model", TINY_CKPT, "--num-step", "8", "--max-queue", "3"
    )
    assert r.exit_code == 0 and "Warning: listening on 0.0.0.0 without --api-key" in r.stderr
    o = seen[-1]
    assert (o.host, o.max_queue, o.api_key, o.model) == ("0.0.0.0", 3, None, str(TINY_CKPT))
    assert (
        dict(o.layers)[__import__("omnivoice_cli.app.settings.layers").app.settings.layers.FLAG_SOURCE]["num_step"] == 8
    )
    r = invoke("serve", "--host", "0.0.0.0", env={"OMNIVOICE_API_KEY": "k"})
    assert r.exit_code == 0 and "Warning" not in r.stderr and seen[-1].api_key == "k"
    r = invoke("serve")
    assert r.exit_code == 0 and "Warning" not in r.stderr and seen[-1].host == "127.0.0.1"
    r = invoke("serve", "--num-step", "0")
    assert r.exit_code == 2 and "--num-step must be an integer in 1..64, got 0" in r.stderr


def test_max_chars_and_its_former_name_set_the_one_limit(invoke, monkeypatch):
    """serve's --max-chars (wyoming's and mcp's name) is the one flag shown; --max-input-chars, its
    former name, still sets it; both at once are refused."""
    from omnivoice_cli.commands import serve as cmd

    seen = []
    monkeypatch.setattr(cmd, "_run", lambda state, quiet: seen.append(state.options))
    from omnivoice_cli.server.config import ServeOptions

    assert cmd.MAX_CHARS == ServeOptions.max_input_chars  # the help's default is the server's
    assert invoke("serve").exit_code == 0 and seen[-1].max_input_chars == 4096
    assert invoke("serve", "--max-chars", "100").exit_code == 0 and seen[-1].max_input_chars == 100
    assert invoke("serve", "--max-input-chars", "200").exit_code == 0 and seen[-1].max_input_chars == 200
    r = invoke("serve", "--max-chars", "100", "--max-input-chars", "200")
    assert r.exit_code == 2 and "--max-input-chars is --max-chars under its former name" in r.stderr
    assert invoke("serve", "--max-input-chars", "0").exit_code == 2  # its bounds are --max-chars'
    shown = invoke("serve", "--help").stdout
    assert "--max-chars" in shown and "--max-input-chars" not in shown


def test_serve_with_a_bad_voice_map_or_model(invoke, tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text('{"x": "robot"}')
    r = invoke("serve", "--voice-map", bad)
    assert r.exit_code == 2 and "voice 'x': unsupported instruct item" in r.stderr
    r = invoke("serve", "--model", tmp_path / "nothing", "--port", "0", "-q")
    assert r.exit_code in (1, 2) and r.stderr.startswith("Error: ") and "Traceback" not in r.stderr


def _health(url: str) -> dict:
    h = httpx.get(url + "/health", timeout=120).json()
    return {k: h[k] for k in ("open", "served", "generating")}


@pytest.mark.slow
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_health_counts_a_request_as_open_until_its_last_byte(engine, monkeypatch, stream):
    """`open` is what the README says: requests being answered, so a reply whose audio is all
    generated but not yet all sent is still open (it read 0 while the reply streamed on); `served`
    counts replies sent in full; `generating` is the engine's share. The reply is held between the
    engine's last piece and its last byte by holding the encoder's final step (or the whole file's
    encoding) until the test lets it go."""
    from omnivoice_cli.app import deliver
    from omnivoice_cli.media import output
    from omnivoice_cli.media.streams import StreamEncoder

    held, entered = threading.Event(), threading.Event()

    def holding(real):
        def wrapper(*args, **kwargs):
            entered.set()
            assert held.wait(120)
            return real(*args, **kwargs)

        return wrapper

    if stream:
        monkeypatch.setattr(StreamEncoder, "finish", holding(StreamEncoder.finish))
    else:
        monkeypatch.setattr(deliver, "encode", holding(output.encode))  # the whole file's, encoded by deliver
    with running_server(engine) as (url, _, state):
        assert _health(url) == {"open": 0, "served": 0, "generating": 0}
        gate = hold_engine(state)
        body = {
            "input": "One sentence here. And a second one.",
            "num_step": 2,
            "response_format": "wav",
            "stream": stream,
        }
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(httpx.post, url + "/v1/audio/speech", json=body, timeout=120)
            wait_for(lambda: state.service.open == 1, what="the request in the engine")
            assert _health(url) == {"open": 1, "served": 0, "generating": 1}
            gate.set()
            assert entered.wait(120)  # every piece generated; the reply's last bytes wait
            assert _health(url) == {"open": 1, "served": 0, "generating": 0}
            held.set()
            r = reply.result()
        assert r.status_code == 200 and len(wav_samples(r.content)) > 0
        wait_for(lambda: _health(url)["open"] == 0, what="the reply to be counted")
        assert _health(url) == {"open": 0, "served": 1, "generating": 0}
        refused = httpx.post(url + "/v1/audio/speech", json={"input": "\u200b"}, timeout=120)
        assert refused.status_code == 400 and _health(url) == {"open": 0, "served": 1, "generating": 0}


@pytest.mark.slow
def test_sigterm_with_requests_in_flight_exits_0(tmp_path):
    env = {**os.environ, "OMNIVOICE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "omnivoice_cli.cli",
            "serve",
            "--model",
            str(TINY_CKPT),
            "--port",
            "0",
            "--num-step",
            "16",
            "--grace",
            "600",  # the default 30 s cut the request short at load 12: only a hang should
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = ready_url(proc)
        text = " ".join(f"Sentence number {n} of a text that takes a while to speak." for n in range(12))
        with ThreadPoolExecutor(1) as pool:
            inflight = pool.submit(
                httpx.post, url + "/v1/audio/speech", json={"input": text, "response_format": "wav"}, timeout=300
            )
            wait_for(lambda: httpx.get(url + "/health", timeout=120).json()["open"] == 1, what="the request in flight")
            proc.send_signal(signal.SIGTERM)
            wait_for(lambda: httpx.get(url + "/health", timeout=120).status_code == 503, what="the drain")
            assert httpx.post(url + "/v1/audio/speech", json={"input": "Too late."}, timeout=120).status_code == 503
            r = inflight.result()
        assert r.status_code == 200 and len(wav_samples(r.content)) > 24000
        assert proc.wait(300) == 0
        rest = proc.stderr.read()
        assert "Traceback" not in rest and "stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
