"""SSML read into the parts a request is spoken in: pure, no model, no settings.

    doc = parse_ssml('<speak>Hi.<break time="1s"/><voice name="bob">Hello.</voice></speak>', "en")
    doc.parts     # (Part("Hi.", pause_before=0), Part("Hello.", voice="bob", pause_before=1.0))
    doc.warnings  # one per tag read as plain text

The subset people send: `speak` (the root), `p` and `s` (each ends as a sentence), `break` (`time`
500ms / 1.5s, else `strength` none..x-strong, else medium), `prosody rate` (x-slow..x-fast, a
percentage or a multiple: the speed, relative to the one around it), `sub alias` (the alias is
said), `say-as` (cardinal, ordinal, characters, date, time, telephone: sayas.py), `lang` and
`xml:lang` (the language), `voice name` (a voice). `emphasis`, `phoneme` and any other tag are
read as their words, with one warning per tag; `mark`, `desc`, `meta`, `metadata` and `lexicon`
say nothing.

Consecutive text of the same voice, language and rate is one part, its breaks pause tags in it
(`[pause 750ms]`); where the voice, the language or the rate changes a new part starts, and the
break between them is its `pause_before` (seconds of silence between two requests).

Parsed by the standard library's expat with no DTD: a document with a DOCTYPE or an entity
declaration is refused (so no billion laughs: entities are never expanded beyond XML's own five),
as is one over MAX_CHARS characters, MAX_DEPTH elements deep or of MAX_ELEMENTS elements. A
refusal is one line naming the line and column (`SsmlError`, an InvalidRequest of the text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.parsers import expat

from ...engine.errors import InvalidRequest
from ...engine.text.canvastext import add_punctuation
from ...engine.text.markup import BREAK_STRENGTH_SECONDS
from ..settings.values import shown_value
from .sayas import SAY_AS, say_as

__all__ = ["Part", "SsmlDocument", "SsmlError", "parse_ssml", "is_ssml", "MAX_CHARS", "MAX_DEPTH", "MAX_PARTS"]

MAX_CHARS = 200_000  # characters of one document
MAX_DEPTH = 64  # elements inside one another
MAX_ELEMENTS = 20_000  # elements of one document
MAX_PARTS = 200  # voice, language or rate changes (each part is its own request)
MAX_BREAK_SECONDS = 60.0  # one <break> (engine/text/pauses.MAX_PAUSE_SECONDS)
DEFAULT_BREAK = "medium"  # a <break/> without time or strength (SSML 1.1)
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
MIN_RATE, MAX_RATE = 0.1, 10.0  # the speed setting's bounds
SILENT = frozenset({"mark", "desc", "meta", "metadata", "lexicon"})  # elements whose content is not said
PLAIN = frozenset({"emphasis", "phoneme", "audio", "w", "token"})  # read as their words, with a warning
SENTENCES = frozenset({"p", "s", "paragraph", "sentence"})
_TIME_RE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)
_RATE_RE = re.compile(r"\s*([+-]?)(\d+(?:\.\d+)?|\.\d+)\s*(%?)\s*")
_START_RE = re.compile(
    r"\A\ufeff?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*(?:<!DOCTYPE\s+speak\b.*?>\s*)?<speak[\s>/]", re.DOTALL
)


class SsmlError(InvalidRequest):
    """Malformed or refused SSML: one line naming the line and column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"SSML{where}: {message}", "text")
        self.line, self.column = line, column


@dataclass(frozen=True)
class Part:
    """Text of one voice, language and rate: one request."""

    text: str  # the words, breaks inside it as pause tags
    voice: str | None = None  # a <voice name>; None: the request's own
    lang: str | None = None  # an xml:lang; None: the request's own
    rate: float | None = None  # a <prosody rate>, relative to the request's speed; None: none
    pause_before: float = 0.0  # seconds of silence before it (after the part before)
    line: int = 1  # where it starts in the document


@dataclass(frozen=True)
class SsmlDocument:
    parts: tuple[Part, ...]
    warnings: tuple[str, ...] = ()


def is_ssml(text: str) -> bool:
    """The text is an SSML document: it starts with <speak> (after an XML declaration, comments
    or a DOCTYPE, which the parser then refuses)."""
    return bool(_START_RE.match(text[:4096]))


@dataclass
class _Frame:
    tag: str
    voice: str | None
    lang: str | None
    rate: float | None
    collect: list[str] | None = None  # say-as and sub: their text, said at their end
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class _Chunk:
    text: str | None  # None: a pause
    key: tuple[str | None, str | None, float | None]
    line: int
    pause: float = 0.0


class _Reader:
    """expat's handlers: a stack of what is in force, the chunks of text and pauses read."""

    def __init__(self, parser, lang: str | None) -> None:
        self.p = parser
        self.stack: list[_Frame] = [_Frame("", None, None, None)]
        self.chunks: list[_Chunk] = []
        self.default_lang = lang
        self.silent = 0  # inside a silent element
        self.elements = 0
        self.warned: dict[str, str] = {}

    def where(self) -> tuple[int, int]:
        return self.p.CurrentLineNumber, self.p.CurrentColumnNumber + 1

    def fail(self, message: str) -> SsmlError:
        return SsmlError(message, *self.where())

    def warn(self, tag: str, message: str) -> None:
        self.warned.setdefault(tag, message)

    # --- expat's handlers -------------------------------------------------------------------
    def doctype(self, *_args) -> None:
        raise self.fail("a DOCTYPE is not allowed (no DTD, no entity declarations)")

    def entity(self, *_args) -> None:
        raise self.fail("an entity declaration is not allowed")

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.elements += 1
        if len(self.stack) > MAX_DEPTH:
            raise self.fail(f"elements are nested more than {MAX_DEPTH} deep")
        if self.elements > MAX_ELEMENTS:
            raise self.fail(f"more than {MAX_ELEMENTS} elements")
        tag = name.lower()
        top = self.stack[-1]
        if len(self.stack) == 1 and tag != "speak":
            raise self.fail(f"the root element must be <speak>, got <{name}>")
        frame = _Frame(tag, top.voice, top.lang, top.rate, attrs=attrs)
        lang = attrs.get("xml:lang")
        if lang is not None and lang.strip():
            frame.lang = lang.strip()
        if self.silent or tag in SILENT:
            self.silent += 1
        elif tag == "break":
            self.pause(self.break_seconds(attrs))
        elif tag == "prosody":
            self.prosody(frame, attrs)
        elif tag == "voice":
            voice = (attrs.get("name") or "").strip()
            if voice:
                frame.voice = voice
            else:
                self.warn("voice", "SSML <voice> without a name keeps the voice it is in")
        elif tag == "sub":
            frame.collect = []
        elif tag == "say-as":
            frame.collect = []
        elif tag in SENTENCES:
            self.text(" ")
        elif tag in PLAIN:
            self.warn(tag, f"SSML <{tag}> is read as plain text (its words are spoken as they are)")
        elif tag not in ("speak", "lang"):
            self.warn(tag, f"SSML <{_cut(name)}> is not read: its words are spoken as they are")
        self.stack.append(frame)

    def end(self, name: str) -> None:
        frame = self.stack.pop()
        if self.silent:
            self.silent -= 1
            return
        if frame.tag == "sub":
            alias = frame.attrs.get("alias")
            self.text(alias if alias is not None else "".join(frame.collect or ()))
        elif frame.tag == "say-as":
            self.text(self.said_as(frame))
        elif frame.tag in SENTENCES:
            self.end_sentence()

    def data(self, text: str) -> None:
        if not self.silent:
            self.text(text)

    # --- what they read ---------------------------------------------------------------------
    def key(self) -> tuple[str | None, str | None, float | None]:
        top = self.stack[-1]
        return top.voice, top.lang, top.rate

    def text(self, text: str) -> None:
        collecting = next((f for f in reversed(self.stack) if f.collect is not None), None)
        if collecting is not None:
            collecting.collect.append(text)  # type: ignore[union-attr]
            return
        last = self.chunks[-1] if self.chunks else None
        key = self.key()
        if last is not None and last.text is not None and last.key == key:
            last.text += text
        else:
            self.chunks.append(_Chunk(text, key, self.p.CurrentLineNumber))

    def pause(self, seconds: float) -> None:
        if seconds <= 0:
            self.text(" ")
            return
        last = self.chunks[-1] if self.chunks else None
        if last is not None and last.text is None:
            last.pause += seconds
        else:
            self.chunks.append(_Chunk(None, self.key(), self.p.CurrentLineNumber, seconds))

    def end_sentence(self) -> None:
        last = next((c for c in reversed(self.chunks) if c.text is not None and c.text.strip()), None)
        if last is not None and last.text is not None:
            last.text = add_punctuation(last.text.rstrip()) + " "

    def break_seconds(self, attrs: dict[str, str]) -> float:
        if "time" in attrs:
            m = _TIME_RE.fullmatch(attrs["time"])
            if not m:
                raise self.fail(f"<break time={shown_value(attrs['time'])}>: give a time such as 500ms or 1.5s")
            seconds = float(m.group(1)) / (1000.0 if m.group(2).lower() == "ms" else 1.0)
            if seconds > MAX_BREAK_SECONDS:
                raise self.fail(
                    f"<break time={shown_value(attrs['time'])}> is too long: at most {MAX_BREAK_SECONDS:g} s"
                )
            return seconds
        strength = attrs.get("strength", DEFAULT_BREAK).strip().lower()
        if strength not in BREAK_STRENGTH_SECONDS:
            raise self.fail(f"<break strength={shown_value(strength)}>: use {', '.join(BREAK_STRENGTH_SECONDS)}")
        return BREAK_STRENGTH_SECONDS[strength]

    def prosody(self, frame: _Frame, attrs: dict[str, str]) -> None:
        others = sorted(k for k in attrs if k != "rate")
        if others:
            self.warn("prosody", f"SSML <prosody {_cut(others[0])}> is not read (only its rate is)")
        if "rate" not in attrs:
            return
        raw = attrs["rate"].strip().lower()
        around = frame.rate if frame.rate is not None else 1.0
        if raw in RATES:
            rate = RATES[raw]
        else:
            m = _RATE_RE.fullmatch(raw)
            if not m:
                raise self.fail(f"<prosody rate={shown_value(attrs['rate'])}>: use x-slow..x-fast, 80%, +10% or 1.2")
            sign, number, percent = m.group(1), float(m.group(2)), m.group(3)
            if sign:  # a change: +10%, -20%, +0.5
                change = number / 100 if percent else number
                rate = around * (1 + change if sign == "+" else 1 - change)
            else:
                rate = around * (number / 100 if percent else number)
        if not MIN_RATE <= rate <= MAX_RATE:
            raise self.fail(
                f"<prosody rate={shown_value(attrs['rate'])}> is a speed of {rate:g}: use {MIN_RATE:g}..{MAX_RATE:g}"
            )
        frame.rate = round(rate, 4)

    def said_as(self, frame: _Frame) -> str:
        text = "".join(frame.collect or ())
        how = (frame.attrs.get("interpret-as") or "").strip().lower()
        if how not in SAY_AS:
            self.warn(
                f"say-as {how}",
                f"SSML <say-as interpret-as={shown_value(how)}> is read as its words (known: {', '.join(SAY_AS)})",
            )
            return text
        try:
            return say_as(how, text, frame.attrs.get("format"), frame.lang or self.default_lang)
        except InvalidRequest as e:
            if e.setting is None or e.setting == "text":
                raise self.fail(f"<say-as interpret-as={shown_value(how)}>: {e}") from None
            raise


def _cut(name: str, limit: int = 60) -> str:
    """A tag's or an attribute's name as a warning shows it: at most `limit` characters."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _parts(chunks: list[_Chunk]) -> tuple[Part, ...]:
    """Chunks of text and pauses joined into parts (see the module doc)."""
    parts: list[Part] = []
    text, key, line, lead, pending, words = "", None, 1, 0.0, 0.0, False

    def close() -> None:
        if words:
            parts.append(Part(" ".join(text.split()), *key, pause_before=lead, line=line))  # type: ignore[misc]

    for c in chunks:
        if c.text is None:
            pending += c.pause
        elif not c.text.strip():
            text += " " if words else ""
        else:
            if words and c.key != key:  # the voice, language or rate changes: a new part
                close()
                text, lead, pending, words = "", pending, 0.0, False
            if not words:
                key, line = c.key, c.line
            if pending:  # a pause inside the part (before the first words: a leading one)
                text += f" {_pause_tag(pending)} "
                pending = 0.0
            text += c.text
            words = True
    if pending and words:
        text += f" {_pause_tag(pending)}"
    close()
    return tuple(parts)


def _pause_tag(seconds: float) -> str:
    return f"[pause {round(seconds * 1000)}ms]"


def parse_ssml(text: str, lang: str | None = None) -> SsmlDocument:
    """The parts of an SSML document (see the module doc); `lang`: the request's language, for
    say-as outside any xml:lang. SsmlError (one line, with the line and column) when malformed,
    refused, or with nothing to say."""
    if len(text) > MAX_CHARS:
        raise SsmlError(f"the document is {len(text)} characters long: at most {MAX_CHARS}")
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    reader = _Reader(parser, lang)
    parser.StartDoctypeDeclHandler = reader.doctype
    parser.EntityDeclHandler = reader.entity
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.data
    parser.ExternalEntityRefHandler = lambda *_: 0  # never fetched: expat reports an error
    try:
        parser.Parse(text.lstrip("\ufeff"), True)
    except expat.ExpatError as e:
        raise SsmlError(expat.errors.messages[e.code], e.lineno, e.offset + 1) from None
    parts = _parts(reader.chunks)
    if not parts:
        raise SsmlError("the document has no words to speak")
    if len(parts) > MAX_PARTS:
        raise SsmlError(
            f"the voice, language or rate changes {len(parts) - 1} times: at most {MAX_PARTS} parts in one document"
        )
    return SsmlDocument(parts, tuple(reader.warned.values()))
