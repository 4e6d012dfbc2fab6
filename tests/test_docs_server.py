"""The first curl example of docs/server.md, run as written against a real `omnivoice serve`
(uvicorn on 127.0.0.1, the tiny checkpoint): the WAV it saves is complete, its header's sizes
exact, so soundfile reads its true length; a WAV asked for as a stream keeps its unknown sizes."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import soundfile as sf
from helpers.audio import wav_sizes

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")


def first_curl_example(page: Path) -> list[str]:
    """The first `curl` command of the page's code blocks, its continued lines joined, as argv."""
    text = page.read_text()
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        lines = block.replace("\\\n", " ").splitlines()
        for line in lines:
            if line.startswith("curl "):
                return shlex.split(line, comments=True)
    raise AssertionError(f"no curl example in {page}")


def test_the_example_is_the_one_described():
    argv = first_curl_example(ROOT / "docs" / "server.md")
    assert argv[:3] == ["curl", "-s", "localhost:8000/v1/audio/speech"] and argv[-2:] == ["-o", "hi.wav"]
    assert '"response_format":"wav"' in argv[argv.index("-d") + 1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_docs_curl_example_saves_a_complete_wav(engine, module_home, tmp_path):
    from server_util import running_server, wav_samples

    argv = first_curl_example(ROOT / "docs" / "server.md")
    out, headers = tmp_path / "hi.wav", tmp_path / "headers.txt"
    with running_server(engine) as (url, _, _state):
        run = [url + a.removeprefix("localhost:8000") if a.startswith("localhost:8000") else a for a in argv]
        run[run.index("hi.wav")] = str(out)
        done = subprocess.run([*run, "-D", str(headers), "--fail-with-body"], capture_output=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        seed = re.search(r"(?im)^x-omnivoice-seed: (\d+)", headers.read_text()).group(1)
        body = json.loads(run[run.index("-d") + 1])
        streamed = httpx.post(url + "/v1/audio/speech", json={**body, "seed": int(seed), "stream": True}, timeout=300)
    assert streamed.status_code == 200 and streamed.headers.get("transfer-encoding") == "chunked"
    samples = wav_samples(streamed.content)  # the audio, from the stream
    data = out.read_bytes()
    riff, data_size, at = wav_sizes(data)
    assert riff == len(data) - 8 and data_size == len(data) - at == 2 * len(samples)  # exact header sizes
    info = sf.info(str(out))
    assert info.frames == len(samples) > 0 and info.samplerate == 24000 and info.duration < 10
    audio, _ = sf.read(str(out), dtype="int16")
    assert (audio == samples).all()
    _, _, at = wav_sizes(streamed.content)
    assert streamed.content[4:8] == streamed.content[at - 4 : at] == b"\xff\xff\xff\xff"  # a stream: sizes unknown
