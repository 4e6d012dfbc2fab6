"""The voice-design vocabulary (`data/instruct.json`) and its everyday synonyms
(`data/instruct_synonyms.json`): the tables that `engine.instructs.resolve_instruct` checks
against and that `engine.phrases` reads free text with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..errors import CheckpointError
from .tables import table

__all__ = [
    "ZH_RE",
    "MAX_INSTRUCT_ITEMS",
    "contains_chinese",
    "InstructCategory",
    "InstructTables",
    "instruct_tables",
    "instruct_vocabulary",
    "PhraseTables",
    "phrase_tables",
    "instruct_synonyms",
    "instruct_category",
    "synonym_items",
    "en_key",
]
ZH_RE = re.compile(r"[\u4e00-\u9fff]")  # CJK Unified Ideographs: "the text is Chinese"
MAX_INSTRUCT_ITEMS = 12  # more items than this cannot be valid (one per category): refused before any lookup


def contains_chinese(text: str | None) -> bool:
    """True when `text` holds a CJK ideograph (U+4E00..U+9FFF), the reference's `ZH_RE` test."""
    return bool(text and ZH_RE.search(text))


@dataclass(frozen=True)
class InstructCategory:
    """One category of the voice-design vocabulary; at most one item of it per instruct.

    `pairs` are (english, chinese) items; accents have no Chinese form (None) and dialects no
    English form (None).
    """

    name: str
    pairs: tuple[tuple[str | None, str | None], ...]

    @property
    def items(self) -> tuple[str, ...]:
        """Every valid spelling in this category (English and Chinese)."""
        return tuple(x for pair in self.pairs for x in pair if x is not None)


@dataclass(frozen=True)
class InstructTables:
    """data/instruct.json read: the categories and the English <-> Chinese item maps."""

    categories: tuple[InstructCategory, ...]
    en_to_zh: dict[str, str]
    zh_to_en: dict[str, str]
    exclusive: tuple[frozenset[str], ...]  # one set per category
    all_valid: tuple[str, ...]  # sorted


@lru_cache(maxsize=None)
def instruct_tables() -> InstructTables:
    data = table("instruct.json")
    cats: list[InstructCategory] = []
    en_to_zh: dict[str, str] = {}
    for name, cat in zip(data["names"], data["categories"]):
        if "en_to_zh" in cat:
            pairs = tuple((en, zh) for en, zh in cat["en_to_zh"].items())
            en_to_zh.update(cat["en_to_zh"])
        else:
            pairs = tuple(((it, None) if not ZH_RE.search(it) else (None, it)) for it in cat["items"])
        cats.append(InstructCategory(name=name, pairs=pairs))
    zh_to_en = {zh: en for en, zh in en_to_zh.items()}
    exclusive = tuple(frozenset(c.items) for c in cats)
    all_valid = tuple(sorted(frozenset().union(*exclusive)))
    return InstructTables(tuple(cats), en_to_zh, zh_to_en, exclusive, all_valid)


def instruct_vocabulary() -> tuple[InstructCategory, ...]:
    """The voice-design vocabulary by category (gender, age, pitch, style, accent, dialect)."""
    return instruct_tables().categories


# Everyday words for the items (`data/instruct_synonyms.json`): --instruct takes one as an item,
# and `engine.phrases.find_instruct_phrases` finds them (and the items) in free text.
_EN_ITEM_RE = re.compile(r"[a-z]+(?:[\s-]+[a-z]+)*")  # an English item as it may be written


def en_key(text: str) -> tuple[str, ...]:
    """The lowercase words of an English phrase: the key of `PhraseTables.en`."""
    return tuple(re.findall(r"[a-z]+", text.lower()))


@dataclass(frozen=True)
class PhraseTables:
    """The synonyms and items as phrases: English by their words, Chinese as written."""

    en: dict[tuple[str, ...], tuple[str, ...]]  # words -> items (an empty tuple: a phrase passed over)
    zh: dict[str, tuple[str, ...]]
    synonyms: dict[str, tuple[str, ...]]  # every synonym as written in the table -> its items
    longest_en: int  # words in the longest English phrase
    longest_zh: int  # characters in the longest Chinese phrase


@lru_cache(maxsize=None)
def phrase_tables() -> PhraseTables:
    t = instruct_tables()
    data = table("instruct_synonyms.json")
    valid = set(t.all_valid)

    def items_of(value: str, where: str) -> tuple[str, ...]:
        items = tuple(x for x in re.split(r"\s*[,，]\s*", value) if x)
        bad = [x for x in items if x not in valid]
        if bad or not items:
            raise CheckpointError(f"instruct_synonyms.json: {where!r} names {bad or value!r}, not vocabulary items")
        return items

    synonyms = {k: items_of(v, k) for k, v in {**data["en"], **data["zh"]}.items()}
    for cat in t.categories:  # '<place>口音' and '<place>方言' for each dialect '<place>话'
        for _, dialect in cat.pairs:
            if dialect and dialect.endswith("话") and cat.pairs[0][0] is None:
                synonyms.update({dialect[:-1] + "口音": (dialect,), dialect[:-1] + "方言": (dialect,)})
    en: dict[tuple[str, ...], tuple[str, ...]] = {en_key(k): () for k in data.get("en_skip", ())}
    zh: dict[str, tuple[str, ...]] = {}
    for phrase, items in [*((x, (x,)) for x in t.all_valid), *synonyms.items()]:
        if ZH_RE.search(phrase):
            zh[phrase] = items
        else:
            en[en_key(phrase)] = items
    return PhraseTables(en, zh, synonyms, max(map(len, en)), max(map(len, zh)))


def instruct_synonyms() -> dict[str, tuple[str, ...]]:
    """Everyday words for the voice-design items: 'woman' -> ('female',), 'girl' -> ('female', 'child')."""
    return dict(phrase_tables().synonyms)


def instruct_category(item: str) -> str | None:
    """The category name of a vocabulary item ('gender' for 'male' and '男'), None if it is none."""
    for cat in instruct_tables().categories:
        if item in cat.items:
            return cat.name
    return None


def synonym_items(item: str) -> tuple[str, ...] | None:
    """The items an --instruct item names by one of the table's phrases (spaces and hyphens aside)."""
    t = phrase_tables()
    if ZH_RE.search(item):
        return t.zh.get(item) or None
    if _EN_ITEM_RE.fullmatch(item):
        return t.en.get(en_key(item)) or None
    return None
