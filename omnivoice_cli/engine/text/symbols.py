"""Runs of a repeated symbol: what the model cannot say, taken out before normalisation.

The model makes a non-speech sound for a run of underscores (k2-fsa/OmniVoice#271) and reads
separator lines (`----`, `====`, `****`, `~~~~`, `####`, box-drawing lines such as `──────`) as
noise; the reference passes them through. `drop_symbol_runs` turns a run of 3 or more of the same
symbol (single spaces between them allowed: `* * *`) into:

- a pause (`[pause]`, 0.5 s) for underscores: a blank to fill in (`Name: ______`) reads as a pause;
- nothing for the other symbols; a run alone on its line (a separator) ends the sentence before it
  ('.' added when that line has no end punctuation), as a heading underlined with `====` would.

Shorter runs are left alone (`--` in a word, `**` of emphasis), and so is every `.` (`...`). A
deliberate difference from the reference (docs/correctness.md).
"""

from __future__ import annotations

import re

from .tables import punct_sets

__all__ = ["MIN_RUN", "drop_symbol_runs", "RUN_PAUSE"]

MIN_RUN = 3  # symbols in a run: '--' and '**' stay
RUN_PAUSE = "[pause]"  # what a run of underscores (a blank) becomes
_BLANKS = "_\uff3f"  # '_' and the full-width '＿'
_SYMBOLS = "_\\-=*~#+^\u2013\u2014\u2015\uff3f\uff0d\uff1d\uff5e\uff0a\uff03"  # and en/em dashes, full-width forms
_BOX = "\u2500-\u259f"  # box drawing and block elements, mixed freely ('├──┤', '════')
_RUN_RE = re.compile(
    rf"[ \t]*(?:(?P<s>[{_SYMBOLS}])(?:[ \t]?(?P=s)){{{MIN_RUN - 1},}}|[{_BOX}](?:[ \t]?[{_BOX}]){{{MIN_RUN - 1},}})[ \t]*"
)


def _alone_on_its_line(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return not text[line_start:start].strip() and not text[end:line_end].strip()


def drop_symbol_runs(text: str) -> str:
    """`text` with its runs of a repeated symbol made a pause or nothing (see the module doc);
    a text without such a run comes back unchanged."""
    if not _RUN_RE.search(text):
        return text
    out: list[str] = []
    pos = 0
    for m in _RUN_RE.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        if m.group().strip()[0] in _BLANKS:
            out.append(f" {RUN_PAUSE} ")
            continue
        if _alone_on_its_line(text, m.start(), m.end()):
            before = "".join(out).rstrip()
            if before and before[-1] not in punct_sets()[2] and not before.endswith("]"):
                before += "."
            out = [before, "\n" if before else ""]
            continue
        out.append(" ")  # a word boundary: 'well---maybe' is two words
    out.append(text[pos:])
    return "".join(out)
