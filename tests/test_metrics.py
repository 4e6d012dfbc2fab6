"""GET /metrics (server/metrics.py): Prometheus text that prometheus_client's own parser reads,
its counters moving with the requests made."""

import json

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

import httpx
from prometheus_client.parser import text_string_to_metric_families
from server_util import running_server, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home")]  # all end to end; an empty OMNIVOICE_HOME


def scrape(c):
    r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values


def value(values, name, **labels):
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_parse_and_move_with_requests(engine):
    with running_server(engine) as (url, _server, state):
        c = httpx.Client(base_url=url, timeout=120)
        before = scrape(c)
        assert value(before, "omnivoice_max_queue") == state.options.max_queue
        assert value(before, "omnivoice_engine_open_requests") == 0
        body = {"input": "Hello there. How are you?", "num_step": 2, "response_format": "pcm", "stream": False}
        for _ in range(2):
            assert c.post("/v1/audio/speech", json=body).status_code == 200
        assert c.post("/v1/audio/speech", json={**body, "num_step": 100}).status_code == 400
        pcm = c.post("/v1/audio/speech", json=body).content
        from websockets.sync.client import connect

        with connect(url.replace("http", "ws") + "/tts/ws", open_timeout=120) as ws:
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=120)) == {"type": "pong"}
        after = scrape(c)
        ok = ("omnivoice_requests_total", {"endpoint": "speech", "status": "200"})
        assert value(after, ok[0], **ok[1]) - value(before, ok[0], **ok[1]) == 3
        assert value(after, "omnivoice_requests_total", endpoint="speech", status="400") == 1
        assert value(after, "omnivoice_requests_total", endpoint="metrics", status="200") >= 1
        ws_count = lambda: value(scrape(c), "omnivoice_requests_total", endpoint="ws", status="101")
        wait_for(lambda: ws_count() == 1, 120, "the socket to be counted (when it closes)")
        assert value(after, "omnivoice_engine_requests_total", outcome="done") == 3
        assert value(after, "omnivoice_first_audio_seconds_count") == 3
        assert value(after, "omnivoice_generation_seconds_count") == 3
        assert value(after, "omnivoice_generation_seconds_sum") > 0
        forwards = value(after, "omnivoice_forwards_total")
        assert forwards == state.service.stats()["forwards"] > 0
        assert value(after, "omnivoice_forward_jobs_count") == forwards
        assert value(after, "omnivoice_packed_positions_total") > forwards  # many positions a forward
        seconds = value(after, "omnivoice_audio_seconds_total")
        assert seconds == pytest.approx(3 * (len(pcm) / 2) / 24000, rel=1e-6)
        assert value(after, "omnivoice_request_seconds_count", endpoint="speech") == 4
        c.get("/no/such/path")
        assert value(scrape(c), "omnivoice_requests_total", endpoint="other", status="404") == 1


def test_metrics_need_the_key(engine):
    with running_server(engine, api_key="k") as (url, _server, _state):
        assert httpx.get(url + "/metrics", timeout=120).status_code == 401
        r = httpx.get(url + "/metrics", headers={"Authorization": "Bearer k"}, timeout=120)
        assert r.status_code == 200 and "omnivoice_requests_total" in r.text
