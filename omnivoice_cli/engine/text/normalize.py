"""Text normalisation (opt-in): numbers, currency, dates, times and units in their spoken form.

Equal to the reference's `normalize_text` (omnivoice 0.2.1), checked on a golden table
(tests/fixtures/normalize/golden.json, made by tools/make_normalize_golden.py):

- the language: a model id or name (anything `resolve_language` maps); without one, Chinese if
  the text holds a CJK ideograph, else English;
- Chinese and English: WeTextProcessing 1.2.0's compiled normalisers, the very FSTs the
  reference loads (shipped xz-compressed in data/tn/), run by `kaldifst` instead of pynini;
- other languages: every run of digits through `num2words` in that language, where num2words
  has it (decimals and signs are not read as such, as in the reference);
- protected and passed through verbatim: every `[...]` span (non-verbal tags like [laughter],
  CMU pronunciations like [B EY1 S], our [pause 500ms] tags) and, for Chinese, uppercase pinyin
  with a tone digit (NI3). Whitespace around a protected span is kept.

Two deliberate differences:

- num2words, given a code it lacks, tries the code's first two letters, so the reference reads
  digits in Filipino ('fil') as Finnish and in Cebuano ('ceb') as Chechen. We accept that
  fallback only for the Arabic varieties ('arb', 'arz', ... -> 'ar') and otherwise leave the
  digits as they are (what the reference does for languages num2words lacks).
- English money with exactly two decimals is read with its cents, as people say it: "$3.50" ->
  "three dollars fifty", "$1.01" -> "one dollar oh one", "$0.99" -> "ninety nine cents", "£0.20"
  -> "twenty pence" (the reference says "three point five dollars", losing the cents' zero). The
  words come from the same English FST (its reading of "$3 50"); "$12.00", one or three decimals
  ("$3.5", "$2.999"), an amount with a quantity ("$3.50 million", "$3.50k") and Chinese are read
  as the reference reads them.

`kaldifst` and `num2words` are the `normalize` extra; they are imported on first use only.
"""

from __future__ import annotations

import lzma
import re
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable

from ..errors import InvalidRequest, MissingExtra
from .languages import resolve_language

__all__ = ["normalize_text", "normalizer_language"]

_BRACKET_RE = re.compile(r"\[[^\[\]]*\]")  # non-verbal tags, CMU pronunciations, pause tags
_PINYIN_RE = re.compile(r"[A-Z]+[1-5]")  # uppercase pinyin with a tone digit (Chinese only)
_CJK_RE = re.compile(r"[\u4e00-\u9fff]")
_DIGITS_RE = re.compile(r"\d+")
# Codes whose first two letters name the same language in num2words (see the module docstring).
_NUM2WORDS_PREFIX_OK = frozenset({"arb", "arq", "ars", "ary", "arz"})
# The token parser's field orders of WeTextProcessing 1.2.0 ("tn" for Chinese, "en_tn" for English):
# a token named here has its fields rewritten in this order (fields not named are dropped),
# unless it carries preserve_order: "true".
_FIELD_ORDERS = {
    "zh": {
        "date": ("year", "month", "day"),
        "fraction": ("denominator", "numerator"),
        "measure": ("denominator", "numerator", "value"),
        "money": ("value", "currency"),
        "time": ("noon", "hour", "minute", "second"),
    },
    "en": {
        "date": ("preserve_order", "text", "day", "month", "year"),
        "money": ("integer_part", "fractional_part", "quantity", "currency_maj"),
    },
}
# English money with exactly two decimals ($ € £; not after a letter such as US$, not before a
# digit, a letter or a quantity word, which the FST reads as "three point five oh million dollars").
_CENTS_RE = re.compile(
    r"(?<![\w$€£.,])([$€£])(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?![.,]?\d)(?![^\W\d_])"
    r"(?!\s*(?i:thousand|million|billion|trillion|quadrillion|quintillion|mln|bn|[kmb])s?\b)"
)
_OPENING, _CLOSING = "([{\"'“‘«", ")]}\"'”’»,.;:!?"
_MINOR_UNIT = {"$": ("cent", "cents"), "€": ("cent", "cents"), "£": ("penny", "pence")}
_TOKEN_RE = re.compile(r'\s*([A-Za-z_]+)\s*\{((?:\s*[A-Za-z_]+:\s*"(?:[^"\\]|\\.)*")*)\s*\}', re.S)
_FIELD_RE = re.compile(r'([A-Za-z_]+):\s*"((?:[^"\\]|\\.)*)"', re.S)


def _missing(package: str) -> InvalidRequest:
    return MissingExtra("text normalisation", package, "normalize")


def reorder_tokens(tagged: str, lang: str) -> str:
    """The tagger's output with each token's fields in the verbalizer's order (WeTextProcessing
    1.2.0's TokenParser.reorder): 'money { currency: "$" value: "3" }' -> value first for zh."""
    orders = _FIELD_ORDERS[lang]
    out: list[str] = []
    pos = 0
    tagged = tagged.rstrip()
    while pos < len(tagged):
        m = _TOKEN_RE.match(tagged, pos)
        if m is None:
            raise ValueError(f"cannot parse the tagged text at {tagged[pos : pos + 40]!r}")
        name, body = m.group(1), m.group(2)
        fields = dict(_FIELD_RE.findall(body))
        keys = [k for k, _ in _FIELD_RE.findall(body)]
        if name in orders and fields.get("preserve_order") != "true":
            keys = [k for k in orders[name] if k in fields]
        out.append(name + " {" + "".join(f' {k}: "{fields[k]}"' for k in keys) + " }")
        pos = m.end()
    return " ".join(out)


class _FstNormalizer:
    """WeTextProcessing's normaliser for one language: tagger, field reorder, verbalizer."""

    def __init__(self, lang: str) -> None:
        try:
            import kaldifst
        except ImportError:
            raise _missing("kaldifst") from None
        self.lang = lang
        data = resources.files("omnivoice_cli").joinpath("data").joinpath("tn")
        with tempfile.TemporaryDirectory(prefix="omnivoice-tn-") as tmp:
            fsts = []
            for part in ("tagger", "verbalizer"):  # kaldifst reads a path; the FST is then in memory
                path = Path(tmp) / f"{lang}_tn_{part}.fst"
                path.write_bytes(lzma.decompress(data.joinpath(f"{path.name}.xz").read_bytes()))
                fsts.append(kaldifst.TextNormalizer(str(path)))
        self._tagger, self._verbalizer = fsts

    def __call__(self, text: str) -> str:
        tagged = self._tagger(text) if text else ""
        return self._verbalizer(reorder_tokens(tagged, self.lang)) if tagged else ""


@lru_cache(maxsize=None)
def _fst_normalizer(lang: str) -> _FstNormalizer:
    return _FstNormalizer(lang)


def say_cents(text: str, fst: Callable[[str], str]) -> str:
    """English money with two decimals in words, cents included (the module's second deliberate
    difference): "$3.50" -> "three dollars fifty", "$0.99" -> "ninety nine cents". `fst` is the
    English normaliser; the rest of the text is left for it."""

    def words(m: re.Match) -> str:
        symbol, whole, cents = m.groups()
        if cents == "00":
            return fst(f"{symbol}{whole}")  # "twelve dollars", as the reference says it
        if whole.strip("0,") == "":
            one, many = _MINOR_UNIT[symbol]
            return f"{fst(str(int(cents)))} {one if cents == '01' else many}"
        return fst(f"{symbol}{whole} {cents}")  # the FST's own reading of dollars and cents

    def spaced(m: re.Match) -> str:  # "$3.50-$4.50": "... fifty - four ...", never "fifty-four"
        before, after = text[m.start() - 1 : m.start()], text[m.end() : m.end() + 1]
        lead = " " if before and not before.isspace() and before not in _OPENING else ""
        trail = " " if after and not after.isspace() and after not in _CLOSING else ""
        return lead + words(m) + trail

    return _CENTS_RE.sub(spaced, text)


def _num2words_fn(code: str) -> Callable[[str], str] | None:
    """Digit runs to words in `code` (None when num2words lacks that language)."""
    try:
        from num2words import CONVERTER_CLASSES, num2words
    except ImportError:
        raise _missing("num2words") from None
    if code in CONVERTER_CLASSES:
        lang = code
    elif code in _NUM2WORDS_PREFIX_OK:
        lang = code[:2]
    else:
        return None

    def words(m: re.Match) -> str:
        try:
            return num2words(int(m.group()), lang=lang)
        except Exception:  # a value num2words cannot say: left as it is
            return m.group()

    return lambda s: _DIGITS_RE.sub(words, s)


def normalizer_language(lang: str | None, text: str) -> str:
    """The language that routes `text`: 'zh', 'en' or another model id (None: by script)."""
    if lang is not None and lang.strip() and lang.strip().lower() != "none":
        code, _ = resolve_language(lang.strip())
        if code is not None:
            return code
    return "zh" if _CJK_RE.search(text) else "en"


def _protected(text: str, pinyin: bool) -> list[tuple[int, int]]:
    """Merged, sorted (start, end) spans that pass through untouched."""
    spans = [m.span() for m in _BRACKET_RE.finditer(text)]
    if pinyin:
        spans += [m.span() for m in _PINYIN_RE.finditer(text)]
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _segment(fn: Callable[[str], str], seg: str) -> str:
    """`fn` on the stripped segment, its outer whitespace kept; unchanged if `fn` fails."""
    if not seg.strip():
        return seg
    core = seg.strip()
    lead, trail = seg[: len(seg) - len(seg.lstrip())], seg[len(seg.rstrip()) :]
    try:
        return lead + fn(core) + trail
    except Exception:  # as the reference: a segment the normaliser cannot take stays as written
        return seg


def _apply(text: str, fn: Callable[[str], str], pinyin: bool) -> str:
    out: list[str] = []
    last = 0
    for start, end in _protected(text, pinyin):
        out.append(_segment(fn, text[last:start]))
        out.append(text[start:end])
        last = end
    out.append(_segment(fn, text[last:]))
    return "".join(out)


def normalize_text(text: str, lang: str | None = None) -> str:
    """`text` with numbers, currency, dates, times and units spelled out (see the module docstring).

    `lang`: a model language id or anything `resolve_language` maps; None picks Chinese or
    English by script. Raises `InvalidRequest` naming the pip command when the `normalize` extra
    (kaldifst, num2words) is needed and missing.
    """
    if not text or not text.strip():
        return text
    code = normalizer_language(lang, text)
    if code == "en":
        fst = _fst_normalizer(code)  # here, not in _apply: a missing extra is an error, not a no-op
        return _apply(text, lambda seg: fst(say_cents(seg, fst)), pinyin=False)
    if code == "zh":
        return _apply(text, _fst_normalizer(code), pinyin=True)
    if not _DIGITS_RE.search(text):
        return text
    fn = _num2words_fn(code)
    return text if fn is None else _apply(text, fn, pinyin=False)
