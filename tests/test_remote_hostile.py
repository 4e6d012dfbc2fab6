"""`say --server` (app/say/remote.py) against a broken or hostile server: a stdlib HTTP server on
127.0.0.1 that sends each bad reply for real. A malformed URL is a usage error (exit 2) in one
line; a reply that is not what was asked (bad headers, a WAV of the wrong shape, a cut one, a body
past the longest reply the text can make, a huge error message) is one line, exit 1 (a refusal:
2), and no file."""

from __future__ import annotations

import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from conftest import error_line

pytest.importorskip("httpx")

TEXT = "Hello there."
RATE = 24_000
ENDLESS_CAP = 64 << 20  # bytes the endless server sends at most (far past what TEXT can make)


def wav(seconds: float = 1.0, channels: int = 1, rate: int = RATE, data_size: int | None = None) -> bytes:
    """A 16-bit PCM WAV of a quiet tone; `data_size`: what its header claims instead of the truth."""
    n = int(seconds * rate)
    tone = (3000 * np.sin(2 * np.pi * 220 * np.arange(n) / rate)).astype("<i2")
    data = np.repeat(tone[:, None], channels, axis=1).tobytes()
    size = len(data) if data_size is None else data_size
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    riff = min(0xFFFFFFFF, 4 + 8 + len(fmt) + 8 + size)
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", size)
        + data
    )


class Hostile(BaseHTTPRequestHandler):
    """Answers every POST with `status`, `headers` and `body` (bytes, or None: an endless body,
    zeros until the client hangs up or ENDLESS_CAP bytes went). `sent`: bytes of the last body,
    final once `answered` (an Event the fixture gives) is set: the client may return before."""

    status, headers, body = 200, {}, b""
    sent = 0
    answered: threading.Event

    def do_POST(self):
        try:
            self._answer()
        finally:
            type(self).answered.set()

    def _answer(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        self.send_response(cls.status)
        for key, value in cls.headers.items():
            self.send_header(key, value)
        if cls.body is not None:
            self.send_header("Content-Length", str(len(cls.body)))
        self.end_headers()  # HTTP/1.0: without a length, the body ends when the connection closes
        cls.sent = 0
        try:
            if cls.body is not None:
                self.wfile.write(cls.body)
                cls.sent = len(cls.body)
                return
            chunk = bytes(1 << 16)
            while cls.sent < ENDLESS_CAP:
                self.wfile.write(chunk)
                cls.sent += len(chunk)
        except OSError:  # the client hung up
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    """(the handler class to set the reply on, the server's URL)."""

    class Handler(Hostile):
        status, headers, body, sent = 200, {}, b"", 0
        answered = threading.Event()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(60)


def say_remote(invoke, url, *args, env=None):
    return invoke("say", TEXT, "--server", url, "-q", *args, env=env)


def test_a_well_formed_reply_is_written(hostile, invoke, tmp_path):
    handler, url = hostile
    handler.headers = {
        "X-OmniVoice-Seed": "7",
        "X-OmniVoice-Loudness": json.dumps({"target_lufs": -16.0, "lufs": -16.1}),
        "X-OmniVoice-Voice-Prompt": "ab" * 32,
    }
    handler.body = wav(1.0)
    r = say_remote(invoke, url, "-o", tmp_path / "ok.wav", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["seed"] == 7 and (tmp_path / "ok.wav").stat().st_size > 40_000
    assert summary["voice_prompt"] == "ab" * 32
    handler.headers = {"X-OmniVoice-Seed": "7", "X-OmniVoice-Voice-Prompt": "none"}  # no voice cloned
    r = say_remote(invoke, url, "-o", tmp_path / "ok.wav", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["voice_prompt"] is None, r.stderr


BAD_URLS = {
    "an unclosed IPv6 bracket": "http://[::1",
    "a 5,000-character host": "http://" + "a" * 5000 + ":8000",
    "two ports": "http://127.0.0.1:8000:9000",
    "a port out of range": "http://127.0.0.1:99999",
    "no host": "http://:8000",
}


@pytest.mark.parametrize("case", list(BAD_URLS))
def test_a_malformed_url_is_a_usage_error_in_one_line(invoke, tmp_path, case):
    url = BAD_URLS[case]
    r = say_remote(invoke, url, "-o", tmp_path / "u.wav")
    line = error_line(r, "--server", exit_code=2)
    assert len(line) < 300 and "http://HOST" in line, line
    r = invoke("say", TEXT, "-q", "-o", tmp_path / "u.wav", env={"OMNIVOICE_SERVER": url})
    line = error_line(r, "OMNIVOICE_SERVER", exit_code=2)
    assert len(line) < 300
    assert not (tmp_path / "u.wav").exists()


BAD_HEADERS = {
    "a seed that is not a number": ("X-OmniVoice-Seed", "lucky"),
    "a seed of 5,000 digits": ("X-OmniVoice-Seed", "9" * 5000),
    "a negative seed": ("X-OmniVoice-Seed", "-3"),
    "loudness that is not JSON": ("X-OmniVoice-Loudness", "{loud"),
    "loudness nested 3,000 deep": ("X-OmniVoice-Loudness", "[" * 3000 + "]" * 3000),
    "loudness of the wrong shape": ("X-OmniVoice-Loudness", '["a", "b"]'),
    "verify that is not JSON": ("X-OmniVoice-Verify", "]["),
    "verify nested 3,000 deep": ("X-OmniVoice-Verify", '{"a":' * 3000 + "1" + "}" * 3000),
    "verify of the wrong shape": ("X-OmniVoice-Verify", '{"piece": 0}'),
    "a voice prompt that is not a sha256": ("X-OmniVoice-Voice-Prompt", "ab" * 31 + "zz"),
    "a voice prompt of 5,000 characters": ("X-OmniVoice-Voice-Prompt", "a" * 5000),
}


@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_a_bad_header_is_one_line_exit_1_and_no_file(hostile, invoke, tmp_path, case):
    handler, url = hostile
    name, value = BAD_HEADERS[case]
    handler.headers, handler.body = {name: value}, wav(1.0)
    r = say_remote(invoke, url, "-o", tmp_path / "h.wav")
    line = error_line(r, name, exit_code=1)
    assert len(line) < 400, line
    assert not (tmp_path / "h.wav").exists()


def test_a_64_channel_wav_is_refused(hostile, invoke, tmp_path):
    handler, url = hostile
    handler.body = wav(0.2, channels=64)
    r = say_remote(invoke, url, "-o", tmp_path / "c.wav")
    assert "64 channels" in error_line(r, exit_code=1)
    assert not (tmp_path / "c.wav").exists()


def test_a_wav_that_claims_4_gb_but_holds_1_s_is_a_cut_reply(hostile, invoke, tmp_path):
    handler, url = hostile
    handler.body = wav(1.0, data_size=4_000_000_000)
    r = say_remote(invoke, url, "-o", tmp_path / "cut.wav")
    assert "cut off" in error_line(r, exit_code=1)
    assert not (tmp_path / "cut.wav").exists()


@pytest.mark.parametrize("stream", [(), ("--stream",)], ids=["whole", "stream"])
def test_a_reply_that_never_ends_is_stopped_past_the_longest_the_text_can_make(hostile, invoke, tmp_path, stream):
    handler, url = hostile
    handler.body = None
    r = say_remote(invoke, url, *stream, "-o", tmp_path / "endless.wav")
    assert "longest" in error_line(r, exit_code=1)
    assert not (tmp_path / "endless.wav").exists()
    assert handler.answered.wait(120)  # the server's write loop has ended: `sent` is its last count
    assert handler.sent < ENDLESS_CAP  # the client hung up long before the server's own cap


@pytest.mark.parametrize("status, code", [(400, 2), (500, 1)])
def test_a_1_mb_json_error_message_is_cut_like_a_plain_one(hostile, invoke, tmp_path, status, code):
    handler, url = hostile
    handler.status = status
    handler.headers = {"Content-Type": "application/json"}
    handler.body = json.dumps({"error": {"message": "bad " * 250_000}}).encode()
    r = say_remote(invoke, url, "-o", tmp_path / "e.wav")
    assert len(error_line(r, "bad bad", exit_code=code)) < 500
    handler.body = b"x" * (1 << 20)
    r = say_remote(invoke, url, "-o", tmp_path / "e.wav")
    assert len(error_line(r, exit_code=code)) < 500
