#!/usr/bin/env python3
"""`say --server` against a warm `omnivoice serve` versus a cold local `say`: the whole command,
each its own process, alternated, and the files compared byte for byte.

    python benchmarks/bench_remote.py [--ckpt DIR] [--steps 8] [--repeats 3] [--threads 2]

The server is started once (`omnivoice serve --model CKPT` on a free 127.0.0.1 port), warmed by
one request, then each repeat runs `omnivoice say TEXT --model CKPT -o local.wav` and
`omnivoice say TEXT --server URL -o remote.wav` (same seed, steps, greedy) and times both from
the process's start to its exit. Prints the medians, their ratio and whether the files are equal.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import _harness as H

TEXT = "Thank you very much for your help today."  # about 2 s of speech


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    ckpt = str(args.ckpt or H.default_ckpt())
    env = {**os.environ, "PYTHONPATH": str(H.ROOT)}
    env.pop("OMNIVOICE_SERVER", None)
    cli = [sys.executable, "-m", "omnivoice_cli.cli"]
    same = ["--seed", "1", "--num-step", str(args.steps), "--position-temperature", "0", "-q", "--lang", "en"]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [*cli, "serve", "--model", ckpt, "--port", str(port), "--threads", str(args.threads), "-q"]
    server = subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 1800
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else "serve exited"
            assert time.monotonic() < deadline, "the server did not start"
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if json.loads(r.read()).get("status") == "ready":
                        break
            except OSError:
                pass
            time.sleep(0.5)
        with tempfile.TemporaryDirectory() as tmp:
            here, there = Path(tmp) / "local.wav", Path(tmp) / "remote.wav"
            timed([*cli, "say", TEXT, "--server", url, "-o", str(there), *same], env)  # the warm-up
            local, remote = [], []
            for _ in range(args.repeats):
                local.append(
                    timed(
                        [*cli, "say", TEXT, "--model", ckpt, "--threads", str(args.threads), "-o", str(here), *same],
                        env,
                    )
                )
                remote.append(timed([*cli, "say", TEXT, "--server", url, "-o", str(there), *same], env))
            equal = here.read_bytes() == there.read_bytes()
        lo, re_ = statistics.median(local), statistics.median(remote)
        print(
            json.dumps(
                {
                    "ckpt": ckpt,
                    "steps": args.steps,
                    "threads": args.threads,
                    "local_s": [round(x, 2) for x in local],
                    "remote_s": [round(x, 2) for x in remote],
                    "local_median_s": round(lo, 2),
                    "remote_median_s": round(re_, 2),
                    "speedup": round(lo / re_, 2),
                    "bytes_equal": equal,
                }
            )
        )
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
