#!/usr/bin/env python3
"""`omnivoice serve` under load, side by side with the reference called once per text.

    python benchmarks/bench_serve.py [--ckpt DIR] [--steps 8] [--threads 2] [--no-reference]
                                     [--device cpu] [--out figures.json]

One server subprocess (`omnivoice serve`, the checkpoint loaded once) gets, over HTTP:
- the 8 benchmark lines (1.5-9 s of audio each) all at once, and the same 8 one after another;
- a lone request (compared with `omnivoice say --json`'s generation time for the same text, in
  its own subprocess), for a text of one piece and for the 9 s sentence (which the server cuts
  into pieces, as `say --stream` does);
- a long request (32 steps) and, once it runs, a short one (8 steps): which finishes first.
The reference (omnivoice 0.2.1, the oracle venv) runs `generate()` once per text, one after
another, in its own subprocess: what the existing OmniVoice servers do.

Throughput = audio seconds / wall seconds from the first request to the last reply. Latency of
each request counts from the moment all 8 were there (for the one-after-another runs, a request
waits for the ones before it, as it would in a one-at-a-time server). Peak RSS is sampled every
10 ms in the server (the reference: in its process) while the requests run. Greedy settings
(position and class temperature 0), lang en, guidance 2, as the other benchmarks.
Targets (issue 12, CPU): >= 1.3x the reference's throughput, >= 1.0x our own one at a time, a
lone request within 10% of `say`, the short request first. On a GPU: 16 at once >= 3x one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _harness as H

AT_ONCE, ONE_BY_ONE = "ours, all at once", "ours, one after another"
ONE_PIECE = "The train to the city leaves at seven in the evening."  # under the first piece's 4 s: not cut


# --------------------------------------------------------------------------------- the reference


def reference_child(args) -> None:
    """Runs under the oracle venv: generate() once per text, one after another."""
    import torch

    torch.set_num_threads(args.threads)
    from omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(str(args.ckpt), dtype=torch.float32, device_map="cpu")
    model.eval()
    texts = json.loads(args.texts)
    torch.manual_seed(0)
    done, audio = [], []
    with H.PeakRSS() as pk:
        t0 = time.perf_counter()
        for text in texts:
            [a] = model.generate(
                text=text, language="en", num_step=args.steps, position_temperature=0.0, class_temperature=0.0
            )
            done.append(time.perf_counter() - t0)
            audio.append(len(a) / model.sampling_rate)
    print("RESULT " + json.dumps({"done": done, "audio": audio, "peak_rss_gib": pk.peak / 2**30}), flush=True)


# --------------------------------------------------------------------------------- our server


def body(text: str, steps: int, seed: int) -> dict:
    return {
        "model": "omnivoice",
        "input": text,
        "lang": "en",
        "num_step": steps,
        "position_temperature": 0,
        "class_temperature": 0,
        "response_format": "pcm",
        "stream": False,
        "seed": seed,
    }


def post(url: str, payload: dict, t0: float) -> tuple[float, float]:
    """(seconds from t0 to the whole reply, audio seconds)."""
    import httpx

    r = httpx.post(url + "/v1/audio/speech", json=payload, timeout=3600)
    if r.status_code != 200:
        raise SystemExit(f"request failed: {r.status_code} {r.text[:300]}")
    return time.perf_counter() - t0, len(r.content) / 2 / 24000


def forwards(url: str) -> int:
    import httpx

    return httpx.get(url + "/health").json()["forwards"]


def at_once(url: str, texts: list[str], steps: int) -> dict:
    with ThreadPoolExecutor(len(texts)) as pool:
        f0, t0 = forwards(url), time.perf_counter()
        results = list(pool.map(lambda i: post(url, body(texts[i], steps, i), t0), range(len(texts))))
    return {"done": [r[0] for r in results], "audio": [r[1] for r in results], "forwards": forwards(url) - f0}


def one_by_one(url: str, texts: list[str], steps: int) -> dict:
    f0, t0 = forwards(url), time.perf_counter()
    results = [post(url, body(t, steps, i), t0) for i, t in enumerate(texts)]
    return {"done": [r[0] for r in results], "audio": [r[1] for r in results], "forwards": forwards(url) - f0}


def short_while_long(url: str, steps: int) -> dict:
    """A 32-step request, and an 8-step one sent after the long one's first forward."""
    with ThreadPoolExecutor(2) as pool:
        f0, t0 = forwards(url), time.perf_counter()
        long = pool.submit(post, url, body(H.SENTENCE_9S, 32, 1), t0)
        while forwards(url) == f0:
            time.sleep(0.05)
        sent = time.perf_counter() - t0
        short = pool.submit(post, url, body("Good morning.", steps, 2), t0)
        return {"long_done": long.result()[0], "short_sent": sent, "short_done": short.result()[0]}


def say_seconds(args, text: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "omnivoice_cli.cli",
            "say",
            text,
            "--model",
            str(args.ckpt),
            "--threads",
            str(args.threads),
            "--device",
            args.device,
            "--dtype",
            args.dtype,
            "--num-step",
            str(args.steps),
            "--position-temperature",
            "0",
            "--class-temperature",
            "0",
            "--lang",
            "en",
            "--seed",
            "0",
            "-o",
            f"{tmp}/say.wav",
            "--json",
            "-q",
        ]
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(H.ROOT)})
        if p.returncode != 0:
            raise SystemExit(f"say failed: {p.stderr[-2000:]}")
        return json.loads(p.stdout)["seconds"]


# --------------------------------------------------------------------------------- report


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(run: dict) -> dict:
    total = max(run["done"])
    return {
        **run,
        "throughput": sum(run["audio"]) / total,
        "p50": quantile(run["done"], 0.5),
        "p95": quantile(run["done"], 0.95),
        "total": total,
        "audio": sum(run["audio"]),
    }


def print_table(rows: dict) -> None:
    print(f"\n{H.cpu_header()}")
    print(f"{'run':34s} {'audio s/s':>9s} {'p50 s':>7s} {'p95 s':>7s} {'total s':>8s} {'audio s':>8s} {'peak GiB':>8s}")
    for name, r in rows.items():
        print(
            f"{name:34s} {r['throughput']:9.3f} {r['p50']:7.1f} {r['p95']:7.1f} {r['total']:8.1f} "
            f"{r['audio']:8.2f} {r['peak_rss_gib']:8.2f}"
        )


def lone_runs(args, server: H.ServeProcess, out: dict) -> None:
    """A lone request and `say` of the same text, alternating (`--repeats` each), medians."""
    for text, name in ((ONE_PIECE, "one_piece"), (H.SENTENCE_9S, "sentence_9s")):
        lone, say = [], []
        for _ in range(args.repeats):
            say.append(say_seconds(args, text))
            lone.append(post(server.url, body(text, args.steps, 0), time.perf_counter())[0])
        out[f"lone_{name}"], out[f"say_{name}"] = H.median(lone), H.median(say)
        out[f"lone_{name}_runs"], out[f"say_{name}_runs"] = lone, say
        print(f"  lone {name}: {lone} against say {say}", flush=True)


def serve_runs(args, texts: list[str]) -> dict:
    extra = ["--threads", str(args.threads), "--device", args.device, "--dtype", args.dtype, "--max-queue", "64"]
    server = H.ServeProcess(args.ckpt, extra)
    out: dict = {"load_average_start": os.getloadavg()}
    try:
        post(server.url, body("Warm up.", 2, 0), time.perf_counter())  # first forward and decode
        if "lone" in args.parts:
            lone_runs(args, server, out)
        if "load" in args.parts:
            for name, fn in ((AT_ONCE, at_once), (ONE_BY_ONE, one_by_one)):
                server.sample(True)
                run = fn(server.url, texts, args.steps)
                server.sample(False)
                out[name] = summary(run) | {"peak_rss_gib": server.peak / 2**30}
                print(f"  {name}: {out[name]['total']:.1f} s, {run['forwards']} forwards", flush=True)
        if "short" in args.parts:
            out["short_while_long"] = short_while_long(server.url, args.steps)
    finally:
        out["exit_code"] = server.stop()
        out["load_average_end"] = os.getloadavg()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument(
        "--parts",
        nargs="+",
        choices=["load", "lone", "short"],
        default=["load", "lone", "short"],
        help="load: 8 at once / one after another / the reference; lone: a lone request against say; "
        "short: a short request beside a long one",
    )
    ap.add_argument("--repeats", type=int, default=1, help="lone requests and say runs, alternating")
    ap.add_argument("--requests", type=int, default=8, help="requests at once (the 8 lines, repeated; 16 on a GPU)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", choices=["reference"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--texts", default=None, help=argparse.SUPPRESS)
    H.add_device_args(ap)
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    if args.child:
        reference_child(args)
        return 0
    texts = H.lines(args.requests)
    ref = H.have_reference() and not args.no_reference and args.device == "cpu"
    print(
        f"checkpoint {args.ckpt}, {args.threads} threads, {args.steps} steps, reference {'on' if ref else 'off'}",
        flush=True,
    )
    out = serve_runs(args, texts)
    rows = {k: out[k] for k in (AT_ONCE, ONE_BY_ONE) if k in out}
    if ref and "load" in args.parts:
        cmd = [
            str(H.ORACLE_PY),
            __file__,
            "--child",
            "reference",
            "--ckpt",
            str(args.ckpt),
            "--threads",
            str(args.threads),
            "--steps",
            str(args.steps),
            "--texts",
            json.dumps(texts),
        ]
        r = H.run_json(cmd)
        rows["reference, generate() per text"] = out["reference"] = summary(r) | {"peak_rss_gib": r["peak_rss_gib"]}
    report(out, rows, ref and "load" in args.parts)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


def report(out: dict, rows: dict, ref: bool) -> None:
    print(f"load average (1, 5, 15 min) at the start {out['load_average_start']}, at the end {out['load_average_end']}")
    if rows:
        print_table(rows)
        at, seq = rows[AT_ONCE], rows[ONE_BY_ONE]
        print(
            f"\nall at once: {at['throughput'] / seq['throughput']:.2f}x the throughput of one after another "
            f"({at['forwards']} forwards against {seq['forwards']}; target >= 1.0x; on a GPU, 16 at once >= 3x)"
        )
    if ref:
        r = rows["reference, generate() per text"]
        print(
            f"all at once: {at['throughput'] / r['throughput']:.2f}x the reference's throughput (target >= 1.3x); "
            f"one after another: {seq['throughput'] / r['throughput']:.2f}x"
        )
    for name in ("one_piece", "sentence_9s"):
        if f"lone_{name}" in out:
            lone, say = out[f"lone_{name}"], out[f"say_{name}"]
            print(
                f"lone request ({name}): {lone:.1f} s over HTTP against say's {say:.1f} s of generation "
                f"({lone / say:.2f}x; target within 1.10x)"
            )
    if "short_while_long" in out:
        s = out["short_while_long"]
        first = "the short one first" if s["short_done"] < s["long_done"] else "the LONG one first"
        print(
            f"short (8 steps) sent at {s['short_sent']:.1f} s while a long one (32 steps) ran: done at "
            f"{s['short_done']:.1f} s, the long one at {s['long_done']:.1f} s: {first}"
        )
    print(f"server exit code after SIGTERM: {out['exit_code']}")


if __name__ == "__main__":
    sys.exit(main())
