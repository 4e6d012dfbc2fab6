"""The plan of a book (no model): the chapters `--chapters` names, each cut into parts of typed
segments (Text, Pause), each part's content key (its work-folder file name) and seed, and the
chapter files' names. The book's run (app/book/book.py) plans each part's request on the batch run.

A part is a tuple of segments: `Text` (the book's words, cleaned: its brackets become
parentheses, so the book's "[1]" is never read as the model's [laughter] markup) and `Pause`
(seconds of silence: after the title, between two paragraphs). `part_text` writes a part as the
request's text, the one place a Pause becomes a `[pause Ns]` tag; the key is over that text, so
keys are what they were when parts were strings."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

from ...engine.errors import InvalidRequest
from ...engine.text.chunking import is_sentence_break  # not after 'U.S.' or 'Mr.' (the chunker's rule)
from ..batch.batchinput import Line
from ..marking import MARK_KEYS
from ..request import spoken_text
from ..settings.layers import Resolved
from ..settings.schema import MAX_SEED
from ..voices.voices import resolve_voice

TITLE_PAUSE = 1.0  # seconds of silence after a chapter's spoken title
PARAGRAPH_PAUSE = 0.6  # seconds between two paragraphs (and two parts) of a chapter
CHAPTER_LEAD = 0.5  # seconds of silence before a chapter's first word
CHAPTER_TAIL = 2.0  # seconds of silence after its last
PART_CHARS = 10_000  # characters of a part at most: about 11 minutes of speech, 65 MB of audio while spoken
PART_FORMAT = "flac"  # the parts in the work folder: lossless
PEAK_DBTP = -1.0  # the true-peak ceiling of the limiter
BOOK_SUFFIXES = (".m4b",)
# settings that do not change what is spoken (the part keys leave them out)
# (the lexicon neither: what it changes is in the key as the part's text as spoken, see lexicon_key)
NOT_IN_KEY = ("device", "threads", "compile", "format", "loudness", "lexicon", *MARK_KEYS)  # the mark: metadata
FILE_SETTINGS = ("ref",)  # settings naming a file: its content is in the key too
KEY_CHARS = 20  # hex digits of a part's key in its file name
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u3002\uff01\uff1f])\s+")
SettingsKey = dict[str, object]  # what of the run's settings is in every part's key (JSON values)


@dataclass(frozen=True)
class Text:
    """Words of a part, as the model reads them (cleaned: see _clean)."""

    text: str


@dataclass(frozen=True)
class Pause:
    """Silence inside a part."""

    seconds: float


Segment = Union[Text, Pause]
Part = tuple[Segment, ...]


def part_text(part: Part) -> str:
    """A part as the request's text: its words, each Pause as a `[pause Ns]` tag between them."""
    out = ""
    for seg in part:
        out += seg.text if isinstance(seg, Text) else f" [pause {seg.seconds:g}s] "
    return out


__all__ = [
    "Text",
    "Pause",
    "Part",
    "plan_parts",
    "part_text",
    "split_parts",
    "parse_chapters",
    "BookOutput",
    "book_output",
    "PartLine",
    "ChapterPlan",
]


# --------------------------------------------------------------------------------------------
# The chapters a run speaks, and their parts
# --------------------------------------------------------------------------------------------


def parse_chapters(spec: str, count: int) -> list[int]:
    """The chapter numbers `--chapters` names: "3", "3-5", "1,4,7-9", "5-" (to the last), in
    order and each once. InvalidRequest naming the value and what the book allows."""
    allowed = f"this book has chapters 1..{count}" if count > 1 else "this book has one chapter, 1"
    hint = f"{allowed} (e.g. --chapters 2, 1-{count} or 1,{count})" if count > 1 else allowed
    picked: set[int] = set()
    items = [item.strip() for item in (spec or "").split(",")]
    if not any(items):
        raise InvalidRequest(f"--chapters is empty: {hint}")
    for item in items:
        m = re.fullmatch(r"(\d{1,9})(?:\s*-\s*(\d{1,9})?)?", item)
        if m is None:
            raise InvalidRequest(f"--chapters {spec!r}: {item!r} is not a number or a range N-M: {hint}")
        first = int(m.group(1))
        last = first if "-" not in item else int(m.group(2)) if m.group(2) else count
        if first < 1 or last > count or first > last:
            shown = item if first <= last else f"{item} (backwards)"
            raise InvalidRequest(f"--chapters {shown}: {hint}")
        picked.update(range(first, last + 1))
    return sorted(picked)


def _clean(text: str) -> str:
    """One paragraph as the model reads it: spaces squashed, brackets as parentheses (the book's
    "[1]" must not read as the model's [laughter] or [pause] markup)."""
    return " ".join(text.replace("[", "(").replace("]", ")").split())


def _cut(paragraph: str, limit: int) -> list[str]:
    """A paragraph longer than `limit` cut between sentences, else between words, else anywhere."""
    if len(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    ends = [m for m in _SENTENCE_END.finditer(paragraph) if is_sentence_break(paragraph, m.start() - 1)]
    bounds = zip([0, *(m.end() for m in ends)], [*(m.start() for m in ends), len(paragraph)])
    for sentence in [paragraph[a:b] for a, b in bounds]:
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit + 1)
            cut = cut if cut > 0 else limit
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if pieces and len(pieces[-1]) + 1 + len(sentence) <= limit:
            pieces[-1] = f"{pieces[-1]} {sentence}"
        elif sentence:
            pieces.append(sentence)
    return [p for p in pieces if p]


def plan_parts(text: str, title: str | None, limit: int = PART_CHARS) -> list[Part]:
    """A chapter's text (paragraphs apart by blank lines) as its parts: the title and a
    TITLE_PAUSE first when given, paragraphs with a PARAGRAPH_PAUSE between them, each part at
    most about `limit` characters as rendered, cut between paragraphs where it can."""
    gap = len(part_text((Pause(PARAGRAPH_PAUSE),)))  # what a pause takes of a part's characters
    paragraphs = [c for p in re.split(r"\n\s*\n", text) if (q := _clean(p)) for c in _cut(q, limit)]
    groups: list[list[str]] = []
    size = limit + 1
    for p in paragraphs:
        if size + gap + len(p) > limit:
            groups.append([])
            size = -gap
        groups[-1].append(p)
        size += gap + len(p)
    parts: list[Part] = []
    for g in groups:
        segments: list[Segment] = []
        for i, p in enumerate(g):
            segments += [Pause(PARAGRAPH_PAUSE), Text(p)] if i else [Text(p)]
        parts.append(tuple(segments))
    if title and _clean(title):
        head = Text(_clean(title))
        parts = [(head, Pause(TITLE_PAUSE), *parts[0]), *parts[1:]] if parts else [(head,)]
    return parts


def split_parts(text: str, title: str | None, limit: int = PART_CHARS) -> list[str]:
    """plan_parts' parts as the requests' texts (part_text)."""
    return [part_text(p) for p in plan_parts(text, title, limit)]


def _file_digest(path: str) -> str | None:
    """sha256 of a file a setting names (None when it is not a readable file)."""
    p = Path(path).expanduser()
    try:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def settings_key(values: dict[str, object]) -> SettingsKey:
    """What of the run's settings goes into every part's key: all that change the audio, and the
    content of the files they name."""
    kept = {k: v for k, v in values.items() if k not in NOT_IN_KEY}
    if kept.get("instruct_text") is None:  # added later: a book begun before it resumes with its keys
        kept.pop("instruct_text", None)
    for name in FILE_SETTINGS:
        if isinstance(file := kept.get(name), str):
            kept[f"{name}_sha256"] = _file_digest(file)
    if isinstance(voice := kept.get("voice"), str):  # a saved voice: its file's content
        try:
            kept["voice_sha256"] = _file_digest(str(resolve_voice(voice, None)))
        except (InvalidRequest, OSError):
            kept["voice_sha256"] = None  # planning the parts then says what is wrong with it
    return kept


def lexicon_key(text: str, resolved: Resolved) -> tuple[str, list[tuple[str, str]]]:
    """What a part's key is over, and what the lexicon replaced in it. Without a lexicon, or
    where it replaces nothing, the part's text (so the key is as without one); where it does,
    the text and the text as the model is given it (spoken_text: after the lexicon), so an
    edited lexicon gives new keys to exactly the parts whose spoken words it changes."""
    if resolved["lexicon"] is None:
        return text, []
    replaced: list[tuple[str, str]] = []
    try:
        said = spoken_text(text, resolved, replaced)[0]
    except InvalidRequest:  # planning the part says what is wrong
        return text, []
    return (f"{text}\0{said}" if replaced else text), replaced


def part_key(text: str, key_settings: SettingsKey) -> str:
    data = json.dumps({"v": 1, "text": text, "settings": key_settings}, sort_keys=True, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def part_seed(text: str, base: int | None) -> int:
    """A part's seed: from its text, moved by --seed when given (in 0..MAX_SEED)."""
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    return h % 2**31 if base is None else (base + h) % (MAX_SEED + 1)


def chapter_stem(number: int, title: str, width: int) -> str:
    """A chapter's file name without extension: "01-The-Storm" (letters and digits of any script
    kept, every other run of characters one '-', at most 60 characters of title)."""
    words = re.sub(r"[\W_]+", "-", title).strip("-")[:60].strip("-")
    return f"{number:0{width}d}" + (f"-{words}" if words else "")


@dataclass
class PartLine(Line):
    """A batch line that is one part of the book (one or more chapters may share it)."""

    name: str = ""  # its file in the work folder: "KEY.flac" (a batch line's output name)
    chapter: int = 0  # the first chapter that has it
    part: int = 1
    parts: int = 1
    estimate: float = 0.0  # seconds of audio, the engine's estimate
    pieces: int = 0  # the engine's pieces (generations) of it
    replaced: dict[tuple[str, str], int] = field(default_factory=dict)  # the lexicon's (words, say): times
    segments: Part = ()  # the part as planned (its text is part_text(segments))

    def fail(self, message: str) -> None:
        prefix = f"chapter {self.chapter} (part {self.part}/{self.parts}): "
        message = re.sub(rf"^line {self.number}: ", "", message)
        self.error = message if message.startswith(prefix) else prefix + message


@dataclass
class ChapterPlan:
    number: int
    title: str
    source: str
    words: int
    stem: str  # its file name without extension ("01-The-Storm")
    parts: list[PartLine] = field(default_factory=list)

    @property
    def estimate(self) -> float:
        gaps = PARAGRAPH_PAUSE * max(0, len(self.parts) - 1)
        return CHAPTER_LEAD + sum(p.estimate for p in self.parts) + gaps + CHAPTER_TAIL


@dataclass(frozen=True)
class BookOutput:
    """What -o names: one .m4b audiobook (its chapters marked in it), or a folder of chapter files."""

    path: Path  # the .m4b, or the folder
    m4b: bool  # one .m4b file; else a folder, one file per chapter

    @property
    def kind(self) -> Literal["m4b", "folder"]:
        """As the reports name it."""
        return "m4b" if self.m4b else "folder"

    @property
    def folder(self) -> Path:
        """Where the outputs go: the folder, or the .m4b's folder."""
        return self.path.parent if self.m4b else self.path

    @property
    def work(self) -> Path:
        """The work folder (the parts, book.json): beside an .m4b, inside a folder."""
        return Path(f"{self.path}.parts") if self.m4b else self.path / ".parts"


def book_output(spec: str) -> BookOutput:
    """The output -o names: a .m4b file, or a folder (it exists, ends in '/', or has no
    extension). InvalidRequest for anything else."""
    if not spec or not spec.strip():
        raise InvalidRequest("-o is empty: give a .m4b file (one audiobook) or a folder (one file per chapter)")
    path = Path(spec).expanduser()
    if spec.endswith(("/", os.sep)) or path.is_dir() or not path.suffix:
        if path.exists() and not path.is_dir():
            raise InvalidRequest(f"-o {spec!r} is a file: give a folder (it is created when missing) or a .m4b file")
        return BookOutput(path, m4b=False)
    if path.suffix.lower() in BOOK_SUFFIXES:
        return BookOutput(path, m4b=True)
    raise InvalidRequest(
        f"-o {spec!r} has the extension {path.suffix!r}: give a .m4b file (one audiobook with chapter marks) "
        "or a folder (one file per chapter; end its name with '/')"
    )
