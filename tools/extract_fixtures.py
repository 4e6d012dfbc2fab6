"""Development tool: copy the golden tensors the tests assert on from ../shared/fixtures/tiny.

Run from the repo root: python tools/extract_fixtures.py [SRC] [--cases NAME,...]. Never used at
run time or by the tests. Keeps the repo lean: raw waveforms that equal a codec decode output are
not stored twice, the step-0 logits are cut to the target positions (the only positions the engine
computes heads on), and a case in ONLY keeps just what its tests assert.

Cases beyond the shared goldens (made with the oracle's golden.py machinery, its CASES list with
one more entry, on ../shared/fixtures/tiny/ckpt; the oracle code stays out of this repo):
  long_speed15  the `long` case with speed=1.5 (golden.py's LONG_TEXT, language "en", speed 1.5):
                tests/test_long.py shows that only the later chunks' target lengths differ
                (docs/correctness.md, "Deliberate differences"). Extract it alone:
                python tools/extract_fixtures.py DIR --cases long_speed15
"""

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

DST = Path("tests/fixtures/golden")
# case -> the tensors its tests assert (the others are left out): long_speed15's chunk 0 is generated
# as the reference does (canvas, every step, tokens); of the later chunks only the canvases are
# compared (their target lengths deliberately differ, so their tokens cannot be the reference's)
ONLY = {
    "long_speed15": lambda key: (
        key == "task.target_lens" or key.startswith("call0.item0.") or key.endswith(".input_ids")
    )
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", default="../shared/fixtures/tiny/golden", help="a golden.py output folder")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: every case in SRC)")
    args = ap.parse_args()
    src, only = Path(args.src), set(filter(None, args.cases.split(",")))
    DST.mkdir(parents=True, exist_ok=True)
    if not only:
        for name in ("ref_24k.wav", "ref_16k.wav"):
            shutil.copyfile(src / name, DST / name)
    for case in json.loads((src / "cases.json").read_text())["cases"]:
        name = case["name"]
        if only and name not in only:
            continue
        meta = json.loads((src / name / "case.json").read_text())
        t = load_file(src / name / "tensors.safetensors")
        out = {}
        for key, v in t.items():
            if key.endswith(".attention_mask") or ".step0." in key:
                continue
            if name in ONLY and not ONLY[name](key):
                continue
            if key.endswith("input_ids"):
                v = v.to(torch.int32)
            if key.startswith("item") and key.endswith("raw_waveform") and len(meta["calls"]) == 1:
                continue  # equals the matching decode{k}.audio_values
            if key.startswith("decode") and key.endswith("audio_values") and len(meta["calls"]) > 1:
                continue  # chunked: the cross-faded item{i}.raw_waveform is asserted instead
            out[key] = v.contiguous()
        if "call0.step0.logits" in t:
            lg = t["call0.step0.logits"]  # [2B, 8, Lmax, 1025]
            c_len = meta["calls"][0]["cond_lens"][0]
            tl = meta["calls"][0]["target_lens"][0]
            out["step0.cond_target_logits"] = lg[0, :, c_len - tl : c_len].contiguous()
            out["step0.uncond_target_logits"] = lg[1, :, :tl].contiguous()
        save_file(out, DST / f"{name}.safetensors")
        fields = ("name", "generate_kwargs", "calls", "task") if name in ONLY else ()
        fields = fields or ("name", "generate_kwargs", "calls", "task", "decodes", "encodes", "prompts", "post")
        keep = {k: meta[k] for k in fields}
        (DST / f"{name}.json").write_text(json.dumps(keep, indent=1, ensure_ascii=False) + "\n")
        print(name, sorted(out)[:3], "...", len(out))


if __name__ == "__main__":
    main()
