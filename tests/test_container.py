"""The container image (Containerfile) built and run for real with podman, and compose.yaml checked
against it: the same ports, volumes and health check (docs/deploy.md)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
import yaml
from helpers.audio import wav_sizes
from helpers.container import (
    COMPOSE,
    CONTAINERFILE,
    ROOT,
    Podman,
    base_tarball,
    cache_dir,
    declared,
    instructions,
    podman_problem,
    process_uids,
    wheels,
)
from server_util import TINY_CKPT, ready_url, wait_for

REQUEST = {  # one request, its seed pinned: the image and a plain `serve` must give the same bytes
    "model": "omnivoice",
    "input": "Hello there, from a container.",
    "voice": "alloy",
    "response_format": "wav",
    "seed": 7,
}


def test_the_containerfile_reader_joins_lines_and_reads_declarations():
    text = (
        "# a comment\nARG BASE=x:1\nFROM ${BASE}\nRUN a \\\n    && b\nEXPOSE 8000 10200/tcp\n"
        'VOLUME ["/cache", "/data"]\nHEALTHCHECK --interval=10s --retries=3 \\\n    CMD ["python3", "-c", "x"]\n'
        'CMD ["serve"]\n'
    )
    assert ("RUN", "a      && b") in instructions(text)
    d = declared(text)
    assert d["ports"] == [8000, 10200] and d["volumes"] == ["/cache", "/data"] and d["args"] == {"BASE": "x:1"}
    assert d["healthcheck"] == {"test": ["CMD", "python3", "-c", "x"], "interval": "10s", "retries": "3"}
    assert d["cmd"] == ["serve"]


def test_the_image_serves_on_all_interfaces_as_a_user_with_its_state_in_volumes():
    image = declared(CONTAINERFILE.read_text())
    assert image["entrypoint"] == ["omnivoice"] and image["cmd"][:3] == ["serve", "--host", "0.0.0.0"]
    assert image["ports"] == [8000, 10200] and image["volumes"] == ["/cache", "/data"]
    assert "/health/ready" in " ".join(image["healthcheck"]["test"]) and ":8000/" in " ".join(
        image["healthcheck"]["test"]
    )
    assert image["args"]["BASE"].endswith("python:3.11-slim") and "whl/cpu" in image["args"]["TORCH_INDEX"]
    keywords = [k for k, _ in instructions(CONTAINERFILE.read_text())]
    assert "USER" in keywords and keywords.index("USER") > max(i for i, k in enumerate(keywords) if k == "RUN")
    # the package's own layer after its dependencies' (a change to the code rebuilds only it)
    copies = [rest for k, rest in instructions(CONTAINERFILE.read_text()) if k == "COPY"]
    assert copies[0].startswith("pyproject.toml") and copies[-1].startswith("omnivoice_cli")


def test_the_build_context_is_what_the_containerfile_copies_for_docker_and_podman_alike():
    """.containerignore (podman) and .dockerignore (docker) are one list, and it lets in exactly the
    files the Containerfile copies (a checkout's venvs, caches and tests stay out of the context)."""
    ignore = (ROOT / ".containerignore").read_text()
    assert (ROOT / ".dockerignore").read_text() == ignore
    allowed = {line[1:] for line in ignore.splitlines() if line.startswith("!")}
    copied = {rest.split()[0] for k, rest in instructions(CONTAINERFILE.read_text()) if k == "COPY"}
    assert copied == allowed and "*" in ignore.splitlines()


def test_compose_names_the_images_ports_volumes_and_health_check():
    """compose.yaml's services run the image's commands with its health check, publish its ports
    and mount its volumes; the API key comes from the environment, Wyoming is an option (a profile)."""
    image = declared(CONTAINERFILE.read_text())
    compose = yaml.safe_load(COMPOSE.read_text())
    server, wyoming = compose["services"]["omnivoice"], compose["services"]["wyoming"]
    assert server["command"] == image["cmd"] and server["build"] == "."
    assert server["ports"] == [f"{image['ports'][0]}:{image['ports'][0]}"]
    wyoming_port = f"127.0.0.1:{image['ports'][1]}:{image['ports'][1]}"  # no key: this machine only
    assert wyoming["ports"] == [wyoming_port] and wyoming["profiles"] == ["wyoming"]
    assert wyoming["command"][:3] == ["wyoming", "--uri", f"tcp://0.0.0.0:{image['ports'][1]}"]
    assert "profiles" not in server
    check = server["healthcheck"]
    assert check["test"] == image["healthcheck"]["test"]
    assert (check["interval"], check["timeout"], check["start_period"], str(check["retries"])) == tuple(
        image["healthcheck"][k] for k in ("interval", "timeout", "start-period", "retries")
    )
    for service in (server, wyoming):
        assert service["image"] == wyoming["image"]
        assert sorted(v.split(":")[1] for v in service["volumes"]) == sorted(image["volumes"])
        assert {v.split(":")[0] for v in service["volumes"]} <= set(compose["volumes"])
    assert server["environment"]["OMNIVOICE_API_KEY"].startswith("${OMNIVOICE_API_KEY:?")


def test_compose_validates_with_a_compose_tool():
    """`docker compose config` / `podman compose config`, where one is installed, takes the file."""
    for tool in (["docker", "compose"], ["podman", "compose"]):
        if shutil.which(tool[0]) is None:
            continue
        probe = subprocess.run([*tool, "version"], capture_output=True, text=True)
        if probe.returncode != 0:
            continue
        env = {**os.environ, "OMNIVOICE_API_KEY": "k"}
        r = subprocess.run([*tool, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        assert "/health/ready" in r.stdout
        return
    pytest.skip("no compose tool here (docker compose or podman compose); the file is read by PyYAML above")


def _follow(proc: subprocess.Popen, lines: queue.Queue) -> None:
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.put(line)
    lines.put(None)


def _speak(url: str) -> bytes:
    body = json.dumps(REQUEST).encode()
    req = urllib.request.Request(f"{url}/v1/audio/speech", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as reply:
            return reply.read()
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{url}: {e.code} {e.read()[:500]!r}") from None


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _plain_serve_bytes() -> bytes:
    """The request's reply from `omnivoice serve` on this host, on the same checkpoint."""
    command = [sys.executable, "-m", "omnivoice_cli.cli", "serve", "--model", str(TINY_CKPT), "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        url = ready_url(proc)
        wait_for(lambda: _get(f"{url}/health/ready")[0] == 200, what="the plain serve's /health/ready")
        return _speak(url)
    finally:
        proc.terminate()
        proc.wait(120)


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    reason = podman_problem()
    if reason:
        pytest.skip(f"the container image is not built here: {reason}")
    return Podman(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def image(podman):
    """The Containerfile built on a debootstrapped Debian, offline, from wheels downloaded here."""
    folder = cache_dir()
    base = "localhost/omnivoice-test-base:" + base_tarball(folder).stem.removeprefix("base-")
    if podman("image", "exists", base, check=False).returncode != 0:
        podman("import", str(folder / f"base-{base.rsplit(':', 1)[1]}.tar"), base)
    torch = "torch==" + importlib.metadata.version("torch")  # this host's (its CPU build lies on disk here)
    wheelhouse = wheels(folder, torch, declared(CONTAINERFILE.read_text())["args"]["EXTRAS"])
    tag = "localhost/omnivoice-test:latest"  # kept: a later run reuses the layers that did not change
    podman(
        "build", "--format", "docker", "--network", "none", "-v", f"{wheelhouse}:/wheels:ro",
        "--build-arg", f"BASE={base}", "--build-arg", "PIP_ARGS=--no-index", "--build-arg", "KERNELS=", "--build-arg", f"TORCH={torch}",
        "-t", tag, "-f", str(CONTAINERFILE), str(ROOT),
    )  # fmt: skip
    size = int(podman("image", "inspect", tag, "--format", "{{.Size}}").stdout)
    print(f"\nimage {tag}: {size / 1e6:.0f} MB (base {base})")
    return tag


@pytest.mark.slow
def test_the_image_speaks_like_serve_as_a_user_and_stops_on_sigterm(podman, image):
    name = f"omnivoice-test-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    podman(
        "run", "-d", "--name", name, "-p", "127.0.0.1::8000", "-v", f"{TINY_CKPT}:/model:ro",
        "-e", "OMNIVOICE_MODEL=/model", "-e", "OMNIVOICE_ALLOW_NO_KEY=1", image,
    )  # fmt: skip
    logs, lines = podman.popen("logs", "-f", name), queue.Queue()
    threading.Thread(target=_follow, args=(logs, lines), daemon=True).start()
    try:
        seen = []
        while not any("; ready" in line for line in seen):  # the server's own line, once the model is loaded
            line = lines.get(timeout=1800)  # (a net for a hang only: a real start prints ready or exits)
            assert line is not None, "the container exited before it was ready:\n" + "".join(seen)
            seen.append(line)
        port = podman("port", name, "8000").stdout.strip().rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{port}"
        # the ready line is printed as the model is loaded, a moment before the server takes requests
        wait_for(lambda: _get(f"{url}/health/ready")[0] == 200, what="/health/ready")
        ready_after = time.monotonic() - started  # (printed for docs/deploy.md; nothing asserted on it)
        health = podman("healthcheck", "run", name, check=False)  # the image's HEALTHCHECK, run once
        assert health.returncode == 0, health.stdout + health.stderr
        print(f"\nrun to ready: {ready_after:.1f} s (the tiny checkpoint)")

        pid = int(podman("inspect", name, "--format", "{{.State.Pid}}").stdout)
        assert all(uid != 0 for uid in process_uids(pid)), process_uids(pid)  # omnivoice, not root
        assert podman("exec", name, "id", "-un").stdout.strip() == "omnivoice"

        spoken = _speak(url)
        assert spoken[:4] == b"RIFF" and len(spoken) > 1000
        plain = _plain_serve_bytes()
        # the same audio, byte for byte; each file marked as AI-made (the marks name the checkpoint
        # by its path, which the image mounts elsewhere)
        assert spoken[wav_sizes(spoken)[2] :] == plain[wav_sizes(plain)[2] :]
        assert b"omnivoice" in spoken[: wav_sizes(spoken)[2]] and b"omnivoice" in plain[: wav_sizes(plain)[2]]

        podman("kill", "--signal", "TERM", name)
        assert podman("wait", name).stdout.strip() == "0"  # exit 0: it stopped itself, not killed
        rest = []
        while (line := lines.get(timeout=600)) is not None:
            rest.append(line)
        assert any("stopped" in line for line in rest), "".join(rest)
    finally:
        podman("rm", "-f", name, check=False)
        logs.kill()
