"""Voice-design words in free text: every vocabulary item and synonym a text names, in order,
each marked when a negation ("not", "don't", "不要") stands just before it in its clause.

    find_instruct_phrases("a deep British male voice, not whispering")
        -> [deep (low pitch), British (british accent), male (male), whispering (whisper, negated)]

It makes no choice between what it finds: `app.instruct.read_free` (the server's free-text
`instructions`) chooses, and `engine.instructs.resolve_instruct` names what an unknown
--instruct item holds in its error (so the engine needs it too: it cannot import the app).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .vocabulary import ZH_RE, PhraseTables, phrase_tables

__all__ = ["InstructPhrase", "find_instruct_phrases", "NEGATION_REACH"]

_SCAN_RE = re.compile(r"[A-Za-z]+|[\u4e00-\u9fff]+")  # English words and runs of Chinese
_GAP_RE = re.compile(r"[\s-]+")  # what may stand between the words of one phrase
_CLAUSE_RE = re.compile(r"[,.;:!?，。；：！？]")  # ends a negation's reach
_NEGATIONS_EN = frozenset(
    {"not", "no", "never", "without", "don", "doesn", "didn", "isn", "aren", "wasn", "won", "nor", "avoid", "non"}
)
_CLAUSE_WORDS_EN = frozenset({"but", "and", "or", "yet", "instead", "rather", "than"})
_NEGATIONS_ZH = ("不要太", "不要", "不是", "不用", "不太", "别太", "没有", "不", "别", "无")
NEGATION_REACH = 4  # English words before a phrase that a negation may stand in


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
    t = phrase_tables()
    tokens = list(_SCAN_RE.finditer(text))
    words = [(i, m.group().lower()) for i, m in enumerate(tokens) if not ZH_RE.match(m.group())]
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
        if ZH_RE.match(m.group()):
            found += _chinese_phrases(m.group(), m.start(), t)
    return sorted(found, key=lambda p: p.start)


def _negated_en(text: str, tokens: list[re.Match[str]], first: int) -> bool:
    i = first
    for _ in range(NEGATION_REACH):
        if i == 0 or _CLAUSE_RE.search(text[tokens[i - 1].end() : tokens[i].start()]):
            return False
        i -= 1
        word = tokens[i].group().lower()
        if word in _NEGATIONS_EN:
            return True
        if word in _CLAUSE_WORDS_EN or ZH_RE.match(word):
            return False
    return False


def _chinese_phrases(run: str, offset: int, t: PhraseTables) -> list[InstructPhrase]:
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
