"""A batch's input: the file read line by line (.txt: one text per line; .jsonl: one JSON object
per line; blank lines and lines starting with '#' skipped), within its bounds (MAX_INPUT_BYTES,
MAX_LINE_BYTES, MAX_LINES), and each JSON line's fields checked (`check_fields`: names, types,
values). Each line to speak is a `Line`, which the run (batch.BatchRun) then plans, speaks and
records; a line that does not parse is a Line with its error set (the other lines still run)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...engine.errors import InvalidRequest
from ...engine.text.textcheck import is_blank
from ..request import Built
from ..settings.layers import Source, check_layer
from ..settings.schema import LINE_SETTINGS, SCHEMA
from ..settings.setting import LINE, SettingsError, flag_name
from ..settings.values import did_you_mean, shown_value, type_name

if TYPE_CHECKING:  # annotations only: these pull torch (or the recogniser's extra) at import
    from ...engine.sound.voice import VoicePrompt
    from ..listening.verify import RequestCheck

TEXT_SUFFIXES = (".txt",)
JSON_SUFFIXES = (".jsonl", ".ndjson")
MAX_INPUT_BYTES = 512 * 1024 * 1024  # the input file is read up to here
MAX_LINE_BYTES = 1024 * 1024  # one line (a text of about 20 minutes of speech)
MAX_LINES = 100_000  # lines to speak in one input file (each is planned, and kept, before the model loads)
LINE_FIELDS = ("text", "id", "output", *LINE_SETTINGS, "preset")


@dataclass
class Line:
    """One input line that is not blank or a comment, and what became of it."""

    number: int  # 1-based line number in the input file
    text: str | None = None
    fields: dict[str, object] = field(default_factory=dict)  # a JSON line's fields; {} for a .txt line
    id: str | None = None  # the JSON line's id, as a string
    name: str | None = None  # the output file, relative to the output folder (posix form)
    format: str | None = None  # wav | flac | ogg
    built: Built | None = None  # the request, when the line is valid
    prompt: "VoicePrompt | None" = None  # its reference recording, encoded once the model is loaded
    check: "RequestCheck | None" = None  # --verify: its per-piece check, while it is spoken
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # "line N: ..." when the line failed
    status: str | None = None  # done | failed | skipped (None: not run yet)
    record: dict[str, object] | None = None  # its manifest record from this run (or reused)

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
    def settings(self) -> dict[str, object] | None:
        return dict(self.built.settings.values) if self.built else None

    def fail(self, message: str) -> None:
        self.error = message if message.startswith(f"line {self.number}:") else f"line {self.number}: {message}"


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
            line.error = f'line {number}: expected a JSON object such as {{"text": "Hello"}}, got {type_name(obj)}'
    return line


def check_fields(line: Line) -> None:
    """Check a JSON line's fields (names, types, values); set line.text, line.id or line.error."""
    if line.error is not None or (not line.fields and line.text is not None):
        return
    n, f = line.number, line.fields
    unknown = [k for k in f if k not in LINE_FIELDS]
    if unknown:
        hint = did_you_mean(unknown[0], LINE_FIELDS)
        if unknown[0] in SCHEMA:  # a setting of the whole run (a file of this machine, the hardware)
            hint = f" ({unknown[0]} is set for the whole run: give {flag_name(unknown[0])} or a --preset)"
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
        line.error = f"line {n}: field 'text' must be a string, got {shown_value(text)} ({type_name(text)})"
    elif not text.strip():
        line.error = f"line {n}: field 'text' is empty: give some text to speak"
    else:
        line.text = text  # its line breaks kept for `markdown` (request.spoken_text joins the lines)
        line.error = _check_plain_fields(n, f)
    if line.error is None and f.get("id") is not None:
        line.id = str(f["id"])


def _check_plain_fields(n: int, f: dict[str, object]) -> str | None:
    for key in ("id", "output", "preset"):
        value = f.get(key)
        if value is None:
            continue
        ok = isinstance(value, str) or (key == "id" and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            kind = "a string or an integer" if key == "id" else "a string"
            return f"line {n}: field {key!r} must be {kind}, got {shown_value(value)} ({type_name(value)})"
        if isinstance(value, str) and not value.strip():
            return f"line {n}: field {key!r} is empty"
    try:
        f.update(check_layer({k: f.get(k) for k in LINE_SETTINGS}, Source("line", str(n)), LINE))
    except SettingsError as e:
        return str(e)
    return None
