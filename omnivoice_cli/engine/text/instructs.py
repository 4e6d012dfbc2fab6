"""Voice-design instructs, strictly: `resolve_instruct` validates and normalises an instruct string
as the reference does (every comma-separated item in the vocabulary or one of its synonyms), and
names what an unknown item may have meant."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from ..errors import InvalidRequest
from .phrases import find_instruct_phrases
from .vocabulary import MAX_INSTRUCT_ITEMS, ZH_RE, InstructTables, instruct_tables, phrase_tables, synonym_items

if TYPE_CHECKING:
    from ..checkpoint.finetune import CheckpointOwn

__all__ = ["resolve_instruct", "check_instruct_text"]

MAX_INSTRUCT_TEXT = 500  # characters of a verbatim instruct (--instruct-text)
_BAD_TEXT_RE = re.compile(r"[\x00-\x1f\x7f]|<\||\|>")  # control characters, the model's marker tokens


def _suggestion(raw: str, n: str, t: InstructTables) -> str:
    """How an unknown --instruct item is named in the error: with the close item or synonym, else
    the items a longer phrase holds."""
    synonyms = phrase_tables().synonyms
    sug = difflib.get_close_matches(n, [*t.all_valid, *synonyms], n=1, cutoff=0.6)
    if sug:
        meant = f"'{sug[0]}'" + (f", read as '{', '.join(synonyms[sug[0]])}'" if sug[0] in synonyms else "")
        return f"'{raw}' (did you mean {meant}?)"
    if len(raw) <= 200:
        items = list(dict.fromkeys(x for p in find_instruct_phrases(raw) if not p.negated for x in p.items))
        if items:
            return f"'{raw}' (did you mean '{', '.join(items)}'? give items separated by commas)"
    return f"'{raw}'"


def check_instruct_text(text: str | None, own: CheckpointOwn | None = None) -> tuple[str | None, str | None]:
    """A verbatim instruct (--instruct-text, a fine-tune's speaker name): (the text, stripped, or
    None when blank; a warning unless the checkpoint declares it as its own item). It is given
    to the model as is: one line of at most MAX_INSTRUCT_TEXT characters, no marker tokens."""
    if text is None or not text.strip():
        return None, None
    text = text.strip()
    if len(text) > MAX_INSTRUCT_TEXT or _BAD_TEXT_RE.search(text):
        raise InvalidRequest(
            f"'{text[:60]}' is not allowed: one line of at most {MAX_INSTRUCT_TEXT} characters, "
            "without control characters or '<|' '|>'",
            "instruct_text",
        )
    if own is not None and own.instruct_item(text) is not None:
        return text, None
    return text, (
        f"instruct text '{text[:60]}' is given to the model verbatim: the base OmniVoice model does not know it "
        "(only a fine-tune trained on it does)"
    )


def resolve_instruct(instruct: str | None, use_zh: bool = False, own: CheckpointOwn | None = None) -> str | None:
    """Validate and normalise a voice-design instruct string, as the reference does.

    Items are split on ',' and '，', stripped and lowercased; each must be in the vocabulary, or
    be one of its synonyms ('woman', 'deep', `data/instruct_synonyms.json`), which stands for its
    items. A dialect forces Chinese and an accent forces English (both: error); otherwise `use_zh`
    (the target text contains Chinese) decides. Items are mapped to that language and joined
    with ', ' (English) or '，' (Chinese). Two items of one category are an error. A fine-tuned
    checkpoint's own items (`own`, engine/checkpoint/finetune.py) are taken too, in its spelling.
    Returns None for None or a blank string. Raises `InvalidRequest` with a one-line message.
    """
    if instruct is None:
        return None
    instruct_str = instruct.strip()
    if not instruct_str:
        return None
    t = instruct_tables()
    valid = set(t.all_valid)

    raw_items = [x for x in re.split(r"\s*[,，]\s*", instruct_str) if x]
    if len(raw_items) > MAX_INSTRUCT_ITEMS + (min(len(own.instructs), 8) if own else 0):
        raise InvalidRequest(
            f"instruct has {len(raw_items)} items: at most one per category ({len(t.categories)} categories: "
            "gender, age, pitch, style, accent, dialect; run `omnivoice instructs` for the list)"
        )
    normalised: list[str] = []
    origin: dict[int, str] = {}  # index in normalised -> the synonym it came from
    unknown: list[str] = []
    for raw in raw_items:
        n = raw.strip().lower()
        if n in valid:
            normalised.append(n)
            continue
        mine = own.instruct_item(n) if own else None
        if mine is not None:
            normalised.append(mine)
            continue
        items = synonym_items(n)
        if items:
            origin.update({len(normalised) + i: raw.strip() for i in range(len(items))})
            normalised.extend(items)
            continue
        unknown.append(_suggestion(raw, n, t))
    if unknown:
        more = f"; and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InvalidRequest(
            f"unsupported instruct item{'s' if len(unknown) > 1 else ''} in '{instruct_str[:200]}': "
            + "; ".join(unknown[:5])
            + more
            + ". Use only English items joined by ', ' or only Chinese items joined by '，' "
            "(run `omnivoice instructs` for the list)."
            + (f" This checkpoint's own items: {', '.join(own.instructs[:20])}." if own and own.instructs else "")
        )
    return _finish_instruct(instruct_str, normalised, origin, use_zh)


def _finish_instruct(instruct_str: str, normalised: list[str], origin: dict[int, str], use_zh: bool) -> str:
    """The items' language (a dialect forces Chinese, an accent English), then one item a category."""
    t = instruct_tables()
    has_dialect = any(n.endswith("话") for n in normalised)
    has_accent = any(" accent" in n for n in normalised)
    if has_dialect and has_accent:
        raise InvalidRequest(
            f"instruct '{instruct_str}' mixes a Chinese dialect and an English accent: "
            "dialects are for Chinese speech, accents for English speech; use one of them."
        )
    if has_dialect:
        use_zh = True
    elif has_accent:
        use_zh = False

    if use_zh:
        normalised = [t.en_to_zh.get(n, n) for n in normalised]
    else:
        normalised = [t.zh_to_en.get(n, n) for n in normalised]

    conflicts = []
    for cat in t.exclusive:
        hits = [(i, n) for i, n in enumerate(normalised) if n in cat]
        if len(hits) > 1:
            conflicts.append(" vs ".join(f"'{x}'" + (f" (from '{origin[i]}')" if i in origin else "") for i, x in hits))
    if conflicts:
        raise InvalidRequest(
            "conflicting instruct items within the same category: "
            + "; ".join(conflicts)
            + ". Each category (gender, age, pitch, style, accent, dialect) allows at most one item."
        )

    has_zh = any(ZH_RE.search(n) for n in normalised)
    return ("，" if has_zh else ", ").join(normalised)
