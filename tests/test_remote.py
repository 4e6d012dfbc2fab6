"""`say --server URL` (app/say/remote.py) against a real `omnivoice serve` (uvicorn on 127.0.0.1, the
tiny checkpoint): the same bytes as a local `say` with the same seed, the same errors and exit codes,
one line when no server is there."""

import shlex
import sys

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)
pytest.importorskip("httpx")

from conftest import error_line
from server_util import TINY_CKPT, running_server

pytestmark = pytest.mark.slow  # a server on the tiny model, and local runs of it

TEXT = "I can speak in the same voice."
SETTINGS = ("--seed", 1, "--num-step", 4, "--position-temperature", 0, "--class-temperature", 0)


@pytest.fixture(scope="module")
def url(engine, module_home):
    with running_server(engine) as (address, _, state):
        yield address


def local(invoke, *args):
    return invoke("say", TEXT, "--model", TINY_CKPT, *SETTINGS, "-q", *args)


def remote(invoke, url, *args, env=None):
    return invoke("say", TEXT, "--server", url, *SETTINGS, "-q", *args, env=env)


@pytest.mark.parametrize("name, extra", [("a.wav", ()), ("a.flac", ("--sample-rate", 16000))])
def test_a_file_through_the_server_equals_a_local_one_byte_for_byte(url, invoke, tmp_path, name, extra):
    here, there = tmp_path / f"here-{name}", tmp_path / f"there-{name}"
    r = local(invoke, "-o", here, *extra)
    assert r.exit_code == 0, r.stderr
    r = remote(invoke, url, "-o", there, *extra)
    assert r.exit_code == 0, r.stderr
    assert there.read_bytes() == here.read_bytes()


def test_the_server_is_also_found_by_the_environment_and_says_its_seed(url, invoke, tmp_path):
    out = tmp_path / "env.wav"
    r = invoke("say", TEXT, *SETTINGS, "--json", "-o", out, env={"OMNIVOICE_SERVER": url})
    assert r.exit_code == 0, r.stderr
    assert '"seed": 1' in r.stdout and out.stat().st_size > 44
    r = invoke("say", TEXT, *SETTINGS, "--server", "", "--model", TINY_CKPT, "-o", out, env={"OMNIVOICE_SERVER": url})
    assert r.exit_code == 0, r.stderr  # --server '': a local run, where --model is allowed


def test_the_summary_names_the_voice_prompt_the_server_cloned(url, invoke, tmp_path):
    """--json's `voice_prompt` is the server's (its X-OmniVoice-Voice-Prompt): the designed alloy the
    local run on the same checkpoint and home clones; none for the model's own voice."""
    import json

    here = local(invoke, "--voice", "alloy", "--json", "-o", tmp_path / "here.wav")
    there = remote(invoke, url, "--voice", "alloy", "--json", "-o", tmp_path / "there.wav")
    assert here.exit_code == there.exit_code == 0, there.stderr
    prompt = json.loads(there.stdout)["voice_prompt"]
    assert prompt == json.loads(here.stdout)["voice_prompt"] and len(prompt) == 64
    plain = remote(invoke, url, "--json", "-o", tmp_path / "plain.wav")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["voice_prompt"] is None


@pytest.mark.parametrize("streamed", [("--stream",), ()], ids=["stream", "whole"])
def test_stdout_through_the_server_equals_a_local_run(url, invoke, streamed):
    here = local(invoke, *streamed, "-o", "-")
    there = remote(invoke, url, *streamed, "-o", "-")
    assert here.exit_code == there.exit_code == 0, there.stderr
    assert len(here.stdout_bytes) > 1000
    assert there.stdout_bytes == here.stdout_bytes


def test_a_streamed_file_through_the_server_equals_a_local_one(url, invoke, tmp_path):
    here, there = tmp_path / "here.flac", tmp_path / "there.flac"
    assert local(invoke, "--stream", "-o", here).exit_code == 0
    r = remote(invoke, url, "--stream", "-o", there)
    assert r.exit_code == 0, r.stderr
    assert there.read_bytes() == here.read_bytes()


RECORDER = """import sys
with open(sys.argv[1], "ab") as f:
    f.write(sys.stdin.buffer.read())
"""


def test_played_through_the_server_the_player_gets_what_a_local_stream_sends(url, invoke, tmp_path, monkeypatch):
    from omnivoice_cli.media import player as playermod

    monkeypatch.setattr(playermod, "_sounddevice_problem", lambda: "not installed")
    script, played = tmp_path / "recorder.py", tmp_path / "played.raw"
    script.write_text(RECORDER)
    monkeypatch.setenv("OMNIVOICE_PLAYER", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {played}")
    r = remote(invoke, url)  # no -o: played as the pieces come
    assert r.exit_code == 0, r.stderr
    here = local(invoke, "--stream", "-o", "-", "--format", "raw")
    assert here.exit_code == 0 and len(here.stdout_bytes) > 1000
    assert played.read_bytes() == here.stdout_bytes


def test_a_bad_value_is_the_same_usage_error_as_here(url, invoke, tmp_path):
    here = local(invoke, "--instruct", "purple", "-o", tmp_path / "x.wav")
    there = remote(invoke, url, "--instruct", "purple", "-o", tmp_path / "y.wav")
    assert here.exit_code == there.exit_code == 2
    assert error_line(there) == error_line(here)
    assert not (tmp_path / "y.wav").exists()


def test_what_the_server_refuses_is_a_usage_error_in_its_words(url, invoke, tmp_path):
    r = remote(invoke, url, "--voice", "nobody-saved-this", "-o", tmp_path / "v.wav")
    assert r.exit_code == 2, r.stderr
    assert "nobody-saved-this" in error_line(r)
    assert not (tmp_path / "v.wav").exists()


def test_the_settings_of_the_model_and_machine_are_refused_with_a_server(url, invoke, tmp_path):
    r = remote(invoke, url, "--threads", 2, "-o", tmp_path / "t.wav")
    assert r.exit_code == 2
    assert "--threads cannot go with --server" in error_line(r)
    r = remote(invoke, url, "--ref", tmp_path / "r.wav", "-o", tmp_path / "t.wav")
    assert r.exit_code == 2 and "--ref cannot go with --server: a recording is not sent" in error_line(r)
    r = remote(invoke, url, "--subtitles", tmp_path / "t.srt", "-o", tmp_path / "t.wav")
    assert r.exit_code == 2 and "--subtitles cannot go with --server" in error_line(r)


def test_no_server_listening_is_one_line_and_exit_1(invoke, tmp_path):
    import socket

    with socket.socket() as held:  # bound, never listening: a connect is refused, and no other process takes the port
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        r = remote(invoke, f"http://127.0.0.1:{port}", "-o", tmp_path / "n.wav")
    assert r.exit_code == 1
    assert error_line(r).startswith(f"Error: no omnivoice server answered at http://127.0.0.1:{port}")
    assert not (tmp_path / "n.wav").exists()


def test_a_server_url_must_be_http(invoke):
    r = remote(invoke, "127.0.0.1:8000", "-o", "-")
    assert r.exit_code == 2 and "must be an http:// or https:// URL" in error_line(r)


@pytest.fixture
def odd_server():
    """A stdlib HTTP server that answers every POST with (status, body) of `odd_server.reply`."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        reply = (500, b"")

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            status, body = Handler.reply
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(60)


def test_a_failing_server_is_exit_1_and_a_refusing_one_exit_2(odd_server, invoke, tmp_path):
    handler, address = odd_server
    handler.reply = (500, b'{"error": {"message": "the engine  broke"}}')
    r = remote(invoke, address, "-o", tmp_path / "f.wav")
    assert r.exit_code == 1
    assert error_line(r) == f"Error: the server at {address} failed (HTTP 500): the engine broke"
    handler.reply = (401, b'{"error": {"message": "missing API key"}}')
    r = remote(invoke, address, "-o", tmp_path / "f.wav")
    assert r.exit_code == 2 and error_line(r) == "Error: missing API key"
    handler.reply = (200, b"<html>a proxy's page</html>")
    r = remote(invoke, address, "-o", tmp_path / "f.wav")
    assert r.exit_code == 1 and error_line(r).startswith("Error: the server's reply is not a WAV file")
    assert not (tmp_path / "f.wav").exists()
