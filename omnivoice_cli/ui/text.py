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

import re

__all__ = ["visible"]

# C0 (U+0000..U+001F) and DEL, C1 (U+0080..U+009F), the bidi embeddings/overrides/isolates, the
# line and paragraph separators (a new line to some terminals), and lone surrogates (which a
# UTF-8 terminal cannot be sent).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


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
