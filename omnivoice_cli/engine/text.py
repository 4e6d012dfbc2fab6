"""Everything about text: tokenizer, languages, voice-design instructs, canvas text, durations, chunks.

These are small pure functions that reproduce the reference (omnivoice 0.2.1) exactly:

- `TextTokenizer`: the Qwen2 byte-level BPE from the checkpoint's `tokenizer.json`.
- `resolve_language`, `list_languages`: language codes, tags and names (from `languages.py`).
- `resolve_instruct`, `instruct_vocabulary`: voice-design instructs (`data/instruct.json`), with
  everyday synonyms (`data/instruct_synonyms.json`) and `find_instruct_phrases` for free text.
- `combine_text`, `tokenize_with_nonverbal_tags`, `add_punctuation`: the canvas text.
- `estimate_target_tokens`, `resolve_target_len`: how many audio frames to generate
  (`data/duration.json`); `speech_seconds`, `check_ref_transcript`: a transcript's speaking time
  against its recording's length.
- `check_text`: the one check of a text to speak (valid Unicode, something to say); `is_blank`.
- `chunk_text`, `chunk_len_for`: splitting long text (`data/text.json`); `cut_to_length`: cutting a
  stretch without sentence punctuation at words (else characters) so no generation exceeds its bound.

Tables are read from the package's `data/` folder with `importlib.resources`.
"""

from __future__ import annotations

import bisect
import difflib
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .errors import CheckpointError, InvalidRequest
from .languages import language_display_name, list_languages, resolve_language  # re-exported

__all__ = [
    "MARKER_TOKENS",
    "TextTokenizer",
    "resolve_language",
    "list_languages",
    "language_display_name",
    "contains_chinese",
    "resolve_instruct",
    "instruct_vocabulary",
    "instruct_synonyms",
    "instruct_category",
    "find_instruct_phrases",
    "InstructPhrase",
    "InstructCategory",
    "combine_text",
    "tokenize_with_nonverbal_tags",
    "add_punctuation",
    "text_weight",
    "estimate_duration",
    "estimate_target_tokens",
    "resolve_target_len",
    "chunk_len_for",
    "chunk_text",
    "is_sentence_break",
    "cut_to_length",
    "speech_seconds",
    "check_ref_transcript",
]


@lru_cache(maxsize=None)
def _table(name: str) -> dict:
    """One json table from the package's data folder (read once)."""
    raw = resources.files("omnivoice_cli").joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(raw)


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

# The seven OmniVoice markers, added tokens of the checkpoint's tokenizer (ids 151669..151675
# in the real one).
MARKER_TOKENS: tuple[str, ...] = (
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
)


class TextTokenizer:
    """The checkpoint's text tokenizer (`tokenizer.json`, Qwen2-style byte-level BPE).

    The reference calls a transformers `Qwen2Tokenizer`; this tokenizer has no bos token and its
    post-processor adds nothing, so both its normal call and `add_special_tokens=False` give
    the plain ids that `encode` returns. Added tokens (the markers) are matched in the input
    text and come out as single ids.
    """

    def __init__(self, tokenizer, source: str = "<memory>") -> None:
        self._tok = tokenizer  # a tokenizers.Tokenizer
        self.source = source
        self._special: dict[str, int] = {}
        for marker in MARKER_TOKENS:
            tid = tokenizer.token_to_id(marker)
            if tid is None:
                raise CheckpointError(f"{source}: the tokenizer lacks the OmniVoice marker token {marker}")
            if tokenizer.encode(marker, add_special_tokens=False).ids != [tid]:
                raise CheckpointError(
                    f"{source}: the marker {marker} is not an added token (it does not encode to its single id {tid})"
                )
            self._special[marker] = tid

    @classmethod
    def from_file(cls, path: str | Path) -> "TextTokenizer":
        """Load `tokenizer.json`; `CheckpointError` if it is missing, corrupt, or lacks the markers."""
        from tokenizers import Tokenizer

        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"checkpoint file missing: {path}")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise CheckpointError(f"cannot read tokenizer {path}: {e}") from None
        return cls(tok, source=str(path))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no special tokens added (markers in the text are single ids)."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def special_id(self, name: str) -> int:
        """Id of a marker, given as '<|lang_start|>' or 'lang_start'."""
        key = name if name.startswith("<|") else f"<|{name}|>"
        try:
            return self._special[key]
        except KeyError:
            tid = self._tok.token_to_id(key)
            if tid is None:
                raise KeyError(f"unknown special token {name!r}") from None
            return tid

    @property
    def vocab_size(self) -> int:
        """Size of the vocabulary including added tokens."""
        return self._tok.get_vocab_size(with_added_tokens=True)


# --------------------------------------------------------------------------------------------
# A text to speak: the one check (say, batch lines, dub cues, the server's input)
# --------------------------------------------------------------------------------------------

# Characters with nothing to say on their own: whitespace and separators, control and format
# characters (zero-width space and joiners, BOM, word joiner, bidi marks), lone surrogates, and
# combining marks without a letter to sit on.
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Mn", "Mc", "Me"})
_SHOWN_CHARS = 3  # characters a message names


def unicode_problem(text: str) -> str | None:
    """Why `text` is not valid Unicode, or None: a lone surrogate (U+D800..U+DFFF), which is what
    a JSON escape such as \\ud800 or bytes that are not UTF-8 (a command-line argument, read with
    surrogateescape) become; no encoder or tokenizer takes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"not valid Unicode: character {e.start + 1} is U+{ord(text[e.start]):04X}, a lone surrogate "
            "(half of a UTF-16 pair, or a byte that is not UTF-8)"
        )
    return None


def is_blank(text: str) -> bool:
    """True when `text` has nothing to speak: only whitespace, invisible (zero-width, format) or
    control characters and combining marks (what `str.strip` alone leaves, such as U+200B)."""
    return all(unicodedata.category(ch) in _BLANK_CATEGORIES for ch in text)


def has_words(text: str) -> bool:
    """True when `text` holds a letter or a digit (of any script)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def _named_chars(text: str) -> str:
    seen = list(dict.fromkeys(ch for ch in text if not ch.isspace()))
    shown = [f"U+{ord(ch):04X} {unicodedata.name(ch, '')}".strip() for ch in seen[:_SHOWN_CHARS]]
    return ", ".join(shown) + (", ..." if len(seen) > _SHOWN_CHARS else "")


def check_text(text: str) -> None:
    """The text of a request can be spoken: InvalidRequest (about the setting "text") when it is
    not a string, not valid Unicode, or has nothing to speak (empty, whitespace, only invisible or
    control characters)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("text is empty: give some text to speak", "text")
    problem = unicode_problem(text)
    if problem:
        raise InvalidRequest(f"text is {problem}: give UTF-8 text", "text")
    if is_blank(text):
        raise InvalidRequest(
            f"text is empty: it has only invisible or control characters ({_named_chars(text)}): "
            "give some text to speak",
            "text",
        )


def wordless_warning(text: str) -> str | None:
    """A warning when `text` (checked, pause tags out) has no letter or digit: only punctuation or
    symbols such as emoji, which the model has no words for."""
    if has_words(text):
        return None
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 20 else shown[:20] + "..."
    return f"text {shown!r} has no letters or digits, only punctuation or symbols: it may not come out as speech"


# --------------------------------------------------------------------------------------------
# Voice-design instructs
# --------------------------------------------------------------------------------------------

_ZH_RE = re.compile(r"[\u4e00-\u9fff]")  # CJK Unified Ideographs: "the text is Chinese"
MAX_INSTRUCT_ITEMS = 12  # more items than this cannot be valid (one per category): refused before any lookup


def contains_chinese(text: str | None) -> bool:
    """True when `text` holds a CJK ideograph (U+4E00..U+9FFF), the reference's `_ZH_RE` test."""
    return bool(text and _ZH_RE.search(text))


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
class _InstructTables:
    categories: tuple[InstructCategory, ...]
    en_to_zh: dict[str, str]
    zh_to_en: dict[str, str]
    exclusive: tuple[frozenset[str], ...]  # one set per category
    all_valid: tuple[str, ...]  # sorted


@lru_cache(maxsize=None)
def _instruct_tables() -> _InstructTables:
    data = _table("instruct.json")
    cats: list[InstructCategory] = []
    en_to_zh: dict[str, str] = {}
    for name, cat in zip(data["names"], data["categories"]):
        if "en_to_zh" in cat:
            pairs = tuple((en, zh) for en, zh in cat["en_to_zh"].items())
            en_to_zh.update(cat["en_to_zh"])
        else:
            pairs = tuple(((it, None) if not _ZH_RE.search(it) else (None, it)) for it in cat["items"])
        cats.append(InstructCategory(name=name, pairs=pairs))
    zh_to_en = {zh: en for en, zh in en_to_zh.items()}
    exclusive = tuple(frozenset(c.items) for c in cats)
    all_valid = tuple(sorted(frozenset().union(*exclusive)))
    return _InstructTables(tuple(cats), en_to_zh, zh_to_en, exclusive, all_valid)


def instruct_vocabulary() -> tuple[InstructCategory, ...]:
    """The voice-design vocabulary by category (gender, age, pitch, style, accent, dialect)."""
    return _instruct_tables().categories


# Everyday words for the items (`data/instruct_synonyms.json`): --instruct takes one as an item,
# and `find_instruct_phrases` finds them (and the items) in free text.
_EN_ITEM_RE = re.compile(r"[a-z]+(?:[\s-]+[a-z]+)*")  # an English item as it may be written
_SCAN_RE = re.compile(r"[A-Za-z]+|[\u4e00-\u9fff]+")  # English words and runs of Chinese
_GAP_RE = re.compile(r"[\s-]+")  # what may stand between the words of one phrase
_CLAUSE_RE = re.compile(r"[,.;:!?，。；：！？]")  # ends a negation's reach
_NEGATIONS_EN = frozenset(
    {"not", "no", "never", "without", "don", "doesn", "didn", "isn", "aren", "wasn", "won", "nor", "avoid", "non"}
)
_CLAUSE_WORDS_EN = frozenset({"but", "and", "or", "yet", "instead", "rather", "than"})
_NEGATIONS_ZH = ("不要太", "不要", "不是", "不用", "不太", "别太", "没有", "不", "别", "无")
NEGATION_REACH = 4  # English words before a phrase that a negation may stand in


def _en_key(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[a-z]+", text.lower()))


@dataclass(frozen=True)
class _PhraseTables:
    en: dict[tuple[str, ...], tuple[str, ...]]  # words -> items (an empty tuple: a phrase passed over)
    zh: dict[str, tuple[str, ...]]
    synonyms: dict[str, tuple[str, ...]]  # every synonym as written in the table -> its items
    longest_en: int  # words in the longest English phrase
    longest_zh: int  # characters in the longest Chinese phrase


@lru_cache(maxsize=None)
def _phrase_tables() -> _PhraseTables:
    t = _instruct_tables()
    data = _table("instruct_synonyms.json")
    valid = set(t.all_valid)

    def items_of(value: str, where: str) -> tuple[str, ...]:
        items = tuple(x for x in re.split(r"\s*[,，]\s*", value) if x)
        bad = [x for x in items if x not in valid]
        if bad or not items:
            raise CheckpointError(f"instruct_synonyms.json: {where!r} names {bad or value!r}, not vocabulary items")
        return items

    synonyms = {k: items_of(v, k) for k, v in {**data["en"], **data["zh"]}.items()}
    for cat in t.categories:  # '<place>口音' and '<place>方言' for each dialect '<place>话'
        for _, zh in cat.pairs:
            if zh and zh.endswith("话") and cat.pairs[0][0] is None:
                synonyms.update({zh[:-1] + "口音": (zh,), zh[:-1] + "方言": (zh,)})
    en: dict[tuple[str, ...], tuple[str, ...]] = {_en_key(k): () for k in data.get("en_skip", ())}
    zh: dict[str, tuple[str, ...]] = {}
    for phrase, items in [*((x, (x,)) for x in t.all_valid), *synonyms.items()]:
        if _ZH_RE.search(phrase):
            zh[phrase] = items
        else:
            en[_en_key(phrase)] = items
    return _PhraseTables(en, zh, synonyms, max(map(len, en)), max(map(len, zh)))


def instruct_synonyms() -> dict[str, tuple[str, ...]]:
    """Everyday words for the voice-design items: 'woman' -> ('female',), 'girl' -> ('female', 'child')."""
    return dict(_phrase_tables().synonyms)


def instruct_category(item: str) -> str | None:
    """The category name of a vocabulary item ('gender' for 'male' and '男'), None if it is none."""
    for cat in _instruct_tables().categories:
        if item in cat.items:
            return cat.name
    return None


def _synonym_items(item: str) -> tuple[str, ...] | None:
    """The items an --instruct item names by one of the table's phrases (spaces and hyphens aside)."""
    t = _phrase_tables()
    if _ZH_RE.search(item):
        return t.zh.get(item) or None
    if _EN_ITEM_RE.fullmatch(item):
        return t.en.get(_en_key(item)) or None
    return None


@dataclass(frozen=True)
class InstructPhrase:
    """A voice-design phrase found in free text (`find_instruct_phrases`)."""

    text: str  # as written
    items: tuple[str, ...]  # the vocabulary items it names
    start: int  # where it is in the text
    negated: bool  # "not", "don't", "不要" ... just before it (in the same clause)


def find_instruct_phrases(text: str) -> list[InstructPhrase]:
    """Every vocabulary item and synonym in free text, in order: whole English words (longest phrase
    first; case, spaces and hyphens aside), Chinese anywhere. Phrases that merely look like one
    ('10 years old', 'a deep breath') are passed over. No choice is made between what is found."""
    t = _phrase_tables()
    tokens = list(_SCAN_RE.finditer(text))
    words = [(i, m.group().lower()) for i, m in enumerate(tokens) if not _ZH_RE.match(m.group())]
    found: list[InstructPhrase] = []
    w = 0
    while w < len(words):
        for k in range(min(t.longest_en, len(words) - w), 0, -1):
            run = words[w : w + k]
            idx = [i for i, _ in run]
            if idx != list(range(idx[0], idx[0] + k)) or any(
                not _GAP_RE.fullmatch(text[tokens[a].end() : tokens[a + 1].start()]) for a in idx[:-1]
            ):
                continue
            items = t.en.get(tuple(word for _, word in run))
            if items is not None:
                if items:
                    start, end = tokens[idx[0]].start(), tokens[idx[-1]].end()
                    found.append(InstructPhrase(text[start:end], items, start, _negated_en(text, tokens, idx[0])))
                w += k
                break
        else:
            w += 1
    for m in tokens:
        if _ZH_RE.match(m.group()):
            found += _chinese_phrases(m.group(), m.start(), t)
    return sorted(found, key=lambda p: p.start)


def _negated_en(text: str, tokens: list, first: int) -> bool:
    i = first
    for _ in range(NEGATION_REACH):
        if i == 0 or _CLAUSE_RE.search(text[tokens[i - 1].end() : tokens[i].start()]):
            return False
        i -= 1
        word = tokens[i].group().lower()
        if word in _NEGATIONS_EN:
            return True
        if word in _CLAUSE_WORDS_EN or _ZH_RE.match(word):
            return False
    return False


def _chinese_phrases(run: str, offset: int, t: _PhraseTables) -> list[InstructPhrase]:
    out = []
    j = 0
    while j < len(run):
        for k in range(min(t.longest_zh, len(run) - j), 0, -1):
            items = t.zh.get(run[j : j + k])
            if items:
                out.append(InstructPhrase(run[j : j + k], items, offset + j, run[:j].endswith(_NEGATIONS_ZH)))
                j += k
                break
        else:
            j += 1
    return out


def _suggestion(raw: str, n: str, t: _InstructTables) -> str:
    """How an unknown --instruct item is named in the error: with the close item or synonym, else
    the items a longer phrase holds."""
    synonyms = _phrase_tables().synonyms
    sug = difflib.get_close_matches(n, [*t.all_valid, *synonyms], n=1, cutoff=0.6)
    if sug:
        meant = f"'{sug[0]}'" + (f", read as '{', '.join(synonyms[sug[0]])}'" if sug[0] in synonyms else "")
        return f"'{raw}' (did you mean {meant}?)"
    if len(raw) <= 200:
        items = list(dict.fromkeys(x for p in find_instruct_phrases(raw) if not p.negated for x in p.items))
        if items:
            return f"'{raw}' (did you mean '{', '.join(items)}'? give items separated by commas)"
    return f"'{raw}'"


def resolve_instruct(instruct: str | None, use_zh: bool = False) -> str | None:
    """Validate and normalise a voice-design instruct string, as the reference does.

    Items are split on ',' and '，', stripped and lowercased; each must be in the vocabulary, or
    be one of its synonyms ('woman', 'deep', `data/instruct_synonyms.json`), which stands for its
    items. A dialect forces Chinese and an accent forces English (both: error); otherwise `use_zh`
    (the target text contains Chinese) decides. Items are mapped to that language and joined
    with ', ' (English) or '，' (Chinese). Two items of one category are an error.
    Returns None for None or a blank string. Raises `InvalidRequest` with a one-line message.
    """
    if instruct is None:
        return None
    instruct_str = instruct.strip()
    if not instruct_str:
        return None
    t = _instruct_tables()
    valid = set(t.all_valid)

    raw_items = [x for x in re.split(r"\s*[,，]\s*", instruct_str) if x]
    if len(raw_items) > MAX_INSTRUCT_ITEMS:
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
        items = _synonym_items(n)
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
        )
    return _finish_instruct(instruct_str, normalised, origin, use_zh)


def _finish_instruct(instruct_str: str, normalised: list[str], origin: dict[int, str], use_zh: bool) -> str:
    """The items' language (a dialect forces Chinese, an accent English), then one item a category."""
    t = _instruct_tables()
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

    has_zh = any(_ZH_RE.search(n) for n in normalised)
    return ("，" if has_zh else ", ").join(normalised)


# --------------------------------------------------------------------------------------------
# Canvas text
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _nonverbal_re() -> re.Pattern:
    return re.compile(_table("text.json")["nonverbal_tags"])


_CJK_SPACE_RE = re.compile(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])")


def combine_text(text: str, ref_text: str | None = None) -> str:
    """The text of the canvas: ref_text.strip() + ' ' + text.strip() (or text.strip()), cleaned.

    Cleaning: drop \\r and \\n, map full-width parentheses to ASCII, collapse runs of
    spaces/tabs to one space, remove whitespace next to CJK ideographs (U+4E00..U+9FFF).
    """
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return _CJK_SPACE_RE.sub("", full)


def tokenize_with_nonverbal_tags(tokenizer: TextTokenizer, text: str) -> list[int]:
    """Token ids of `text`, each non-verbal tag (e.g. '[laughter]') and each stretch between
    tags tokenized on its own, so a tag gets the same ids whatever surrounds it."""
    ids: list[int] = []
    last = 0
    for m in _nonverbal_re().finditer(text):
        if m.start() > last:
            ids.extend(tokenizer.encode(text[last : m.start()]))
        ids.extend(tokenizer.encode(m.group()))
        last = m.end()
    if last < len(text):
        ids.extend(tokenizer.encode(text[last:]))
    return ids


@lru_cache(maxsize=None)
def _punct_sets() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    t = _table("text.json")
    return (
        frozenset(t["split_punctuation"]),
        frozenset(t["closing_marks"]),
        frozenset(t["end_punctuation"]),
        frozenset(t["abbreviations"]),
    )


def add_punctuation(text: str) -> str:
    """Strip `text` and end it with '.' ('。' if it holds CJK) unless it already ends with
    punctuation from data/text.json end_punctuation (the reference-text rule)."""
    text = text.strip()
    if not text:
        return text
    if text[-1] not in _punct_sets()[2]:
        text += "。" if contains_chinese(text) else "."
    return text


# --------------------------------------------------------------------------------------------
# Duration
# --------------------------------------------------------------------------------------------

_DEFAULT_REF_TEXT = "Nice to meet you."  # yardstick without a reference ...
_DEFAULT_REF_FRAMES = 25  # ... spoken in 25 frames (1 s)


@lru_cache(maxsize=None)
def _duration_tables() -> tuple[dict[str, float], list[int], list[str]]:
    d = _table("duration.json")
    ranges = [(int(end, 16), script) for end, script in d["ranges_end_codepoint_to_script"]]
    return d["weights"], [e for e, _ in ranges], [s for _, s in ranges]


@lru_cache(maxsize=8192)
def _char_weight(ch: str) -> float:
    """Relative speaking time of one character (1.0 = one Latin letter)."""
    weights, ends, scripts = _duration_tables()
    code = ord(ch)
    if 65 <= code <= 90 or 97 <= code <= 122:
        return weights["latin"]
    if code == 32:
        return weights["space"]
    if code == 0x0640:  # Arabic tatweel is silent
        return weights["mark"]
    cat = unicodedata.category(ch)
    if cat[0] == "M":
        return weights["mark"]
    if cat[0] in "PS":
        return weights["punctuation"]
    if cat[0] == "Z":
        return weights["space"]
    if cat[0] == "N":
        return weights["digit"]
    idx = bisect.bisect_left(ends, code)
    if idx < len(ends):
        return weights.get(scripts[idx], weights["default"])
    if code > 0x20000:  # CJK extensions and other upper planes
        return weights["cjk"]
    return weights["default"]


def text_weight(text: str) -> float:
    """Sum of the character weights of `text`."""
    return sum(_char_weight(c) for c in text)


def estimate_duration(
    text: str, ref_text: str, ref_frames: float, low_threshold: float | None = 50, boost_strength: float = 3
) -> float:
    """Rule-based estimate of `text`'s length in frames, scaled by ref_text spoken in ref_frames.

    Estimates under `low_threshold` are boosted: low * (est/low) ** (1/boost_strength).
    Returns 0.0 when the reference is empty, weightless or has no frames.
    """
    if ref_frames <= 0 or not ref_text:
        return 0.0
    ref_weight = text_weight(ref_text)
    if ref_weight == 0:
        return 0.0
    est = text_weight(text) / (ref_weight / ref_frames)
    if low_threshold is not None and est < low_threshold:
        return low_threshold * (est / low_threshold) ** (1.0 / boost_strength)
    return est


def estimate_target_tokens(text: str, ref_text: str | None, num_ref_tokens: int | None, speed: float = 1.0) -> int:
    """Frames to generate for `text`: max(1, int(estimate / speed)).

    Without a reference (no ref_text, empty ref_text or no ref frames) the yardstick is
    "Nice to meet you." in 25 frames. speed <= 0 or == 1 leaves the estimate as is.
    """
    if num_ref_tokens is None or ref_text is None or len(ref_text) == 0:
        ref_text, num_ref_tokens = _DEFAULT_REF_TEXT, _DEFAULT_REF_FRAMES
    est = estimate_duration(text, ref_text, num_ref_tokens)
    if speed > 0 and speed != 1.0:
        est = est / speed
    return max(1, int(est))


def speech_seconds(text: str) -> float:
    """How long `text` takes to say, in seconds, by the duration estimator at its plain rate
    ("Nice to meet you." in 1 s; no short-text boost: that one gives a target room, not a time)."""
    return estimate_duration(text, _DEFAULT_REF_TEXT, _DEFAULT_REF_FRAMES, low_threshold=None) / _DEFAULT_REF_FRAMES


def check_ref_transcript(ref_text: str | None, ref_seconds: float, max_ratio: float = 2.0) -> str | None:
    """A warning when a reference transcript and its prepared recording disagree in length.

    The transcript's speaking time (`speech_seconds`) and `ref_seconds` (the recording after
    preparation) differing by more than `max_ratio` either way usually means a partial or wrong
    transcript, which makes the target length estimate (scaled by the reference) far off.
    Returns None when they agree, or when there is no transcript or no recording to compare.
    """
    if not ref_text or not ref_text.strip() or not ref_seconds > 0:
        return None
    est = speech_seconds(ref_text)
    if est <= 0:
        return None
    if ref_seconds > max_ratio * est:
        return (
            f"the reference transcript reads as about {est:.1f} s but the recording is {ref_seconds:.1f} s: "
            "is the transcript complete?"
        )
    if est > max_ratio * ref_seconds:
        return (
            f"the reference transcript reads as about {est:.1f} s but the recording is only "
            f"{ref_seconds:.1f} s: is it the transcript of this recording?"
        )
    return None


def _check_positive(name: str, value, unit: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidRequest(f"{name} {value!r} is not allowed: use a number > 0{unit}")
    return float(value)


def resolve_target_len(
    text: str,
    ref_text: str | None,
    num_ref_tokens: int | None,
    speed: float | None = None,
    duration: float | None = None,
    frame_rate: float = 25.0,
) -> tuple[int, float | None]:
    """Target frames of one request and its effective speed (the reference's `_preprocess_all`).

    - duration (seconds) given: T = max(1, int(duration * frame_rate)) and the effective speed
      is est / T with est the estimate at speed 1 (speed is then ignored);
    - else speed given: T = the estimate at that speed, effective speed = speed;
    - else: T = the estimate, effective speed None (chunking then uses 1.0).
    `ref_text` is the already-punctuated reference text. A speed or duration that is not a
    finite number > 0 is an `InvalidRequest` (the reference silently ignores such values).
    """
    if speed is not None:
        speed = _check_positive("speed", speed)
    if duration is not None:
        duration = _check_positive("duration", duration, " (seconds)")
        est = estimate_target_tokens(text, ref_text, num_ref_tokens, speed=1.0)
        target = max(1, int(duration * frame_rate))
        return target, est / target
    est = estimate_target_tokens(text, ref_text, num_ref_tokens, speed=1.0 if speed is None else speed)
    return est, speed


# --------------------------------------------------------------------------------------------
# Chunking
# --------------------------------------------------------------------------------------------


def chunk_len_for(text: str, target_len: int, chunk_duration: float = 15.0, frame_rate: float = 25.0) -> int:
    """Characters per chunk so that a chunk lasts about `chunk_duration` seconds
    (the reference's `_generate_chunked`: int(duration * rate / (T / len(text))))."""
    avg_tokens_per_char = target_len / len(text)
    return int(chunk_duration * frame_rate / avg_tokens_per_char)


# Scripts written without spaces between words: an ASCII mark touching one of their characters
# ends a sentence as the reference has it ('你好,世界'), since no space follows marks there.
_UNSPACED_RANGES = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))  # Thai and Lao, Myanmar, Khmer
_ASCII_SPLIT = frozenset("!,.:;?")
# A dotted abbreviation up to a '.': letters (of a spaced script) in 1-3 letter groups with an
# internal dot, after no word character ('U.S', 'e.g', 'i.e', 'Ph.D', 'z.B'); checked on the 32 characters before the mark.
_DOTTED_RE = re.compile(r"(?<!\w)(?:[^\W\d_]{1,3}\.){1,6}[^\W\d_]{1,3}\Z")
_DOTTED_REACH = 32
_ABBREV_REACH = 12  # characters of a word looked at for data/text.json's abbreviations ('Mr.')


def _unspaced(ch: str) -> bool:
    """A character of a script written without spaces (CJK, kana, Hangul, full-width forms, Thai...)."""
    if unicodedata.east_asian_width(ch) in "WF":
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _UNSPACED_RANGES)


@lru_cache(maxsize=8192)
def _word_char(ch: str) -> bool:
    """A letter, digit or combining mark of a script that spaces its words."""
    return unicodedata.category(ch)[0] in "LNM" and not _unspaced(ch)


def is_sentence_break(text: str, i: int) -> bool:
    """Whether the split mark `text[i]` may end a sentence (or clause): False when it is inside a
    token, the one rule of every cutter (chunks, streamed pieces, subtitle cues, Wyoming's stream).

    Inside a token:
    - a digit on both sides, for any mark ('21:30', '3.5', '1,000', '１２：３０');
    - an ASCII mark (`!,.:;?`) between two word characters of a spaced script, so with no space
      after it ('U.S', 'e.g', 'example.com', 'a,b'); a mark before a space, a quote, a bracket,
      another mark or the end of the text is a break, and so is one touching a character of a
      script written without spaces ('你好,世界', 'OK.好的'), where no space after a mark is normal;
    - the '.' closing a dotted abbreviation ('U.S.', 'e.g.', 'i.e.', 'Ph.D.') or a word of
      data/text.json's abbreviations ('Mr.', 'Dr.': the reference's rule, which `chunk_text`
      also checks its own way, on the sentence so far).
    Everywhere else (full-width '。' and '，' however they are followed included) it is a break,
    as the reference has it.
    """
    ch = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if before.isdigit() and after.isdigit():
        return False
    if ch in _ASCII_SPLIT and before and after and _word_char(before) and _word_char(after):
        return False
    if ch == "." and before.isalpha():
        m = _DOTTED_RE.search(text, max(0, i - _DOTTED_REACH), i)
        if m and not any(_unspaced(c) for c in m.group()):
            return False
        start = i  # the word the '.' ends, if it is short enough to be an abbreviation
        while start > 0 and i - start < _ABBREV_REACH and not text[start - 1].isspace():
            start -= 1
        if (start == 0 or text[start - 1].isspace()) and text[start : i + 1] in _punct_sets()[3]:
            return False
    return True


def chunk_text(text: str, chunk_len: int, min_chunk_len: int | None = 3) -> list[str]:
    """Split `text` at punctuation into chunks of about `chunk_len` characters.

    1. Sentences end at split punctuation, except a '.' ending a known abbreviation ('Mr.') and
       a mark inside a token (`is_sentence_break`: '21:30', '3.5', '1,000', 'U.S.'; a deliberate
       difference from the reference, which cuts there); punctuation or a closing mark that
       would start a sentence joins the previous one.
    2. Consecutive sentences are merged while the chunk stays <= chunk_len characters.
    3. A chunk shorter than min_chunk_len joins the previous chunk (a short first chunk takes
       the second one in).
    Chunks are stripped; empty ones dropped.
    """
    split, closing, _, abbrevs = _punct_sets()

    sentences: list[list[str]] = []
    cur: list[str] = []
    for i, ch in enumerate(text):
        if not cur and sentences and (ch in split or ch in closing):
            sentences[-1].append(ch)
            continue
        cur.append(ch)
        if ch in split and is_sentence_break(text, i):
            if ch == ".":
                stripped = "".join(cur).strip()
                if stripped and stripped.split()[-1] in abbrevs:
                    continue
            sentences.append(cur)
            cur = []
    if cur:
        sentences.append(cur)

    merged: list[list[str]] = []
    chunk: list[str] = []
    for sent in sentences:
        if len(chunk) + len(sent) <= chunk_len:
            chunk.extend(sent)
        else:
            if chunk:
                merged.append(chunk)
            chunk = sent
    if chunk:
        merged.append(chunk)

    if min_chunk_len is not None:
        first_short = bool(merged) and len(merged[0]) < min_chunk_len
        final: list[list[str]] = []
        for i, c in enumerate(merged):
            if i == 1 and first_short:
                final[-1].extend(c)
            elif len(c) >= min_chunk_len or not final:
                final.append(c)
            else:
                final[-1].extend(c)
    else:
        final = merged

    out = ["".join(c).strip() for c in final]
    return [c for c in out if c]


_TAG_OR_SPACE_RE = re.compile(r"\[[^\[\]]*\]|\s+")  # a bracketed tag ([laughter], [B EY1 S]) or a space run


def _words(text: str) -> list[str]:
    """`text` as words, each with the spaces after it; a bracketed tag is one word (never cut)."""
    words, start = [], 0
    for m in _TAG_OR_SPACE_RE.finditer(text):
        if m.group()[0] != "[":  # a space run ends the word before it
            words.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        words.append(text[start:])
    return [w for w in words if w]


def cut_to_length(text: str, max_chars: int) -> list[str]:
    """Cut `text` into pieces of at most `max_chars` characters (stripped, none empty), for a
    stretch too long for one generation that has no sentence punctuation to cut at: at spaces
    (a bracketed tag stays whole), and a word longer than `max_chars` (or text without spaces,
    as Chinese is written) at characters."""
    max_chars = max(1, int(max_chars))
    pieces: list[str] = []
    cur = ""
    for word in _words(text):
        if len(cur) + len(word.rstrip()) > max_chars and cur.strip():
            pieces.append(cur)
            cur = ""
        while len(word.rstrip()) > max_chars:  # a word (or a text without spaces) too long alone
            pieces.append(word[:max_chars])
            word = word[max_chars:]
        cur += word
    pieces.append(cur)
    return [p.strip() for p in pieces if p.strip()]


# --------------------------------------------------------------------------------------------
# Pause tags
# --------------------------------------------------------------------------------------------

_PAUSE_ANY_RE = re.compile(r"\[\s*pause\b[^\]]*\]?", re.IGNORECASE)
_PAUSE_RE = re.compile(r"\[pause(?:\s+(\d+(?:\.\d+)?|\.\d+)\s*(s|ms))?\]", re.IGNORECASE)
DEFAULT_PAUSE_SECONDS = 0.5
MAX_PAUSE_SECONDS = 60.0  # one tag (adjacent tags add up, so this bounds a tag, not a gap)
MAX_TOTAL_PAUSE_SECONDS = 3600.0  # all pause tags of one text together


def split_pauses(text: str) -> tuple[list[str], list[float]]:
    """Cut text at `[pause]`, `[pause 0.5s]`, `[pause 500ms]` tags.

    Returns (parts, gaps): the text parts with something to speak (an `is_blank` part is dropped),
    and len(parts) + 1 silences in seconds (gaps[0] before the first part, gaps[-1] after the last,
    gaps[i] between parts i-1 and i; adjacent tags add up). A tag that starts like a pause but is not one of these forms, a tag over
    MAX_PAUSE_SECONDS, or tags adding up to more than MAX_TOTAL_PAUSE_SECONDS are an
    InvalidRequest naming it.
    """
    parts: list[str] = []
    gaps: list[float] = [0.0]
    pos = 0
    for m in _PAUSE_ANY_RE.finditer(text):
        tag = m.group(0)
        ok = _PAUSE_RE.fullmatch(tag)
        if not ok:
            raise InvalidRequest(
                f"malformed pause tag {tag!r}: use [pause] (0.5 s), [pause 1.5s] or [pause 500ms]", "text"
            )
        seconds = DEFAULT_PAUSE_SECONDS
        if ok.group(1):
            seconds = float(ok.group(1)) / (1000.0 if ok.group(2).lower() == "ms" else 1.0)
        if seconds > MAX_PAUSE_SECONDS:
            raise InvalidRequest(f"pause tag {tag!r} is too long: at most {MAX_PAUSE_SECONDS:g} s", "text")
        before = text[pos : m.start()]
        if not is_blank(before):
            parts.append(before)
            gaps.append(0.0)
        gaps[-1] += seconds
        pos = m.end()
    if not is_blank(text[pos:]):
        parts.append(text[pos:])
        gaps.append(0.0)
    total = sum(gaps)
    if total > MAX_TOTAL_PAUSE_SECONDS:
        raise InvalidRequest(
            f"the pause tags add up to {total:g} s: at most {MAX_TOTAL_PAUSE_SECONDS:g} s of pauses in one text", "text"
        )
    return parts, gaps


def nonverbal_tags() -> tuple[str, ...]:
    """The non-verbal tags the model speaks as sounds: ('[laughter]', '[sigh]', ...)."""
    pattern = _table("text.json")["nonverbal_tags"]
    names = pattern[pattern.index("(") + 1 : pattern.rindex(")")].split("|")
    return tuple(f"[{name}]" for name in names)
