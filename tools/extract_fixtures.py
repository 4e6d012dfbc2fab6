"""Development tool: copy the golden tensors the tests assert on from ../shared/fixtures/tiny.

Run from the repo root: python tools/extract_fixtures.py. Never used at run time or by the tests.
Keeps the repo lean: raw waveforms that equal a codec decode output are not stored twice, and the
step-0 logits are cut to the target positions (the only positions the engine computes heads on).
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/fixtures/tiny/golden")
DST = Path("tests/fixtures/golden")


def main() -> None:
    DST.mkdir(parents=True, exist_ok=True)
    for name in ("ref_24k.wav", "ref_16k.wav"):
        shutil.copyfile(SRC / name, DST / name)
    for case in json.loads((SRC / "cases.json").read_text())["cases"]:
        name = case["name"]
        meta = json.loads((SRC / name / "case.json").read_text())
        t = load_file(SRC / name / "tensors.safetensors")
        out = {}
        for key, v in t.items():
            if key.endswith(".attention_mask") or ".step0." in key:
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
        keep = {
            k: meta[k] for k in ("name", "generate_kwargs", "calls", "task", "decodes", "encodes", "prompts", "post")
        }
        (DST / f"{name}.json").write_text(json.dumps(keep, indent=1, ensure_ascii=False) + "\n")
        print(name, sorted(out)[:3], "...", len(out))


if __name__ == "__main__":
    main()
