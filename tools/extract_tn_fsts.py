"""Development tool: copy WeTextProcessing 1.2.0's compiled text-normalisation FSTs into the package.

The reference's `normalize_text` (omnivoice 0.2.1) runs WeTextProcessing's Chinese and English
normalisers. Those load the FSTs that ship inside the WeTextProcessing wheel (`tn/*.fst`; the
normaliser's flags only matter when it rebuilds them, which needs pynini). We run the very same
FSTs through `kaldifst` (no pynini), so this tool copies the four files, checks them against the
wheel's RECORD, and writes them xz-compressed (10 MB -> 0.56 MB) to omnivoice_cli/data/tn/.

Run from the repo root with a python that has WeTextProcessing 1.2.0 installed (the oracle venv):

    /work/main/.oracle/venv/bin/python tools/extract_tn_fsts.py

Nothing here runs at run time; the FSTs are data under WeTextProcessing's Apache-2.0 licence
(see omnivoice_cli/data/tn/NOTICE).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import lzma
from pathlib import Path

FILES = ("en_tn_tagger.fst", "en_tn_verbalizer.fst", "zh_tn_tagger.fst", "zh_tn_verbalizer.fst")
DST = Path("omnivoice_cli/data/tn")


def _record_hashes() -> dict[str, str]:
    dist = md.distribution("WeTextProcessing")
    if dist.version != "1.2.0":
        raise SystemExit(f"WeTextProcessing {dist.version} found; the reference was checked with 1.2.0")
    out = {}
    for line in (dist.read_text("RECORD") or "").splitlines():
        path, digest, _ = line.rsplit(",", 2)
        if path.startswith("tn/") and path.endswith(".fst"):
            out[path[3:]] = digest.split("=", 1)[1]
    return out


def main() -> None:
    dist = md.distribution("WeTextProcessing")
    record = _record_hashes()
    DST.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        raw = Path(dist.locate_file(f"tn/{name}")).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
        if digest != record[name]:
            raise SystemExit(f"{name}: sha256 differs from the wheel's RECORD")
        packed = lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)
        (DST / f"{name}.xz").write_bytes(packed)
        print(f"{name}: {len(raw)} -> {len(packed)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}")


if __name__ == "__main__":
    main()
