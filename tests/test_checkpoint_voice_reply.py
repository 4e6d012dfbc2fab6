"""A fine-tune's own voice whose recording is broken or poor, asked for over HTTP: the reply names
the voice and its recording as the checkpoint declares it (reference_speakers/x.wav), never the
server's own folders; `say` says the same in one line."""

from __future__ import annotations

import pytest
from conftest import FakeEngine, error_line

from omnivoice_cli.app.settings.layers import FLAG_SOURCE

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")


def _ask(folder, voice: str) -> httpx.Response:
    """POST a speech request for `voice` to a server of the checkpoint `folder` (a fake engine: the
    request is refused before it reaches one)."""
    from server_util import running_server

    layers = ((FLAG_SOURCE, {"num_step": 2, "model": str(folder)}),)
    with running_server(FakeEngine(str(folder), "cpu", "float32"), model=str(folder), layers=layers) as (url, _, _):
        body = {"model": "omnivoice", "input": "Good evening.", "voice": voice, "response_format": "wav"}
        return httpx.post(url + "/v1/audio/speech", json=body, timeout=120)


def _shown(reply: httpx.Response) -> str:
    return reply.text + "".join(f"{k}: {v}\n" for k, v in reply.headers.items())


def test_an_unreadable_recording_is_a_400_without_the_servers_paths(finetune, home):
    folder = finetune("voicetut")
    (folder / "reference_speakers" / "karim.wav").write_bytes(b"RIFF\0\0\0\0WAVEjunk" * 8)
    reply = _ask(folder, "Karim")
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert "'Karim'" in message and "reference_speakers/karim.wav" in message, message
    assert str(folder) not in _shown(reply) and str(folder.resolve()) not in _shown(reply)
    assert str(home) not in _shown(reply) and "/tmp" not in _shown(reply)


def test_say_names_the_voice_and_its_recording_in_one_line(invoke, finetune, home, tmp_path):
    folder = finetune("voicetut")
    (folder / "reference_speakers" / "karim.wav").write_bytes(b"RIFF\0\0\0\0WAVEjunk" * 8)
    r = invoke("say", "hello", "--model", folder, "--voice", "karim", "--dry-run")
    line = error_line(r, "reference_speakers/karim.wav")
    assert "'Karim'" in line
