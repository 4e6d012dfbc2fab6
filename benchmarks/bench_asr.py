"""The cost of listening back: recognition time per second of audio, against generation's.

    PYTHONPATH=/tmp/asrtool_pkgs python tools/make_asr_fixture.py /tmp/asr-turbo-random --size turbo
    python benchmarks/bench_asr.py --asr-model /tmp/asr-turbo-random [--tts-ckpt DIR] [--steps 32 16]

The recogniser is one of the default's exact size (whisper-large-v3-turbo) with random weights,
its decode capped to the text's length as --verify caps it (verify.max_tokens), so that random
weights do not decode to Whisper's 448 tokens: what a real model pays on speech that says its
text. Each figure is the median of --runs runs of one process (the recogniser loaded once).

Generation: with --tts-ckpt (a full-size checkpoint: benchmarks/make_checkpoint.py) the same
sentence is generated at each --steps and timed; without one, --tts-rtf gives the seconds per
second of audio measured elsewhere (benchmarks/speed-log.md: 9.36 at 32 steps, fp32, this CPU).
The verify overhead is recognition's seconds per audio second over generation's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._harness import SENTENCE_9S, max_rss_gib  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--asr-model", required=True, help="a faster-whisper folder (tools/make_asr_fixture.py --size turbo)"
    )
    ap.add_argument("--tts-ckpt", type=Path, help="a full-size OmniVoice checkpoint to time generation with")
    ap.add_argument(
        "--tts-rtf", type=float, nargs="*", default=[], help="generation seconds per audio second, per --steps"
    )
    ap.add_argument("--steps", type=int, nargs="*", default=[32, 16])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=9.2, help="audio length when no checkpoint makes it")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    import numpy as np

    from omnivoice_cli.app.listening import listen, verify

    out: dict = {"text": SENTENCE_9S, "asr_model": args.asr_model}
    t0 = time.perf_counter()
    rec = listen.load_recogniser(args.asr_model, "cpu")
    out["asr_load_seconds"] = round(time.perf_counter() - t0, 2)
    out["asr_peak_rss_gib_after_load"] = round(max_rss_gib(), 2)

    gen: dict[int, float] = {}
    audio = None
    if args.tts_ckpt is not None:
        from omnivoice_cli.engine.hardware import Hardware
        from omnivoice_cli.engine.model.config import GenerationConfig
        from omnivoice_cli.engine.pipeline import Engine
        from omnivoice_cli.engine.planning import Request

        engine = Engine.load(str(args.tts_ckpt), Hardware(device="cpu"))
        for steps in args.steps:
            times = []
            for _ in range(args.runs):
                req = Request(text=SENTENCE_9S, seed=1, generation=GenerationConfig(num_step=steps))
                t = time.perf_counter()
                [res] = engine.generate([req])
                times.append(time.perf_counter() - t)
                audio = res.audio
            gen[steps] = statistics.median(times) / (len(audio) / 24000)
        out["peak_rss_gib_both_loaded"] = round(max_rss_gib(), 2)
    else:
        gen = dict(zip(args.steps, args.tts_rtf))
        rng = np.random.default_rng(0)
        audio = (0.05 * rng.standard_normal(int(args.seconds * 24000))).astype(np.float32)
    seconds = len(audio) / 24000
    cap = verify.max_tokens(SENTENCE_9S, "en")

    def timed(words: bool) -> float:
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            rec.transcribe(audio, 24000, "en", max_tokens=cap, words=words)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    check, with_words = timed(False), timed(True)  # --verify's check; --words (word times: a second encode)
    asr = check / seconds
    out.update(
        audio_seconds=round(seconds, 2),
        max_tokens=cap,
        asr_seconds=round(check, 3),
        asr_seconds_with_word_times=round(with_words, 3),
        asr_seconds_per_audio_second=round(asr, 4),
        asr_peak_rss_gib=round(max_rss_gib(), 2),
    )
    for steps, g in gen.items():
        out[f"generation_seconds_per_audio_second_{steps}_steps"] = round(g, 3)
        out[f"verify_overhead_{steps}_steps"] = round(asr / g, 4)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
