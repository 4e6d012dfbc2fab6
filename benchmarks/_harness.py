"""Shared pieces of the benchmarks: workloads, peak-RSS sampling, side-by-side subprocess runs.

Every measurement runs in its own subprocess (so peak RSS and start-up are per run), with a fixed
number of torch threads; ours and the reference's runs alternate, and medians are reported.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORACLE_PY = ROOT / ".oracle" / "venv" / "bin" / "python"  # ../shared/oracle/setup_venv.sh builds it

# The reference oracle's own benchmark workloads (../shared/oracle/bench_ref.py), so figures compare.
SENTENCE_9S = (
    "The old clockmaker opened the wooden shutters of his tiny shop every morning, "
    "swept the dust from the floor, and wound each of the clocks on the walls."
)
BATCH8 = [
    "Good morning.",
    "Please close the door behind you.",
    "The train to the city leaves at seven in the evening.",
    "She carefully packed her bags, checked the tickets twice, and called a taxi.",
    SENTENCE_9S,
    "Reading books is one of the best ways to learn new words and ideas.",
    "It was raining so hard that the streets turned into small rivers within minutes, "
    "and nobody dared to leave the cafe.",
    "Thank you very much for your help today.",
]


def default_ckpt() -> Path:
    for p in (ROOT / ".oracle" / "ckpt-full", ROOT / "bench-ckpt-full"):
        if (p / "model.safetensors").is_file():
            return p
    raise SystemExit("no full-size checkpoint: run `python benchmarks/make_checkpoint.py` (writes bench-ckpt-full/)")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Peak resident memory of this process, sampled every 10 ms."""

    def __init__(self, period: float = 0.01):
        self.period, self.peak, self._stop = period, 0, threading.Event()

    def __enter__(self):
        self.peak = rss_bytes()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.period)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())


def run_json(cmd: list[str], env: dict | None = None) -> dict:
    """Run a measurement subprocess; it prints one line `RESULT {json}`. Adds its wall time."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["process_seconds"] = wall
            return r
    raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")


def run_wall(cmd: list[str], env: dict | None = None) -> float:
    """Wall time of a whole command (imports, load, generation, decode, writing)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return time.perf_counter() - t0


def report_whole(walls: dict[str, list[float]], steps: int, repeats: int, out: dict) -> None:
    """Print the whole-command wall times (median of the runs) and, when the reference ran, each of
    ours as a ratio to it; record them in out["whole"]."""
    print(f"\nwhole command at {steps} steps (median of {repeats}, seconds)")
    for name, ws in walls.items():
        print(f"  {name:14s} {median(ws):7.1f}   runs {[round(w, 1) for w in ws]}")
        out["whole"][name] = {"median": median(ws), "runs": ws}
    if "reference" in walls:
        for name in walls:
            if name != "reference":
                print(f"  {name}: {median(walls['reference']) / median(walls[name]):.2f}x the reference")


def median(xs):
    return statistics.median(xs)


def have_reference() -> bool:
    return ORACLE_PY.is_file()


def ours_cmd(args, texts, num_step, extra=()) -> list[str]:
    device = ["--device", getattr(args, "device", "cpu"), "--dtype", getattr(args, "dtype", "auto")]
    return [
        sys.executable, str(Path(__file__).parent / "_ours.py"), "--ckpt", str(args.ckpt),
        "--threads", str(args.threads), "--num-step", str(num_step), "--texts", json.dumps(texts), *device, *extra,
    ]  # fmt: skip


def add_device_args(ap) -> None:
    """--device / --dtype for our engine; the reference runs on the CPU only, so it is skipped
    (and the whole-command runs use the same device) when another device is chosen."""
    ap.add_argument("--device", default="cpu", help="cpu, cuda, ... (the reference is skipped off the CPU)")
    ap.add_argument("--dtype", default="auto", help="auto, float32, bfloat16, float16")


def lines(n: int) -> list[str]:
    """n benchmark lines: BATCH8 repeated (1.5-9 s each)."""
    return [BATCH8[i % len(BATCH8)] for i in range(n)]


def reference_cmd(args, texts, num_step, extra=()) -> list[str]:
    return [
        str(ORACLE_PY), str(Path(__file__).parent / "_reference.py"), "--ckpt", str(args.ckpt),
        "--threads", str(args.threads), "--num-step", str(num_step), "--texts", json.dumps(texts), *extra,
    ]  # fmt: skip


def fmt_row(name: str, r: dict) -> str:
    return (
        f"{name:28s} {r['s_per_step']:8.2f} {r['generate_seconds']:9.1f} {r['audio_seconds']:8.2f} "
        f"{r['rtf']:7.2f} {r['peak_rss_gib']:8.2f}"
    )


HEADER = f"{'run':28s} {'s/step':>8s} {'total s':>9s} {'audio s':>8s} {'RTF':>7s} {'peak GiB':>8s}"
