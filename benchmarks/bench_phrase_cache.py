#!/usr/bin/env python3
"""The phrase cache (`serve --phrase-cache`): a hit's time as a fraction of the miss's, over HTTP.

    python benchmarks/bench_phrase_cache.py [--ckpt DIR] [--steps 16] [--hits 5] [--threads 2]
                                            [--device cpu] [--format wav] [--out figures.json]

One server subprocess (`omnivoice serve --phrase-cache 256`, a fresh cache folder, the checkpoint
loaded once) gets each of the phrases below with no seed: the first request of a phrase is a miss
(rendered, then kept), the next --hits are hits (read from the cache, verified). Each request is
timed by the client, from sending the body to the last byte of the reply; the ratio is the median
hit over the miss, per phrase. The replies of a phrase are checked byte-identical (the header
X-OmniVoice-Cache says miss, then hit). The default checkpoint: the full-size random one
(benchmarks/make_checkpoint.py). Target (issue 59): a hit under 5% of the miss's time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import _harness as H
import httpx

PHRASES = (
    "One moment, please.",
    "Thank you for calling. How can I help you today?",
    "I am sorry, I did not catch that. Could you say it again?",
)


def timed(client: httpx.Client, text: str, fmt: str) -> tuple[float, str, bytes]:
    t0 = time.perf_counter()
    r = client.post("/v1/audio/speech", json={"model": "omnivoice", "input": text, "response_format": fmt})
    seconds = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{r.status_code}: {r.text}")
    return seconds, r.headers.get("x-omnivoice-cache", "?"), r.content


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--hits", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--format", default="wav")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    print(H.cpu_header())
    print(f"checkpoint {args.ckpt}, {args.steps} steps, {args.threads} threads, {args.device}, {args.format}")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        extra = ["--threads", str(args.threads), "--device", args.device, "--phrase-cache", "256"]
        extra += ["--num-step", str(args.steps)]
        server = H.ServeProcess(args.ckpt, extra, env={"OMNIVOICE_PHRASE_CACHE": folder}, wait=900)
        try:
            with httpx.Client(base_url=server.url, timeout=900) as client:
                for text in PHRASES:
                    miss, said, first = timed(client, text, args.format)
                    assert said == "miss", said
                    hits = []
                    for _ in range(args.hits):
                        seconds, said, data = timed(client, text, args.format)
                        assert said == "hit" and data == first, (said, len(data), len(first))
                        hits.append(seconds)
                    hit = H.median(hits)
                    rows.append({"text": text, "bytes": len(first), "miss_s": miss, "hit_s": hit, "ratio": hit / miss})
        finally:
            server.stop()
    print(f"{'miss s':>8} {'hit s':>8} {'hit/miss':>10} {'bytes':>8}  text")
    for r in rows:
        print(f"{r['miss_s']:8.3f} {r['hit_s']:8.4f} {r['ratio']:9.4%} {r['bytes']:8d}  {r['text']}")
    worst = max(r["ratio"] for r in rows)
    print(f"worst hit/miss: {worst:.4%} (target < 5%)")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "worst_ratio": worst, "cpu": H.cpu_header()}, indent=1))
    return 0 if worst < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
