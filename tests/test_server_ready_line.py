"""`omnivoice serve`'s ready line: printed only once /health/ready answers 200 and the socket
accepts, so that the first request sent after it is taken, never answered 503 ("loading")."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
from server_util import TINY_CKPT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

# `serve --warmup` in a process whose warm-up request waits for a line on stdin: the test holds the
# server between "model loaded" and ready for as long as it likes, with no clock involved
HELD_WARMUP = """
import sys
from omnivoice_cli.server.state import ServerState

spoken = ServerState.warm_up

def held(self):
    sys.stdin.readline()
    spoken(self)

ServerState.warm_up = held
sys.argv = ["omnivoice", *sys.argv[1:]]
from omnivoice_cli.cli import main

main()
"""


def test_the_first_request_after_the_ready_line_is_taken(tmp_path):
    env = {**os.environ, "OMNIVOICE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = ["serve", "--model", str(TINY_CKPT), "--port", "0", "--num-step", "2", "--warmup"]
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_WARMUP, *command],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines: list[str] = []
        while not any("ready" in line for line in lines):
            lines.append(proc.stderr.readline())
            assert lines[-1], "".join(lines)
            if "model loaded" in lines[-1] and "ready" not in lines[-1]:
                proc.stdin.write("go\n")  # the model is loaded: let the warm-up be spoken
                proc.stdin.flush()
        url = next(line for line in lines if "listening on" in line).split("listening on ")[1].split()[0]
        assert "model loaded" in "".join(lines)  # the load's own line came first
        health = httpx.get(url + "/health/ready", timeout=120)
        assert health.status_code == 200, health.text
        assert health.json()["warmed"] is True
        r = httpx.post(url + "/v1/audio/speech", json={"input": "Hello.", "response_format": "wav"}, timeout=300)
        assert r.status_code == 200, r.text
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(120)
