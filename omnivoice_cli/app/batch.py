"""`omnivoice batch`: many texts from one file, one audio file per line, resumable.

    omnivoice batch lines.txt -o out/                  # one audio file per non-empty line
    omnivoice batch jobs.jsonl -o out/ --preset fast   # per-line settings

A run (`BatchRun`), in order:
  1. read the input (.txt: one text per line; .jsonl: one JSON object per line; blank lines and
     lines starting with '#' are skipped) and check every line: fields, types, values, preset,
     the engine's own checks, references (read and prepared), output names (two lines may not
     write one file). A bad line fails alone, with its reason in the manifest;
  2. create the output folder, remove temporary files a killed run left behind, and skip every
     line whose output already exists (unless --overwrite): a rerun resumes;
  3. load the model (only if a line is left to speak), encode the references, and send the lines
     to `Engine.generate` in groups of GROUP_SIZE; each file is written (temporary name, then
     rename) as soon as its line is finished, and its manifest record appended (with --ray the
     lines are spoken on a Ray cluster instead: cluster.RayExecutor; this run still writes). The
     part that speaks is the run's `Executor` (LocalExecutor here), which hands each result to
     BatchRun.save_result (or fails its line with BatchRun.fail_line);
  4. rewrite the manifest atomically with one record per input line (manifest.py).

Settings: defaults < the run's preset (or a line's own "preset") < the flags < the line's fields.
model, device, dtype, threads, quantize and compile are per run (one engine), so a line's preset
may not change them. Seeds: a line's own "seed" wins; else with --seed S the line with 0-based
index i in the file (counting every physical line, blank and comment lines too) uses S + i; else
a random seed. The seed is always recorded, so `omnivoice say TEXT --seed N` (same settings)
repeats any line byte for byte. Relative paths in a line are relative to the input file's folder.
"""

from __future__ import annotations

import json
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from ..engine.errors import InvalidRequest, MissingExtra, OmniVoiceError
from ..engine.planning import Result
from ..engine.text import is_blank
from ..media.output import FORMATS, OutputTarget
from . import settings as st
from .deliver import Outputs, SilentAudio, Take, deliver
from .folder import (
    audio_seconds,
    check_duplicates,
    line_output,
    prepare_output_dir,
    remove_stale_temporaries,
    target_problem,
)
from .listen import Recogniser, RecogniserHolder
from .manifest import MANIFEST, ManifestWriter, done_records, fingerprint
from .request import Built, References, Voices, build_request, named
from .session import Session, WarnOnce, hardware_from_settings, random_seed, seed_for
from .signals import HoldSignals
from .verify import RequestCheck, Verifier

if TYPE_CHECKING:  # annotations only: these pull torch (or the recogniser's extra) at import
    from ..engine.hardware import Hardware
    from ..engine.pipeline import Engine
    from ..engine.voice import VoicePrompt

GROUP_SIZE = 64  # lines per Engine.generate call (the engine bounds each forward itself)
TEXT_SUFFIXES = (".txt",)
JSON_SUFFIXES = (".jsonl", ".ndjson")
MAX_INPUT_BYTES = 512 * 1024 * 1024  # the input file is read up to here
MAX_LINE_BYTES = 1024 * 1024  # one line (a text of about 20 minutes of speech)
MAX_LINES = 100_000  # lines to speak in one input file (each is planned, and kept, before the model loads)
LINE_FIELDS = ("text", "id", "output", *st.LINE_SETTINGS, "preset")
__all__ = ["BatchRun", "BatchReport", "Executor", "LocalExecutor", "MANIFEST", "run_batch"]


@dataclass
class Line:
    """One input line that is not blank or a comment, and what became of it."""

    number: int  # 1-based line number in the input file
    text: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # a JSON line's fields; {} for a .txt line
    id: str | None = None  # the JSON line's id, as a string
    name: str | None = None  # the output file, relative to the output folder (posix form)
    format: str | None = None  # wav | flac | ogg
    built: Built | None = None  # the request, when the line is valid
    prompt: "VoicePrompt | None" = None  # its reference recording, encoded once the model is loaded
    check: "RequestCheck | None" = None  # --verify: its per-piece check, while it is spoken
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # "line N: ..." when the line failed
    status: str | None = None  # done | failed | skipped (None: not run yet)
    record: dict[str, Any] | None = None  # its manifest record from this run (or reused)

    @property
    def index(self) -> int:
        return self.number - 1

    @property
    def planned(self) -> Built:
        """Its request: only a line plan_line built (and named) is run."""
        if self.built is None:
            raise RuntimeError(f"line {self.number} was not planned")
        return self.built

    @property
    def settings(self) -> dict[str, Any] | None:
        return dict(self.built.settings.values) if self.built else None

    def fail(self, message: str) -> None:
        self.error = message if message.startswith(f"line {self.number}:") else f"line {self.number}: {message}"


@dataclass
class BatchReport:
    """What a run did."""

    lines: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    pending: int = 0
    audio_seconds: float = 0.0  # audio generated by this run
    generate_seconds: float = 0.0  # wall time spent generating (after the model was loaded)
    load_seconds: float | None = None  # None: the model was not needed
    voice_seconds: float | None = None  # encoding the recordings of ref (None: none to encode)
    wall_seconds: float = 0.0
    manifest: Path | None = None
    interrupted: int | None = None  # the signal number when stopped by Ctrl-C / SIGTERM
    warnings: list[str] = field(default_factory=list)  # as shown ("line N: ..."), each once

    @property
    def rtf(self) -> float | None:
        return self.generate_seconds / self.audio_seconds if self.audio_seconds > 0 else None


# --------------------------------------------------------------------------------------------
# Reading the input
# --------------------------------------------------------------------------------------------


def _open_input(path: str | Path):
    p = Path(path).expanduser()
    suffix = p.suffix.lower()
    if suffix not in TEXT_SUFFIXES + JSON_SUFFIXES:
        shown = f"extension {suffix!r}" if suffix else "no extension"
        raise InvalidRequest(
            f"input '{path}' has {shown}: use a .txt file (one text per line) or a .jsonl file "
            "(one JSON object per line)"
        )
    if not p.exists():
        raise InvalidRequest(f"input file '{path}' does not exist")
    if p.is_dir():
        raise InvalidRequest(f"input '{path}' is a folder: give a .txt or .jsonl file")
    try:
        return open(p, "rb"), suffix in JSON_SUFFIXES
    except OSError as e:
        raise OSError(e.errno, f"cannot read the input file '{path}': {e.strerror or e}") from None


def _raw_lines(f, path: str | Path):
    """(number, text or None when too long or not UTF-8, error) of each physical line."""
    total = 0
    for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
        total += len(raw)
        if total > MAX_INPUT_BYTES:
            raise InvalidRequest(
                f"input file '{path}' is over {MAX_INPUT_BYTES >> 20} MiB: split it into several files"
            )
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the line
                raw = f.readline(MAX_LINE_BYTES + 1)
                total += len(raw)
                if total > MAX_INPUT_BYTES:
                    raise InvalidRequest(f"input file '{path}' is over {MAX_INPUT_BYTES >> 20} MiB")
            yield number, None, f"line {number}: longer than {MAX_LINE_BYTES >> 20} MiB: split it"
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield number, raw.decode("utf-8").rstrip("\r\n"), None
        except UnicodeDecodeError as e:
            raise InvalidRequest(
                f"input file '{path}' is not UTF-8 text (line {number}, column {e.start + 1})"
            ) from None


def read_input(path: str | Path) -> tuple[list[Line], int]:
    """The lines to speak (blank and '#' lines skipped) and the file's number of physical lines.

    A missing, unreadable or empty file, or an unknown extension, is an InvalidRequest. A line that
    does not parse becomes a Line with its error set (the other lines still run)."""
    f, as_json = _open_input(path)
    lines: list[Line] = []
    physical, seen_text = 0, False
    with f:
        for number, raw, error in _raw_lines(f, path):
            physical = number
            if error is not None:
                lines.append(Line(number, error=error))
                continue
            stripped = raw.strip()
            seen_text = seen_text or bool(stripped)
            if is_blank(stripped) or stripped.startswith("#"):  # blank: whitespace, zero-width, controls
                continue
            if len(lines) >= MAX_LINES:
                raise InvalidRequest(
                    f"input file '{path}' has more than {MAX_LINES} lines to speak: split it into several files"
                )
            lines.append(Line(number, text=stripped) if not as_json else _json_line(number, stripped))
    if not lines:
        what = "is empty" if physical == 0 or not seen_text else "has only blank lines and # comments"
        raise InvalidRequest(f"input file '{path}' {what}: nothing to speak")
    return lines, physical


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_line(number: int, stripped: str) -> Line:
    line = Line(number)
    try:
        obj = json.loads(stripped, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as e:
        line.error = f"line {number}: field {e.args[0]!r} appears twice"
    except json.JSONDecodeError as e:
        line.error = f"line {number}: not valid JSON: {e.msg} (column {e.colno})"
    except (RecursionError, ValueError) as e:  # nested too deeply; an integer of thousands of digits
        what = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(";")[0]
        line.error = f"line {number}: not valid JSON: {what}"
    else:
        if isinstance(obj, dict):
            line.fields = obj
        else:
            line.error = f'line {number}: expected a JSON object such as {{"text": "Hello"}}, got {st.type_name(obj)}'
    return line


def check_fields(line: Line) -> None:
    """Check a JSON line's fields (names, types, values); set line.text, line.id or line.error."""
    if line.error is not None or (not line.fields and line.text is not None):
        return
    n, f = line.number, line.fields
    unknown = [k for k in f if k not in LINE_FIELDS]
    if unknown:
        hint = st.did_you_mean(unknown[0], LINE_FIELDS)
        if unknown[0] in st.SCHEMA:  # a setting of the whole run (a file of this machine, the hardware)
            hint = f" ({unknown[0]} is set for the whole run: give {st.flag_name(unknown[0])} or a --preset)"
        names = ", ".join(repr(k)[:60] for k in unknown[:5])
        line.error = (
            f"line {n}: unknown field{'s' if len(unknown) > 1 else ''} {names}{hint}; "
            f"known fields: {', '.join(LINE_FIELDS)}"
        )
        return
    text = f.get("text")
    if text is None:
        line.error = f"line {n}: field 'text' is missing: every line needs the text to speak"
    elif not isinstance(text, str):
        line.error = f"line {n}: field 'text' must be a string, got {st.shown_value(text)} ({st.type_name(text)})"
    elif not text.strip():
        line.error = f"line {n}: field 'text' is empty: give some text to speak"
    else:
        line.text = text  # its line breaks kept for `markdown` (request.spoken_text joins the lines)
        line.error = _check_plain_fields(n, f)
    if line.error is None and f.get("id") is not None:
        line.id = str(f["id"])


def _check_plain_fields(n: int, f: dict[str, Any]) -> str | None:
    for key in ("id", "output", "preset"):
        value = f.get(key)
        if value is None:
            continue
        ok = isinstance(value, str) or (key == "id" and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            kind = "a string or an integer" if key == "id" else "a string"
            return f"line {n}: field {key!r} must be {kind}, got {st.shown_value(value)} ({st.type_name(value)})"
        if isinstance(value, str) and not value.strip():
            return f"line {n}: field {key!r} is empty"
    try:
        f.update(st.check_layer({k: f.get(k) for k in st.LINE_SETTINGS}, st.Source("line", str(n)), st.LINE))
    except st.SettingsError as e:
        return str(e)
    return None


# --------------------------------------------------------------------------------------------
# Settings, requests and output names of each line
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The output folder
# --------------------------------------------------------------------------------------------


def _record(line: Line, status: str, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "line": line.number,
        "id": line.id,
        "status": status,
        "output": line.name,
        "text": None if line.text is None else st.join_lines(line.text),
        "audio_seconds": None,
        "seconds": None,
        "seed": line.settings["seed"] if line.settings else None,
        "settings": line.settings,
        "ref": line.fields.get("ref"),
        "ref_text": line.fields.get("ref_text"),
        "warnings": line.warnings,
        "error": line.error,
    }
    rec.update(extra)
    return rec


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


class Executor(Protocol):
    """What speaks the pending lines of a run: LocalExecutor (the engine in this process) or
    cluster.RayExecutor (engine actors on a Ray cluster). It ends each line with run.save_result
    or run.fail_line (the run writes the files and the manifest, the executor nothing), shows
    the run's warnings (run.warn), feeds run.progress.step, and sets run.report's load_seconds,
    voice_seconds and generate_seconds. `signals` are the run's (HoldSignals: reclaim them after a
    library took them, protect what must not be cut); a Stop (Ctrl-C, SIGTERM) goes through, and
    the run records the lines not spoken as pending."""

    def speak(self, run: "BatchRun", pending: list[Line], signals: HoldSignals) -> None: ...


class LineSink(Protocol):
    """Where a run that composes the batch (the book) is told of its lines: how a warning names
    a line, a step before a line's file is written (an error message fails the line instead),
    and each line's end (line.status: done or failed)."""

    def where(self, line: Line) -> str: ...

    def before_write(self, line: Line, result: Result) -> str | None: ...

    def ended(self, line: Line) -> None: ...


class BatchRun:
    """One batch: plan every line (no model), then speak what is left, writing files and manifest.
    A run that composes it (the book) plans its own lines with plan_line, hands them to
    run(planned=...) and is told of them through its `sink`."""

    def __init__(
        self,
        input_path: str | Path,
        output_dir: str | Path,
        *,
        preset: st.Preset | None,
        flags: dict[str, Any],
        overwrite: bool = False,
        session: Session | None = None,
        subtitles: str | None = None,
        executor: Executor | None = None,
        words: bool = False,
        sink: LineSink | None = None,
    ) -> None:
        self.sink = sink  # told of each line (the book's parts), when a run composes this one
        self.input_path, self.output_dir = input_path, output_dir
        self.words = words  # --words: NAME.words.json beside each audio file (words.py)
        self.verifier: Verifier | None = None  # --verify: the run's recogniser, loaded on first use
        self._listener: RecogniserHolder | None = None  # --words without --verify
        self.subtitles = subtitles  # "srt" | "vtt": a subtitles file beside each audio file (cues.py)
        self.executor = executor or LocalExecutor()  # speaks the pending lines: this engine, or cluster.RayExecutor
        self.preset, self.flags, self.overwrite = preset, flags, overwrite
        self.session = session or Session()  # how the run shows itself (the face's status line and bars)
        self.echo, self.quiet = self.session.echo, self.session.quiet
        self.base = Path(input_path).expanduser().parent  # relative paths in a line start here
        self.refs, self.voices = References(), Voices()
        self.presets: dict[str, st.Preset | st.SettingsError] = {}
        self.report = BatchReport()
        self.lines: list[Line] = []
        self.out: Path | None = None  # the output folder, once created
        self.signals: HoldSignals | None = None  # while the run speaks
        self._once = WarnOnce(lambda w: None)
        self.group_size = GROUP_SIZE  # lines per Engine.generate call (a book's long lines: fewer)

    # -- planning (no model) -------------------------------------------------------------

    def run_settings(self) -> st.Resolved:
        layers = [(self.preset.origin, self.preset.settings)] if self.preset else []
        resolved, _ = st.engine_options(st.resolve(*layers, (st.FLAG_SOURCE, self.flags)))  # (the command said it)
        return resolved

    def hardware(self) -> tuple[str, Hardware]:
        """The run's engine, one for every line: (the model, how it is loaded)."""
        return str((values := self.run_settings().values)["model"]), hardware_from_settings(values)

    def _line_preset(self, line: Line) -> st.Preset | None:
        spec = line.fields.get("preset")
        if spec is None:
            return self.preset
        if spec not in self.presets:
            try:
                self.presets[spec] = st.find_preset(spec)
            except st.SettingsError as e:
                self.presets[spec] = e
        found = self.presets[spec]
        if isinstance(found, st.SettingsError):
            raise InvalidRequest(f"field 'preset': {found}")
        # The hardware settings (device, dtype, threads, quantize, compile) are the run's: a line's
        # preset does not change them (plan_line sets the run's), as a request's preset on the server.
        return found

    def plan_line(self, line: Line, run: st.Resolved, width: int) -> None:
        """Resolve a checked line's settings, build its request and output name (or fail it)."""
        n, f = line.number, line.fields
        preset = self._line_preset(line)
        flags = dict(self.flags)
        if flags.get("seed") is not None and f.get("seed") is None:
            flags["seed"] = seed_for(flags["seed"], line.index)
        layer = {k: f[k] for k in st.LINE_SETTINGS if f.get(k) is not None}
        preset_layer = [(preset.origin, preset.settings)] if preset else []
        settings = st.resolve(*preset_layer, (st.FLAG_SOURCE, flags), (st.Source("line", str(n)), layer))
        settings = settings.with_values({k: run[k] for k in st.RUN_WIDE})  # the run's hardware, its sources kept
        line.name, line.format = line_output(line, settings["format"], width)
        settings = settings.with_values({"format": line.format})
        seed = random_seed() if settings["seed"] is None else None
        assert line.text is not None  # a checked line has its text (check_line)
        line.built = build_request(
            line.text, settings, refs=self.refs, voices=self.voices, line_base=self.base, seed=seed
        )
        line.warnings = list(line.built.warnings)

    def plan(self) -> None:
        """Read and check every line (InvalidRequest for input-level problems)."""
        self.lines, physical = read_input(self.input_path)
        self.report.lines = len(self.lines)
        run = self.run_settings()
        width = max(4, len(str(physical)))
        for line in self.lines:
            check_fields(line)
            if line.error is not None:
                continue
            try:
                self.plan_line(line, run, width)
            except MissingExtra:
                raise  # the installation, not the line: the whole run stops (one line, exit 2)
            except (InvalidRequest, st.SettingsError) as e:
                line.fail(str(e))
        check_duplicates(self.lines)
        if self.subtitles:
            check_duplicates(self.lines, f".{self.subtitles}")

    # -- what the executor reports -----------------------------------------------------------

    def warn(self, line: Line, warnings: list[str]) -> None:
        """Show a line's warnings, each text once per run ("Warning: line N: ...")."""
        where = self.sink.where(line) if self.sink is not None else f"line {line.number}"
        for w in self._once.new(warnings):
            self.report.warnings.append(f"{where}: {w}")
            self.echo(f"Warning: {where}: {w}")

    def _held(self):
        """No stop between a file and its record (the signals held while the run speaks)."""
        return self.signals.protect() if self.signals is not None else nullcontext()

    def fail_line(self, line: Line, message: str) -> None:
        """The line failed (`message` says why): its record, the error shown, the bar moved."""
        with self._held():
            line.fail(message)
            line.status = "failed"
            line.record = _record(line, "failed")
            self.manifest.append(line.record)
            self.echo(f"Error: {line.error}")
            self.progress.line("failed")
        if self.sink is not None:
            self.sink.ended(line)

    def recogniser(self, line: Line) -> Recogniser:
        """The run's speech recogniser (--verify's, or one for --words alone)."""
        if self.verifier is not None:
            return self.verifier.recogniser
        if self._listener is None:
            settings = line.planned.settings
            self._listener = RecogniserHolder(settings["asr_model"], settings["device"] or "auto", "--words")
        return self._listener.get()

    def save_result(self, line: Line, result: Result, started: float) -> None:
        """Write a line's engine Result (its subtitles first, with --subtitles) and its record;
        `started`: perf_counter() when its group started (its record's "seconds" count from there
        to its file being written). A file that cannot be written fails the line."""
        if self.sink is not None and (problem := self.sink.before_write(line, result)) is not None:
            return self.fail_line(line, problem)
        with self._held():  # the file and its record, or neither
            name, fmt = line.name, line.format  # a spoken line was named (plan_line) in a made folder (run)
            if self.out is None or name is None or fmt is None:
                raise RuntimeError(f"line {line.number} has no output folder or name")
            target = self.out / name
            outputs = Outputs(
                target=OutputTarget(target, *FORMATS["." + fmt]),
                subtitles=target.with_suffix("." + self.subtitles) if self.subtitles else None,
                words=target.with_name(target.stem + ".words.json") if self.words else None,
                loudness=line.planned.settings["loudness"],  # --loudness: over the line's whole file
            )
            req = line.planned.request
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                listener = self.recogniser(line) if self.words else None
                done = deliver(Take.of(result, req.text, req.lang), outputs, listener=listener)
                written = fingerprint(target)  # what a later run checks the file against (manifest.is_recorded)
            except (OSError, SilentAudio) as e:
                self.fail_line(line, f"cannot write {target}: {getattr(e, 'reason', None) or e.strerror or e}")
                return
            seconds = len(result.audio) / result.sample_rate
            checked = [] if line.check is None else line.check.warnings()
            checked += list(done.warnings)
            line.warnings = list(dict.fromkeys([*line.warnings, *result.warnings, *checked]))
            self.warn(line, [*result.warnings, *checked])
            line.status = "done"
            verified = {} if line.check is None else {"verify": line.check.summary()}  # verify.py
            line.record = _record(
                line,
                "done",
                audio_seconds=round(seconds, 4),
                seconds=round(time.perf_counter() - started, 4),
                seed=result.seed,
                **verified,
                **written,
            )
            self.manifest.append(line.record)
            self.report.audio_seconds += seconds
            self.progress.line("done")
        if self.sink is not None:
            self.sink.ended(line)

    # -- running ---------------------------------------------------------------------------

    def _skip_or_queue(self, out: Path, earlier: dict[str, dict[str, Any]]) -> list[Line]:
        """Fail the bad lines, skip the done ones; the lines left to speak."""
        pending = []
        for line in self.lines:
            name = line.name or ""  # set on every line without an error (plan_line)
            if line.error is None:
                line.error = target_problem(out, name)
            if line.error is not None:
                self.fail_line(line, line.error)
            elif (out / name).exists() and not self.overwrite:
                line.status = "skipped"
                if self.subtitles and not (out / name).with_suffix("." + self.subtitles).exists():
                    message = f"line {line.number}: {name} exists without subtitles: give --overwrite to make both"
                    self.report.warnings.append(message)
                    self.echo(f"Warning: {message}")
                old = earlier.get(name.casefold())
                if old is not None:
                    line.record = {**old, "line": line.number}
                else:
                    line.record = _record(
                        line, "skipped", audio_seconds=audio_seconds(out / name), settings=None, seed=None
                    )
                    self.manifest.append(line.record)
                self.progress.line("skipped")
            else:
                pending.append(line)
        return pending

    def _finish(self, signals: HoldSignals) -> None:
        """One record per line in the manifest, rewritten atomically (no stop while it is written)."""
        signals.depth += 1
        error = (
            "the run was interrupted before this line was spoken"
            if self.report.interrupted
            else "the run stopped before this line was spoken"
        )
        final: list[Mapping[str, Any]] = []
        for line in self.lines:
            if line.record is None:
                line.record = _record(line, "pending", error=error)
                self.report.pending += 1
            final.append(line.record)
        try:
            self.manifest.rewrite(final)
        finally:
            signals.__exit__()
            self.signals = None

    def run(self, planned: list[Line] | None = None) -> BatchReport:
        """Plan (or take the lines `planned` by the run that composes this one), then speak.
        Per-line problems go to `echo` and the manifest, never raised."""
        t_start = time.perf_counter()
        if planned is None:
            self.plan()
        else:
            self.lines, self.report.lines = list(planned), len(planned)
        out = self.out = prepare_output_dir(self.output_dir)
        remove_stale_temporaries(out, [ln.name for ln in self.lines if ln.name])
        self.report.manifest = out / MANIFEST
        earlier = done_records(self.report.manifest)
        self.manifest = ManifestWriter(self.report.manifest)
        self.manifest.check()  # a link in its place: refused before anything runs
        self.progress = self.session.progress(len(self.lines))
        signals = self.signals = HoldSignals().__enter__()
        try:
            with self.progress:
                pending = self._skip_or_queue(out, earlier)
                if pending:
                    self.executor.speak(self, pending, signals)
        except KeyboardInterrupt as e:
            self.report.interrupted = int(getattr(e, "signum", signal.SIGINT))
        finally:
            self._finish(signals)
        for status in ("done", "failed", "skipped"):
            setattr(self.report, status, sum(1 for ln in self.lines if ln.status == status))
        self.report.wall_seconds = time.perf_counter() - t_start
        return self.report


class LocalExecutor:
    """The engine in this process (the default Executor): loaded once, the reference recordings
    encoded once each, the lines sent to Engine.generate in groups of GROUP_SIZE."""

    def speak(self, run: BatchRun, pending: list[Line], signals: HoldSignals) -> None:
        engine, run.report.load_seconds = run.session.load_engine(*run.hardware())
        cloned = [(ln, ref) for ln in pending if (ref := ln.planned.reference) is not None]
        if cloned:  # the encoder and every recording: "voices prepared in", apart from the model's load
            t_voice = time.perf_counter()
            with run.session.status("preparing the reference voices ..."):
                engine.load_encoder()
                for line, ref in cloned:
                    try:
                        line.prompt = run.refs.encode(engine, ref)
                    except (OmniVoiceError, OSError, ValueError) as e:
                        run.fail_line(line, f"{line.planned.settings.name('ref')}: {' '.join(str(e).split())}")
            run.report.voice_seconds = time.perf_counter() - t_voice
        t_gen = time.perf_counter()
        pending = [ln for ln in pending if ln.status is None]
        for line in pending:
            run.warn(line, line.warnings)
        size = getattr(run, "group_size", GROUP_SIZE)
        for start in range(0, len(pending), size):
            self.run_group(run, engine, pending[start : start + size])
        run.report.generate_seconds = time.perf_counter() - t_gen

    def check_for(self, run: BatchRun, line: Line) -> RequestCheck | None:
        """A line's --verify check (the run's one recogniser, loaded on the first such line)."""
        settings = line.planned.settings
        if not settings["verify"]:
            return None
        if run.verifier is None:
            with run.session.status("loading the speech recogniser ..."):
                run.verifier = Verifier.from_settings(settings)
        line.check = run.verifier.for_request(
            line.planned.request.lang, settings["verify_max_error"], settings["verify_retries"]
        )
        return line.check

    def run_group(self, run: BatchRun, engine: Engine, group: list[Line]) -> None:
        """One Engine.generate call: each line saved as soon as it is finished."""
        import dataclasses

        t0 = time.perf_counter()

        def on_result(i: int, result: Result) -> None:
            run.save_result(group[i], result, t0)

        def on_error(i: int, e: Exception) -> None:  # this line alone failed (its checks, size, decoding)
            line = group[i]
            if isinstance(e, InvalidRequest) and e.setting is not None:
                e = named(line.planned.settings, e)
            run.fail_line(line, f"generation failed: {' '.join((str(e).strip() or type(e).__name__).split())}")

        requests = [
            dataclasses.replace(ln.planned.request, ref=ln.prompt) if ln.prompt else ln.planned.request for ln in group
        ]
        checks = [self.check_for(run, ln) for ln in group]  # --verify (verify.py)
        try:
            engine.generate(
                requests,
                on_step=run.progress.step,
                on_result=on_result,
                on_error=on_error,
                steady=True,  # lines leave one by one: a stop keeps what is finished (waves.Stagger)
                **({"checks": checks} if any(c is not None for c in checks) else {}),
            )
        except (OmniVoiceError, RuntimeError, MemoryError) as e:  # e.g. out of memory: the group fails
            msg = " ".join((str(e).strip() or type(e).__name__).split())
            for line in group:
                if line.status is None:
                    run.fail_line(line, f"generation failed: {msg}")


def run_batch(input_path: str | Path, output_dir: str | Path, **kwargs: Any) -> BatchReport:
    """Run a batch (see BatchRun)."""
    return BatchRun(input_path, output_dir, **kwargs).run()
