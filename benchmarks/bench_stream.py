#!/usr/bin/env python3
"""Streamed against not streamed: time to first audio and total time of a 600-character paragraph.

    python benchmarks/bench_stream.py [--ckpt DIR] [--num-step 8] [--threads 2] [--repeats 1]
                                      [--device cpu] [--out figures.json]

Each run is its own subprocess (load, then one render, peak RSS sampled): "plain" is
Engine.generate (the audio exists only at the end: its first audio is its total), "stream" is
engine.stream.render.stream (first audio = the first spoken piece handed out). The two alternate
`--repeats` times; medians are reported. Targets (issue 13): first streamed audio within 20% of
the plain total, streamed total within 1.15x of it.

    python benchmarks/bench_stream.py --reply --ckpt DIR --num-step 16 [--repeats 2]

--reply: the 13-sentence agent reply (benchmarks/_reply.py) as `/tts/ws` speaks it (the first
sentence alone, then the other 12 as one request in its voice) and as `say --stream` speaks it,
before (later pieces of whole sentences up to 10 s) and after (today's cut), alternated in one
process (the `fast` preset, int8): first audio, each sentence's arrival, the longest gap after the
first audio against one sentence's solo time, the share of the audio by the midpoint between the
first and the last audio (issue 48: >= 30%).
"""

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import _harness as H

PARAGRAPH = (  # 600 characters
    "Once upon a time, in a quiet village at the foot of the mountains, there lived an old clockmaker "
    "named Elias. Every morning he opened the wooden shutters of his tiny shop, swept the dust from the "
    "floor, and wound each of the hundred clocks that hung on the walls. The children of the village "
    "loved to press their noses against his window and watch the tiny gears turn. One cold winter evening, "
    "a stranger knocked at the door with a broken pocket watch that had not ticked for forty years. "
    "Elias worked through the night by the light of a single candle. When the sun rose, his watch was ticking again."
)


def child(args) -> None:
    import torch

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    engine = Engine.load(str(args.ckpt), Hardware(device=args.device, dtype=args.dtype))
    req = Request(text=PARAGRAPH, lang="en", seed=args.seed, generation=GenerationConfig(num_step=args.num_step))
    out = {"mode": args.child}
    with H.PeakRSS() as pk:
        t0 = time.perf_counter()
        if args.child == "plain":
            [r] = engine.generate([req])
            out["total"] = out["first_audio"] = time.perf_counter() - t0
            out["audio_seconds"] = len(r.audio) / r.sample_rate
            out["pieces"] = len(engine.plan(req).pieces)
        else:
            from omnivoice_cli.engine.stream.render import stream

            pieces, warnings = [], []
            s = stream(
                engine,
                req,
                lambda p: pieces.append((time.perf_counter() - t0, len(p.audio))),
                on_warning=warnings.append,
            )
            out["total"] = time.perf_counter() - t0
            out["first_audio"] = s.first_audio
            out["audio_seconds"] = s.samples / s.sample_rate
            out["pieces"], out["waves"], out["kept_up"], out["warnings"] = s.pieces, s.waves, s.kept_up, warnings
            out["emitted_at"] = [round(t, 2) for t, _ in pieces]
    out["peak_rss_gib"] = pk.peak / 2**30
    print("RESULT " + json.dumps(out), flush=True)


def reply(args) -> int:
    """--reply: the 13-sentence agent reply (_reply.py), before (later pieces of whole sentences up
    to 10 s, as main cut them) and after (today's cut), alternated in this one process on one
    engine loaded as `serve --preset fast --quantize int8 --threads N` loads it."""
    from _reply import run_say_stream, run_socket

    from omnivoice_cli.app.door.speaker import Speaker
    from omnivoice_cli.app.session import Session, hardware_from_settings
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve
    from omnivoice_cli.app.settings.presets import find_preset
    from omnivoice_cli.engine.stream.cut import StreamConfig
    from omnivoice_cli.server.config import ServeOptions
    from omnivoice_cli.server.speech import serve_speaker_options

    preset = find_preset("fast")
    flags = {"model": str(args.ckpt), "quantize": "int8", "threads": args.threads, "num_step": args.num_step}
    flags["device"] = args.device
    layers = ((preset.origin, preset.settings), (FLAG_SOURCE, flags))
    resolved = resolve(*layers)
    engine, load_seconds = Session().load_engine(str(resolved["model"]), hardware_from_settings(resolved.values))
    served = serve_speaker_options(dataclasses.replace(ServeOptions(), layers=layers))
    speaker = Speaker(served, load=lambda: None)  # builds requests only
    configs = {
        "before": (StreamConfig(10.0, 10.0, sentence_seconds=10.0), StreamConfig(4.0, 10.0, sentence_seconds=10.0)),
        "after": (served.stream_config(), StreamConfig()),
    }
    print(
        f"{H.cpu_header()}\nmodel loaded in {load_seconds:.1f} s; {args.num_step} steps, {args.threads} threads",
        flush=True,
    )
    flows = [{"socket": "socket", "say": "say --stream"}[f] for f in args.flows.split(",")]
    runs: dict = {f"{flow} {mode}": [] for flow in flows for mode in configs}
    for rep in range(args.repeats):
        for mode, (server_config, say_config) in configs.items():
            for flow in flows:
                if flow == "socket":
                    r = run_socket(engine, speaker, server_config, continued=mode == "after", seed=args.seed)
                else:
                    r = run_say_stream(engine, speaker, say_config, seed=args.seed)
                runs[f"{flow} {mode}"].append(r)
                print(f"{flow} {mode} #{rep + 1}: {json.dumps(r)}", flush=True)
    print()
    for name, rs in runs.items():
        first, gap = H.median([r["first_audio"] for r in rs]), H.median([r["longest_gap"] for r in rs])
        share, last = H.median([r["share_by_midpoint"] for r in rs]), H.median([r["last_audio"] for r in rs])
        solo = H.median([r["solo"] for r in runs.get(f"socket {name.split()[-1]}", [{"solo": first}])])
        print(
            f"{name:20s} first audio {first:6.1f} s, longest gap {gap:6.1f} s ({gap / solo:.1f}x one sentence's "
            f"solo {solo:.1f} s), by the midpoint {share:5.1%}, last audio {last:6.1f} s"
        )
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--num-step", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write all figures as JSON here")
    ap.add_argument("--child", choices=["plain", "stream"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--reply", action="store_true", help="the agent's reply before / after (_reply.py)")
    ap.add_argument("--flows", default="socket,say", help="--reply: socket, say or both (socket,say)")
    H.add_device_args(ap)
    args = ap.parse_args()
    args.ckpt = args.ckpt or H.default_ckpt()
    if args.reply:
        return reply(args)
    if args.child:
        child(args)
        return 0
    print(
        f"checkpoint {args.ckpt}, {args.threads} threads, {args.device}, {args.num_step} steps, "
        f"{len(PARAGRAPH)} characters",
        flush=True,
    )
    runs = {"plain": [], "stream": []}
    for rep in range(args.repeats):
        for mode in runs:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--ckpt",
                str(args.ckpt),
                "--num-step",
                str(args.num_step),
                "--threads",
                str(args.threads),
                "--seed",
                str(args.seed),
                "--device",
                args.device,
                "--dtype",
                args.dtype,
            ]
            runs[mode].append(H.run_json(cmd))
            r = runs[mode][-1]
            print(
                f"  {mode:6s} repeat {rep + 1}: first audio {r['first_audio']:.1f} s, total {r['total']:.1f} s",
                flush=True,
            )
    med = {
        m: {k: H.median([r[k] for r in rs]) for k in ("first_audio", "total", "audio_seconds", "peak_rss_gib")}
        for m, rs in runs.items()
    }
    plain, streamed = med["plain"], med["stream"]
    print(f"\n{H.cpu_header()}")
    print(f"{'':8s} {'first audio s':>13s} {'total s':>8s} {'audio s':>8s} {'peak GiB':>9s}")
    for m in runs:
        print(
            f"{m:8s} {med[m]['first_audio']:13.1f} {med[m]['total']:8.1f} {med[m]['audio_seconds']:8.1f} {med[m]['peak_rss_gib']:9.2f}"
        )
    first_ratio, total_ratio = streamed["first_audio"] / plain["total"], streamed["total"] / plain["total"]
    last = runs["stream"][-1]
    print(
        f"\nstream: {last['pieces']} pieces, waves {last['waves']}, kept up: {last['kept_up']}; "
        f"pieces out at {last['emitted_at']} s"
    )
    print(f"first streamed audio / plain total: {first_ratio:.2f} (target <= 0.20)")
    print(f"streamed total / plain total:       {total_ratio:.2f} (target <= 1.15)")
    if args.out:
        args.out.write_text(
            json.dumps({"median": med, "runs": runs, "first_ratio": first_ratio, "total_ratio": total_ratio}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
