"""The server's speech recogniser (serve --asr-model: `timestamps`, `verify`, uploads without
ref_text) when it is broken: every request is answered once, with a clean JSON error that does
not show the server's folders; no traceback leaves the app and the keep-alive connection stays."""

from __future__ import annotations

import http.client
import json
import logging
import shutil
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import httpx
from server_util import running_server

from omnivoice_cli.app.listening import listen

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ASR_TINY = FIXTURES / "asr-tiny"
GOLDEN = FIXTURES / "golden"
REF = (GOLDEN / json.loads((GOLDEN / "clone.json").read_text())["generate_kwargs"]["ref_audio"]).read_bytes()
BODY = {"model": "omnivoice", "input": "Hello there.", "voice": "auto", "seed": 5, "num_step": 2}


class Errors(logging.Handler):
    """The records of ERROR and above that a logger (uvicorn's) emits: a traceback that left the app."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def post_all(url: str, bodies: list[dict]) -> list[tuple[int, dict, str | None]]:
    """Each body POSTed to /v1/audio/speech on ONE keep-alive connection: (status, the error's
    JSON, the Connection header) of each; fails if the server dropped the connection between them."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    out, sock = [], None
    try:
        for body in bodies:
            conn.request("POST", "/v1/audio/speech", json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            out.append((r.status, json.loads(data) if r.status != 200 else {}, r.getheader("connection")))
            assert sock is None or conn.sock is sock, "the server closed the keep-alive connection"
            sock = conn.sock
            assert sock is not None
    finally:
        conn.close()
    return out


@pytest.mark.slow
def test_a_corrupt_asr_model_is_one_clean_500_and_the_connection_stays(engine, tmp_path, home):
    """Before: each timestamps/verify request answered 500, then the error escaped the app (a
    traceback per request, the connection reset), and the message showed the server's folder."""
    pytest.importorskip("faster_whisper")
    broken = tmp_path / "server-secret" / "broken-asr"
    shutil.copytree(ASR_TINY, broken)
    (broken / "model.bin").write_bytes((ASR_TINY / "model.bin").read_bytes()[:1000])
    errors = Errors()
    logger = logging.getLogger("uvicorn.error")
    with running_server(engine, asr_model=str(broken)) as (url, _server, state):
        logger.addHandler(errors)
        try:
            fields = ["timestamps", "verify", "timestamps"]
            replies = post_all(url, [{**BODY, field: True} for field in fields])
            upload = httpx.post(  # a voice without ref_text: its words are the recogniser's
                url + "/v1/audio/voices", data={"name": "bob"}, files={"file": ("bob.wav", REF, "audio/wav")}
            )
        finally:
            logger.removeHandler(errors)
        forwards = state.service.stats()["forwards"]
    error = upload.json()["error"]
    assert upload.status_code == 500 and (error["code"], error["param"]) == ("no_recogniser", "ref_text"), error
    assert "cannot be loaded from <asr-model>" in error["message"] and "server-secret" not in upload.text
    assert forwards == 0  # refused before anything was generated
    for field, (status, body, connection) in zip(fields, replies):
        error = body["error"]
        assert status == 500 and error["code"] == "no_recogniser" and error["param"] == field, body
        assert "the speech recogniser cannot be loaded from <asr-model>" in error["message"], body
        assert "server-secret" not in error["message"] and str(tmp_path) not in error["message"]
        assert connection != "close"
    assert not errors.records, [r.getMessage() for r in errors.records]


class Failing:
    """A recogniser that loads, then fails on any audio naming its folder (as WhisperRecogniser does)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        raise listen.RecogniserFailed(f"the speech recogniser ({self.folder}) failed: RuntimeError: bad weights")

    def close(self):
        pass


@pytest.mark.slow
def test_a_recogniser_failing_on_the_audio_is_one_clean_500(engine, tmp_path, monkeypatch):
    """A recogniser that fails while the request is answered (the words of `timestamps`, a piece
    checked by `verify`): a 500 naming the failure without the server's folder, the connection kept."""
    folder = tmp_path / "server-secret" / "asr"
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: Failing(spec))
    errors = Errors()
    logger = logging.getLogger("uvicorn.error")
    with running_server(engine, asr_model=str(folder)) as (url, _server, _state):
        logger.addHandler(errors)
        try:
            replies = post_all(url, [{**BODY, "timestamps": True}, {**BODY, "verify": True}, BODY])
        finally:
            logger.removeHandler(errors)
    for status, body, connection in replies[:2]:
        message = body["error"]["message"]
        assert status == 500 and "the speech recogniser (<asr-model>) failed: RuntimeError: bad weights" in message
        assert "server-secret" not in message and connection != "close"
    assert replies[2][0] == 200  # the same connection goes on
    assert not errors.records, [r.getMessage() for r in errors.records]


def test_a_5xx_message_shows_no_server_path():
    from omnivoice_cli.server.errors import from_engine, scrub_asr, scrub_paths

    said = "--asr-model /srv/m/asr: the speech recogniser cannot be loaded from /srv/m/asr (RuntimeError: 'enc/w' bad)"
    assert scrub_paths(said) == (
        "--asr-model <path>: the speech recogniser cannot be loaded from <path> (RuntimeError: 'enc/w' bad)"
    )
    assert scrub_asr("from models/asr (x)", "models/asr") == "from <asr-model> (x)"
    assert scrub_paths("1/2 and a/b, http://h/x, ~/x.bin, '/etc/x'") == "1/2 and a/b, http://h/x, <path>, '<path>'"
    error = from_engine(listen.RecogniserFailed("the speech recogniser (/home/me/asr) failed: E"))
    assert (error.status, error.message) == (500, "the speech recogniser (<path>) failed: E")
