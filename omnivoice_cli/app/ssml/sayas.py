"""SSML's `<say-as interpret-as=...>` in words, by our text normaliser (engine/text/normalize.py).

    say_as("ordinal", "3", None, "en")             # "third"
    say_as("date", "12/25/2024", "mdy", "en")      # "the twenty fifth of december twenty twenty four"
    say_as("telephone", "555-0123", None, "en")    # "five five five, zero one two three"

- cardinal (number): the digits as a number;
- ordinal: the number as a rank (English and Chinese: the normaliser's "3rd"; other languages:
  num2words' ordinal where it has one, else the number);
- characters (spell-out): each letter and digit on its own;
- date: `format` (mdy, dmy, ymd, md, dm, ym, my, y: the order of the numbers) read as an ISO date,
  then said by the normaliser; without a format, the normaliser reads it as written;
- time: the normaliser's reading ("10:30" -> "ten thirty");
- telephone: each digit on its own, the groups apart ("555-0123" -> "five five five, zero ...").

All but characters need the `normalize` extra (MissingExtra names it). The numbers of all but
characters have at most MAX_DIGITS digits (a longer one is refused: no number has a name that
long, the normaliser's time grows with it, and Python will not read one past 4,300 digits).
"""

from __future__ import annotations

import re

from ...engine.errors import InvalidRequest
from ...engine.text.normalize import normalize_text, normalizer_language
from ..settings.values import shown_value

SAY_AS = ("cardinal", "number", "ordinal", "characters", "spell-out", "date", "time", "telephone")
DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "y")
_NUMBER_RE = re.compile(r"\d+")
MAX_DIGITS = 64  # digits in one say-as of a number, a date, a time or a telephone number


def _digits(text: str) -> str:
    """Every digit on its own: '0123' -> '0 1 2 3'."""
    return " ".join(text)


def _ordinal(text: str, lang: str | None) -> str:
    number = text.strip().replace(",", "")
    if not number.isdigit():
        raise InvalidRequest(f"{shown_value(text)} is not a whole number", "text")
    code = normalizer_language(lang, text)
    if code in ("en", "zh"):
        if code == "zh":
            return normalize_text(f"第{number}", lang)
        n = int(number)
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return normalize_text(f"{number}{suffix}", "en")
    try:
        from num2words import num2words

        return str(num2words(int(number), to="ordinal", lang=code))
    except (ImportError, NotImplementedError, KeyError, OverflowError):
        return normalize_text(number, lang)


def _date(text: str, fmt: str | None, lang: str | None) -> str:
    if not fmt:
        return normalize_text(text, lang)
    fmt = fmt.strip().lower()
    if fmt not in DATE_FORMATS:
        raise InvalidRequest(f"format {shown_value(fmt)} is not a date format: use {', '.join(DATE_FORMATS)}", "text")
    numbers = _NUMBER_RE.findall(text)
    if len(numbers) != len(fmt):
        raise InvalidRequest(
            f"{shown_value(text)} does not have the {len(fmt)} numbers of format {shown_value(fmt)}", "text"
        )
    got = dict(zip(fmt, (int(n) for n in numbers)))
    if not 1 <= got.get("m", 1) <= 12 or not 1 <= got.get("d", 1) <= 31:
        raise InvalidRequest(f"{shown_value(text)} is not a date in format {shown_value(fmt)}", "text")
    if "y" in got and got["y"] < 100:
        got["y"] += 2000
    if "y" in got and "m" in got and "d" in got:
        return normalize_text(f"{got['y']:04d}-{got['m']:02d}-{got['d']:02d}", lang)
    words = []
    if "d" in got:
        words.append(_ordinal(str(got["d"]), lang))
    if "m" in got:
        import calendar

        words.append(calendar.month_name[got["m"]] if normalizer_language(lang, text) == "en" else str(got["m"]))
    if "y" in got:
        words.append(str(got["y"]))
    return normalize_text(" ".join(words), lang)


def _telephone(text: str, lang: str | None) -> str:
    groups = _NUMBER_RE.findall(text)
    if not groups:
        raise InvalidRequest(f"{shown_value(text)} has no digits to say as a telephone number", "text")
    plus = "+ " if text.strip().startswith("+") else ""
    return plus + normalize_text(", ".join(_digits(g) for g in groups), lang)


def say_as(how: str, text: str, fmt: str | None, lang: str | None) -> str:
    """`text` as `how` (one of SAY_AS) says it, in `lang` (None: by its script); InvalidRequest
    (setting "text") when the text is not what `how` reads."""
    text = " ".join(text.split())
    if not text:
        return text
    if how in ("characters", "spell-out"):
        return " ".join(c for c in text if not c.isspace())
    digits = sum(c.isdigit() for c in text)
    if digits > MAX_DIGITS:
        raise InvalidRequest(
            f"has {digits} digits: at most {MAX_DIGITS} are read so (interpret-as='characters' spells them one by one)",
            "text",
        )
    if how in ("cardinal", "number"):
        return normalize_text(text, lang)
    if how == "ordinal":
        return _ordinal(text, lang)
    if how == "date":
        return _date(text, fmt, lang)
    if how == "time":
        return normalize_text(text, lang)
    return _telephone(text, lang)
