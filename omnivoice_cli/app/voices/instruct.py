"""Voice-design items from what people write, and from a voice's own items.

    read_free("Speak like a deep British man, not whispering")
        -> FreeInstruct(instruct="male, low pitch, british accent", notes=("ignored 'whispering' (negated)",))
    merge("female, young adult, moderate pitch", "male, whisper")
        -> "male, young adult, moderate pitch, whisper"

The engine's `resolve_instruct` is strict: every comma-separated item must be in the vocabulary
or be one of its synonyms (`--instruct`, a preset's `instruct`, a JSON line's). The server's
OpenAI field `instructions` is free text instead ("Speak in a cheerful and positive tone", "a
deep British male voice"): `read_free` keeps the items and synonyms it finds
(`engine.phrases.find_instruct_phrases`), the first of each category (accent and dialect count as
one), and ignores the rest, saying what it left out. A built-in voice's items (an OpenAI voice
name) are merged with given items by `merge`: the given ones replace the voice's of the same
category.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from urllib.parse import quote

from ...engine.errors import InvalidRequest
from ...engine.text.instructs import resolve_instruct
from ...engine.text.phrases import InstructPhrase, find_instruct_phrases
from ...engine.text.vocabulary import instruct_category, instruct_synonyms, instruct_vocabulary

MAX_NOTES = 8  # notes kept about one text
_SPLIT_RE = re.compile(r"\s*[,，]\s*")
_WORD_RE = re.compile(r"[A-Za-z]{4,}")  # words long enough to be told apart from a typo
TYPO_CUTOFF = 0.85  # how close an unknown word must be to an item or synonym to be named as a typo


@dataclass(frozen=True)
class FreeInstruct:
    """What free text gives: the items used (None: none found) and what was left out, and why."""

    instruct: str | None
    notes: tuple[str, ...] = ()


def _group(item: str) -> str:
    """The category an item counts in; an accent and a dialect exclude each other."""
    name = instruct_category(item) or item
    name = name.split(" (")[0]
    return "accent or dialect" if name in ("accent", "dialect") else name


def _order() -> dict[str, int]:
    return {_group(c.items[0]): i for i, c in enumerate(instruct_vocabulary())}


def _english(item: str) -> str:
    """An item as its English name where it has one ('女' -> 'female'; a dialect stays Chinese)."""
    return resolve_instruct(item, use_zh=False) or item


def _join(items: list[str]) -> str | None:
    order = _order()
    items = sorted(items, key=lambda x: order.get(_group(x), len(order)))
    return ", ".join(items) or None


def items_of(instruct: str | None) -> list[str]:
    """The items of a valid instruct (a synonym gives its items), by their English names."""
    resolved = resolve_instruct(instruct, use_zh=False)
    return [_english(x) for x in _SPLIT_RE.split(resolved)] if resolved else []


def merge(base: str | None, over: str | None) -> str | None:
    """`over`'s items, and `base`'s of the categories `over` leaves out (category order).
    Both must be valid instructs (InvalidRequest otherwise)."""
    if not base or not base.strip():
        return over
    if not over or not over.strip():
        return base
    given = items_of(over)
    taken = {_group(x) for x in given}
    return _join([x for x in items_of(base) if _group(x) not in taken] + given)


def read_free(text: str | None) -> FreeInstruct:
    """The voice-design items of free text (see the module doc)."""
    if text is None or not text.strip():
        return FreeInstruct(None)
    chosen: dict[str, tuple[str, str]] = {}  # group -> (item, the phrase that gave it)
    notes: list[str] = []
    phrases = find_instruct_phrases(text)
    for phrase in phrases:
        if phrase.negated:
            notes.append(f"ignored '{phrase.text}' (negated)")
            continue
        for item in map(_english, phrase.items):
            group = _group(item)
            if group not in chosen:
                chosen[group] = (item, phrase.text)
            elif chosen[group][0] != item:
                kept, source = chosen[group]
                said = f"'{kept}'" if kept.lower() == source.lower() else f"'{kept}' from '{source}'"
                shown = f"'{phrase.text}'" + ("" if phrase.text.lower() == item else f" ({item})")
                notes.append(f"ignored {shown}: one {group} only, kept {said}")
    notes += _typos(text, phrases)
    instruct = _join([item for item, _ in chosen.values()])
    if instruct is None and not notes:
        notes.append("no voice-design words found (gender, age, pitch, whisper, accent)")
    return FreeInstruct(instruct, tuple(notes[:MAX_NOTES]))


def _typos(text: str, phrases: list[InstructPhrase]) -> list[str]:
    """Words that are not items but nearly are ('lowpitch', 'femail'): named, with the item meant."""
    spans = [(p.start, p.start + len(p.text)) for p in phrases]
    words = [
        *(x for x in instruct_synonyms() if x.isascii()),
        *(x for c in instruct_vocabulary() for x in c.items if x.isascii()),
    ]
    notes = []
    for m in _WORD_RE.finditer(text):
        if any(a <= m.start() < b for a, b in spans):
            continue
        close = difflib.get_close_matches(m.group().lower(), words, n=1, cutoff=TYPO_CUTOFF)
        if close and close[0] != m.group().lower():
            notes.append(f"ignored '{m.group()}' (did you mean '{close[0]}'?)")
        if len(notes) >= MAX_NOTES:
            break
    return notes


def shown(instruct: str | None) -> str:
    """An instruct as the reply header says it: the items' English names ('none' when there are
    none), non-ASCII characters (a Chinese dialect) as percent-encoded UTF-8."""
    try:
        items = items_of(instruct) if instruct else []
    except InvalidRequest:  # a fine-tune's own items: as given
        items = [instruct] if instruct else []
    return quote(", ".join(items), safe=" ,-'()") if items else "none"


def header_text(text: str, limit: int = 500) -> str:
    """`text` fit for an HTTP header: percent-encoded where not ASCII, at most `limit` characters."""
    out = quote(" ".join(text.split()), safe=" ,-'():;?!./=")
    return out if len(out) <= limit else re.sub(r"%[0-9A-F]?$", "", out[: limit - 3]) + "..."
