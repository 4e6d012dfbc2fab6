"""The package's text tables (`data/*.json`), read once with `importlib.resources`."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def table(name: str) -> dict:
    """One json table from the package's data folder (read once)."""
    raw = resources.files("omnivoice_cli").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    return json.loads(raw)


@lru_cache(maxsize=None)
def punct_sets() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """data/text.json's (split punctuation, closing marks, end punctuation, abbreviations)."""
    t = table("text.json")
    return (
        frozenset(t["split_punctuation"]),
        frozenset(t["closing_marks"]),
        frozenset(t["end_punctuation"]),
        frozenset(t["abbreviations"]),
    )
