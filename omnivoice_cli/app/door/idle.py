"""An idle model (`serve` / `wyoming` / `mcp --idle-unload`): the duration after which it is
unloaded, as the option gives it (`idle_seconds`), and the memory given back once it is
(`free_memory`). Speaker (speaker.py) watches for the idle time and unloads.
"""

from __future__ import annotations

import gc
import sys

from ...engine.errors import InvalidRequest
from ...engine.fast import memory

DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


def idle_seconds(spec: str | None, option: str = "--idle-unload") -> float | None:
    """A duration such as 30s, 5m, 1h, 500ms or 90 (seconds) in seconds; None for none, "never"
    or "off". InvalidRequest naming the value and what is allowed."""
    if spec is None or spec.strip().lower() in ("never", "off"):
        return None
    text = spec.strip().lower()
    number = text.rstrip("mhs")
    unit = text[len(number) :]
    try:
        value = float(number) * DURATION_UNITS[unit]
    except (ValueError, KeyError):
        value = -1.0
    if not (value > 0 and value < 1e9):
        raise InvalidRequest(
            f"{option} must be a duration above 0 such as 30s, 5m, 1h or 500ms (or never), got {spec!r}"
        )
    return value


def free_memory() -> None:
    """Give back what an unloaded model held: the cycles collected, CUDA's cached blocks (where
    torch is loaded and has used CUDA), the heap's free memory (glibc's malloc_trim)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    memory.release_free_memory()
