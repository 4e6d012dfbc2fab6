"""--verify: each piece transcribed after it is made, and retaken when it does not say its text.

    verifier = Verifier.from_settings(settings)           # loads the recogniser (listen.py)
    engine.generate([request], checks=[verifier.for_request(0, request)])
    verifier.report(0)   # per piece: text, error, transcript, attempts, seed of the take kept, ok

The check is the engine's per-piece check (engine/pieces.py: `PieceCheck`): the engine shows it
each finished take and retakes a piece while it asks, with seed + k + 1000 x attempt, packing the
retakes into the same forwards as the rest. The error is the word error rate of the transcript
against the piece's text, both normalised the same way (`normalise`: case folded, punctuation
and symbols dropped, NFKC); for Chinese, Japanese, Korean and Thai (by --lang, or text in those
scripts) the character error rate. A piece over --verify-max-error is retaken up to
--verify-retries times; the take of least error is kept, with a warning when it is still over.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from ...engine.pieces import PieceTake
from . import listen

if TYPE_CHECKING:
    from ..settings.layers import Resolved

CHARACTER_LANGS = frozenset({"zh", "yue", "ja", "ko", "th", "cmn", "wuu", "lo", "my", "km"})
_CHAR_SCRIPT = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff]"
)
_TAG = re.compile(r"\[[^\]]*\]")  # control tags ([laughter], [pause 1s], [B EY1 S]) are not spoken words


def normalise(text: str) -> str:
    """The text as words are compared: tags dropped, NFKC, case folded, punctuation and symbols
    as spaces (an apostrophe inside a word kept), spaces collapsed."""
    text = unicodedata.normalize("NFKC", _TAG.sub(" ", text)).casefold()
    out = []
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if ch in "'\u2019" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append("'")
        elif cat[0] in "PSZC":
            out.append(" ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def by_characters(text: str, lang: str | None) -> bool:
    """Character error rate: a language without spaces between words."""
    base = listen.whisper_language(lang) if lang else None
    return base in CHARACTER_LANGS or (base is None and bool(_CHAR_SCRIPT.search(text)))


def units(text: str, chars: bool) -> list[str]:
    norm = normalise(text)
    return list(norm.replace(" ", "")) if chars else norm.split()


def edit_distance(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def error_rate(expected: str, heard: str, lang: str | None = None) -> float:
    """Word (or character) error rate of `heard` against `expected`: edits / expected units
    (0 when both are empty; 1 for anything heard against nothing expected)."""
    chars = by_characters(expected, lang)
    ref, hyp = units(expected, chars), units(heard, chars)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)


def max_tokens(text: str, lang: str | None = None) -> int:
    """A cap on the recogniser's decode: 3 tokens a word (2 a character without spaces), plus
    slack (a garbled take must not decode to Whisper's 448 tokens)."""
    chars = by_characters(text, lang)
    return 16 + (2 if chars else 3) * len(units(text, chars))


class PieceRow(TypedDict):
    """One piece's check as reported (`--json`, the server's verify header, the manifest)."""

    piece: int  # from 0
    text: str
    error: float | None  # of the take kept (None: never checked)
    transcript: str | None
    attempts: int
    kept: int  # the take kept, from 1
    seed: int | None
    ok: bool  # within --verify-max-error


class VerifySummary(TypedDict):
    """A request's check as one score (a batch line's `verify` in the manifest): see `summary`."""

    error: float
    worst: float
    attempts: int
    retakes: int
    passed: bool
    pieces: list[PieceRow]


@dataclass
class PieceVerdict:
    """What the check saw of one piece: every take's (error, transcript, seed), and the one kept."""

    text: str
    takes: list[tuple[float, str, int]] = field(default_factory=list)
    kept: int | None = None

    def as_dict(self, piece: int, max_error: float) -> PieceRow:
        k = self.kept if self.kept is not None else 0
        error, heard, seed = self.takes[k] if self.takes else (None, None, None)
        return {
            "piece": piece,
            "text": self.text,
            "error": None if error is None else round(error, 4),
            "transcript": heard,
            "attempts": len(self.takes),
            "kept": k + 1,
            "seed": seed,
            "ok": error is not None and error <= max_error,
        }


class RequestCheck:
    """The engine's PieceCheck for one request."""

    def __init__(self, recogniser: listen.Recogniser, lang: str | None, max_error: float, retries: int) -> None:
        self.recogniser, self.lang, self.max_error, self.retries = recogniser, lang, float(max_error), int(retries)
        self.pieces: dict[int, PieceVerdict] = {}

    def check(self, take: PieceTake) -> tuple[float, bool]:
        heard = self.recogniser.transcribe(
            take.audio, take.sample_rate, self.lang, max_tokens=max_tokens(take.text, self.lang), words=False
        ).text
        error = error_rate(take.text, heard, self.lang)
        verdict = self.pieces.setdefault(take.piece, PieceVerdict(take.text))
        verdict.takes.append((error, heard, take.seed))
        return error, error > self.max_error and take.attempt < self.retries

    def kept(self, piece: int, attempt: int, seed: int) -> None:
        self.pieces[piece].kept = attempt

    def report(self) -> list[PieceRow]:
        return [self.pieces[k].as_dict(k, self.max_error) for k in sorted(self.pieces)]

    def summary(self) -> VerifySummary:
        """The request as one score (a batch line's `verify` in the manifest), beside its pieces:
        `error`: the error rate of the whole text, each piece's kept take weighted by its words
        (characters for zh, ja, ko, th), i.e. all edits over all words; `worst`: the largest piece
        error; `attempts`: takes in all; `retakes`: attempts beyond one a piece; `passed`: every
        piece within --verify-max-error; `pieces`: `report()`."""
        rows = self.report()
        weighted = total = 0.0
        for k, verdict in self.pieces.items():
            n = len(units(verdict.text, by_characters(verdict.text, self.lang)))
            weighted += n * verdict.takes[verdict.kept or 0][0]
            total += n
        attempts = sum(r["attempts"] for r in rows)
        return {
            "error": round(weighted / total, 4) if total else 0.0,
            "worst": max((r["error"] for r in rows if r["error"] is not None), default=0.0),
            "attempts": attempts,
            "retakes": attempts - len(rows),
            "passed": all(r["ok"] for r in rows),
            "pieces": rows,
        }

    def warnings(self, label: str = "") -> list[str]:
        out = []
        for row in self.report():
            if not row["ok"]:
                out.append(
                    f"{label}piece {row['piece'] + 1} still reads {row['error']:.0%} wrong after "
                    f"{row['attempts']} takes (kept take {row['kept']}, seed {row['seed']}): heard "
                    f"{row['transcript']!r} for {row['text']!r}"
                )
        return out


class Verifier:
    """--verify for a run: one recogniser (kept loaded while the TTS model runs), a check per request."""

    def __init__(self, recogniser: listen.Recogniser, max_error: float, retries: int) -> None:
        self.recogniser, self.max_error, self.retries = recogniser, float(max_error), int(retries)

    @classmethod
    def from_settings(cls, values: Resolved) -> "Verifier":
        rec = listen.recogniser(values["asr_model"], values.get("device") or "auto", "--verify")
        return cls(rec, values["verify_max_error"], values["verify_retries"])

    def for_request(self, lang: str | None, max_error: float | None = None, retries: int | None = None) -> RequestCheck:
        """The check of one request (a batch line's own limits, when it gives them)."""
        return RequestCheck(
            self.recogniser,
            lang,
            self.max_error if max_error is None else max_error,
            self.retries if retries is None else retries,
        )

    def close(self) -> None:
        self.recogniser.close()
