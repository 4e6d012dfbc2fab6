#!/usr/bin/env python3
"""Long text: peak memory must not grow with the text's length.

    python benchmarks/bench_long.py [--ckpt tests/fixtures/tiny/ckpt] [--chars 900 9000] [--num-step 8]

Each text is synthesised by the engine in its own subprocess, and its peak RSS (the child's own
ru_maxrss: model, generation, decode and the written file included) and generation time are
reported, with the RSS ratio to the first (shortest) text.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORY = (
    "Once upon a time, in a quiet village at the foot of the mountains, there lived an old clockmaker "
    "named Elias. Every morning he opened the wooden shutters of his tiny shop, swept the dust from the "
    "floor, and wound each of the hundred clocks that hung on the walls. "
)


def text_of(chars: int) -> str:
    return (STORY * (chars // len(STORY) + 1))[:chars].rsplit(" ", 1)[0] + "."


CHILD = """
import resource, sys, time
import soundfile as sf
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.pipeline import Engine, Request
from omnivoice_cli.engine.hardware import Hardware
ckpt, src, steps, threads, out = sys.argv[1:6]
engine = Engine.load(ckpt, Hardware(device="cpu", threads=int(threads)))
t0 = time.perf_counter()
[r] = engine.generate([Request(text=open(src).read(), seed=1, generation=GenerationConfig(num_step=int(steps)))])
from omnivoice_cli.media.output import check_output, write_audio
write_audio(r.audio, r.sample_rate, check_output(out))
print("RESULT", time.perf_counter() - t0, len(r.audio) / r.sample_rate, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=ROOT / "tests" / "fixtures" / "tiny" / "ckpt")
    ap.add_argument("--chars", type=int, nargs="*", default=[900, 9000])
    ap.add_argument("--num-step", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.chars:
            src = Path(tmp) / f"text{n}.txt"
            src.write_text(text_of(n))
            cmd = [
                sys.executable,
                "-c",
                CHILD,
                str(args.ckpt),
                str(src),
                str(args.num_step),
                str(args.threads),
                f"{tmp}/out{n}.wav",
            ]
            p = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            wall, seconds, peak_kib = p.stdout.rsplit("RESULT", 1)[1].split()
            rows.append((n, float(wall), int(peak_kib) * 1024, float(seconds)))
    base = rows[0]
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    print(H.cpu_header())
    print(f"{'chars':>6s} {'audio s':>8s} {'generate s':>10s} {'peak RSS MiB':>13s} {'RSS ratio':>9s}")
    for n, wall, peak, seconds in rows:
        print(f"{n:6d} {seconds:8.1f} {wall:10.1f} {peak / 2**20:13.0f} {peak / base[2]:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
