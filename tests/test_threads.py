"""An engine's audio does not depend on the thread that runs it: `say` (the main thread), `say
--stream` (a worker thread) and `serve` (its engine loop thread) give the same samples for one
text, seed and --threads; and an engine keeps its own thread count in every thread, also where
torch's count was changed after a thread had run torch (another engine loaded with other
--threads, an application's own torch.set_num_threads).

Each case runs in a subprocess: torch's thread count is process state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from server_util import TINY_CKPT, ready_url, wav_samples

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Hello there, this is a test of threads."
SAY = [sys.executable, "-m", "omnivoice_cli.cli", "say", TEXT, "--model", str(TINY_CKPT), "--device", "cpu"]
SETTINGS = ["--seed", "7", "--num-step", "4"]


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "OMNIVOICE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}


def _say(tmp_path: Path, threads: list[str], stream: bool) -> np.ndarray:
    out = ["--stream", "-o", "-"] if stream else ["-o", str(tmp_path / "say.wav")]
    r = subprocess.run([*SAY, *SETTINGS, *threads, *out, "-q"], capture_output=True, env=_env(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return wav_samples(r.stdout if stream else (tmp_path / "say.wav").read_bytes())


def _serve(tmp_path: Path, threads: list[str]) -> np.ndarray:
    import httpx

    args = [sys.executable, "-m", "omnivoice_cli.cli", "serve", "--model", str(TINY_CKPT), "--device", "cpu"]
    proc = subprocess.Popen(
        [*args, *threads, "--port", "0", "--no-ui"], stderr=subprocess.PIPE, text=True, env=_env(tmp_path)
    )
    try:
        url = ready_url(proc)
        body = {"input": TEXT, "voice": "auto", "seed": 7, "num_step": 4, "response_format": "wav"}
        r = httpx.post(url + "/v1/audio/speech", json=body, timeout=300)
        assert r.status_code == 200, r.text
        return wav_samples(r.content)
    finally:
        proc.terminate()
        proc.wait(300)


@pytest.mark.parametrize("threads", [["--threads", "1"], ["--threads", "2"], []], ids=["1", "2", "default"])
def test_say_say_stream_and_serve_give_the_same_samples(tmp_path, threads):
    pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)
    said = _say(tmp_path, threads, stream=False)
    assert len(said) > 0
    assert np.array_equal(_say(tmp_path, threads, stream=True), said)
    assert np.array_equal(_serve(tmp_path, threads), said)


# Engine A (threads=2) has run in the main thread and in a Service loop thread; engine B is then
# loaded with threads=1 (torch.set_num_threads(1), in the main thread). A's audio in the main
# thread, in its old loop thread, in a fresh streamed render's worker and in a fresh Speaker loop
# (wyoming, mcp) must all stay what A gave before B was loaded.
SCRIPT = r"""
import dataclasses, json, queue, sys
import numpy as np
from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
from omnivoice_cli.engine.pipeline import Engine, Request
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.service import Service
from omnivoice_cli.engine.stream.run import StreamRun

ckpt = sys.argv[1]
req = Request(text="Hello there, this is a test of threads.", seed=7)
req = dataclasses.replace(req, generation=dataclasses.replace(req.generation, num_step=4))

def served(service):
    events, pieces = queue.Queue(), []
    service.submit(req, events.put)
    while True:
        e = events.get()
        if e.kind == "piece":
            pieces.append(e.piece.audio)
        elif e.kind == "done":
            return np.concatenate(pieces)
        else:
            raise e.error

def streamed(engine):
    with StreamRun(engine, req) as run:
        return np.concatenate([p.audio for p in run])

a = Engine.load(ckpt, Hardware(device="cpu", threads=2))
loop = Service(a).start()
before = a.generate([req])[0].audio
old_loop = served(loop)
b = Engine.load(ckpt, Hardware(device="cpu", threads=1))
one_thread = b.generate([req])[0].audio
speaker = Speaker(SpeakerOptions(), load=lambda: a)
after = {
    "main thread": a.generate([req])[0].audio,
    "old loop thread": served(loop),
    "streamed worker": streamed(a),
    "speaker loop": speaker.render(req)[0],
}
loop.stop()
speaker.stop()
print(json.dumps({
    "counts_differ": not np.array_equal(before, one_thread),
    "loop_before": bool(np.array_equal(old_loop, before)),
    "same": {k: bool(np.array_equal(v, before)) for k, v in after.items()},
}))
"""


def test_an_engine_keeps_its_thread_count_in_every_thread(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TINY_CKPT)], capture_output=True, text=True, env=_env(tmp_path), timeout=300
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if not got["counts_differ"]:
        pytest.skip("one and two torch threads add this model's floats up alike on this CPU")
    assert got["loop_before"]
    assert got["same"] == dict.fromkeys(got["same"], True)
