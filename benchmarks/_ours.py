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
    ap.add_argument("--step-cache", action="store_true", help="the step cache on (n=8, k=3)")
    ap.add_argument("--preset", default=None, help="a preset's generation and quantize settings (num_step stays)")
    ap.add_argument("--ref-seconds", type=float, default=0, help="clone a synthetic reference of this length")
    args = ap.parse_args()
    import torch

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.pipeline import Engine
    from omnivoice_cli.engine.planning import Request

    torch.set_num_threads(args.threads)
    force_int8_kernel(args.int8_kernel)
    t0 = time.perf_counter()
    kw = {}
    preset = {}
    if args.preset:
        from omnivoice_cli.app.settings.presets import find_preset

        preset = find_preset(args.preset).settings
        args.quantize = preset.get("quantize", args.quantize)
        args.step_cache = preset.get("step_cache", args.step_cache)
    if args.quantize:
        kw["quantize"] = args.quantize
    if args.compile:
        kw["compile"] = True
    engine = Engine.load(args.ckpt, Hardware(device=args.device, dtype=args.dtype, **kw))
    load_s = time.perf_counter() - t0
    sync = torch.cuda.synchronize if engine.device.type == "cuda" else (lambda: None)  # honest step times
    gen = GenerationConfig(
        num_step=args.num_step, position_temperature=0.0, class_temperature=0.0, step_cache=args.step_cache
    )
    ref = None
    if args.ref_seconds:
        ref = engine.voice_from_audio(synthetic_reference(args.ref_seconds), REF_TEXT)
    reqs = [Request(text=t, lang="en", generation=gen, ref=ref) for t in json.loads(args.texts)]
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


REF_TEXT = "A quiet voice read the first lines of the letter, slowly and clearly, to the end."


def synthetic_reference(seconds: float) -> str:
    """A WAV file of `seconds` of speech-like sound (a voiced pitch contour with noise, in
    syllables): the encoder's input for a clone benchmark (its codes' values do not matter)."""
    import tempfile

    import numpy as np
    import soundfile as sf

    sr = 24000
    t = np.arange(int(seconds * sr)) / sr
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    voiced = np.sin(2 * np.pi * np.cumsum(pitch) / sr) + 0.3 * np.sin(4 * np.pi * np.cumsum(pitch) / sr)
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    noise = np.random.default_rng(0).standard_normal(len(t)) * 0.02
    wav = (0.3 * voiced * envelope + noise).astype(np.float32)
    path = tempfile.NamedTemporaryFile(suffix=".wav", delete=False).name
    sf.write(path, wav, sr)
    return path


if __name__ == "__main__":
    main()
