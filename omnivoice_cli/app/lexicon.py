"""A pronunciation lexicon (`--lexicon FILE`, setting `lexicon`): whole-word replacements made to a
request's text before it is normalised.

    # words.toml
    GIF = "jif"                  # any case: GIF, gif, Gif
    "New York" = "Noo York"      # several words; any run of spaces between them in the text
    bass = "[B EY1 S]"           # English: a CMU pronunciation, in brackets
    "打折" = "打ZHE2"             # Chinese: pinyin with a tone digit (uppercase)

    [case-sensitive]
    US = "you ess"               # "US" only, never "us"

    lexicon = load_lexicon("words.toml")          # read and checked (InvalidRequest: one line)
    text, replaced = lexicon.apply("GIFs and a GIF.")   # "GIFs and a jif.", [("GIF", "jif")]

Matching:

- whole words: a key that starts (ends) with a letter, digit, '_' or combining mark matches only
  where the text has none of these just before (after) it, in any script with spaces between
  words (Latin with accents, Cyrillic, Greek, Arabic, Devanagari, Hangul ...). "GIF" is not
  replaced in "GIFs" or "GIF2"; it is in "GIF's", "GIF-like" and "(GIF)". A key that starts
  (ends) with another character (".NET", "C++") has no boundary on that side.
- scripts written without spaces (Chinese, Japanese kana, Thai, Lao, Khmer, Myanmar): no word
  boundaries there, the key is matched as a literal string; and such a character next to a Latin
  key does not count as part of its word ("用GIF做" replaces GIF).
- the longest key wins where several start at one place ("New York" before "New"); at the same
  length a case-sensitive entry before a case-insensitive one. One pass from left to right: a
  replacement is never matched again.
- case-insensitive (the top level: the text's word lowercased equals the key lowercased) or
  case-sensitive (the `[case-sensitive]` table: exactly as written). The value is put in as
  written, whatever the case of the word it replaces; "" drops the word.
- what is around a match is kept as it is (punctuation, spaces, line breaks); bracketed spans
  ([laughter], [pause 1s], [B EY1 S]) are never looked into.

Pronunciation forms: the reference (k2-fsa/OmniVoice, README "Non-Verbal & Pronunciation
Control") reads CMU-dictionary phonemes in brackets for English ("[B EY1 S]") and uppercase
pinyin with a tone digit for Chinese ("ZHE2"); its code gives them to the tokenizer as plain text
and its normaliser passes them through ([...] always, pinyin in Chinese text). A lexicon value may
be such a form: the lexicon runs before normalisation, which leaves it alone, so it reaches the
canvas's text tokens exactly as if it had been written in the text.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.errors import InvalidRequest
from .settings.values import shown_value, type_name

CASE_SENSITIVE = "case-sensitive"  # the one table of a lexicon file
MAX_LEXICON_BYTES = 4 * 1024 * 1024  # reading stops here: a lexicon is words, not a dictionary
MAX_KEY_CHARS = 200

# Scripts written without spaces between words: a key is matched there as a literal string.
_NO_SPACE = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0x20000, 0x323AF),  # CJK extensions B..H
)
_NO_SPACE_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _NO_SPACE)
_SPACES_RE = re.compile(r"\s+")
_BRACKET_RE = re.compile(r"\[[^\[\]]*\]")  # tags and pronunciations: never looked into (as normalize.py)
_LINE_RE = re.compile(r"\(at line (\d+), column (\d+)\)")


def _no_space(ch: str) -> bool:
    o = ord(ch)
    return any(a <= o <= b for a, b in _NO_SPACE)


def is_word_char(ch: str) -> bool:
    """A character that is part of a word of a spaced script: a letter, digit, '_' or combining mark."""
    return (ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M") and not _no_space(ch)


@dataclass(frozen=True)
class Replacement:
    """One entry of a lexicon: a key and what is said in its place."""

    key: str  # as written in the file, inner spaces made one
    say: str  # the replacement, as written
    case: bool  # case-sensitive
    left: bool  # needs a word boundary before it (its first character is a word character)
    right: bool  # ... after it


@dataclass
class Lexicon:
    """The entries of one lexicon file, ready to apply (see the module doc)."""

    path: str = ""
    entries: list[Replacement] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._exact = {e.key: e for e in self.entries if e.case}
        self._folded = {e.key.lower(): e for e in self.entries if not e.case}
        self._lengths = sorted({len(e.key) for e in self.entries}, reverse=True)
        self._starts = _start_pattern(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def _longest(self, view: str, i: int) -> Replacement | None:
        before = view[i - 1] if i > 0 else ""
        for n in self._lengths:
            word = view[i : i + n]
            if len(word) < n:
                continue
            for entry in (self._exact.get(word), self._folded.get(word.lower())):
                if entry is None or len(entry.key) != n:
                    continue
                after = view[i + n] if i + n < len(view) else ""
                if entry.left and before and is_word_char(before):
                    continue
                if entry.right and after and is_word_char(after):
                    continue
                return entry
        return None

    def matches(self, text: str) -> list[tuple[int, int, Replacement]]:
        """(start, end, entry) of every replacement in `text`, left to right, in `text`'s indices."""
        if not self.entries or not text:
            return []
        view, to_text = _view(text)
        guarded = [m.span() for m in _BRACKET_RE.finditer(view)]
        found, pos, g = [], 0, 0
        while (m := self._starts.search(view, pos)) is not None:
            i = m.start()
            while g < len(guarded) and guarded[g][1] <= i:
                g += 1
            if g < len(guarded) and guarded[g][0] <= i:
                pos = guarded[g][1]  # inside a bracketed span
                continue
            entry = self._longest(view, i)
            if entry is None:
                pos = i + 1
                continue
            end = i + len(entry.key)
            found.append((to_text(i), to_text(end - 1) + 1, entry))
            pos = end
        return found

    def apply(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """`text` with every replacement made, and (the words replaced, their replacement) in order."""
        out, replaced, last = [], [], 0
        for start, end, entry in self.matches(text):
            out += [text[last:start], entry.say]
            replaced.append((text[start:end], entry.say))
            last = end
        out.append(text[last:])
        return "".join(out), replaced


def _view(text: str):
    """The text with each whitespace run one space (multi-word keys match any spacing), and the
    map of its indices back to the text's."""
    breaks, offsets, removed = [], [], 0
    for m in _SPACES_RE.finditer(text):
        run = m.end() - m.start()
        if run > 1:  # view index start+1 on lies `removed` characters earlier than in the text
            breaks.append(m.start() - removed + 1)
            removed += run - 1
            offsets.append(removed)
    view = _SPACES_RE.sub(" ", text)

    def to_text(j: int) -> int:
        k = bisect_right(breaks, j)
        return j + (offsets[k - 1] if k else 0)

    return view, to_text


def _start_pattern(entries: list[Replacement]) -> re.Pattern:
    """Where a key may start: its first character (any case for the case-insensitive ones), not
    just after a word character when the key starts with one (a pre-filter: `_longest` decides)."""
    groups: dict[tuple[bool, bool], set[str]] = {}
    for e in entries:
        groups.setdefault((e.left, e.case), set()).add(e.key[0])
    after_word = f"(?<![^\\W{_NO_SPACE_CLASS}])"
    parts = []
    for (left, case), chars in sorted(groups.items()):
        cls = "[" + "".join(re.escape(c) for c in sorted(chars)) + "]"
        parts.append((after_word if left else "") + (cls if case else f"(?i:{cls})"))
    return re.compile("|".join(parts) or "(?!)")


# --------------------------------------------------------------------------------------------
# Reading a lexicon file
# --------------------------------------------------------------------------------------------


def _read(path: Path, shown: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LEXICON_BYTES + 1)
    except FileNotFoundError:
        raise InvalidRequest(f"lexicon file '{shown}' does not exist", "lexicon") from None
    except IsADirectoryError:
        raise InvalidRequest(f"lexicon '{shown}' is a folder, not a .toml file", "lexicon") from None
    except OSError as e:
        raise InvalidRequest(f"cannot read lexicon file '{shown}': {e.strerror or e}", "lexicon") from None
    if len(data) > MAX_LEXICON_BYTES:
        raise InvalidRequest(f"lexicon file '{shown}' is over {MAX_LEXICON_BYTES >> 20} MiB", "lexicon")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InvalidRequest(f"lexicon file '{shown}', line {line}: not UTF-8 text", "lexicon") from None


def _toml(text: str, shown: str) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        m = _LINE_RE.search(message)
        where = f", line {m.group(1)}" if m else ""
        if m is None and "end of document" in message:
            where = f", line {text.count(chr(10)) + 1}"
        reason = _LINE_RE.sub("", message).replace("(at end of document)", "").strip()
        column = f" (column {m.group(2)})" if m else ""
        raise InvalidRequest(f"lexicon file '{shown}'{where}: TOML syntax error: {reason}{column}", "lexicon") from None
    except RecursionError:
        raise InvalidRequest(f"lexicon file '{shown}': nested too deeply", "lexicon") from None


def _line_of(text: str, key: str) -> str:
    """', line N' of the first line that starts with `key` (quoted or not), else ''."""
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if stripped.startswith((key, f'"{key}"', f"'{key}'")):
            return f", line {n}"
    return ""


def _entry(key: str, value: object, case: bool, text: str, shown: str) -> Replacement:
    words = " ".join(key.split())
    problem = None
    if not isinstance(value, str):
        problem = f"{key!r} must map to its replacement (a string), got {shown_value(value)} ({type_name(value)})"
    elif not words:
        problem = "a key is empty: give the word to replace"
    elif len(words) > MAX_KEY_CHARS:
        problem = f"key {key[:40]!r}... is over {MAX_KEY_CHARS} characters"
    elif "[" in words or "]" in words:
        problem = f"key {key!r} holds a bracket: bracketed tags are never replaced"
    if problem is not None or not isinstance(value, str):  # the line is looked for only now: a long file is read once
        raise InvalidRequest(f"lexicon file '{shown}'{_line_of(text, key)}: {problem}", "lexicon")
    return Replacement(words, value, case, is_word_char(words[0]), is_word_char(words[-1]))


def parse_lexicon(text: str, shown: str = "<text>") -> Lexicon:
    """The lexicon in the TOML `text` (InvalidRequest naming `shown` and the line)."""
    data = _toml(text, shown)
    entries: list[Replacement] = []
    for key, value in data.items():
        if isinstance(value, dict):
            if key != CASE_SENSITIVE:
                raise InvalidRequest(
                    f"lexicon file '{shown}'{_line_of(text, '[' + key)}: unknown table [{key}]; the one table "
                    f"is [{CASE_SENSITIVE}] (its entries match only as written)",
                    "lexicon",
                )
            entries += [_entry(k, v, True, text, shown) for k, v in value.items()]
        else:
            entries.append(_entry(key, value, False, text, shown))
    seen: dict[tuple[str, bool], str] = {}
    for e in entries:
        same = (e.key if e.case else e.key.lower(), e.case)
        if same in seen:
            how = "the same words" if e.case else "the same words in another case"
            raise InvalidRequest(
                f"lexicon file '{shown}'{_line_of(text, e.key)}: {e.key!r} and {seen[same]!r} are {how}: keep one",
                "lexicon",
            )
        seen[same] = e.key
    return Lexicon(shown, entries)


_LOADED: dict[str, Lexicon] = {}
_LOCK = threading.Lock()


def load_lexicon(path: str | Path, fresh: bool = False) -> Lexicon:
    """The lexicon of a file, read once per process (a later call gets the same one, so a server
    keeps the lexicon it started with); `fresh` reads it again (a command's start does)."""
    shown = str(path)
    resolved = str(Path(path).expanduser().resolve())
    with _LOCK:
        if not fresh and resolved in _LOADED:
            return _LOADED[resolved]
    lexicon = parse_lexicon(_read(Path(resolved), shown), shown)
    with _LOCK:
        _LOADED[resolved] = lexicon
    return lexicon
