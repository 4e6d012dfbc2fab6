"""The phrase cache of a run or a server: a store (media/phrasestore.py) in the cache folder, the
keys of built requests (phrasekey.py), and its hits and misses counted.

    cache = PhraseCache.open(parse_size("256"))         # serve --phrase-cache 256; say --cache
    key = cache.key_of(built, "mp3", 24000, "file")     # None: this request is not cached
    found = cache.get(key)                              # a hit (Found) or None (a miss), counted
    cache.put(key, data, {"seed": 7, "samples": 24000})

Where: $OMNIVOICE_PHRASE_CACHE (a folder), else `phrases/` in the user's data folder, beside the
weight cache's `weights/` (`omnivoice cache list` / `clear` show and clear both). Its bound is
given in MB (`parse_size`); each writer evicts down to its own bound after it writes.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...engine.checkpoint import hub
from ...engine.errors import InvalidRequest
from ...media.phrasestore import Found, PhraseStore
from ..request import Built
from ..voices import designcache
from .phrasekey import checkpoint_identity, phrase_key, voice_key

ENV = "OMNIVOICE_PHRASE_CACHE"
HEADER = "X-OmniVoice-Cache"  # a speech reply's: hit or miss
DEFAULT_MB = 256  # say --cache's bound
MAX_MB = 1 << 20  # a terabyte
_SIZE = re.compile(r"\s*(\d{1,8})\s*(mb|m|gb|g)?\s*", re.IGNORECASE)


def phrase_dir() -> Path:
    """The phrase cache's folder (see the module doc)."""
    env = os.environ.get(ENV, "").strip()
    return Path(env).expanduser() if env else hub.user_home() / "phrases"


def parse_size(text: object, flag: str = "--phrase-cache") -> int:
    """A bound in MB ('256', '256MB', '2GB') -> bytes; InvalidRequest naming the value otherwise."""
    found = _SIZE.fullmatch(str(text))
    mb = int(found.group(1)) * (1024 if (found.group(2) or "").lower().startswith("g") else 1) if found else 0
    if not 1 <= mb <= MAX_MB:
        raise InvalidRequest(
            f"{flag} must be a size in MB from 1 to {MAX_MB} (as '256' or '256MB', or '2GB'), got {str(text)!r}"
        )
    return mb << 20


@dataclass
class PhraseCache:
    """A store and its counts (thread-safe); `listeners` hear each lookup's "hit" or "miss"."""

    store: PhraseStore
    hits: int = 0
    misses: int = 0
    listeners: list[Callable[[str], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, cap_bytes: int, folder: Path | None = None, notice: Callable[[str], None] | None = None):
        return cls(PhraseStore(folder or phrase_dir(), cap_bytes, notice))

    def key_of(self, built: Built, fmt: str, rate: int, form: str, model: str | None = None) -> str | None:
        """The key of `built`'s reply in format `fmt` at `rate` Hz, `form` "file" or "stream", spoken
        by `model` (default: its settings'). None: not keyed yet, the checkpoint not here or a
        designed voice not rendered (its first request renders it: key it again after that)."""
        checkpoint = checkpoint_identity(model or built.settings["model"])
        if checkpoint is None:
            return None
        request, ref, prompt = built.request, built.reference, built.request.ref
        if ref is not None and ref.design is not None:  # a designed voice: keyed by its rendered prompt
            prompt, ref = designcache.lookup(ref.key, ref.design), None
            if prompt is None:  # not rendered yet (its first request renders it): not cached
                return None
        voice = voice_key(
            ref.prepared if ref else None,
            prompt,
            request.instruct,
            request.instruct_text,
            request.lang,
            ref.transcript if ref else None,
        )
        return phrase_key(request, built.settings.values, voice, checkpoint, fmt, rate, form)

    def get(self, key: str) -> Found | None:
        """The entry of `key` (a hit), or None (a miss); counted, and told to the listeners."""
        found = self.store.get(key)
        result = "miss" if found is None else "hit"
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        for listener in self.listeners:
            listener(result)
        return found

    def put(self, key: str, data: bytes, meta: dict | None = None) -> bool:
        return self.store.put(key, data, meta)
