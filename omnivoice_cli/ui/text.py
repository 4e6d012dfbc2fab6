"""Text from a file (a book's titles, a script's lines, cue text) made safe to show on a terminal.

    visible("\\x1b]0;pwned\\x07Chapter 1")   # -> "\\\\x1b]0;pwned\\\\x07Chapter 1"

A terminal obeys the control characters it is sent: ESC starts a sequence that can move the
cursor, recolour or retitle the window, write a clipboard (OSC 52) or a link (OSC 8); the C1
controls (U+0080..U+009F: CSI is U+009B) do the same in one character; a carriage return or a
backspace draws over what was written. Bidirectional overrides and isolates (U+202A..U+202E,
U+2066..U+2069) reorder what is shown. `visible` shows each of them as its escape (`\\x1b`,
`\\x9b`, `\\u202e`), so the text reads as it is in the file and nothing in it acts on the
terminal. Everything else (any script, emoji, punctuation) is left as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from typing import Any

from ..engine.errors import UNSAFE_CHARACTERS

__all__ = ["columns", "visible", "wrap_row"]

_UNSAFE = re.compile(f"[{UNSAFE_CHARACTERS}]")  # what a terminal must never be sent raw


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: object, *, lines: bool = False) -> str:
    """`text` (str() of it) with every control character shown as its escape (see the module
    doc); with `lines`, a line feed is kept (text of several lines, each made visible)."""
    text = str(text)
    if lines:
        return "\n".join(_UNSAFE.sub(_escape, line) for line in text.split("\n"))
    return _UNSAFE.sub(_escape, text)


def columns(stream: Any, terminal_only: bool = False) -> int | None:
    """The width to fit lines in: $COLUMNS when set (unless `terminal_only`), else the terminal's
    when `stream` is one; None for a pipe or a file, whose readers get whole lines."""
    env = os.environ.get("COLUMNS", "")
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or no stream at all
        tty = False
    if env.isdigit() and int(env) > 0 and (tty or not terminal_only):
        return int(env)
    return shutil.get_terminal_size().columns if tty else None


def wrap_row(head: str, text: str, width: int | None, lead: str | None = None) -> str:
    """`head` then `text`, cut at spaces into lines within `width` (no width: one line); the
    lines after the first start with `lead` (default: spaces as wide as `head`), so the text
    stays in its column, or, where that column leaves under 20 characters, with `lead` stripped
    of its indent. A word longer than the room is kept whole, never cut."""
    if width is None or len(head) + len(text) <= width:
        return head + text
    lead = " " * len(head) if lead is None else lead
    if width - len(lead) < 20:
        lead = lead.strip() + " " if lead.strip() else "  "
    first_room = width - len(head)
    words = text.split()
    first: list[str] = []
    while words and len(" ".join([*first, words[0]])) <= first_room:
        first.append(words.pop(0))
    if not first and len(head) < len(lead) + 10:  # a long first word: it starts here all the same
        first.append(words.pop(0))
    rest = textwrap.wrap(" ".join(words), width - len(lead), break_long_words=False, break_on_hyphens=False)
    lines = [(head + " ".join(first)).rstrip(), *(lead + line for line in rest)]
    return "\n".join(lines)


def counted(n: int, noun: str) -> str:
    """'1 cue', '3 cues', '0 cues' (a noun whose plural is its name + s)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
