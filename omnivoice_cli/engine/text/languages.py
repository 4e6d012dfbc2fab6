"""Languages: the codes and names people use, mapped to the model's 646 language ids.

`resolve_language` first does exactly what the reference does (a model id as is, case-sensitive;
a name from `data/languages.json` in any case), so every input the reference accepts gives the
same id. Only what the reference rejects goes further:

1. other names, normalised like language_data does (case, '-', parentheses, commas): English
   names and autonyms from `data/language_aliases.json` ('Mandarin', 'Farsi', 'Deutsch', '中文');
2. a BCP-47 tag or ISO 639-1/2/3 code, parsed by `langcodes` ('en-US', 'pt_BR', 'zh-Hant',
   'eng', 'fre', 'ger', 'cmn'): a region whose spoken variety the model has goes to it
   (`data/language_regions.json`, each row with its source: 'ar-EG' -> 'arz', 'zh-HK' -> 'yue',
   'pa-PK' -> 'pnb'; a deliberate difference from the reference, which knows no tags); else its
   language subtag, else its macrolanguage, else the one model language under that
   macrolanguage ('ne' -> 'npi'). A plain 'ar' stays 'arb' and 'zh' stays 'zh'; another region
   or script falls back to the language without a word;
3. else a warning (with a did-you-mean when a name is close) and no language, as the reference.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..checkpoint.finetune import CheckpointOwn

__all__ = ["resolve_language", "unknown_language", "list_languages", "language_display_name", "language_regions"]

# Names whose display form is not `str.title()` (the reference's `lang_map._TITLE_EXCEPTIONS`).
_TITLE_EXCEPTIONS = {
    "fe'fe'": "Fe'fe'",
    "dũya": "Dũya",
    "santiago del estero quichua": "Santiago del Estero Quichua",
    "santa ana de tusi pasco quechua": "Santa Ana de Tusi Pasco Quechua",
    "malinaltepec me'phaa": "Malinaltepec Me'phaa",
    "tlacoapa me'phaa": "Tlacoapa Me'phaa",
}

_FALLBACK = "Falling back to None (language-agnostic mode)."


def _read(name: str) -> dict:
    raw = resources.files("omnivoice_cli").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    return json.loads(raw)


@lru_cache(maxsize=None)
def _lang_tables() -> tuple[dict[str, str], frozenset[str]]:
    name_to_id: dict[str, str] = _read("languages.json")["name_to_id"]  # lowercase name -> id
    return name_to_id, frozenset(name_to_id.values())


@lru_cache(maxsize=None)
def _alias_tables() -> tuple[dict[str, str], dict[str, list[str]]]:
    """(normalised name -> id, including the model's own names; macrolanguage -> member ids)."""
    name_to_id, _ = _lang_tables()
    data = _read("language_aliases.json")
    names = {_norm_name(k): v for k, v in name_to_id.items()}
    names.update(data["aliases"])
    return names, data["macro_members"]


@lru_cache(maxsize=None)
def _region_table() -> dict[str, tuple[str, str]]:
    """BCP-47 tag ('ar-EG', 'pa-Arab') -> (model id, source of the row)."""
    _, ids = _lang_tables()
    rows = _read("language_regions.json")["regions"]
    return {tag: (row["id"], row["source"]) for tag, row in rows.items() if row["id"] in ids}


def language_regions() -> list[tuple[str, str, str]]:
    """The regions (and scripts) whose spoken variety the model has: (tag, model id, source), by tag."""
    return [(tag, code, source) for tag, (code, source) in sorted(_region_table().items())]


def _norm_name(name: str) -> str:
    """A name as a lookup key: casefolded, ’ as ', '-' as a space, no parentheses or commas."""
    key = name.casefold().replace("’", "'").replace("-", " ")
    key = re.sub(r"[(),]", "", key)
    return " ".join(key.split())


def language_display_name(name: str) -> str:
    """Display form of a lowercase language name ('english' -> 'English')."""
    return _TITLE_EXCEPTIONS.get(name, name.title())


@lru_cache(maxsize=None)
def _id_to_display() -> dict[str, str]:
    name_to_id, _ = _lang_tables()
    return {code: language_display_name(name) for name, code in name_to_id.items()}


def _from_tag(text: str) -> tuple[str | None, list[str]]:
    """(model id, []) for a BCP-47 tag / ISO 639 code the model covers; (None, ids) when it is a
    macrolanguage with several model languages under it; (None, []) otherwise."""
    import langcodes  # ~30 ms, only for inputs the plain tables do not know

    tag = text.strip().split(".")[0].split("@")[0].replace("_", "-")  # also 'en_US.UTF-8'
    if not tag or not re.fullmatch(r"[A-Za-z0-9-]+", tag):
        return None, []
    try:
        parsed = langcodes.Language.get(tag, normalize=True)
    except (ValueError, LookupError):  # LanguageTagError is a ValueError
        return None, []
    lang = parsed.language
    if not lang:
        return None, []
    regions = _region_table()
    for sub in (parsed.territory, parsed.script):  # 'zh-Hant-HK' and 'ar_EG.UTF-8' too
        if sub and f"{lang}-{sub}" in regions:
            return regions[f"{lang}-{sub}"][0], []
    _, ids = _lang_tables()
    _, macro_members = _alias_tables()
    for cand in dict.fromkeys((lang, langcodes.standardize_tag(lang, macro=True))):
        if cand in ids:
            return cand, []
        members = macro_members.get(cand, [])
        if len(members) == 1:
            return members[0], []
        if members:
            return None, members
    return None, []


def _did_you_mean(text: str) -> str | None:
    """The closest known language name to `text` (a typo), as "'English' (en)", or None."""
    key = _norm_name(text)
    if len(key) < 4:  # short strings are codes: a near code is a different language
        return None
    names, _ = _alias_tables()
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.8)
    if not close:
        return None
    code = names[close[0]]
    return f"'{_id_to_display()[code]}' ({code})"


def unknown_language(lang: str | None, own: CheckpointOwn | None = None) -> str | None:
    """Why `lang` is refused, in one line, where it names none of the model's languages (where the
    reference warns and speaks language-agnostic): with a did-you-mean for a near miss. None for
    one of its languages, and for None and "none" (asked for language-agnostic)."""
    code, warning = resolve_language(lang, own)
    if code is not None or warning is None or lang is None:
        return None
    listed = "`omnivoice languages` lists them; none speaks any language"
    hint = _did_you_mean(lang)
    if hint:
        return f"unknown language '{lang}': did you mean {hint}? ({listed})"
    if warning.startswith(f"Language '{lang}' covers several"):
        return warning.replace(f" {_FALLBACK}", "").replace(f"Language '{lang}'", f"'{lang}'") + f" ({listed})"
    return f"unknown language '{lang}': give a code (en), a tag (en-US) or a name (English); {listed}"


def resolve_language(lang: str | None, own: CheckpointOwn | None = None) -> tuple[str | None, str | None]:
    """Map a language code, tag or name to the model's language id.

    A fine-tuned checkpoint's own languages (`own`, engine/checkpoint/finetune.py) come first: their id or
    name gives their id, with a note when the base model reads the same code as another language
    ('sa': the checkpoint's Saudi dialect, not ISO 639-1 Sanskrit).

    Returns (id or None, warning or None). None / "none" gives (None, None). What the reference
    accepts gives the reference's id; tags, ISO 639 codes and other names map as the module
    docstring says; anything else gives (None, warning): the reference too warns and goes on in
    language-agnostic mode. The warning names the input and, for a near miss, a did-you-mean.
    """
    if lang is None or lang.lower() == "none":
        return None, None
    mine = own.language(lang) if own else None
    if mine is not None:
        return mine[0], _collision(lang, mine)
    name_to_id, ids = _lang_tables()
    if lang in ids:
        return lang, None
    code = name_to_id.get(lang.lower())
    if code is not None:
        return code, None
    names, _ = _alias_tables()
    code = names.get(_norm_name(lang))
    if code is not None:
        return code, None
    code, several = _from_tag(lang)
    if code is not None:
        return code, None
    if several:
        listed = ", ".join(f"'{c}' ({_id_to_display()[c]})" for c in several)
        return None, (
            f"Language '{lang}' covers several of the model's languages: {listed}; use one of them. " + _FALLBACK
        )
    hint = _did_you_mean(lang)
    if hint:
        return None, f"Language '{lang}' is not recognized (did you mean {hint}?). {_FALLBACK}"
    return None, (
        f"Language '{lang}' is not recognized. Use a language code (e.g. 'en', 'zh', 'ja', 'de'), "
        f"a tag (e.g. 'en-US') or a language name (e.g. 'English', 'Chinese', 'Japanese'). {_FALLBACK}"
    )


def _collision(lang: str, mine: tuple[str, str]) -> str | None:
    """The note when the base model reads `lang` as another language than the checkpoint's."""
    base, _ = resolve_language(lang)
    if base is None:
        return None
    return (
        f"language '{lang}' is this checkpoint's own '{mine[1]}' ({mine[0]}), "
        f"not the base model's {_id_to_display().get(base, base)} ({base})"
    )


def list_languages(filter: str | None = None) -> list[tuple[str, str]]:
    """The model's languages as (id, display name), sorted by display name.

    With `filter`, only those whose id or name contains it (case-insensitive), plus the language
    it resolves to as a code, tag or name ('eng', 'Deutsch', 'pt-BR').
    """
    shown = _id_to_display()
    rows = sorted(shown.items(), key=lambda cn: (cn[1].lower(), cn[0]))
    if filter is None or not filter.strip():
        return rows
    word = filter.strip().casefold()
    hit, _ = resolve_language(filter.strip())
    return [(c, n) for c, n in rows if word in c.casefold() or word in n.casefold() or c == hit]
