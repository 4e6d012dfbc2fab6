"""`serve --warmup`: the OpenAI names' and the `--voice-map` entries' designed voices are rendered and
kept in designed/ before the ready line, and the first request for one clones the kept voice: no
design is rendered after ready (a real `serve` process that says on stderr each design it renders)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
from server_util import TINY_CKPT

from omnivoice_cli.engine.sound.voicefile import read_voice_metadata

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
OPENAI_NAMES = [
    k for k in json.loads((ROOT / "omnivoice_cli" / "data" / "openai_voices.json").read_text()) if k[0] != "_"
]
DESIGNED = "test: rendered a design"

# `serve` in a process whose design renderer says on stderr each time it renders (app/request.py
# calls design.render through its module, so this is every design the server renders)
WATCHED = f"""
import sys
from omnivoice_cli.app.voices import design

rendered = design.render

def render(engine, d):
    sys.stderr.write("{DESIGNED}: " + str(d.instruct) + "\\n")
    sys.stderr.flush()
    return rendered(engine, d)

design.render = render
sys.argv = ["omnivoice", *sys.argv[1:]]
from omnivoice_cli.cli import main

main()
"""


def _kept(folder: Path) -> dict[str, tuple[int, int, str, str]]:
    """designed/'s voice files: name -> (inode, mtime_ns, instruct, voice_prompt)."""
    out = {}
    for p in sorted(folder.glob("voice-*.safetensors")):
        st, meta = p.stat(), read_voice_metadata(p)
        out[p.name] = (st.st_ino, st.st_mtime_ns, meta["instruct"], meta["voice_prompt"])
    return out


def test_warmup_keeps_every_designed_voice_before_ready_and_the_first_request_clones(tmp_path):
    home = tmp_path / "home"
    voice_map = tmp_path / "voices.json"
    voice_map.write_text(json.dumps({"narrator": "male, low pitch, british accent"}))
    env = {**os.environ, "OMNIVOICE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    command = ["serve", "--model", str(TINY_CKPT), "--port", "0", "--num-step", "2", "--warmup"]
    proc = subprocess.Popen(
        [sys.executable, "-c", WATCHED, *command, "--voice-map", str(voice_map)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        before: list[str] = []
        while not any("takes requests; ready" in line for line in before):
            before.append(proc.stderr.readline())
            assert before[-1], "".join(before)
        kept = _kept(home / "designed")  # nothing renders between the ready line and a request
        url = next(line for line in before if "listening on" in line).split("listening on ")[1].split()[0]
        prompts = {}
        for voice in ("alloy", "narrator"):
            r = httpx.post(url + "/v1/audio/speech", json={"input": "Hello.", "voice": voice}, timeout=300)
            assert r.status_code == 200, r.text
            prompts[voice] = r.headers["X-OmniVoice-Voice-Prompt"]
    finally:
        proc.terminate()
        after = proc.communicate(timeout=120)[1].splitlines()
    renders = [line for line in before if line.startswith(DESIGNED)]
    assert len(renders) == len(OPENAI_NAMES) + 1 == len(kept), (renders, kept)
    assert any("british accent" in line for line in renders)  # the voice-map entry's
    assert not [line for line in after if line.startswith(DESIGNED)]  # the requests cloned, designed nothing
    assert _kept(home / "designed") == kept  # the same files, neither rendered again nor rewritten
    recorded = {instruct: prompt for _, _, instruct, prompt in kept.values()}
    assert prompts["narrator"] == recorded["male, low pitch, british accent"]
    assert prompts["alloy"] in recorded.values() and prompts["alloy"] != prompts["narrator"]
