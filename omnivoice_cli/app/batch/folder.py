"""A run's output folder (batch, dub's stems, the book's parts): each line's file name in it,
checked (no two lines writing one file, nothing leading outside it), the folder created, and the
temporary files a killed run left removed."""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Protocol, Sequence

from ...engine.errors import InvalidRequest
from ...media.atomic import temporary_files
from ...media.formats import AUDIO_FORMATS
from ..settings.values import or_list, shown_value
from .manifest import MANIFEST


class NamedLine(Protocol):
    """What naming reads of a line (batchinput.Line, the book's parts)."""

    number: int  # 1-based line number in the input file
    fields: dict[str, object]  # a JSON line's fields
    id: str | None
    name: str | None  # its output file, once named
    error: str | None

    def fail(self, message: str) -> None: ...


AUDIO_SUFFIXES = {ext: f.name for f in AUDIO_FORMATS.values() for ext in f.extensions}  # ".mp3" -> "mp3"
MAX_NAME_BYTES = 200  # an output file name (the temporary name adds ~20 bytes; most systems allow 255)
MAX_PATH_BYTES = 1024  # an output's path inside the folder
MAX_DEPTH = 16  # folders in an output's path


def _safe_id(value: str) -> bool:
    return bool(value.strip()) and value not in (".", "..") and not any(c in value for c in "/\\\0")


def _output_name(spec: str, fmt: str) -> tuple[str, str, str | None]:
    """(relative name, format, error) for a line's "output" field."""
    if "\0" in spec:
        return "", fmt, f"{shown_value(spec)} must be a file name (it holds a NUL character)"
    p = PurePath(spec.replace("\\", "/"))
    if p.is_absolute() or spec.startswith(("/", "~")) or ".." in p.parts or not p.parts or p.name in ("", "."):
        return "", fmt, f"{spec!r} must be a file name inside the output folder (no absolute path, no '..')"
    suffix = p.suffix.lower()
    if suffix in AUDIO_SUFFIXES:
        name, fmt = p.as_posix(), AUDIO_SUFFIXES[suffix]
    elif suffix and not suffix[1:].isdigit():
        return "", fmt, f"{spec!r} must end in {or_list(AUDIO_SUFFIXES)}, or have no extension"
    else:
        name = f"{p.as_posix()}.{fmt}"
    if any(len(part.encode()) > MAX_NAME_BYTES for part in PurePath(name).parts):
        return "", fmt, f"{shown_value(spec)} is too long: at most {MAX_NAME_BYTES} bytes per name"
    if len(name.encode()) > MAX_PATH_BYTES or len(PurePath(name).parts) > MAX_DEPTH:
        return (
            "",
            fmt,
            (f"{shown_value(spec)} is too long: at most {MAX_PATH_BYTES} bytes and {MAX_DEPTH} folders deep"),
        )
    return name, fmt, None


def line_output(line: NamedLine, fmt: str, width: int) -> tuple[str, str]:
    """(file name relative to the output folder, format) of a line; InvalidRequest when it cannot name a file."""
    f, n = line.fields, line.number
    if f.get("output") is not None:
        name, fmt, error = _output_name(str(f["output"]), fmt)
        if error:
            raise InvalidRequest(f"line {n}: field 'output' {error}")
        return name, fmt
    if line.id is not None:
        if not _safe_id(line.id) or len(line.id.encode()) > MAX_NAME_BYTES:
            raise InvalidRequest(
                f"line {n}: field 'id' {shown_value(line.id)} cannot name a file (no '/', '\\', "
                f"'.' or '..', at most {MAX_NAME_BYTES} bytes): use letters, digits, '-' and '_', "
                "or give 'output'"
            )
        return f"{line.id}.{fmt}", fmt
    return f"{n:0{width}d}.{fmt}", fmt


def check_duplicates(lines: Sequence[NamedLine], suffix: str | None = None) -> None:
    """Two lines that would write the same file (case-insensitively) both fail; with `suffix`,
    the same file of that extension beside their audio (their subtitles)."""
    by_name: dict[str, list[NamedLine]] = {}
    for line in lines:
        if line.error is None and line.name is not None:
            name = line.name if suffix is None else str(PurePath(line.name).with_suffix(suffix))
            by_name.setdefault(name.casefold(), []).append(line)
    for group in by_name.values():
        if len(group) < 2:
            continue
        for line in group:
            others = ", ".join(str(o.number) for o in group if o is not line)
            own = line.name or ""  # every grouped line has a name (above)
            name = own if suffix is None else str(PurePath(own).with_suffix(suffix))
            line.fail(f"output '{name}' is also written by line {others}: give each line its own id or output")


def check_output_dir(spec: str | Path, flag: str = "-o", command: str = "batch") -> None:
    """Before the model: an output folder's name that ends as an audio file's (`-o hello.wav`) is
    refused (a usage error), unless that folder exists already: the run writes a folder."""
    out = Path(spec).expanduser()
    if out.suffix.lower() in AUDIO_SUFFIXES and not out.is_dir():
        raise InvalidRequest(
            f"{flag} '{spec}' names an audio file, but {command} writes a folder (one audio file a line and "
            f"{MANIFEST}): give a folder, e.g. {flag} '{out.with_suffix('')}'"
        )


def prepare_output_dir(spec: str | Path) -> Path:
    out = Path(spec).expanduser()
    if out.exists() and not out.is_dir():
        raise InvalidRequest(f"output folder '{spec}' is a file: give a folder (it is created when missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, f"cannot create the output folder '{spec}': {e.strerror or e}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OSError(13, f"cannot write to the output folder '{spec}': permission denied")
    return out


def remove_stale_temporaries(out: Path, names: list[str]) -> list[Path]:
    """Delete the temporary files (.NAME.*.part) a killed run left for these outputs and the manifest."""
    removed = []
    for name in [*names, MANIFEST]:
        target = out / name
        if not target.parent.is_dir():
            continue
        for tmp in temporary_files(target):
            try:
                tmp.unlink()
                removed.append(tmp)
            except OSError:
                pass
    return removed


def target_problem(out: Path, name: str) -> str | None:
    """Why a line's output cannot be written (before anything runs), else None: a folder in its
    place, a path leading outside the output folder (through a symbolic link), a name the file
    system refuses."""
    target = out / name
    try:
        if target.is_dir():
            return f"output '{name}' is a folder: give another output"
        if not target.parent.resolve().is_relative_to(out.resolve()):
            return f"output '{name}' leads outside the output folder (through a symbolic link)"
        target.exists()
    except (OSError, ValueError) as e:
        return f"output '{name}' cannot be written: {getattr(e, 'strerror', None) or e}"
    return None


def audio_seconds(path: Path) -> float | None:
    """The length of an audio file in seconds (4 decimals), None when it cannot be read."""
    try:
        import soundfile as sf

        info = sf.info(str(path))
        return round(info.frames / info.samplerate, 4)
    except Exception:
        return None
