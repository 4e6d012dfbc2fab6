"""What determines a reply's bytes, hashed: the phrase cache's key, the voice's part of it, and the
seed of a request that names none while the cache is on (torch-free but for a saved voice's codes).

    voice = voice_key(reference, prompt, instruct, instruct_text, lang)
    seed = derived_seed(text, voice)                    # request.build_request, with phrase_seed
    key = phrase_key(request, settings, voice, checkpoint_identity(model), "mp3", 24000, "file")

The key is a sha256 over: this key's layout (KEY_FORMAT), the package's and torch's versions, the
checkpoint's identity (its stamp: engine/checkpoint/stamp.py, the one the weight cache and the
designed voices key by too), the text as the model is given
it (after SSML, Markdown, the lexicon and normalisation), the voice's key, the seed, every setting
of the one settings schema (app/settings/schema.py; those that only name a file are keyed by what
they give: the text, the voice), the output format, its rate and its form (a whole file, or a
streamed reply's bytes). A setting added to the schema is in the key with no change here.

The derived seed: a request without a seed, with the cache on, takes the first 31 bits of
sha256(voice key, text), so that the same words in the same voice are the same request (and a
hit); a different text or voice gets another seed, as a drawn one would be.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...engine.checkpoint.stamp import checkpoint_stamp
from ..checkpoint import checkpoint_folder

if TYPE_CHECKING:
    from ...engine.planning import Request
    from ...engine.sound.voice import PreparedReference, VoicePrompt

KEY_FORMAT = "2"  # bumped when what the key covers changes (2: the checkpoint's stamp: every entry missed once)
SEED_BITS = 31  # a derived seed stays as short as a drawn one (session.RANDOM_SEED_BOUND)
# settings keyed by what they give, not by their value: the model (by its identity), the files of a
# voice and a lexicon (by the voice's key, the text), the seed and the format (keyed on their own)
KEYED_APART = ("model", "ref", "ref_text", "voice", "lexicon", "seed", "format", "sample_rate")


def voice_key(
    reference: PreparedReference | None,
    prompt: VoicePrompt | None,
    instruct: str | None,
    instruct_text: str | None,
    lang: str | None,
    transcript: str | None = None,
) -> str:
    """The voice a request speaks in, hashed (sha256 hex): a recording to clone by its prepared
    samples and transcript; a voice prompt (a saved voice file's, the checkpoint's own voice once
    encoded, a designed voice once rendered) by its `voice_prompt` (the sha256 of its codes and
    words: voicefile.prompt_checksum), its level and rate; else the voice design (instruct items,
    instruct text, language), whose voice the seed settles (the seed is keyed on its own).

    The one place the phrase cache reads a voice."""
    h = hashlib.sha256()
    if reference is not None:
        import numpy as np

        h.update(b"recording\0")
        h.update(np.ascontiguousarray(reference.wav, dtype=np.float32).tobytes())
        h.update(json.dumps([transcript, float(reference.rms)]).encode())
    elif prompt is not None:  # its `voice_prompt` (what replies name), with how it is spoken
        from ...engine.sound.voicefile import prompt_checksum

        h.update(b"prompt\0")
        h.update(json.dumps([prompt_checksum(prompt.codes, prompt.text), prompt.rms, prompt.rate]).encode())
    else:
        h.update(b"design\0")
        h.update(json.dumps([instruct, instruct_text, lang]).encode())
    return h.hexdigest()


def derived_seed(text: str, voice: str) -> int:
    """The seed of a request that names none while the phrase cache is on (the module doc)."""
    digest = hashlib.sha256(f"{voice}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def checkpoint_identity(model: str | None) -> str | None:
    """The checkpoint `model` names, as the key knows it: its stamp's digest (the module doc). None:
    it is not here yet, or a file of it is unreadable, so nothing is cached."""
    folder = checkpoint_folder(model)
    stamp = None if folder is None else checkpoint_stamp(folder)
    return None if stamp is None else stamp.digest


@lru_cache(maxsize=1)
def versions() -> tuple[str, str]:
    """(this package's version, torch's): a change of either may change the bytes."""
    found = []
    for name in ("omnivoice-cli", "torch"):
        try:
            found.append(version(name))
        except PackageNotFoundError:
            found.append("?")
    return found[0], found[1]


def phrase_key(
    request: Request,
    settings: Mapping[str, Any],
    voice: str,
    checkpoint: str,
    fmt: str,
    rate: int,
    form: str,
) -> str:
    """The phrase cache's key of a reply (the module doc): 64 hex digits."""
    generation = dataclasses.asdict(request.generation) if request.generation is not None else None
    shown = {k: v for k, v in sorted(settings.items()) if k not in KEYED_APART}
    body = {
        "key_format": KEY_FORMAT,
        "versions": versions(),
        "checkpoint": checkpoint,
        "text": request.text,
        "lang": request.lang,
        "instruct": request.instruct,
        "instruct_text": request.instruct_text,
        "duration": request.duration,
        "speed": request.speed,
        "seed": request.seed,
        "generation": generation,
        "voice": voice,
        "settings": shown,
        "format": fmt,
        "rate": int(rate),
        "form": form,
    }
    raw = json.dumps(body, sort_keys=True, default=_plain, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def _plain(value: object) -> object:
    """A setting's value that JSON does not know (a path, a tuple's items): its text."""
    return str(value) if isinstance(value, Path) else repr(value)
