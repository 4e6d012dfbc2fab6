"""One measurement of the reference implementation (omnivoice 0.2.1), run with the oracle venv's
python (../shared/oracle/setup_venv.sh builds .oracle/venv). A development tool only."""

import argparse
import json
import time

from _harness import PeakRSS, max_rss_gib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--num-step", type=int, default=32)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--output", default=None, help="whole-command mode: write the audio here (NAME_i.wav for several)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from omnivoice import OmniVoice

    t0 = time.perf_counter()
    model = OmniVoice.from_pretrained(args.ckpt, dtype=torch.float32, device_map="cpu")
    model.eval()
    load_s = time.perf_counter() - t0
    fwd, mark = [], {}
    model.register_forward_pre_hook(lambda m, a, k: mark.__setitem__("t", time.perf_counter()), with_kwargs=True)
    model.register_forward_hook(lambda m, a, k, o: fwd.append(time.perf_counter() - mark["t"]), with_kwargs=True)
    texts = json.loads(args.texts)
    torch.manual_seed(0)
    with PeakRSS() as pk:
        t1 = time.perf_counter()
        audios = model.generate(
            text=texts if len(texts) > 1 else texts[0],
            language="en",
            num_step=args.num_step,
            position_temperature=0.0,
            class_temperature=0.0,
        )
        total = time.perf_counter() - t1
    if args.output:
        import soundfile as sf

        for i, a in enumerate(audios):
            path = args.output if len(audios) == 1 else args.output.replace(".wav", f"_{i}.wav")
            sf.write(path, a, model.sampling_rate)
    audio_s = sum(len(a) for a in audios) / model.sampling_rate
    print(
        "RESULT "
        + json.dumps(
            {
                "load_seconds": load_s,
                "generate_seconds": total,
                "n_forward": len(fwd),
                "s_per_step": sorted(fwd)[len(fwd) // 2],
                "step_seconds": fwd,
                "audio_seconds": audio_s,
                "rtf": total / audio_s,
                "peak_rss_gib": pk.peak / 2**30,
                "max_rss_gib": max_rss_gib(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
