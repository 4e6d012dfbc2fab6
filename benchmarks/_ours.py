"""One measurement of this project's engine (run by the bench_* scripts in a subprocess)."""

import argparse
import json
import time

from _harness import PeakRSS, force_int8_kernel, max_rss_gib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--num-step", type=int, default=32)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--int8-kernel", default=None, help="int8 on this kernel (onednn, fbgemm), not the table's")
    ap.add_argument("--logits-of", default=None, help="also dump step-0 target logits to this file")
    args = ap.parse_args()
    import torch

    from omnivoice_cli.engine.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Engine, Request

    torch.set_num_threads(args.threads)
    force_int8_kernel(args.int8_kernel)
    t0 = time.perf_counter()
    kw = {}
    if args.quantize:
        kw["quantize"] = args.quantize
    if args.compile:
        kw["compile"] = True
    engine = Engine.load(args.ckpt, device=args.device, dtype=args.dtype, **kw)
    load_s = time.perf_counter() - t0
    sync = torch.cuda.synchronize if engine.device.type == "cuda" else (lambda: None)  # honest step times
    gen = GenerationConfig(num_step=args.num_step, position_temperature=0.0, class_temperature=0.0)
    reqs = [Request(text=t, lang="en", generation=gen) for t in json.loads(args.texts)]
    marks = []
    with PeakRSS() as pk:
        t1 = time.perf_counter()
        results = engine.generate(reqs, on_step=lambda d, t: (sync(), marks.append(time.perf_counter())))
        total = time.perf_counter() - t1
    steps = [b - a for a, b in zip([t1] + marks[:-1], marks)]
    audio_s = sum(len(r.audio) for r in results) / engine.sample_rate
    print(
        "RESULT "
        + json.dumps(
            {
                "load_seconds": load_s,
                "generate_seconds": total,
                "n_forward": len(steps),
                # the first forward also builds canvases; the step time is the median forward
                "s_per_step": sorted(steps)[len(steps) // 2],
                "step_seconds": steps,
                "audio_seconds": audio_s,
                "rtf": total / audio_s,
                "peak_rss_gib": pk.peak / 2**30,
                "max_rss_gib": max_rss_gib(),
                "target_lens": [r.target_len for r in results],
                "tokens_sha": [hash(r.tokens.numpy().tobytes()) for r in results],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
