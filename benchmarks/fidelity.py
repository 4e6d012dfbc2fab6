#!/usr/bin/env python3
"""How far the CPU's narrow paths (`--dtype bfloat16`, `--quantize int8`) move the model from fp32.

    python benchmarks/fidelity.py [--full DIR] [--steps 8] [--variants bf16 int8 auto]

(under caps, e.g. `ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2`,
the paths of that class: there int8 runs FBGEMM's kernel, and bf16 loads float32)

For each golden case of the tiny fixture checkpoint (and one ~9 s sentence on the full-size
checkpoint, if given or found), the first forward of the request runs in fp32 and in each variant;
reported are the relative error ||x - fp32|| / ||fp32|| of the target logits (conditional and
unconditional rows), the share of (codebook, frame) positions whose argmax token agrees, and the
share of the final tokens of a whole greedy run at --steps steps that equal fp32's.

On random weights the argmax shares are a weak measure: such a model's logits are nearly flat
across frames (a few classes win everywhere), so near-ties decide many positions. The relative
logits error is the figure to compare between variants.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"bf16": {"dtype": "bfloat16"}, "int8": {"quantize": "int8"}, "auto": {"quantize": "auto"}}


def step0_logits(engine, requests) -> list[torch.Tensor]:
    """[C, 2T, V] per request: the first forward's target logits, conditional then unconditional."""
    from omnivoice_cli.engine.generation import pack

    out = []
    with torch.inference_mode():
        for req in requests:
            job = engine.prepare(req)
            batch, [(c, u)] = pack([job], "cpu")
            h = engine.model(batch)
            T = job.canvas.target_len
            out.append(torch.cat([engine.model.heads(h[c : c + T]), engine.model.heads(h[u : u + T])], 1))
    return out


def final_tokens(engine, requests, steps: int) -> list[torch.Tensor]:
    from dataclasses import replace

    from omnivoice_cli.engine.config import GenerationConfig

    gen = GenerationConfig(num_step=steps, position_temperature=0.0, class_temperature=0.0)
    return [r.tokens for r in engine.generate([replace(q, generation=gen) for q in requests])]


def compare(ckpt: Path, named, variants: list[str], steps: int) -> list[tuple]:
    """Rows (variant, case, relative logits error, argmax agreement, final-token agreement)."""
    from omnivoice_cli.engine.pipeline import Engine

    names, requests = [n for n, _ in named], [r for _, r in named]
    fp32 = Engine.load(str(ckpt), device="cpu")
    base, base_tokens = step0_logits(fp32, requests), final_tokens(fp32, requests, steps)
    del fp32
    rows = []
    for variant in variants:
        engine = Engine.load(str(ckpt), device="cpu", **VARIANTS[variant])
        logits, tokens = step0_logits(engine, requests), final_tokens(engine, requests, steps)
        for name, a, b, ta, tb in zip(names, base, logits, base_tokens, tokens):
            rel = ((b - a).norm() / a.norm()).item()
            agree = (b.argmax(-1) == a.argmax(-1)).float().mean().item()
            same = (ta == tb).float().mean().item() if ta.shape == tb.shape else float("nan")
            rows.append((variant, name, rel, agree, same))
        del engine
    return rows


def main() -> None:
    from omnivoice_cli.engine.pipeline import Request

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=8, help="steps of the whole greedy runs")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["bf16", "int8"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--int8-kernel", choices=["onednn", "fbgemm"], default=None, help="int8 on this kernel, not the table's"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    golden = ROOT / "tests" / "fixtures" / "golden"
    reqs = []
    for case in ["auto_en", "design_en", "zh", "nonverbal", "speed13"]:
        kw = json.loads((golden / f"{case}.json").read_text())["generate_kwargs"]
        reqs.append(
            (
                case,
                Request(text=kw["text"], lang=kw.get("language"), instruct=kw.get("instruct"), speed=kw.get("speed")),
            )
        )
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    from omnivoice_cli.engine import cpu, linears

    H.force_int8_kernel(args.int8_kernel)
    print(H.cpu_header())
    print(f"  int8 kernel: {linears.int8_kind().__name__}; quantize auto: {cpu.choice().quantize or 'none'}")
    print(
        f"{'checkpoint':10s} {'variant':7s} {'case':12s} {'logits rel. error':>17s} {'argmax agree':>12s} {'tokens agree':>12s}"
    )
    table = []

    def show(ckpt_name, rows):
        for variant, name, rel, agree, same in rows:
            print(f"{ckpt_name:10s} {variant:7s} {name:12s} {rel:17.4f} {agree:12.3f} {same:12.3f}", flush=True)
            table.append(
                {
                    "checkpoint": ckpt_name,
                    "variant": variant,
                    "case": name,
                    "rel_error": rel,
                    "argmax_agree": agree,
                    "tokens_agree": same,
                }
            )

    show("tiny", compare(ROOT / "tests" / "fixtures" / "tiny" / "ckpt", reqs, args.variants, args.steps))
    full = args.full or next(
        (p for p in (ROOT / ".oracle" / "ckpt-full", ROOT / "bench-ckpt-full") if p.is_dir()), None
    )
    if full:
        from _harness import SENTENCE_9S

        show(
            "full-size",
            compare(full, [("sentence 9 s", Request(text=SENTENCE_9S, lang="en"))], args.variants, args.steps),
        )
    if args.out:
        args.out.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
