"""One value of a setting: its check (`check_setting`), a flag's text parsed (`parse_text`), and the
words of messages about values (`type_name`, `shown_value`, `or_list`, `did_you_mean`); and
`join_lines`, the first rule every text to speak goes through."""

from __future__ import annotations

import difflib
import math
import re
from typing import Iterable

from .schema import SCHEMA
from .setting import SettingsError, Value

_ANY_NUMBER = "a number"


def type_name(value: object) -> str:
    """'an integer', 'a string', ... for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return _ANY_NUMBER
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table/object"
    return type(value).__name__


def allowed(key: str) -> str:
    """What a setting accepts, in words: 'an integer in 1..64'."""
    return SCHEMA[key].allowed


def shown_value(value: object) -> str:
    """A value as a message shows it: repr, cut to 80 characters; a huge integer by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value)))} digits"  # never print a 5,000-digit number
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _of_kind(kind: type, value: object) -> Value:
    """`value` when it is of `kind` (bool is no number; an int where a number is due becomes a
    float: OverflowError when too large), else None."""
    if isinstance(value, bool):
        return value if kind is bool else None
    if isinstance(value, int) and kind in (int, float):
        return value if kind is int else float(value)
    if isinstance(value, float):
        return float(value) if kind is float else None
    if isinstance(value, str):
        return value if kind is str else None
    return None


def check_setting(key: str, value: object) -> Value:
    """Check one setting's type and value; return it (an int becomes a float where a number is due).

    Raises SettingsError with a message that does not name where the value came from, e.g.
    "must be an integer in 1..64, got 0": callers add the source ("--num-step", "line 3: field
    'num_step'", ...) in front.
    """
    s = SCHEMA[key]
    try:
        checked = _of_kind(s.kind, value)
    except OverflowError:
        raise SettingsError(f"must be {s.allowed}, got {shown_value(value)}") from None
    if checked is None:
        raise SettingsError(f"must be {s.allowed}, got {shown_value(value)} ({type_name(value)})")
    if isinstance(checked, float) and not math.isfinite(checked):
        raise SettingsError(f"must be {s.allowed}, got {checked!r}")
    if s.ok is not None and not s.ok(checked):
        raise SettingsError(f"must be {s.allowed}, got {shown_value(checked)}")
    number = checked if isinstance(checked, (int, float)) else None  # bounds are only given to numbers
    if s.low is not None and number is not None and number < s.low:
        raise SettingsError(f"must be at least {s.low:g}, got {shown_value(checked)}")
    if s.high is not None and number is not None and number > s.high:
        raise SettingsError(f"must be at most {s.high:g}, got {shown_value(checked)}")
    return checked


def parse_text(key: str, raw: str) -> Value:
    """A value typed on the command line (a string) -> the setting's value, checked.

    Numbers are parsed here rather than by click, so that a bad one gets the same words as in a
    preset or a JSON line: "must be an integer in 1..64, got 'abc'"."""
    s = SCHEMA[key]
    text = raw.strip()
    if s.kind is int:
        try:
            value: Value = int(text) if len(text) <= 40 else None
        except ValueError:
            value = None
    elif s.kind is float:
        try:
            value = float(text) if len(text) <= 40 else None
        except ValueError:
            value = None
    elif s.choices:
        value = text.lower()
    else:
        value = raw
    if value is None:
        raise SettingsError(f"must be {s.allowed}, got {shown_value(raw)}")
    return check_setting(key, value)


def or_list(items: Iterable[str]) -> str:
    """'a, b or c'."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean 'x'?)" or ""."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


_LINE_BREAK_RE = re.compile(r"[ \t]*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])+[ \t]*")


def join_lines(text: str) -> str:
    """Line breaks (and the spaces around them) become one space; the ends are stripped.

    The engine, like the reference, deletes line breaks without a space, which would glue the
    last word of a line to the first word of the next: every text goes through this first."""
    if not isinstance(text, str):
        return text
    return _LINE_BREAK_RE.sub(" ", text).strip()
