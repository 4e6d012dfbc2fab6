#!/usr/bin/env python3
"""Time the codec ENCODE path (voice-clone reference -> codes) at full size, random weights.

The encoder is built on the meta device with the real checkpoint's shapes (the full
audio_tokenizer/config.json kept in tests/fixtures/full), then materialised in float32 with random
weights (no checkpoint file needed; timing does not depend on the values, denormals aside, which
the initialisation avoids). For each input length the encode of a synthetic waveform is timed
(median of --repeats runs after one warm-up) and reported as seconds per second of audio, with a
per-stage breakdown of the median run.

    python benchmarks/bench_encode.py [--threads 2] [--seconds 5 10] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnivoice_cli.engine.model.encoder import (  # noqa: E402
    EncoderConfig,
    HiggsEncoder,
    build_encoder,
)
from omnivoice_cli.engine.model.hubert import WeightNormConv1d  # noqa: E402
from omnivoice_cli.engine.sound.resample import resample_tensor  # noqa: E402

FULL_CONFIG = ROOT / "tests" / "fixtures" / "full" / "audio_tokenizer" / "config.json"


def random_full_encoder(seed: int = 0) -> HiggsEncoder:
    cfg = EncoderConfig.from_dict(json.loads(FULL_CONFIG.read_text()), FULL_CONFIG)
    with torch.device("meta"):
        model = build_encoder(cfg)
    model = model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, (nn.Conv1d, nn.Linear)):
                fan_in = mod.weight[0].numel()
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) / fan_in**0.5)
                if mod.bias is not None:
                    mod.bias.copy_(0.02 * torch.randn(mod.bias.shape, generator=g))
            elif isinstance(mod, (nn.LayerNorm, nn.GroupNorm)):
                mod.weight.fill_(1.0)
                mod.bias.zero_()
            elif isinstance(mod, WeightNormConv1d):
                wn = mod.parametrizations.weight
                wn.original0.copy_(0.5 + torch.rand(wn.original0.shape, generator=g))
                wn.original1.copy_(torch.randn(wn.original1.shape, generator=g))
                mod.bias.copy_(0.02 * torch.randn(mod.bias.shape, generator=g))
        for name, p in model.named_parameters():
            if name.endswith("alpha"):  # Snake
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
        for q in model.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=g))
    model.eval()
    model.requires_grad_(False)
    return model


def synthetic_wave(seconds: float, sr: int, hop: int, seed: int = 1) -> torch.Tensor:
    n = int(seconds * sr) // hop * hop
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n) / sr
    voiced = 0.2 * torch.sin(2 * torch.pi * 140 * t) * (0.6 + 0.4 * torch.sin(2 * torch.pi * 3 * t))
    return (voiced + 0.02 * torch.randn(n, generator=g)).reshape(1, 1, n)


def timed_encode(model: HiggsEncoder, wav: torch.Tensor) -> dict[str, float]:
    """One encode, with the stages timed separately (same computation as model.encode)."""
    c = model.cfg.codec
    stages = {}
    with torch.inference_mode():
        t0 = time.perf_counter()
        x = resample_tensor(wav, c.sample_rate, c.semantic_sample_rate)[:, 0, :]
        t1 = time.perf_counter()
        x = nn.functional.pad(x, (model.cfg.semantic_pad, model.cfg.semantic_pad))
        states = model.semantic_model(x)
        feats = torch.stack(states, dim=1).mean(dim=1)[:, :: model.cfg.semantic_downsample_factor]
        t2 = time.perf_counter()
        sem = model.encoder_semantic(feats.transpose(1, 2))
        t3 = time.perf_counter()
        ac = model.acoustic_encoder(wav)
        t4 = time.perf_counter()
        fused = model.fc(torch.cat([ac, sem], dim=1).transpose(1, 2)).transpose(1, 2)
        codes = model.quantizer(fused)
        t5 = time.perf_counter()
    assert codes.shape[-1] == wav.shape[-1] // c.hop_length
    stages.update(
        resample=t1 - t0,
        hubert=t2 - t1,
        semantic_encoder=t3 - t2,
        acoustic_encoder=t4 - t3,
        fc_rvq=t5 - t4,
        total=t5 - t0,
    )
    return stages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    ap.add_argument("--seconds", type=float, nargs="+", default=[5.0, 10.0], help="input lengths")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per length (median reported)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    print(H.cpu_header())
    t = time.perf_counter()
    model = random_full_encoder()
    n_params = sum(p.numel() for p in model.state_dict().values())
    print(
        f"full-size encoder: {n_params:,} elements, built in {time.perf_counter() - t:.1f}s; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    results = []
    for seconds in args.seconds:
        wav = synthetic_wave(seconds, model.sample_rate, model.hop_length)
        audio_s = wav.shape[-1] / model.sample_rate
        timed_encode(model, wav)  # warm-up
        runs = [timed_encode(model, wav) for _ in range(args.repeats)]
        totals = [r["total"] for r in runs]
        med = statistics.median(totals)
        median_run = min(runs, key=lambda r: abs(r["total"] - med))
        row = {
            "audio_s": audio_s,
            "frames": wav.shape[-1] // model.hop_length,
            "encode_s_median": med,
            "encode_s_runs": totals,
            "s_per_audio_s": med / audio_s,
            "stages_s": {k: v for k, v in median_run.items() if k != "total"},
        }
        results.append(row)
        stages = ", ".join(f"{k} {v:.2f}" for k, v in row["stages_s"].items())
        print(
            f"{audio_s:5.1f}s audio ({row['frames']} frames): encode {med:.2f}s median of "
            f"{args.repeats} ({', '.join(f'{x:.2f}' for x in totals)}) -> "
            f"{row['s_per_audio_s']:.3f} s per second of audio  [{stages}]"
        )
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "results": results}, indent=1))


if __name__ == "__main__":
    main()
