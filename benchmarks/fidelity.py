#!/usr/bin/env python3
"""How far the CPU's narrow paths (`--dtype bfloat16`, `--quantize int8`) move the model from fp32.

    python benchmarks/fidelity.py [--full DIR] [--steps 8] [--variants bf16 int8 auto] [--sentences 4]
    python benchmarks/fidelity.py --step-cache [--steps 16] [--every 8 3] [--cache-path fp32]

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
    from omnivoice_cli.engine.model.generation import pack

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

    from omnivoice_cli.engine.model.config import GenerationConfig

    gen = GenerationConfig(num_step=steps, position_temperature=0.0, class_temperature=0.0)
    return [r.tokens for r in engine.generate([replace(q, generation=gen) for q in requests])]


def compare(ckpt: Path, named, variants: list[str], steps: int) -> list[tuple]:
    """Rows (variant, case, relative logits error, argmax agreement, final-token agreement)."""
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.pipeline import Engine

    names, requests = [n for n, _ in named], [r for _, r in named]
    fp32 = Engine.load(str(ckpt), Hardware(device="cpu"))
    base, base_tokens = step0_logits(fp32, requests), final_tokens(fp32, requests, steps)
    del fp32
    rows = []
    for variant in variants:
        engine = Engine.load(str(ckpt), Hardware(device="cpu", **VARIANTS[variant]))
        logits, tokens = step0_logits(engine, requests), final_tokens(engine, requests, steps)
        for name, a, b, ta, tb in zip(names, base, logits, base_tokens, tokens):
            rel = ((b - a).norm() / a.norm()).item()
            agree = (b.argmax(-1) == a.argmax(-1)).float().mean().item()
            same = (ta == tb).float().mean().item() if ta.shape == tb.shape else float("nan")
            rows.append((variant, name, rel, agree, same))
        del engine
    return rows


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """||b - a|| / ||a|| over the finite entries of a (the mask id's -inf left out)."""
    keep = torch.isfinite(a)
    return ((b[keep] - a[keep]).norm() / a[keep].norm()).item()


def cache_per_step(ckpt: Path, req, steps: int, prompt_every: int, uncond_every: int, **load) -> list[tuple]:
    """The step cache against the exact loop, step by step, on the exact loop's own trajectory:
    the exact run is recorded (the tokens entering each step, its target logits and guided
    log-probabilities); then a job with the cache on is given those same tokens at every step
    (teacher-forced), so its cache is built from them and each step's difference is the cache's
    alone, not a trajectory that went elsewhere. Rows (step, refreshed, cond logits error, guided
    log-probs error, argmax agreement, revealed-set agreement)."""
    from dataclasses import replace

    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.model.generation import pack, step_log_probs
    from omnivoice_cli.engine.pipeline import Engine

    engine = Engine.load(str(ckpt), Hardware(device="cpu", **load))
    mask = engine.cfg.audio_mask_id
    gen = GenerationConfig(num_step=steps, position_temperature=0.0, class_temperature=0.0)
    model = engine.model

    def one_step(job):
        batch, [(c, u)] = pack([job], "cpu")
        h = model(batch)
        T = job.canvas.target_len
        return model.heads(h[c : c + T]), step_log_probs(job, model, h, c, u, mask)

    def revealed(job, lp, k):  # the positions the step reveals (greedy: position_temperature 0)
        from omnivoice_cli.engine.model import scheduler

        pred, conf = scheduler.predict(lp, 0.0, None)
        scores = scheduler.position_scores(conf, job.tokens != mask, job.gen.layer_penalty_factor, 0.0, None)
        index = torch.topk(scores.flatten(), k).indices
        return index, pred.flatten()[index]

    rows = []
    with torch.inference_mode():
        exact = engine.prepare(replace(req, generation=gen))
        cached = engine.prepare(
            replace(
                req,
                generation=gen.replace(
                    step_cache=True, step_cache_prompt_every=prompt_every, step_cache_uncond_every=uncond_every
                ),
            )
        )
        for s in range(steps):
            k = exact.schedule[s]
            cached.tokens = exact.tokens.clone()
            refreshed = cached.cache.prompt_due(s)
            cond_e, lp_e = one_step(exact)
            cond_c, lp_c = one_step(cached)
            where_e, what_e = revealed(exact, lp_e, k)
            where_c, what_c = revealed(cached, lp_c, k)
            same = len(set(zip(where_e.tolist(), what_e.tolist())) & set(zip(where_c.tolist(), what_c.tolist())))
            agree = (lp_c.argmax(-1) == lp_e.argmax(-1)).float().mean().item()
            rows.append((s, refreshed, _rel(cond_e, cond_c), _rel(lp_e, lp_c), agree, same / k))
            exact.tokens.view(-1)[where_e] = what_e  # the exact loop's own reveal (as scheduler.reveal)
            exact.step += 1
            cached.step += 1
    return rows


def main_cache(args) -> None:
    """--step-cache: the per-step table of cache_per_step, tiny fixture cases and the full size."""
    from omnivoice_cli.engine.planning import Request

    sys.path.insert(0, str(Path(__file__).parent))
    import _harness as H

    print(H.cpu_header())
    n, k = args.every
    print(f"step cache n={n} k={k}, {args.steps} steps, teacher-forced on the exact run's tokens")
    print(
        f"{'checkpoint':10s} {'case':12s} {'step':>4s} {'kind':8s} {'cond logits err':>15s} {'guided lp err':>13s} {'argmax agree':>12s} {'reveal agree':>12s}"
    )
    table = []
    cases = [
        (
            "tiny",
            ROOT / "tests" / "fixtures" / "tiny" / "ckpt",
            "auto_en",
            Request(text="The quick brown fox jumps over the lazy dog, twice.", lang="en"),
        )
    ]
    full = args.full or H.default_ckpt()
    cases.append(("full-size", full, "sentence 9 s", Request(text=H.SENTENCE_9S, lang="en")))
    for ckpt_name, ckpt, case, req in cases:
        for s, refreshed, cond_err, lp_err, agree, reveal in cache_per_step(
            ckpt, req, args.steps, n, k, **VARIANTS.get(args.cache_path, {})
        ):
            kind = "refresh" if refreshed else "cached"
            if s % k == 0:  # the unconditional row ran (StepCache.uncond_due)
                kind += "+u"
            print(
                f"{ckpt_name:10s} {case:12s} {s:4d} {kind:8s} {cond_err:15.4f} {lp_err:13.4f} {agree:12.3f} {reveal:12.3f}",
                flush=True,
            )
            table.append(
                {
                    "checkpoint": ckpt_name,
                    "case": case,
                    "step": s,
                    "refreshed": refreshed,
                    "cond_rel_error": cond_err,
                    "guided_rel_error": lp_err,
                    "argmax_agree": agree,
                    "reveal_agree": reveal,
                }
            )
    if args.out:
        args.out.write_text(json.dumps(table, indent=1))


def main() -> None:
    from omnivoice_cli.engine.planning import Request

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=8, help="steps of the whole greedy runs")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["bf16", "int8"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--int8-kernel", choices=["onednn", "fbgemm"], default=None, help="int8 on this kernel, not the table's"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    ap.add_argument(
        "--sentences",
        type=int,
        default=1,
        help="full-size cases: the 9 s sentence and this many less one of BATCH8's, then REPLY13's (21 in all)",
    )
    ap.add_argument(
        "--step-cache", action="store_true", help="instead: the step cache against the exact loop, step by step"
    )
    ap.add_argument("--every", type=int, nargs=2, default=[8, 3], metavar=("N", "K"), help="the cache's n and k")
    ap.add_argument("--cache-path", choices=["fp32", *VARIANTS], default="fp32", help="the precision of both runs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.step_cache:
        return main_cache(args)
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

    from omnivoice_cli.engine.fast import cpu, linears

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
        for variant in dict.fromkeys(r[0] for r in rows):  # the mean over the cases: the figure to compare
            rels = [r[2] for r in rows if r[0] == variant]
            print(f"{ckpt_name:10s} {variant:7s} {'mean':12s} {sum(rels) / len(rels):17.4f}  ({len(rels)} cases)")

    show("tiny", compare(ROOT / "tests" / "fixtures" / "tiny" / "ckpt", reqs, args.variants, args.steps))
    full = args.full or next(
        (p for p in (ROOT / ".oracle" / "ckpt-full", ROOT / "bench-ckpt-full") if p.is_dir()), None
    )
    if full:
        named = [("sentence 9 s", Request(text=H.SENTENCE_9S, lang="en"))]
        more = [(f"batch8 {i}", t) for i, t in enumerate(H.BATCH8[1:], 1)] + [
            (f"reply {i}", t) for i, t in enumerate(H.REPLY13, 1)
        ]
        named += [(name, Request(text=t, lang="en")) for name, t in more[: args.sentences - 1]]
        show("full-size", compare(full, named, args.variants, args.steps))
    if args.out:
        args.out.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
