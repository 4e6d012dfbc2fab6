"""A voice library that travels: `omnivoice voice export NAME -o alice.safetensors` writes a saved
voice as one file (its prepared prompt, the codes; its transcript, language and the model it was
made with in the metadata) with a checksum over all of it; `voice import` (and the server's voice
upload) read such a file bounded and verified: at most MAX_VOICE_BYTES, the safetensors header
checked before anything is read, the codes' shape as recorded, the checksum recomputed. A file
that fails is refused in one line and nothing is written; the name it is saved under is checked
by the store (`voices.check_name`: no path, nothing outside the store).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ...engine.errors import InvalidRequest
from ...engine.sound.voicefile import read_voice_metadata
from . import voices as store

MAX_VOICE_BYTES = 4 << 20  # a voice file: 60 s of codes is under 100 kB
CHECKSUM_KEY = "checksum"
_KEPT = ("name", "model", "source", "seconds", "frames", "codebooks", "created", "tool", *store.DESIGN_KEYS)


def checksum(path: Path) -> str:
    """'sha256:...' over a voice file's codes (shape and values) and its metadata but the checksum."""
    from ...engine.sound import voice as vmod

    voice = vmod.load_voice(path)
    meta = {k: v for k, v in read_voice_metadata(path).items() if k != CHECKSUM_KEY}
    h = hashlib.sha256(b"omnivoice-voice-export\0")
    h.update(json.dumps(list(voice.codes.shape)).encode())
    h.update(voice.codes.contiguous().numpy().tobytes())
    h.update(json.dumps(meta, sort_keys=True, ensure_ascii=False).encode())
    return "sha256:" + h.hexdigest()


def export_voice(name: str, out: Path, force: bool = False) -> Path:
    """Write the saved voice `name` to `out` (a .safetensors file) with its checksum; returns `out`."""
    from ...engine.sound import voice as vmod

    if out.suffix.lower() != store.VOICE_SUFFIX:
        raise InvalidRequest(f"-o {out}: a voice file ends in {store.VOICE_SUFFIX}")
    if out.exists() and not force:
        raise InvalidRequest(f"-o {out} already exists: give --force to replace it")
    src = store.find_saved(name)
    voice = store.load_voice_file(src)
    meta = {k: v for k, v in read_voice_metadata(src).items() if k in _KEPT and v}
    fd, tmp_name = tempfile.mkstemp(suffix=store.VOICE_SUFFIX, dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        vmod.save_voice(tmp, voice, **meta)
        vmod.save_voice(tmp, voice, **meta, **{CHECKSUM_KEY: checksum(tmp)})
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def verify_voice_file(path: Path, shown: str | None = None) -> dict[str, str]:
    """A voice file to import, checked (see the module doc); returns its metadata."""
    shown = shown or str(path)
    try:
        size = path.stat().st_size
    except OSError:
        raise InvalidRequest(f"voice file '{shown}' does not exist") from None
    if size > MAX_VOICE_BYTES:
        raise InvalidRequest(f"voice file '{shown}' is {size} bytes: at most {MAX_VOICE_BYTES} for a voice file")
    meta = read_voice_metadata(path)
    from ...engine.sound import voice as vmod

    codes = vmod.load_voice(path).codes
    for key, n in (("codebooks", codes.shape[0]), ("frames", codes.shape[-1])):
        if meta.get(key) and meta[key] != str(int(n)):
            raise InvalidRequest(f"voice file '{shown}': its {key} say {meta[key]}, its codes hold {int(n)}")
    if CHECKSUM_KEY in meta and meta[CHECKSUM_KEY] != checksum(path):
        raise InvalidRequest(
            f"voice file '{shown}': its checksum does not match its contents (changed or damaged since it was exported)"
        )
    return meta
