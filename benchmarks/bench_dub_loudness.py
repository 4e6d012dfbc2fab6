#!/usr/bin/env python3
"""Peak RSS of a dub's track delivered with and without `--loudness`, no model needed.

Each run is a fresh process: a synthetic speech-like track (tone bursts with noise and a few
near-full-scale clicks, so the true-peak limiter works; silence between, as a dub's track has)
of --minutes at 24 kHz is built in blocks into one float32 array, as `dub` fills its track, then
handed to app/deliver.deliver as dub's `deliver_track` hands it (a WAV file, the loudness over
the whole track, `level_in_place` where the package has it). The process's peak RSS (VmHWM) is
read at the end, and its RSS just before the delivery: the delivery's own share is the
difference. --root picks the package measured (another checkout: the code before a change).

    python benchmarks/bench_dub_loudness.py [--minutes 240] [--root /path/to/checkout] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import dataclasses, json, sys, time
import numpy as np
from pathlib import Path
from omnivoice_cli.app.deliver import Outputs, Take, deliver
from omnivoice_cli.media.output import OutputTarget

def vm(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

minutes, target, out = float(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
sr, block = 24000, 1 << 20
track = np.zeros(int(minutes * 60 * sr), dtype=np.float32)
rng = np.random.default_rng(0)
for i in range(0, len(track), block):  # speech-like: 3 s on, 1 s off; a click near full scale every 7 s
    t = np.arange(i, min(i + block, len(track))) / sr
    on = (t % 4.0) < 3.0
    x = 0.25 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t)) + 0.03 * rng.standard_normal(len(t))
    x[(t % 7.0) < 1 / sr] = 0.97
    track[i : i + len(t)] = x * on
np.clip(track, -1.0, 1.0, out=track)
kw = dict(target=OutputTarget(out, "WAV", "PCM_16"), loudness=None if target == "none" else float(target))
kw["loudness_what"] = "the track"
if "level_in_place" in {f.name for f in dataclasses.fields(Outputs)}:
    kw["level_in_place"] = True
deliver(Take(np.zeros(sr, np.float32) + 0.1, sr), dataclasses.replace(Outputs(**kw), target=None))  # imports warmed
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on (Linux): the delivery's own
before = vm("VmRSS")
t0 = time.perf_counter()
done = deliver(Take(track, sr), Outputs(**kw))
seconds = time.perf_counter() - t0
loud = done.loudness
print(json.dumps({
    "track_bytes": track.nbytes, "rss_before": before, "peak_rss": vm("VmHWM"), "seconds": seconds,
    "lufs": loud.lufs if loud else None, "dbtp": loud.dbtp if loud else None, "report": loud.as_dict() if loud else None,
}))
"""


def run(root: Path, minutes: float, target: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(minutes), target, str(Path(tmp) / "track.wav")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,  # `-c` puts the working folder first on sys.path: only --root's package is found
        )
    if out.returncode:
        raise SystemExit(f"the run failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=240.0)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose package is measured")
    ap.add_argument("--loudness", default="-16")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    print(H.cpu_header())
    print(f"{args.root}: a {args.minutes:g} min track")
    report: dict = {"minutes": args.minutes, "root": str(args.root)}
    for target in ("none", args.loudness):
        r = report[target] = run(args.root, args.minutes, target)
        gib = 1 << 30
        print(
            f"loudness {target:>5s}: peak RSS {r['peak_rss'] / gib:6.2f} GiB, the delivery's share "
            f"{(r['peak_rss'] - r['rss_before']) / gib:6.2f} GiB (track {r['track_bytes'] / gib:.2f} GiB), "
            f"{r['seconds']:6.1f} s"
            + (f", {r['lufs']:.2f} LUFS, {r['dbtp']:.2f} dBTP" if r["lufs"] is not None else "")
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
