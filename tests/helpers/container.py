"""The container image built and run for real (test_container.py): podman with runc as root, a
Debian base made by debootstrap (cached, keyed by its recipe), the wheels pip would fetch
downloaded on this host, and the Containerfile's and compose.yaml's declarations read."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CONTAINERFILE = ROOT / "Containerfile"
COMPOSE = ROOT / "compose.yaml"
# The base: Debian's own Python (3.11 in bookworm: the wheels this host's pip downloads must fit it).
BASE_RECIPE = {
    "suite": "bookworm",
    "variant": "minbase",
    "include": ["python3", "python3-venv"],
    "mirror": "http://deb.debian.org/debian",
}
# podman as root on runc (crun is refused by this kernel's cgroups), without podman's default
# ulimits (which this sandbox does not allow to be set), without systemd.
CONTAINERS_CONF = """[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


def instructions(text: str) -> list[tuple[str, str]]:
    """A Containerfile's instructions, (KEYWORD, arguments), continuation lines joined, comments out."""
    joined, found = "", []
    for line in text.splitlines():
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        joined += line
        keyword, _, rest = joined.strip().partition(" ")
        found.append((keyword.upper(), rest.strip()))
        joined = ""
    return found


def declared(text: str) -> dict:
    """What a Containerfile declares about the image it makes: ports, volumes, the health check's
    command and timing, the build args' defaults, the entrypoint and command."""
    out: dict = {"ports": [], "volumes": [], "args": {}}
    for keyword, rest in instructions(text):
        if keyword == "EXPOSE":
            out["ports"] += [int(p.split("/")[0]) for p in rest.split()]
        elif keyword == "VOLUME":
            out["volumes"] += json.loads(rest) if rest.startswith("[") else rest.split()
        elif keyword == "ARG":
            name, _, default = rest.partition("=")
            out["args"][name] = default
        elif keyword == "HEALTHCHECK":
            options, _, command = rest.partition(" CMD ")
            out["healthcheck"] = {
                "test": ["CMD", *json.loads(command)],
                **dict(o.lstrip("-").split("=", 1) for o in options.split()),
            }
        elif keyword in ("ENTRYPOINT", "CMD"):
            out[keyword.lower()] = json.loads(rest)
    return out


def podman_problem() -> str | None:
    """Why the image cannot be built and run here (None: it can)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs Linux and root (podman with runc as root)"
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (.ci/run installs them with apt where it can)"
    if sys.version_info[:2] != (3, 11):
        return "the wheels are downloaded by this Python, which must be the base's (Debian bookworm: 3.11)"
    return None


class Podman:
    """podman as root with the test's containers.conf (CONTAINERS_CONF)."""

    def __init__(self, conf_dir: Path) -> None:
        conf = conf_dir / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def __call__(self, *args: str, check: bool = True, timeout: float = 3600) -> subprocess.CompletedProcess:
        """Run `podman ARGS`; its output in the failure when it fails."""
        r = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, (
                f"podman {shlex.join(args)}: exit {r.returncode}\n{r.stdout[-4000:]}{r.stderr[-4000:]}"
            )
        return r

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            ["podman", *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )


def cache_dir() -> Path:
    """The project's cache for the test's slow inputs: $OMNIVOICE_TEST_CACHE, else .cache/ in the checkout."""
    folder = Path(os.environ.get("OMNIVOICE_TEST_CACHE") or ROOT / ".cache" / "container-test")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def locked(folder: Path):
    """The cache to this process alone (another run making the same base waits, then reuses it)."""
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def base_tarball(folder: Path) -> Path:
    """The base's root file system as a tar: debootstrap's once per recipe, kept in `folder` as
    base-KEY.tar beside its sha256, and made again when the sum no longer matches."""
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip() or "amd64"
    recipe = {**BASE_RECIPE, "arch": arch}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    tar, sums = folder / f"base-{key}.tar", folder / f"base-{key}.tar.sha256"
    with locked(folder):
        if tar.exists() and sums.exists() and sums.read_text().strip() == _sha256(tar):
            return tar
        rootfs = folder / f"rootfs-{key}"
        shutil.rmtree(rootfs, ignore_errors=True)
        command = [
            "debootstrap",
            f"--variant={recipe['variant']}",
            f"--arch={arch}",
            f"--include={','.join(recipe['include'])}",
            recipe["suite"],
            str(rootfs),
            recipe["mirror"],
        ]
        r = subprocess.run(command, capture_output=True, text=True)
        assert r.returncode == 0, f"{shlex.join(command)}: exit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
        partial = tar.with_suffix(".tar.part")
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."], check=True)
        shutil.rmtree(rootfs)
        sums.write_text(_sha256(partial) + "\n")
        partial.rename(tar)
        return tar


def requirements(extras: str) -> list[str]:
    """What the Containerfile installs after torch: the package's dependencies and those of `extras`."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        *project["dependencies"],
        *(r for e in extras.split(",") if e for r in project["optional-dependencies"][e]),
    ]
    return [r for r in wanted if not r.startswith("torch")]


def wheels(folder: Path, torch: str, extras: str) -> Path:
    """The wheels (and sdists) the build installs, downloaded by this host's pip into a folder of
    the cache keyed by what is asked (pip checks what is there and fetches only what is missing)."""
    asked = [torch, "setuptools>=68", *requirements(extras)]
    key = hashlib.sha256(json.dumps([sys.version_info[:2], asked]).encode()).hexdigest()[:16]
    out = folder / f"wheels-{key}"
    with locked(folder):
        command = [sys.executable, "-m", "pip", "download", "-q", "-d", str(out), *asked]
        r = subprocess.run(command, capture_output=True, text=True)
        assert r.returncode == 0, f"pip download: exit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return out


def process_uids(pid: int) -> list[int]:
    """The real, effective, saved and file-system user ids of a process (/proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = re.search(r"^Uid:\s+(.*)$", status, re.M)
    assert line, status
    return [int(u) for u in line.group(1).split()]
