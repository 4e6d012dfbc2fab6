"""app/door/speaker.py: the one door of every network request. HTTP (speech, script), Wyoming and MCP
requests are all made by `Speaker.make` (presets, voices, the build and the CLI's plan once), and
the server takes exactly what the CLI's plan takes, refusing the rest in the plan's words."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from server_util import TINY_CKPT, running_server

from omnivoice_cli.app.door import speaker as speaker_module
from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
from omnivoice_cli.app.request import References, Voices, build_request
from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.forwardfit import check_sizes, fit_sizes
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.planning import Request, plan_request
from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request
from omnivoice_cli.server.config import ServeOptions, load_voice_map
from omnivoice_cli.server.errors import ApiError
from omnivoice_cli.server.speech import parse_speech

FLAGS = ((FLAG_SOURCE, {"num_step": 4, "seed": 3}),)
UNPUNCTUATED = "word " * 800  # no sentence end: one stretch of about 2,900 s at speed 0.1


@pytest.fixture
def made(monkeypatch):
    """(speaker, text) of every request Speaker.make built, and the count of plans it made (and, second,
    of the designed voices rendered: each makes its own plan)."""
    from omnivoice_cli.app import request as request_module
    from omnivoice_cli.app.voices import design as design_module
    from omnivoice_cli.engine import pipeline

    calls: list[tuple[Speaker, str]] = []
    plans = [0, 0]
    make, plan, render = Speaker.make, plan_request, design_module.render

    def spy(self, text, settings):
        calls.append((self, text))
        return make(self, text, settings)

    def counted(*args, **kwargs):
        plans[0] += 1
        return plan(*args, **kwargs)

    def rendered(*args, **kwargs):
        plans[1] += 1
        return render(*args, **kwargs)

    monkeypatch.setattr(Speaker, "make", spy)
    monkeypatch.setattr(design_module, "render", rendered)
    for module in (pipeline, request_module, speaker_module):  # wherever it is imported from
        if hasattr(module, "plan_request"):
            monkeypatch.setattr(module, "plan_request", counted)
    return calls, plans


def _wyoming_says(speaker: Speaker, text: str) -> list[str]:
    """The event types a real Wyoming client gets for one synthesize, served by `speaker`."""
    pytest.importorskip("wyoming")
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    from omnivoice_cli.server.wyoming.wyoming import WyomingOptions, WyomingServer

    server = WyomingServer(speaker, WyomingOptions(uri="tcp://127.0.0.1:0", quiet=True))
    ready, loop = threading.Event(), asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve(lambda a: ready.set())), daemon=True)
    thread.start()
    assert ready.wait(120)
    port = int(str(server.address).rsplit(":", 1)[1])

    async def synthesize() -> list[str]:
        async with AsyncTcpClient("127.0.0.1", port, connect_timeout=60, read_timeout=120) as client:
            await client.write_event(Synthesize(text=text).event())
            kinds: list[str] = []
            while not kinds or kinds[-1] not in ("audio-stop", "error"):
                event = await client.read_event()
                assert event is not None
                kinds.append(event.type)
            return kinds

    try:
        return asyncio.run(asyncio.wait_for(synthesize(), 300))
    finally:
        loop.call_soon_threadsafe(server.close)
        thread.join(120)


def test_http_wyoming_and_mcp_requests_are_made_by_one_speaker_each_planned_once(engine, module_home, made, tmp_path):
    pytest.importorskip("websockets")  # the serve extra: the socket's client
    from websockets.sync.client import connect

    from omnivoice_cli.server.mcp import Tools

    calls, plans = made
    with running_server(engine) as (url, _server, state):
        c = httpx.Client(base_url=url, timeout=120)
        assert (
            c.post("/v1/audio/speech", json={"input": "Hello from HTTP.", "response_format": "wav"}).status_code == 200
        )
        lines = {"lines": [{"text": "A script's line."}, {"voice": "alloy", "text": "And another."}]}
        assert c.post("/v1/audio/script", json=lines).status_code == 200
        with connect(
            url.replace("http://", "ws://") + "/tts/ws", open_timeout=120
        ) as ws:  # the socket: text in, audio out
            ws.send(json.dumps({"type": "text", "data": {"text": "Hello from the socket."}}))
            ws.send(json.dumps({"type": "flush"}))
            audio, message = 0, {}
            while message.get("data", {}).get("event_type") != "final":
                got = ws.recv(timeout=120)
                audio += len(got) if isinstance(got, bytes) else 0
                message = json.loads(got) if isinstance(got, str) else {}
                assert message.get("type") != "error", message
                audio += len(message.get("data", {}).get("audio", "")) if message.get("type") == "audio" else 0
        assert state.service is state.speaker.running is not None  # the server's engine loop is its Speaker's
    http = state.speaker
    said = [
        (http, "Hello from HTTP."),
        (http, "A script's line."),
        (http, "And another."),
        (http, "Hello from the socket."),
    ]
    assert calls == said and audio > 0

    door = Speaker(SpeakerOptions(layers=FLAGS, model=str(TINY_CKPT)), load=lambda: engine)
    try:
        assert Tools(door, tmp_path).synthesize("Hello from MCP.", "out.wav")["samples"] > 0
        assert _wyoming_says(door, "Hello from Wyoming.")[-1] == "audio-stop"  # its close stops the loop
    finally:
        door.stop()
    assert calls[4:] == [(door, "Hello from MCP."), (door, "Hello from Wyoming.")]
    # one plan per request (and one of alloy's designed voice, rendered once)
    assert plans[0] - plans[1] == len(calls) == http.requests_built + door.requests_built == 6


def test_the_server_takes_the_unpunctuated_stretch_the_clis_plan_cuts_at_words(home):
    cfg = ModelConfig()
    req = Request(text=UNPUNCTUATED, speed=0.1)
    assert len(plan_request(req, cfg).pieces) > 100  # the CLI: cut at words, spoken
    body = parse_speech(json.dumps({"input": UNPUNCTUATED, "speed": 0.1}).encode(), ServeOptions())
    assert body.request.text == UNPUNCTUATED.strip() and body.request.speed == 0.1  # the server's Speaker took it
    door = Speaker(SpeakerOptions(), load=lambda: None)
    assert door.build(UNPUNCTUATED, settings={"speed": 0.1}).request.speed == 0.1  # Wyoming's and MCP's too
    # and the engine loop the Speaker runs (Service(fit=True)) cuts it at words where it would refuse it
    segments = cut_request(body.request, StreamConfig(first_seconds=10.0, piece_seconds=10.0))
    with pytest.raises(InvalidRequest, match="more than one generation holds"):
        check_sizes(body.request, segments, cfg)
    fitted = fit_sizes(body.request, segments, cfg)
    check_sizes(body.request, fitted, cfg)
    assert len(fitted) > 100 and " ".join(s.text or "" for s in fitted).split() == UNPUNCTUATED.split()


def test_the_server_refuses_what_the_clis_plan_refuses_in_its_words(home):
    import torch

    from omnivoice_cli.app.voices import voices
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    voices.save("slow", VoicePrompt(torch.zeros(8, 750, dtype=torch.long), "Hi.", 0.1))  # 30 s for "Hi."
    text = "Hello there, how are you today?"
    settings = resolve((FLAG_SOURCE, {"voice": "slow"}))
    with pytest.raises(InvalidRequest) as cli:  # `say --voice slow`: its request planned, refused
        build_request(text, settings, refs=References(), voices=Voices())
    words = str(cli.value)
    assert "would take" in words and "one generation is at most 30 s" in words
    with pytest.raises(ApiError) as http:
        parse_speech(json.dumps({"input": text, "voice": "slow"}).encode(), ServeOptions(voice_map=load_voice_map()))
    assert (http.value.status, http.value.message) == (400, words)
    with pytest.raises(InvalidRequest) as door:
        Speaker(SpeakerOptions(), load=lambda: None).build(text, voice="slow")
    assert str(door.value) == words
