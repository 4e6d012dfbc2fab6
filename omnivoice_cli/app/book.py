"""`omnivoice book`: a book (EPUB, Markdown, plain text) into an audiobook, on the batch run.

    omnivoice book novel.epub -o novel.m4b --voice alice   # one .m4b: chapter marks, tags, cover
    omnivoice book notes.md -o out/ --format mp3           # one file per chapter: 01-Intro.mp3 ...

A run (`BookRun`), in order:
  1. read the book (bookread.open_book: chapters, titles, metadata, cover; front and back matter
     skipped unless --keep-front-matter), keep the chapters --chapters names, and cut each
     chapter into parts: its title (unless --no-titles) and a TITLE_PAUSE, then its paragraphs
     with PARAGRAPH_PAUSE between them, at most PART_CHARS characters a part (a longer chapter
     is cut between paragraphs, else between sentences). Each part is one batch line;
  2. speak the parts with the batch run (batch.BatchRun: its packing into Engine.generate calls,
     its manifest, its executor: this process or --ray's cluster) into the work folder
     (`novel.m4b.parts/`, or `out/.parts/` for a folder), one lossless FLAC file per part, named
     by the part's content key: a hash of its text and of every setting that changes its audio
     (hardware aside: device, threads, compile). A part whose file exists is not spoken again,
     so a rerun after Ctrl-C or a kill resumes, and a changed chapter text or setting gives new
     keys for the parts it changes and only those are spoken. Seeds: each part's comes from its
     text (and --seed S when given), so an unchanged part is spoken the same way;
  3. once every part is there, assemble each output: the whole book for .m4b, each chapter for
     a folder. A chapter is CHAPTER_LEAD of silence, its parts (PARAGRAPH_PAUSE between two),
     then CHAPTER_TAIL of silence. The loudness of each whole output is measured (ITU-R
     BS.1770) and one gain brings it to the target (-18 LUFS by default, --loudness), with a
     true-peak limiter at -1 dBTP: never a gain per part. An output whose inputs did not change
     is not written again (book.json in the work folder keeps each output's key), so finished
     chapter files stay byte for byte. Beside them: the chapter list as JSON and, with
     --subtitles, one subtitle file per chapter (times on that chapter's file in a folder, on
     the .m4b's timeline for an .m4b).

Every file is written to a temporary name and renamed: nothing is ever half-written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from ..engine.errors import InvalidRequest, MissingExtra, OmniVoiceError
from . import settings as st
from .batch import BatchRun, Line, remove_stale_temporaries
from .manifest import MANIFEST, _open_regular, done_records, fingerprint, is_recorded
from .session import NoProgress, Session
from .signals import HoldSignals, Stop

TITLE_PAUSE = 1.0  # seconds of silence after a chapter's spoken title
PARAGRAPH_PAUSE = 0.6  # seconds between two paragraphs (and two parts) of a chapter
CHAPTER_LEAD = 0.5  # seconds of silence before a chapter's first word
CHAPTER_TAIL = 2.0  # seconds of silence after its last
PART_CHARS = 10_000  # characters of a part at most: about 11 minutes of speech, 65 MB of audio while spoken
BOOK_GROUP_SIZE = 8  # parts per Engine.generate call (it keeps every result of a call until the call ends)
DEFAULT_LOUDNESS = -18.0  # LUFS, integrated, over each whole output
PEAK_DBTP = -1.0  # the true-peak ceiling of the limiter
PART_FORMAT = "flac"  # the parts in the work folder: lossless
STATE = "book.json"  # in the work folder: the key of each output written
CHAPTERS_JSON = "chapters.json"  # a folder's chapter list (an .m4b's: NAME.chapters.json beside it)
BOOK_SUFFIXES = (".m4b",)
# settings that do not change what is spoken (the part keys leave them out)
# (the lexicon neither: what it changes is in the key as the part's text as spoken, see lexicon_key)
NOT_IN_KEY = ("device", "threads", "compile", "format", "loudness", "lexicon")
FILE_SETTINGS = ("ref",)  # settings naming a file: its content is in the key too
KEY_CHARS = 20  # hex digits of a part's key in its file name
MAX_STATE_BYTES = 16 * 1024 * 1024  # book.json and a part's .pieces.json are read up to here
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u3002\uff01\uff1f])\s+")

__all__ = ["BookRun", "BookReport", "BookState", "parse_chapters", "output_kind", "split_parts"]


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
    from ..engine.text import is_sentence_break  # not after 'U.S.' or 'Mr.' (the chunker's rule)

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


def split_parts(text: str, title: str | None, limit: int = PART_CHARS) -> list[str]:
    """A chapter's text (paragraphs apart by blank lines) as the texts of its parts: the title and
    a TITLE_PAUSE first when given, paragraphs joined by PARAGRAPH_PAUSE tags, each part at most
    about `limit` characters, cut between paragraphs where it can."""
    gap = f" [pause {PARAGRAPH_PAUSE:g}s] "
    paragraphs = [c for p in re.split(r"\n\s*\n", text) if (q := _clean(p)) for c in _cut(q, limit)]
    groups: list[list[str]] = []
    size = limit + 1
    for p in paragraphs:
        if size + len(gap) + len(p) > limit:
            groups.append([])
            size = -len(gap)
        groups[-1].append(p)
        size += len(gap) + len(p)
    parts = [gap.join(g) for g in groups]
    if title and _clean(title):
        head = f"{_clean(title)} [pause {TITLE_PAUSE:g}s] "
        parts = [head + parts[0], *parts[1:]] if parts else [head.split(" [pause")[0]]
    return parts


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


def settings_key(values: dict[str, Any]) -> dict[str, Any]:
    """What of the run's settings goes into every part's key: all that change the audio, and the
    content of the files they name."""
    kept = {k: v for k, v in values.items() if k not in NOT_IN_KEY}
    for name in FILE_SETTINGS:
        if isinstance(kept.get(name), str):
            kept[f"{name}_sha256"] = _file_digest(kept[name])
    if isinstance(kept.get("voice"), str):  # a saved voice: its file's content
        from .voices import resolve_voice

        try:
            kept["voice_sha256"] = _file_digest(str(resolve_voice(kept["voice"], None)))
        except (InvalidRequest, OSError):
            kept["voice_sha256"] = None  # planning the parts then says what is wrong with it
    return kept


def lexicon_key(text: str, resolved: st.Resolved) -> tuple[str, list[tuple[str, str]]]:
    """What a part's key is over, and what the lexicon replaced in it. Without a lexicon, or
    where it replaces nothing, the part's text (so the key is as without one); where it does,
    the text and the text as the model is given it (spoken_text: after the lexicon), so an
    edited lexicon gives new keys to exactly the parts whose spoken words it changes."""
    if resolved["lexicon"] is None:
        return text, []
    from .request import spoken_text

    replaced: list[tuple[str, str]] = []
    try:
        said = spoken_text(text, resolved, replaced)[0]
    except InvalidRequest:  # planning the part says what is wrong
        return text, []
    return (f"{text}\0{said}" if replaced else text), replaced


def part_key(text: str, key_settings: dict[str, Any]) -> str:
    data = json.dumps({"v": 1, "text": text, "settings": key_settings}, sort_keys=True, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def part_seed(text: str, base: int | None) -> int:
    """A part's seed: from its text, moved by --seed when given (in 0..MAX_SEED)."""
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    return h % 2**31 if base is None else (base + h) % (st.MAX_SEED + 1)


def chapter_stem(number: int, title: str, width: int) -> str:
    """A chapter's file name without extension: "01-The-Storm" (letters and digits of any script
    kept, every other run of characters one '-', at most 60 characters of title)."""
    words = re.sub(r"[\W_]+", "-", title).strip("-")[:60].strip("-")
    return f"{number:0{width}d}" + (f"-{words}" if words else "")


@dataclass
class PartLine(Line):
    """A batch line that is one part of the book (one or more chapters may share it)."""

    chapter: int = 0  # the first chapter that has it
    part: int = 1
    parts: int = 1
    estimate: float = 0.0  # seconds of audio, the engine's estimate
    pieces: int = 0  # the engine's pieces (generations) of it
    replaced: dict[tuple[str, str], int] = field(default_factory=dict)  # the lexicon's (words, say): times

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


def output_kind(spec: str) -> tuple[Path, str]:
    """(path, "m4b" | "folder") of -o: a .m4b file, or a folder (it exists, ends in '/', or has no
    extension). InvalidRequest for anything else."""
    if not spec or not spec.strip():
        raise InvalidRequest("-o is empty: give a .m4b file (one audiobook) or a folder (one file per chapter)")
    path = Path(spec).expanduser()
    if spec.endswith(("/", os.sep)) or path.is_dir() or not path.suffix:
        if path.exists() and not path.is_dir():
            raise InvalidRequest(f"-o {spec!r} is a file: give a folder (it is created when missing) or a .m4b file")
        return path, "folder"
    if path.suffix.lower() in BOOK_SUFFIXES:
        return path, "m4b"
    raise InvalidRequest(
        f"-o {spec!r} has the extension {path.suffix!r}: give a .m4b file (one audiobook with chapter marks) "
        "or a folder (one file per chapter; end its name with '/')"
    )


# --------------------------------------------------------------------------------------------
# Progress over the whole book
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BookState:
    """Where a book run stands, for the face's bars: chapters, the current chapter's parts, and
    the audio (the engine's estimates) done, with an ETA from the rate measured so far."""

    chapters_done: int
    chapters: int
    chapter: int | None  # the number of the first chapter not done (None: all done)
    title: str
    parts_done: int  # of that chapter
    parts: int
    audio_done: float  # estimated seconds of audio whose parts are done (resumed ones too)
    audio_total: float
    eta: float | None  # seconds left, once a part was spoken in this run
    failed: int = 0  # parts


class BookProgress(Protocol):
    """What the face's bars implement (ui/progress.BookBars)."""

    shows_steps: bool

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...

    def update(self, state: BookState) -> None: ...

    def step(self, done: int, total: int) -> None: ...


class NoBookProgress(NoProgress):
    def update(self, state: BookState) -> None:
        return None


class Tracker:
    """The batch run's Progress for a book: it counts parts per chapter and hands BookState to
    the face's bars as each part ends (in time linear in the parts: a book may have thousands)."""

    def __init__(self, bars: BookProgress, chapters: list[ChapterPlan], work: Path) -> None:
        self.bars, self.chapters, self.work = bars, chapters, work
        self.where: dict[str, list[int]] = {}  # a part's name -> the chapters (indices) that have it
        for i, ch in enumerate(chapters):
            for p in ch.parts:
                self.where.setdefault(p.name, []).append(i)
        self.left = [len(ch.parts) for ch in chapters]  # parts not done, per chapter
        self.total = sum(ch.estimate for ch in chapters)
        self.done: set[str] = set()
        self.audio_done = 0.0  # estimated seconds of the parts done, and of the chapters' silences
        self.chapters_done = 0
        self.first = 0  # the first chapter not done
        self.failed = 0
        self.t0: float | None = None  # the first forward of this run
        self.spoken = 0.0  # estimated seconds spoken in this run

    @property
    def shows_steps(self) -> bool:
        return self.bars.shows_steps

    def __enter__(self) -> "Tracker":
        self.bars.__enter__()
        for name in self.where:
            if (self.work / name).exists():  # what the batch will skip
                self._mark(name)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bars.__exit__(*exc)

    def line(self, status: str, what: str = "") -> None:
        return None  # told by finished(), which knows the part

    def step(self, done: int, total: int) -> None:
        if self.t0 is None:
            self.t0 = time.perf_counter()
        self.bars.step(done, total)

    def _mark(self, name: str) -> float:
        """A part is done: count it in its chapters; its estimated seconds."""
        if name in self.done or name not in self.where:
            return 0.0
        self.done.add(name)
        for i in self.where[name]:
            ch = self.chapters[i]
            self.left[i] -= sum(p.name == name for p in ch.parts)
            self.audio_done += sum(p.estimate for p in ch.parts if p.name == name)
            if self.left[i] == 0:
                self.chapters_done += 1
                self.audio_done += ch.estimate - sum(p.estimate for p in ch.parts)  # its silences
        while self.first < len(self.chapters) and self.left[self.first] == 0:
            self.first += 1
        return next(p.estimate for p in self.chapters[self.where[name][0]].parts if p.name == name)

    def finished(self, line: PartLine, status: str) -> None:
        if status == "done":
            self.spoken += self._mark(line.name)
        else:
            self.failed += 1
        self.bars.update(self.state())

    def state(self) -> BookState:
        current = self.chapters[self.first] if self.first < len(self.chapters) else None
        eta = None
        if self.spoken > 0 and self.t0 is not None:
            eta = (time.perf_counter() - self.t0) / self.spoken * max(0.0, self.total - self.audio_done)
        return BookState(
            chapters_done=self.chapters_done,
            chapters=len(self.chapters),
            chapter=current.number if current else None,
            title=current.title if current else "",
            parts_done=len(current.parts) - self.left[self.first] if current else 0,
            parts=len(current.parts) if current else 0,
            audio_done=self.audio_done,
            audio_total=self.total,
            eta=eta,
            failed=self.failed,
        )


# --------------------------------------------------------------------------------------------
# The parts, spoken by the batch run
# --------------------------------------------------------------------------------------------


class PartsRun(BatchRun):
    """The batch run over a book's parts (planned by BookRun, not read from a file)."""

    tracker: Tracker | None = None

    def plan(self) -> None:
        self.report.lines = len(self.lines)

    def plan_line(self, line: Line, run: st.Resolved, width: int) -> None:
        """batch's plan, the part as spoken: no loudness of its own (a preset's `loudness` is the
        book's, over each whole output, never a part's)."""
        super().plan_line(line, run, width)
        if line.built.settings.get("loudness") is not None:
            line.built.settings = line.built.settings.with_values({"loudness": None})

    def warn(self, line: Line, warnings: list[str]) -> None:
        for w in self._once.new(warnings):
            where = f"chapter {line.chapter}" if isinstance(line, PartLine) else f"line {line.number}"
            self.report.warnings.append(f"{where}: {w}")
            self.echo(f"Warning: {where}: {w}")

    def save_result(self, line: Line, result: Any, started: float) -> None:
        pieces = result.pieces or [(_spoken(line.built.request.text), 0, len(result.audio))]
        record = {"samples": len(result.audio), "sample_rate": result.sample_rate, "pieces": pieces}
        try:  # written before the part: a part always has its pieces (for the subtitles)
            _write_json(self.out / pieces_name(line.name), record)
        except OSError as e:
            self.fail_line(line, f"cannot write {self.out / pieces_name(line.name)}: {e.strerror or e}")
            return
        super().save_result(line, result, started)
        if self.tracker is not None and line.status == "done":
            self.tracker.finished(line, "done")

    def fail_line(self, line: Line, message: str) -> None:
        super().fail_line(line, message)
        if self.tracker is not None:
            self.tracker.finished(line, "failed")


def _spoken(text: str) -> str:
    from ..engine.text import split_pauses

    return " ".join(split_pauses(text)[0])


def pieces_name(part: str) -> str:
    return part[: -len(PART_FORMAT) - 1] + ".pieces.json"


def _read_json(path: Path) -> Any:
    """A JSON file of the work folder, or None: read only when a regular file (never through a
    symbolic link), at most MAX_STATE_BYTES, and None for anything that does not parse."""
    f = _open_regular(path)
    if f is None:
        return None
    with f:
        raw = f.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        return None
    try:
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None


def read_pieces(path: Path) -> dict[str, Any] | None:
    """A part's .pieces.json, checked: {"samples": int, "sample_rate": int, "pieces": [[text,
    start, end], ...]} with 0 <= start <= end <= samples; None when it is anything else."""
    record = _read_json(path)
    if not isinstance(record, dict):
        return None
    samples, rate, pieces = record.get("samples"), record.get("sample_rate"), record.get("pieces")
    if not (isinstance(samples, int) and isinstance(rate, int) and rate > 0 and isinstance(pieces, list)):
        return None
    for p in pieces:
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str)):
            return None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in p[1:]) or not 0 <= p[1] <= p[2] <= samples:
            return None
    return record


def _write_json(path: Path, data: Any) -> None:
    from ..media.output import replace_atomically

    raw = (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8", "surrogatepass")
    replace_atomically(path, lambda f: f.write(raw))


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class BookReport:
    chapters: int = 0
    parts: int = 0
    done: int = 0  # parts spoken by this run
    skipped: int = 0  # parts already there
    failed: int = 0
    pending: int = 0
    audio_seconds: float = 0.0  # spoken by this run
    generate_seconds: float = 0.0
    load_seconds: float | None = None
    wall_seconds: float = 0.0
    duration: float = 0.0  # seconds of the book's outputs, all together
    written: list[str] = field(default_factory=list)  # outputs written by this run
    kept: list[str] = field(default_factory=list)  # outputs already up to date
    loudness: dict[str, dict[str, float | None]] = field(default_factory=dict)  # per output
    interrupted: int | None = None
    manifest: Path | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rtf(self) -> float | None:
        return self.generate_seconds / self.audio_seconds if self.audio_seconds > 0 else None


class BookRun:
    """One book: plan its chapters and parts (no model), speak the parts left, assemble."""

    def __init__(
        self,
        book_path: str | Path,
        output: str | None,
        *,
        preset: st.Preset | None,
        flags: dict[str, Any],
        chapters: str | None = None,
        titles: bool = True,
        keep_front_matter: bool = False,
        subtitles: str | None = None,
        session: Session | None = None,
        bars: Callable[[], BookProgress] | None = None,
        executor: Any = None,
    ) -> None:
        self.book_path, self.spec = Path(book_path), output
        self.preset, self.flags = preset, dict(flags)
        self.chapter_spec, self.titles, self.keep_front_matter = chapters, titles, keep_front_matter
        self.subtitles = subtitles
        self.session = session or Session()
        self.bars = bars or NoBookProgress
        self.report = BookReport()
        self.book: Any = None
        self.plans: list[ChapterPlan] = []
        self.warnings: list[str] = []  # about the book, found before anything is spoken (its cover)
        self.cover_ok = False  # the book's cover is used (checked as the .m4b writer uses it)
        self.sha: dict[str, str] = {}  # each part's sha256, checked as the outputs are assembled
        self.output, self.kind = output_kind(output) if output is not None else (None, None)
        self.work = self._work_folder()
        part_flags = {k: v for k, v in self.flags.items() if k != "loudness"}  # never per part
        self.parts = PartsRun(
            self.book_path, self.work or Path("."), preset=preset, flags=part_flags, executor=executor
        )
        self.parts.group_size = BOOK_GROUP_SIZE

    def _work_folder(self) -> Path | None:
        if self.output is None:
            return None
        return Path(f"{self.output}.parts") if self.kind == "m4b" else self.output / ".parts"

    # -- planning ------------------------------------------------------------------------

    def settings(self) -> st.Resolved:
        layers = [(self.preset.origin, self.preset.settings)] if self.preset else []
        return st.resolve(*layers, (st.FLAG_SOURCE, self.flags))

    def loudness_target(self) -> float | None:
        """The LUFS each output is brought to: the `loudness` setting, else DEFAULT_LOUDNESS."""
        value = self.settings().get("loudness")
        return DEFAULT_LOUDNESS if value is None else float(value)

    def audio_format(self):
        """The format of a folder's chapter files (the `format` setting); an .m4b is AAC."""
        from ..media.output import check_available, format_named

        if self.kind == "m4b":
            if "format" in self.flags:
                raise InvalidRequest(
                    f"--format {self.flags['format']} is for a folder output (-o DIR/, one file per chapter): "
                    "an .m4b is AAC"
                )
            return None
        fmt = format_named(self.settings()["format"])
        check_available(fmt)
        return fmt

    def _check_extras(self) -> None:
        """What the outputs need, checked before anything is read or spoken: PyAV for an .m4b,
        pyloudnorm (its filters) for the loudness every output is brought to."""
        if self.kind == "m4b":
            try:
                import av  # noqa: F401
            except ImportError:
                raise MissingExtra("writing an .m4b audiobook", "PyAV", "book") from None
        if self.kind is not None:
            from ..media.loudness import _libraries

            try:
                _libraries()
            except MissingExtra:
                raise MissingExtra("the loudness of a book's outputs", "pyloudnorm", "book") from None

    def _check_cover(self) -> None:
        """The book's cover checked as the .m4b writer will use it (media/m4b.cover_image: its
        size from the header, then decoded whole), before anything is spoken: one it cannot use
        is left out, with a warning (the book is still written, without a cover)."""
        self.warnings = list(self.book.info.warnings)
        self.cover_ok = self.book.info.cover is not None
        if self.cover_ok and self.kind == "m4b":
            from ..media.m4b import cover_image

            try:
                cover_image(self.book.info.cover)
            except InvalidRequest as e:
                self.cover_ok = False
                self.warnings.append(f"{e}; the book is written without it")
        for message in self.warnings:
            self.report.warnings.append(message)

    def plan(self, *, keep_text: bool = True) -> None:
        """Read the book, pick the chapters, cut them into parts and plan each part's request
        (InvalidRequest for the book or the run, or for a part that cannot be planned).
        keep_text=False (a dry run) drops each part's text once it is estimated."""
        from .bookread import open_book

        self.fmt = self.audio_format()
        self._check_extras()
        self.book = book = open_book(self.book_path, keep_front_matter=self.keep_front_matter)
        self._check_cover()
        if len(book) == 0:
            raise InvalidRequest(f"{self.book_path}: no chapter to speak (every chapter is empty or front matter)")
        numbers = parse_chapters(self.chapter_spec, len(book)) if self.chapter_spec else None
        resolved = self.settings()
        key_settings = settings_key(dict(resolved.values))
        run = self.parts.run_settings()
        width = max(2, len(str(len(book))))
        words = {ref.number: ref.words for ref in book.outline}
        by_name: dict[str, PartLine] = {}
        for chapter in book.chapters(numbers):
            plan = ChapterPlan(
                chapter.number,
                chapter.title,
                chapter.source,
                words.get(chapter.number, 0),
                chapter_stem(chapter.number, chapter.title, width),
            )
            texts = split_parts(chapter.text, chapter.title if self.titles else None)
            if not texts:  # nothing to say (no title, no words)
                continue
            for i, text in enumerate(texts, start=1):
                keyed, replaced = lexicon_key(text, resolved)
                name = f"{part_key(keyed, key_settings)[:KEY_CHARS]}.{PART_FORMAT}"
                line = by_name.get(name)
                if line is None:
                    line = PartLine(
                        len(by_name) + 1, name=name, text=text, chapter=chapter.number, part=i, parts=len(texts)
                    )
                    for pair in replaced:
                        line.replaced[pair] = line.replaced.get(pair, 0) + 1
                    line.fields = {"output": name, "seed": part_seed(text, self.flags.get("seed"))}
                    by_name[name] = self._plan_part(line, run, keep_text)
                plan.parts.append(line)
            self.plans.append(plan)
        if not self.plans:
            raise InvalidRequest(f"{self.book_path}: the chapters picked have nothing to speak")
        self.parts.lines = list(by_name.values())
        self.report.chapters, self.report.parts = len(self.plans), len(self.parts.lines)

    def _plan_part(self, line: PartLine, run: st.Resolved, keep: bool) -> PartLine:
        """Plan one part's request and estimate its length (or fail it)."""
        from .dryrun import describe

        try:
            self.parts.plan_line(line, run, 4)
            described = describe(line.built)
            line.estimate, line.pieces = described["seconds"], len(described["pieces"])
        except MissingExtra:
            raise
        except (InvalidRequest, st.SettingsError) as e:
            # Every part has the run's settings (a book has no per-line fields): what one part
            # cannot be planned with, none can. The run stops before anything is spoken (exit 2).
            message = str(e)
            if not message.startswith("--"):  # about this part's text, not a flag
                line.fail(message)
                message = line.error
            raise InvalidRequest(message) from None
        if not keep:
            line.text, line.built = None, None
        return line

    # -- speaking ------------------------------------------------------------------------

    def _warn_voice(self) -> None:
        values = self.settings()
        to_speak = any(not (self.work / p.name).exists() for p in self.parts.lines if p.name)
        if values["voice"] is None and values["ref"] is None and to_speak:
            message = (
                "no --voice or --ref: each part of the book is spoken in a voice the model makes up for it; "
                "give --voice NAME or --ref FILE for one narrator"
            )
            self.report.warnings.append(message)
            self.session.echo(f"Warning: {message}")

    def run(self) -> BookReport:
        """Plan (unless done), speak the parts left, then assemble the outputs. Per-part problems
        go to echo and the manifest; the book is assembled only when every part is there."""
        t_start = time.perf_counter()
        if self.output is None:
            raise InvalidRequest("-o is missing: give a .m4b file or a folder (or --dry-run)")
        if not self.plans:
            self.plan()
        for message in self.warnings:
            self.session.echo(f"Warning: {message}")
        self._check_outputs()
        self.check_parts(remove=True)
        self._warn_voice()
        self.tracker = Tracker(self.bars(), self.plans, self.work)
        self.parts.tracker = self.tracker
        self.parts.session = dataclasses.replace(self.session, progress=lambda total: self.tracker)
        self.parts.echo, self.parts.quiet = self.session.echo, self.session.quiet
        batch = self.parts.run()
        r = self.report
        r.done, r.skipped, r.failed, r.pending = batch.done, batch.skipped, batch.failed, batch.pending
        r.audio_seconds, r.generate_seconds, r.load_seconds = (
            batch.audio_seconds,
            batch.generate_seconds,
            batch.load_seconds,
        )
        r.manifest, r.interrupted = batch.manifest, batch.interrupted
        r.warnings += batch.warnings
        r.errors = [ln.error for ln in self.parts.lines if ln.status == "failed" and ln.error]
        if not r.interrupted and not r.failed and not r.pending:
            self._assemble_held()
        r.wall_seconds = time.perf_counter() - t_start
        return r

    def _check_outputs(self) -> None:
        """Before the model loads: the outputs' folder made (or there) and writable, no folder
        where an output file goes (InvalidRequest, one line)."""
        folder = self.output if self.kind == "folder" else self.output.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InvalidRequest(f"-o {self.spec}: cannot make the folder {folder}: {e.strerror or e}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InvalidRequest(f"-o {self.spec}: the folder {folder} is not writable")
        for name in self._output_names():
            if (folder / name).is_dir():
                raise InvalidRequest(f"-o {self.spec}: {folder / name} is a folder: remove it or give another -o")

    def check_parts(self, *, remove: bool) -> set[str]:
        """The parts in the work folder that are what the manifest says was written (a regular
        file inside the folder, its size and sha256 those of its "done" record:
        manifest.is_recorded) with a readable .pieces.json (read_pieces). With `remove`, every
        other file or link in a part's place (and its pieces) is deleted, so it is spoken again:
        a part replaced, truncated, linked elsewhere or without a record is never used."""
        if self.work is None or not self.work.is_dir():
            return set()
        records = done_records(self.work / MANIFEST)
        good: set[str] = set()
        for line in self.parts.lines:
            name = line.name
            if not name:
                continue
            ok = is_recorded(self.work, name, records.get(name.casefold()))
            if ok and read_pieces(self.work / pieces_name(name)) is not None:
                good.add(name)
            elif remove:
                for path in (self.work / name, self.work / pieces_name(name)):
                    if path.is_symlink() or path.is_file():
                        try:
                            path.unlink()
                        except OSError:
                            pass
        return good

    def _assemble_held(self) -> None:
        """Assemble with Ctrl-C and SIGTERM turned into a Stop between two blocks of audio (never
        inside an encoder's callback): the output being written is then dropped, not left half."""
        try:
            with HoldSignals() as signals, signals.protect():
                self.assemble(signals)
        except Stop as stop:  # from a block of audio, or as the block ends
            self.report.interrupted = stop.signum
        if not self.chapter_spec and not self.report.interrupted:
            self._remove_old_parts()

    def _remove_old_parts(self) -> None:
        """The parts of an earlier version of the book (no longer any chapter's) are deleted."""
        keep = {p.name for p in self.parts.lines}
        keep |= {pieces_name(n) for n in keep}
        pattern = re.compile(rf"^[0-9a-f]{{{KEY_CHARS}}}\.(?:{PART_FORMAT}|pieces\.json)$")
        for path in self.work.iterdir():
            if pattern.match(path.name) and path.name not in keep:
                try:
                    path.unlink()
                except OSError:
                    pass

    # -- assembling ----------------------------------------------------------------------

    def assemble(self, signals: HoldSignals | None = None) -> None:
        """Write the outputs from the parts (every part must be in the work folder)."""
        self.sha = {}  # each part's sha256, as its record gives it and as checked
        for line in self.parts.lines:
            if not is_recorded(self.work, line.name, line.record):
                for path in (self.work / line.name, self.work / pieces_name(line.name)):
                    if path.is_symlink() or path.is_file():
                        path.unlink()
                raise OmniVoiceError(
                    f"{self.work / line.name} changed while the book was spoken: it is deleted, "
                    "run the same command again to speak it again"
                )
            self.sha[line.name] = line.record["sha256"]
        sr = _part_info(self.work / self.plans[0].parts[0].name)[0]
        layouts = [_layout(self.work, plan, sr) for plan in self.plans]
        self.state = _read_state(self.work / STATE)
        remove_stale_temporaries(self.output if self.kind == "folder" else self.output.parent, self._output_names())
        if self.kind == "m4b":
            self._write_m4b(layouts, sr, signals)
        else:
            self._write_folder(layouts, sr, signals)

    def _output_names(self) -> list[str]:
        if self.kind == "m4b":
            return [self.output.name, _chapters_json(self.output).name]
        return [plan.stem + self.fmt.extension for plan in self.plans] + [CHAPTERS_JSON]

    def _chapter_key(self, plan: ChapterPlan, sr: int) -> str:
        parts = [p.name for p in plan.parts]
        sha = [self.sha.get(p.name) for p in plan.parts]  # what is in them, as checked
        layout = [CHAPTER_LEAD, PARAGRAPH_PAUSE, CHAPTER_TAIL, sr, PEAK_DBTP, self.loudness_target()]
        fmt = self.fmt.name if self.fmt is not None else "m4b"
        return _digest({"parts": parts, "sha256": sha, "layout": layout, "format": fmt})

    def _up_to_date(self, path: Path, key: str) -> bool:
        """Whether the output is there as written from these parts: its key (the parts' names
        and sha256, the layout) and the file itself (its size and sha256, checked)."""
        entry = self.state.get("outputs", {}).get(path.name)
        if not isinstance(entry, dict) or entry.get("key") != key:
            return False
        return is_recorded(path.parent, path.name, {"bytes": entry.get("size"), "sha256": entry.get("sha256")})

    def _written(self, path: Path, key: str, duration: float, level: dict | None) -> None:
        """Record an output just written (state saved at once: a kill keeps what is done)."""
        fp = fingerprint(path)
        entry = {"key": key, "size": fp["bytes"], "sha256": fp["sha256"], "duration": round(duration, 3)}
        entry["loudness"] = level
        self.state.setdefault("outputs", {})[path.name] = entry
        _write_json(self.work / STATE, self.state)
        self.report.written.append(str(path))
        self.report.loudness[path.name] = level
        if level and level.get("warning"):
            message = f"{path.name}: {level['warning']}"
            self.report.warnings.append(message)
            self.session.echo(f"Warning: {message}")

    def _kept(self, path: Path) -> None:
        self.report.kept.append(str(path))
        self.report.loudness[path.name] = self.state["outputs"][path.name].get("loudness")

    def tags(self):
        from ..media.m4b import BookTags

        info = self.book.info
        title = info.title or self.book_path.stem
        return BookTags(
            title=title,
            author=info.author,
            album=title,
            language=info.language or self.settings().get("lang"),
            cover=info.cover if self.cover_ok else None,
            cover_type=info.cover_type if self.cover_ok else None,
        )

    def _write_m4b(self, layouts: list[list[Segment]], sr: int, signals: HoldSignals | None) -> None:
        from ..media.m4b import ChapterMark, write_chapters_json, write_m4b

        marks, start = [], 0
        for plan, layout in zip(self.plans, layouts):
            frames = sum(n for _, n in layout)
            marks.append(ChapterMark(plan.title, start / sr, (start + frames) / sr))
            start += frames
        tags = self.tags()
        cover = hashlib.sha256(tags.cover).hexdigest() if tags.cover else None
        fields = {k: v for k, v in dataclasses.asdict(tags).items() if k != "cover"}
        key = _digest({"chapters": [self._chapter_key(p, sr) for p in self.plans], "tags": fields, "cover": cover})
        titled = [ChapterMark(p.title, m.start, m.end) for p, m in zip(self.plans, marks)]
        if self._up_to_date(self.output, key):
            self._kept(self.output)
        else:

            def stream() -> Iterator[Any]:
                for layout in layouts:
                    yield from _stream(layout, signals)

            level = Level(self.loudness_target(), sr, stream)
            level.measure()
            duration = write_m4b(self.output, level.output(), sr, titled, tags)
            self._written(self.output, key, duration, level.report())
        self.report.duration = start / sr
        write_chapters_json(_chapters_json(self.output), titled, tags)
        if self.subtitles:
            for plan, layout, mark in zip(self.plans, layouts, marks):
                path = self.output.with_name(f"{self.output.stem}.{plan.stem}.{self.subtitles}")
                _write_chapter_subtitles(path, self.work, layout, round(mark.start * sr), sr)

    def _write_folder(self, layouts: list[list[Segment]], sr: int, signals: HoldSignals | None) -> None:
        from ..media.m4b import ChapterMark, write_chapters_json

        marks, files, start = [], [], 0
        for plan, layout in zip(self.plans, layouts):
            frames = sum(n for _, n in layout)
            path = self.output / (plan.stem + self.fmt.extension)
            key = self._chapter_key(plan, sr)
            if self._up_to_date(path, key):
                self._kept(path)
            else:
                level = Level(self.loudness_target(), sr, lambda layout=layout: _stream(layout, signals))
                level.measure()
                write_stream(path, level.output(), sr, self.fmt, frames)
                self._written(path, key, frames / sr, level.report())
            if self.subtitles:
                _write_chapter_subtitles(path.with_suffix("." + self.subtitles), self.work, layout, 0, sr)
            marks.append(ChapterMark(plan.title, start / sr, (start + frames) / sr))
            files.append(path.name)
            start += frames
        self.report.duration = start / sr
        write_chapters_json(self.output / CHAPTERS_JSON, marks, self.tags(), files)


def _chapters_json(m4b: Path) -> Path:
    return m4b.with_name(m4b.stem + ".chapters.json")


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _read_state(path: Path) -> dict[str, Any]:
    data = _read_json(path)  # bounded, never through a link; anything that does not parse: no state
    return data if isinstance(data, dict) and isinstance(data.get("outputs"), dict) else {"outputs": {}}


# --------------------------------------------------------------------------------------------
# Audio of a chapter, its level, and writing it
# --------------------------------------------------------------------------------------------

Segment = tuple  # (part file or None for silence, frames)
BLOCK = 1 << 16  # samples read from a part at a time


def _layout(work: Path, plan: ChapterPlan, sr: int) -> list[Segment]:
    """A chapter as segments: the lead-in silence, its parts with pauses between, the tail."""
    segments: list[Segment] = [(None, round(CHAPTER_LEAD * sr))]
    for i, part in enumerate(plan.parts):
        if i:
            segments.append((None, round(PARAGRAPH_PAUSE * sr)))
        path = work / part.name
        rate, frames = _part_info(path)
        if rate != sr:
            raise OmniVoiceError(
                f"{path}: {rate} Hz, not the {sr} Hz of the book's other parts: delete it and run again"
            )
        segments.append((path, frames))
    segments.append((None, round(CHAPTER_TAIL * sr)))
    return segments


def _open_part(path: Path):
    """A part of the work folder opened for reading: a regular file, never through a link."""
    f = _open_regular(path)
    if f is None:
        raise OmniVoiceError(f"{path} is not a regular file: delete it and run the same command again")
    return f


def _part_info(path: Path) -> tuple[int, int]:
    """(sample rate, frames) of a part (OmniVoiceError, one line, when it does not read)."""
    import soundfile as sf

    with _open_part(path) as f:
        try:
            with sf.SoundFile(f) as snd:
                return snd.samplerate, snd.frames
        except (sf.LibsndfileError, RuntimeError, ValueError) as e:
            raise OmniVoiceError(f"{path} does not read as audio ({e}): delete it and run again") from None


def _stop_point(signals: HoldSignals | None) -> None:
    """A Ctrl-C / SIGTERM held by `signals` is raised here (between two blocks), once."""
    if signals is not None and signals.pending is not None and not signals.stopping:
        signum, signals.pending = signals.pending, None
        signals.stopping = True
        raise Stop(signum)


def _stream(layout: list[Segment], signals: HoldSignals | None) -> Iterator[Any]:
    """A chapter's audio, float32 blocks of at most BLOCK samples (never the whole chapter)."""
    import numpy as np
    import soundfile as sf

    for path, frames in layout:
        _stop_point(signals)
        if path is None:
            for i in range(0, frames, BLOCK):
                yield np.zeros(min(BLOCK, frames - i), dtype=np.float32)
            continue
        with _open_part(path) as f:
            try:
                for block in sf.blocks(f, blocksize=BLOCK, dtype="float32"):
                    _stop_point(signals)
                    yield block
            except (sf.LibsndfileError, RuntimeError) as e:
                raise OmniVoiceError(f"{path} does not read as audio ({e}): delete it and run again") from None


class Level:
    """One output's loudness, as loudness.normalize does it but streamed (an output is read from
    its parts, never held whole): measured over all of it; one gain to the target; where the
    peaks then pass the ceiling, the true-peak limiter, and since it takes a little loudness
    off, the gained and limited audio measured again and the gain raised (twice at most, by
    MAX_MAKEUP_DB in all) before the output is written. `chunks()` gives the output's audio
    anew at each call."""

    def __init__(self, target: float, sr: int, chunks: Callable[[], Iterator[Any]]) -> None:
        self.target, self.sr, self.chunks = target, sr, chunks
        self.before: Any = None  # loudness.Measurement of the audio as spoken
        self.gain_db = 0.0
        self.limits = False  # the limiter is in the way
        self.after: Any = None  # the meter of what was written
        self.limited = 0

    def _pass(self, gain_db: float, limit: bool):
        """The output at this gain, with its meter and Normaliser (None: scaled only)."""
        import numpy as np

        from ..media.loudness import LoudnessMeter, Normaliser

        meter = LoudnessMeter(self.sr)
        norm = Normaliser(10.0 ** (gain_db / 20.0), self.sr, PEAK_DBTP) if limit else None
        scale = np.float32(10.0 ** (gain_db / 20.0))

        def run() -> Iterator[Any]:
            for chunk in self.chunks():
                out = norm.process(chunk) if norm is not None else np.asarray(chunk, np.float32) * scale
                if len(out):
                    meter.add(out)
                    yield out
            if norm is not None:
                out = norm.flush()
                if len(out):
                    meter.add(out)
                    yield out

        return run(), meter, norm

    def measure(self) -> None:
        """The audio as spoken measured, and the gain found (see the class doc)."""
        from ..media.loudness import MARGIN_DB, MAX_MAKEUP_DB, LoudnessMeter, Measurement, check_target

        check_target(self.target)
        meter = LoudnessMeter(self.sr)
        for chunk in self.chunks():
            meter.add(chunk)
        self.before = Measurement(meter.integrated(), meter.true_peak(), meter.samples / self.sr)
        if not math.isfinite(self.before.lufs):
            return  # silence: left as it is
        first = self.gain_db = self.target - self.before.lufs
        for _ in range(2):
            self.limits = self.before.dbtp + self.gain_db > PEAK_DBTP - MARGIN_DB
            if not self.limits:
                return
            out, after, _ = self._pass(self.gain_db, True)
            for _chunk in out:
                pass
            lufs = after.integrated()
            more = min(self.target - lufs, first + MAX_MAKEUP_DB - self.gain_db)
            if not math.isfinite(lufs) or abs(self.target - lufs) <= 0.1 or more < 0.05:
                return
            self.gain_db += more
        self.limits = self.before.dbtp + self.gain_db > PEAK_DBTP - MARGIN_DB

    def output(self) -> Iterator[Any]:
        """The output's audio, at the gain found (its meter kept for the report)."""
        out, self.after, self._norm = self._pass(self.gain_db, self.limits)
        return out

    def report(self) -> dict[str, Any]:
        """loudness.LoudnessReport.as_dict() of the output written, and its warning (None when on target)."""
        from ..media.loudness import LoudnessReport

        norm = getattr(self, "_norm", None)
        samples = max(1, round(self.before.seconds * self.sr))
        limited = norm.limited / samples if norm is not None else 0.0
        lufs = self.after.integrated() if self.after is not None else self.before.lufs
        dbtp = self.after.true_peak() if self.after is not None else self.before.dbtp
        rep = LoudnessReport(self.target, self.before.lufs, self.before.dbtp, self.gain_db, lufs, dbtp, limited)
        return {**rep.as_dict(), "warning": rep.warning()}


def write_stream(path: Path, chunks, sr: int, fmt: Any, frames: int) -> None:
    """Float32 blocks into one audio file of `fmt`, streamed (AAC formats: in memory), to a
    temporary name then renamed. Blocks are re-cut to the format's own size, so the file does not
    depend on how the audio came in."""
    import numpy as np

    from ..media.output import OutputTarget, _write_piece, check_fits, replace_atomically, write_audio

    check_fits(fmt, frames, sr)
    if fmt.encoder == "aac":
        audio = np.concatenate([np.asarray(c, dtype=np.float32) for c in chunks] or [np.zeros(0, np.float32)])
        write_audio(audio, sr, OutputTarget(path, fmt.sf_format, fmt.subtype))
        return
    import soundfile as sf

    size = fmt.block or 1 << 18

    def write(f) -> None:
        with sf.SoundFile(f, "w", samplerate=int(sr), channels=1, **fmt.sf_options()) as out:
            buffer = np.zeros(0, dtype=np.float32)
            for chunk in chunks:
                buffer = np.concatenate([buffer, np.asarray(chunk, dtype=np.float32)])
                while len(buffer) >= size:
                    _write_piece(out, fmt, buffer[:size])
                    buffer = buffer[size:]
            if len(buffer):
                _write_piece(out, fmt, buffer)

    replace_atomically(path, write)


def _write_chapter_subtitles(path: Path, work: Path, layout: list[Segment], offset: int, sr: int) -> None:
    """One chapter's subtitles from its parts' pieces, at `offset` samples (the chapter's start
    on the timeline of the file they go with)."""
    from ..media.cues import finish_subtitles, subtitles_from_pieces, write_subtitles

    subs, at = [], offset
    for part, frames in layout:
        if part is not None:
            record = read_pieces(work / pieces_name(part.name))
            if record is None:
                raise OmniVoiceError(f"{work / pieces_name(part.name)} does not read: delete it and run again")
            subs += subtitles_from_pieces([tuple(p) for p in record["pieces"]], sr, at)
        at += frames
    write_subtitles(path, finish_subtitles(subs, round(at * 1000 / sr)))


def _replaced(plan: ChapterPlan) -> list[dict[str, Any]]:
    """What the lexicon replaced in a chapter: each (words, replacement) once, in the order first
    met, with the times it was replaced."""
    times: dict[tuple[str, str], int] = {}
    for part in plan.parts:
        for pair, n in part.replaced.items():
            times[pair] = times.get(pair, 0) + n
    return [{"words": w, "say": say, "times": n} for (w, say), n in times.items()]


def describe_book(run: BookRun) -> dict[str, Any]:
    """The dry run of a planned book (no model, nothing written): the book, each chapter (words,
    parts, the engine's pieces, estimated seconds, its file, whether its parts are all done,
    what the lexicon replaced in it),
    what was skipped, and the errors of parts that cannot be spoken."""
    info = run.book.info
    chapters = []
    good = run.check_parts(remove=False)  # done: a part the manifest vouches for (nothing deleted)
    for plan in run.plans:
        file = None
        if run.kind == "folder":
            file = plan.stem + run.fmt.extension
        done = all(p.name in good for p in plan.parts)
        chapters.append(
            {
                "number": plan.number,
                "title": plan.title,
                "source": plan.source,
                "words": plan.words,
                "parts": len(plan.parts),
                "pieces": sum(p.pieces for p in plan.parts),
                "seconds": round(plan.estimate, 2),
                "file": file,
                "done": done,
                "replaced": _replaced(plan),
            }
        )
    return {
        "book": str(run.book_path),
        "format": info.format,
        "title": info.title,
        "author": info.author,
        "language": info.language,
        "cover": info.cover_type if run.cover_ok else None,
        "output": None if run.output is None else str(run.output),
        "kind": run.kind,
        "chapters": chapters,
        "words": sum(c["words"] for c in chapters),
        "seconds": round(sum(c["seconds"] for c in chapters), 2),
        "skipped": list(info.skipped),
        "loudness": run.loudness_target(),
        "errors": [ln.error for ln in run.parts.lines if ln.error],
        "warnings": list(run.warnings),
    }
