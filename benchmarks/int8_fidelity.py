#!/usr/bin/env python3
"""How far `--quantize int8` moves the model: step-0 logits against fp32.

    python benchmarks/int8_fidelity.py [--full DIR]

For each golden case of the tiny fixture checkpoint (and the full-size checkpoint, if given or
found), the first forward of the request runs in fp32 and with int8 linear layers; reported are
the relative error ||int8 - fp32|| / ||fp32|| of the target logits and the share of positions whose
argmax token agrees.
"""

import argparse
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def compare(ckpt: Path, requests) -> list[tuple[str, float, float]]:
    from omnivoice_cli.engine.linears import quantize_int8
    from omnivoice_cli.engine.generation import pack
    from omnivoice_cli.engine.pipeline import Engine

    engine = Engine.load(str(ckpt), device="cpu")
    jobs = [(name, engine.prepare(req)) for name, req in requests]

    def logits():
        out = []
        with torch.inference_mode():
            for _, job in jobs:
                batch, [(c, u)] = pack([job], "cpu")
                h = engine.model(batch)
                T = job.canvas.target_len
                out.append(torch.cat([engine.model.heads(h[c : c + T]), engine.model.heads(h[u : u + T])], 1))
        return out

    fp32 = logits()
    quantize_int8(engine.model)
    int8 = logits()
    rows = []
    for (name, _), a, b in zip(jobs, fp32, int8):
        rel = ((b - a).norm() / a.norm()).item()
        agree = (b.argmax(-1) == a.argmax(-1)).float().mean().item()
        rows.append((name, rel, agree))
    return rows


def main() -> None:
    from omnivoice_cli.engine.pipeline import Request

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(2)
    golden = ROOT / "tests" / "fixtures" / "golden"
    reqs = []
    for case in ["auto_en", "design_en", "zh", "nonverbal", "speed13"]:
        kw = json.loads((golden / f"{case}.json").read_text())["generate_kwargs"]
        reqs.append((case, Request(text=kw["text"], lang=kw.get("language"), instruct=kw.get("instruct"), speed=kw.get("speed"))))
    print(f"{'checkpoint':10s} {'case':12s} {'rel. error':>10s} {'argmax agree':>12s}")
    for name, rel, agree in compare(ROOT / "tests" / "fixtures" / "tiny" / "ckpt", reqs):
        print(f"{'tiny':10s} {name:12s} {rel:10.4f} {agree:12.3f}")
    full = args.full or next((p for p in (ROOT / ".oracle" / "ckpt-full", ROOT / "bench-ckpt-full") if p.is_dir()), None)
    if full:
        from _harness import SENTENCE_9S

        for name, rel, agree in compare(full, [("sentence 9 s", Request(text=SENTENCE_9S, lang="en"))]):
            print(f"{'full-size':10s} {name:12s} {rel:10.4f} {agree:12.3f}")


if __name__ == "__main__":
    main()
