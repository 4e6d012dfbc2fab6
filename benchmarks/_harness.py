"""Shared pieces of the benchmarks: workloads, peak-RSS sampling, side-by-side subprocess runs.

Every measurement runs in its own subprocess (so peak RSS and start-up are per run), with a fixed
number of torch threads; ours and the reference's runs alternate, and medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main_checkout(root: Path = ROOT) -> Path:
    """The main checkout of the repository `root` belongs to: `root` itself, or for a git worktree
    (whose .git is a file `gitdir: MAIN/.git/worktrees/NAME`) MAIN, where the git-ignored .oracle/
    lives and outlasts the worktrees."""
    git = root / ".git"
    if git.is_file():
        line = git.read_text().strip()
        if line.startswith("gitdir:"):
            gitdir = Path(line.split(":", 1)[1].strip())
            gitdir = gitdir if gitdir.is_absolute() else (root / gitdir).resolve()
            if gitdir.parent.name == "worktrees":
                return gitdir.parent.parent.parent
    return root


# ../shared/oracle/setup_venv.sh builds it: in the checkout's .oracle/, else $OMNIVOICE_ORACLE (a folder
# holding venv/), else the main checkout's .oracle/ (a worktree's benchmarks use that one)
ORACLE = next(
    (
        p
        for p in (
            ROOT / ".oracle",
            Path(os.environ.get("OMNIVOICE_ORACLE", "/nonexistent")),
            main_checkout() / ".oracle",
        )
        if (p / "venv").is_dir()
    ),
    ROOT / ".oracle",
)
ORACLE_PY = ORACLE / "venv" / "bin" / "python"

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
# more sentences for measures that need many (fidelity.py --sentences: one sentence's error moves with
# any rounding): an agent's reply, sentence by sentence
REPLY13 = [
    "Sure, I can help you plan the trip to the coast this weekend.",
    "The weather forecast says Saturday will be sunny and warm.",
    "Sunday looks cloudier, with a chance of light rain in the afternoon.",
    "The drive takes about three hours if you leave before eight in the morning.",
    "There is a small cafe halfway there that serves excellent pastries.",
    "Once you arrive, the old harbour is a good place to start walking.",
    "Most of the seafood restaurants open for lunch at half past twelve.",
    "If you like museums, the maritime museum is open until five.",
    "Tickets are cheaper when you buy them online the day before.",
    "In the evening, the beach path is quiet and the sunset is lovely.",
    "For the night, the guest house near the lighthouse still has rooms.",
    "Remember to bring a warm jacket, since the wind gets cold after dark.",
    "Have a wonderful trip, and let me know if you need anything else.",
]


def default_ckpt() -> Path:
    env = os.environ.get("OMNIVOICE_BENCH_CKPT")  # a checkpoint kept outside the checkout
    for p in (ORACLE / "ckpt-full", ROOT / "bench-ckpt-full", *([Path(env)] if env else [])):
        if (p / "model.safetensors").is_file():
            return p
    raise SystemExit("no full-size checkpoint: run `python benchmarks/make_checkpoint.py` (writes bench-ckpt-full/)")


def cpu_header(env: dict | None = None) -> str:
    """Two lines for the top of a table: the CPU, its class (engine/fast/cpu.py, under the caps of `env`,
    default this process's environment) with its flags of interest, and the load average now (the
    machine may be shared: ratios measured side by side are what to read)."""
    try:
        from omnivoice_cli.engine.fast import cpu
    except ImportError:  # run without the package installed: the checkout's
        sys.path.insert(0, str(ROOT))
        from omnivoice_cli.engine.fast import cpu
    info = cpu.detect(env=env)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"CPU {cpu.model_name()} ({os.cpu_count()} logical), class {info.describe()}\n"
        f"  flags: {' '.join(info.flags()) or '-'}; load average {load}"
    )


def force_int8_kernel(kernel: str | None) -> None:
    """Make this process's CPU row (engine/fast/cpu.py's CHOICES) run int8 on `kernel` ("onednn" or
    "fbgemm"), to compare the kernels on the same class; None leaves the table alone."""
    if kernel:
        from dataclasses import replace

        from omnivoice_cli.engine.fast import cpu

        row = cpu.row_name(cpu.info())
        cpu.CHOICES[row] = replace(cpu.CHOICES.get(row, cpu.UNMEASURED), int8=kernel)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def max_rss_gib() -> float:
    """The process's peak resident memory since it started (load included), GiB (Linux: ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


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


class ServeProcess:
    """`omnivoice serve --model CKPT --port 0 EXTRA` in a subprocess of the checkout, started: its URL
    read from its 'listening on' line, up at its 'ready' line (else SystemExit with its last lines
    after `wait` seconds); its stderr kept in `log`, its resident memory sampled while `sample(True)`
    (the peak in `peak`, bytes). `env`: more environment variables."""

    def __init__(self, ckpt, extra: list[str], env: dict | None = None, wait: float = 600) -> None:
        cmd = [sys.executable, "-m", "omnivoice_cli.cli", "serve", "--model", str(ckpt), "--port", "0", *extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        self.log: list[str] = []
        self.url: str | None = None
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line.rstrip())
                if "listening on " in line:
                    self.url = line.split("listening on ")[1].split()[0]
                if "ready" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(wait) or self.url is None:
            raise SystemExit("the server did not start:\n" + "\n".join(self.log[-20:]))
        self.peak, self._sampling = 0, False

    def sample(self, on: bool) -> None:
        self._sampling = on
        if on:
            self.peak = 0
            threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while self._sampling:
            with open(f"/proc/{self.proc.pid}/statm") as f:
                self.peak = max(self.peak, int(f.read().split()[1]) * page)
            time.sleep(0.01)

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(120)


def engine_args(doc: str, steps: int = 16, repeats: int = 2, threads: int = 2) -> argparse.ArgumentParser:
    """The command line of an in-process engine benchmark (cpu_engine's): its docstring as the help,
    --ckpt, --steps, --repeats, --threads; the script adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--threads", type=int, default=threads)
    return ap


def cpu_engine(args, **hardware):
    """(checkpoint, engine): --ckpt (else the full-size one: default_ckpt) loaded on the CPU with
    --threads torch threads, after the CPU header is printed. `hardware`: Hardware's other fields."""
    import torch

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.pipeline import Engine

    ckpt = args.ckpt or default_ckpt()
    torch.set_num_threads(args.threads)
    print(cpu_header())
    return ckpt, Engine.load(str(ckpt), Hardware(device="cpu", threads=args.threads, **hardware))


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


def run_whole(cmd: list[str], env: dict | None = None) -> dict:
    """A whole command's wall time ("wall") and the figures it printed on stdout: a `RESULT {json}`
    line (the reference's script) or a line that is one JSON object (`omnivoice say --json`)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    figures: dict = {}
    for line in p.stdout.splitlines():
        line = line.removeprefix("RESULT ").strip()
        if line.startswith("{"):
            try:
                figures = json.loads(line)
            except json.JSONDecodeError:
                continue
    return {**figures, "wall": wall}


def report_whole(walls: dict[str, list[float]], steps: int, repeats: int, out: dict) -> None:
    """Print the whole-command wall times (median of the runs) and, when the reference ran, each of
    ours as a ratio to it; record them in out["whole"]."""
    print(f"\nwhole command at {steps} steps (median of {repeats}, seconds)\n{cpu_header()}")
    for name, ws in walls.items():
        print(f"  {name:14s} {median(ws):7.1f}   runs {[round(w, 1) for w in ws]}")
        out["whole"][name] = {"median": median(ws), "runs": ws}
    if "reference" in walls:
        for name in walls:
            if name != "reference":
                pairs = [round(a / b, 2) for a, b in zip(walls["reference"], walls[name])]
                print(
                    f"  {name}: {median(walls['reference']) / median(walls[name]):.2f}x the reference (pairs {pairs})"
                )


def median(xs):
    return statistics.median(xs)


def have_reference() -> bool:
    return ORACLE_PY.is_file()


def ours_cmd(args, texts, num_step, extra=()) -> list[str]:
    device = ["--device", getattr(args, "device", "cpu"), "--dtype", getattr(args, "dtype", "auto")]
    return [
        sys.executable,
        str(Path(__file__).parent / "_ours.py"),
        "--ckpt",
        str(args.ckpt),
        "--threads",
        str(args.threads),
        "--num-step",
        str(num_step),
        "--texts",
        json.dumps(texts),
        *device,
        *extra,
    ]


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
        str(ORACLE_PY),
        str(Path(__file__).parent / "_reference.py"),
        "--ckpt",
        str(args.ckpt),
        "--threads",
        str(args.threads),
        "--num-step",
        str(num_step),
        "--texts",
        json.dumps(texts),
        *extra,
    ]


def fmt_row(name: str, r: dict) -> str:
    return (
        f"{name:28s} {r['s_per_step']:8.2f} {r['generate_seconds']:9.1f} {r['audio_seconds']:8.2f} "
        f"{r['rtf']:7.2f} {r['peak_rss_gib']:8.2f} {r.get('max_rss_gib', float('nan')):8.2f}"
    )


HEADER = (
    f"{'run':28s} {'s/step':>8s} {'total s':>9s} {'audio s':>8s} {'RTF':>7s} {'peak GiB':>8s} {'max GiB':>8s}"
    "\n(peak: during generate(); max: the whole process, load included)"
)


def table_header() -> str:
    """The CPU (cpu_header) and the columns, for the top of a table of runs."""
    return f"{cpu_header()}\n{HEADER}"


KEYS = ("s_per_step", "generate_seconds", "audio_seconds", "rtf", "peak_rss_gib", "max_rss_gib", "load_seconds")


def dtype_label(device: str, dtype: str) -> str:
    """The row name of our engine at a device and dtype: fp32 (the CPU's auto), bf16, fp16, auto."""
    names = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
    if dtype == "auto":
        return "fp32" if device == "cpu" else f"auto ({device})"
    return names.get(dtype, dtype)


def add_variant_args(ap) -> None:
    """Rows measured besides ours at --dtype: --bf16, --quantize int8 / auto, --int8-kernels,
    --compile; --no-base skips that one."""
    ap.add_argument(
        "--quantize",
        choices=["int8", "auto"],
        nargs="*",
        default=[],
        help="also measure ours with --quantize (auto: the path the fast preset takes on this CPU)",
    )
    ap.add_argument(
        "--int8-kernels",
        choices=["onednn", "fbgemm"],
        nargs="*",
        default=[],
        help="also measure int8 on each of these kernels (per step only: the CLI takes the table's)",
    )
    ap.add_argument("--bf16", action="store_true", help="also measure ours with --dtype bfloat16")
    ap.add_argument("--compile", action="store_true", help="also measure ours with --compile")
    ap.add_argument("--no-base", action="store_true", help="skip ours at --dtype (measure only the extra rows)")
    ap.add_argument(
        "--step-cache", action="store_true", help="also measure every row of ours with --step-cache (n=8, k=3)"
    )
    ap.add_argument("--fast", action="store_true", help="also measure ours with --preset fast (its steps: --steps)")


def variants(args) -> list[tuple[str, list[str]]]:
    """(row name, extra arguments for _ours.py and for the CLI) of every row of ours to measure."""
    rows = [] if args.no_base else [(f"ours {dtype_label(args.device, args.dtype)}", [])]
    if args.bf16:
        rows.append(("ours bf16", ["--dtype", "bfloat16"]))
    for q in args.quantize:
        rows.append((f"ours {q}", ["--quantize", q]))
    for kernel in getattr(args, "int8_kernels", []):
        rows.append((f"ours int8 {kernel}", ["--quantize", "int8", "--int8-kernel", kernel]))
    if args.compile:
        rows.append(("ours compile", ["--compile"]))
    if getattr(args, "step_cache", False):
        rows += [(f"{name} +cache", [*extra, "--step-cache"]) for name, extra in rows]
    if getattr(args, "fast", False):  # _ours.py reads --preset fast as the preset's settings
        rows.append(("ours fast", ["--preset", "fast"]))
    if not rows:
        raise SystemExit("nothing to measure: --no-base needs --bf16, --quantize, --int8-kernels or --compile")
    return rows


def cli_variants(variants: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """The rows a whole command can run (the CLI has no --int8-kernel)."""
    return [(name, extra) for name, extra in variants if "--int8-kernel" not in extra]


def fast_vs_balanced(table: dict) -> str | None:
    """One line for check 3 of issue 29: the fast preset's path (--quantize auto) against
    balanced's (the fp32 default) per step, where both rows were measured."""
    fast, balanced = table.get("ours auto"), table.get("ours fp32")
    if not (fast and balanced):
        return None
    ratio = balanced["s_per_step"] / fast["s_per_step"]
    pairs = pair_ratios(balanced["runs"], fast["runs"])
    verdict = "not slower" if ratio >= 1 else "SLOWER"
    return f"  fast's path (auto) against balanced's (fp32) per step: {ratio:.2f}x, {verdict} (pairs {pairs})"


def pair_ratios(ref_runs: list[dict], our_runs: list[dict], key: str = "s_per_step") -> list[float]:
    """reference / ours for each pair of runs made side by side (the spread of the ratio)."""
    return [round(a[key] / b[key], 2) for a, b in zip(ref_runs, our_runs)]


def table(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Medians of every figure per row, with the runs kept."""
    return {
        name: {k: median([r[k] for r in rs]) for k in KEYS if k in rs[0]} | {"runs": rs} for name, rs in runs.items()
    }


def summary(name: str, r: dict, o: dict) -> str:
    """One line: ours against the reference, per step, generate() and memory."""
    return (
        f"  {name}: {r['s_per_step'] / o['s_per_step']:.2f}x per step, "
        f"{r['generate_seconds'] / o['generate_seconds']:.2f}x generate(), "
        f"peak RSS {o['peak_rss_gib']:.2f} vs {r['peak_rss_gib']:.2f} GiB, "
        f"max RSS {o.get('max_rss_gib', float('nan')):.2f} vs {r.get('max_rss_gib', float('nan')):.2f} GiB"
    )
