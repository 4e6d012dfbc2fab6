"""`omnivoice batch`: many texts from one file, one audio file per line, resumable.

    omnivoice batch lines.txt -o out/                  # one audio file per non-empty line
    omnivoice batch jobs.jsonl -o out/ --preset fast   # per-line settings

The run, in order:
  1. read the input (.txt: one text per line; .jsonl: one JSON object per line; blank lines and
     lines starting with '#' are skipped) and check every line: fields, types, values, preset,
     the engine's own `validate_request`, output names (two lines may not write one file);
  2. create the output folder, remove temporary files a killed run left behind, and skip every
     line whose output already exists (unless --overwrite): a rerun resumes;
  3. load the model (only if a line is left to speak) and send the lines to `Engine.generate` in
     groups of GROUP_SIZE; each file is written (temporary name, then rename) as soon as its line
     is finished, and its manifest record appended;
  4. rewrite the manifest atomically with one record per input line, print a summary.

Manifest (`OUT/manifest.jsonl`, one JSON object per line): while a run goes, one record is appended
(and flushed to disk) per line as it finishes, fails or is skipped; when the run ends, normally or
by Ctrl-C / SIGTERM, the file is rewritten atomically with exactly one record per input line, in
input order. After a hard kill (SIGKILL, power loss) the file holds the earlier records followed by
the new ones: the latest record for a line wins, and the next run rewrites the file. A line whose
file already existed keeps its earlier "done" record; without one it is recorded as "skipped".
Statuses: done, failed, skipped, pending (the run stopped before the line was spoken).

Seeds: a line's own "seed" wins; else with --seed S the line with 0-based index i in the file
(counting every physical line, blank and comment lines too) uses S + i; else each line gets a
random seed. The seed is always recorded, so `omnivoice say TEXT --seed N` (same settings)
repeats any line byte for byte.

A line's "preset" replaces --preset for that line (defaults < the line's preset < the flags < the
line's fields); model, device, dtype, threads, quantize and compile are per run (one engine), so
a line's preset may not change them.

Text: line breaks inside a JSON line's text (and ref_text) become spaces, as in `say`.

Voice cloning: "ref" (a recording) with "ref_text" (its transcript; else the .txt file beside
the recording) is encoded once the model is loaded (`Engine.voice_from_audio`; each recording
once); "voice" is a saved voice's name (`voices.py`) or a voice file (.safetensors, or a reference
`.pt` prompt). Relative paths in a line are relative to the input file's folder; a preset's voice
to the preset's folder; --voice to the current folder.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Callable, Mapping

from . import settings as st
from .engine.errors import InvalidRequest, OmniVoiceError
from .signals import HoldSignals as _Signals

MANIFEST = "manifest.jsonl"
GROUP_SIZE = 64  # lines per Engine.generate call (the engine bounds each forward itself)
TEXT_SUFFIXES = (".txt",)
JSON_SUFFIXES = (".jsonl", ".ndjson")
AUDIO_SUFFIXES = {".wav": "wav", ".flac": "flac", ".ogg": "ogg"}
RUN_WIDE = ("model", "device", "dtype", "threads", "quantize", "compile")  # one engine per run

# Fields of a JSON line that are settings (checked by settings.check_setting).
SETTING_FIELDS = (
    "lang",
    "instruct",
    "voice",
    "duration",
    "speed",
    "seed",
    "num_step",
    "guidance_scale",
    "t_shift",
    "layer_penalty_factor",
    "position_temperature",
    "class_temperature",
    "denoise",
    "chunk_duration",
    "chunk_threshold",
)
LINE_FIELDS = ("text", "id", "output", *SETTING_FIELDS[:3], "ref", "ref_text", *SETTING_FIELDS[3:], "preset")
VOICE_CLONING_MISSING = "voice cloning is not available yet"


@dataclass
class Line:
    """One input line that is not blank or a comment, and what became of it."""

    number: int  # 1-based line number in the input file
    text: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # a JSON line's fields; {} for a .txt line
    id: str | None = None  # the JSON line's id, as a string
    name: str | None = None  # the output file, relative to the output folder (posix form)
    format: str | None = None  # wav | flac | ogg
    settings: dict[str, Any] | None = None  # resolved
    request: Any = None  # engine Request, when the line is valid
    warnings: list[str] = field(default_factory=list)
    ref: tuple[Path, str | None] | None = None  # (recording, transcript) to encode once the model is loaded
    error: str | None = None  # "line N: ..." when the line failed
    status: str | None = None  # done | failed | skipped (None: not run yet)
    record: dict[str, Any] | None = None  # its manifest record from this run (or reused)

    @property
    def index(self) -> int:
        return self.number - 1


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
    wall_seconds: float = 0.0
    manifest: Path | None = None
    interrupted: int | None = None  # the signal number when stopped by Ctrl-C / SIGTERM

    @property
    def rtf(self) -> float | None:
        return self.generate_seconds / self.audio_seconds if self.audio_seconds > 0 else None


# --------------------------------------------------------------------------------------------
# Reading the input
# --------------------------------------------------------------------------------------------


def read_input(path: str | Path) -> tuple[list[Line], int]:
    """The lines to speak (blank and '#' lines skipped) and the file's number of physical lines.

    A missing, unreadable or empty file, or an unknown extension, is an InvalidRequest. A JSON line
    that does not parse becomes a Line with its error set (the other lines still run).
    """
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
        content = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"input file '{path}' is not UTF-8 text (bad byte at offset {e.start})") from None
    except OSError as e:
        raise OSError(e.errno, f"cannot read the input file '{path}': {e.strerror or e}") from None
    raw_lines = content.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()  # the final newline
    lines: list[Line] = []
    as_json = suffix in JSON_SUFFIXES
    for number, raw in enumerate(raw_lines, start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not as_json:
            lines.append(Line(number, text=stripped))
            continue
        line = Line(number)
        try:
            obj = json.loads(stripped, object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as e:
            line.error = f"line {number}: field {e.args[0]!r} appears twice"
        except json.JSONDecodeError as e:
            line.error = f"line {number}: not valid JSON: {e.msg} (column {e.colno})"
        else:
            if isinstance(obj, dict):
                line.fields = obj
            else:
                line.error = (
                    f"line {number}: expected a JSON object such as {{\"text\": \"Hello\"}}, "
                    f"got {st._type_name(obj)}"
                )
        lines.append(line)
    if not lines:
        what = "is empty" if not content.strip() else "has only blank lines and # comments"
        raise InvalidRequest(f"input file '{path}' {what}: nothing to speak")
    return lines, len(raw_lines)


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def check_fields(line: Line) -> None:
    """Check a JSON line's fields (names, types, values); set line.text, line.id or line.error."""
    if line.error is not None or not line.fields and line.text is not None:
        return
    n, f = line.number, line.fields
    unknown = [k for k in f if k not in LINE_FIELDS]
    if unknown:
        hint = st.did_you_mean(unknown[0], LINE_FIELDS)
        names = ", ".join(repr(k) for k in unknown)
        line.error = (
            f"line {n}: unknown field{'s' if len(unknown) > 1 else ''} {names}{hint}; "
            f"known fields: {', '.join(LINE_FIELDS)}"
        )
        return
    text = f.get("text")
    if text is None:
        line.error = f"line {n}: field 'text' is missing: every line needs the text to speak"
        return
    if not isinstance(text, str):
        line.error = f"line {n}: field 'text' must be a string, got {text!r} ({st._type_name(text)})"
        return
    if not text.strip():
        line.error = f"line {n}: field 'text' is empty: give some text to speak"
        return
    line.text = st.join_lines(text)
    for key in ("id", "output", "ref", "ref_text", "preset"):
        value = f.get(key)
        if value is None:
            continue
        ok = isinstance(value, str) or (key == "id" and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            kind = "a string or an integer" if key == "id" else "a string"
            line.error = f"line {n}: field {key!r} must be {kind}, got {value!r} ({st._type_name(value)})"
            return
        if isinstance(value, str) and not value.strip():
            line.error = f"line {n}: field {key!r} is empty"
            return
    for key in SETTING_FIELDS:
        if f.get(key) is None:
            continue
        try:
            f[key] = st.check_setting(key, f[key])
        except st.SettingsError as e:
            line.error = f"line {n}: field {key!r} {e}"
            return
    if f.get("id") is not None:
        line.id = str(f["id"])


# --------------------------------------------------------------------------------------------
# Settings, requests and output names of each line
# --------------------------------------------------------------------------------------------


def plan_line(
    line: Line,
    run_preset: st.Preset | None,
    flags: Mapping[str, Any],
    run: Mapping[str, Any],
    presets: dict[str, st.Preset | st.SettingsError],
    name_width: int,
    random_seed: Callable[[], int],
    base: Path = Path("."),
    voices: dict[Path, Any] | None = None,
) -> None:
    """Resolve a checked line's settings, build its engine request and output name (or set error)."""
    from .engine.config import GenerationConfig
    from .engine.pipeline import Request, validate_request

    n, f = line.number, line.fields
    preset = run_preset
    if f.get("preset") is not None:
        spec = f["preset"]
        if spec not in presets:
            try:
                presets[spec] = st.find_preset(spec)
            except st.SettingsError as e:
                presets[spec] = e
        found = presets[spec]
        if isinstance(found, st.SettingsError):
            line.error = f"line {n}: field 'preset': {found}"
            return
        preset = found
        for key in RUN_WIDE:
            if key in preset.settings and preset.settings[key] != run[key]:
                line.error = (
                    f"line {n}: field 'preset': preset {spec!r} sets {key} {preset.settings[key]!r} but this run "
                    f"uses {run[key]!r}; {key} applies to the whole run (give {st.flag_name(key)} or --preset)"
                )
                return
    line_flags = dict(flags)
    seed_base = flags.get("seed")
    if seed_base is not None and f.get("seed") is None:
        seed = seed_base + line.index
        if seed > st.MAX_SEED:
            line.error = f"line {n}: seed {seed_base} + {line.index} is more than {st.MAX_SEED}: give a smaller --seed"
            return
        line_flags["seed"] = seed
    layer = {k: f[k] for k in SETTING_FIELDS if f.get(k) is not None}
    settings = st.resolve_settings(st.DEFAULTS, preset.settings if preset else None, line_flags, layer)
    settings.update({k: run[k] for k in RUN_WIDE})
    if settings["seed"] is None:
        settings["seed"] = random_seed()
    line.settings = settings

    # the output name
    fmt = settings["format"]
    if f.get("output") is not None:
        name, fmt, error = _output_name(str(f["output"]), fmt)
        if error:
            line.error = f"line {n}: field 'output' {error}"
            return
    elif line.id is not None:
        if not _safe_id(line.id):
            line.error = (
                f"line {n}: field 'id' {line.id!r} cannot name a file (no '/', '\\', '.' or '..'): "
                "use letters, digits, '-' and '_', or give 'output'"
            )
            return
        name = f"{line.id}.{fmt}"
    else:
        name = f"{n:0{name_width}d}.{fmt}"
    line.name, line.format = name, fmt
    settings["format"] = fmt

    # voice cloning: ref / ref_text / voice
    if f.get("voice") is not None:
        voice_base, voice_from = base, "line"  # the input file's folder
    elif flags.get("voice") is not None or preset is None:
        voice_base, voice_from = Path("."), "flag"
    else:
        voice_base, voice_from = preset.path.parent, "preset"
    ref = _voice_prompt(line, settings, base, voice_base, {} if voices is None else voices, voice_from)
    if line.error:
        return

    try:
        generation = GenerationConfig(**st.generation_kwargs(settings))
        request = Request(
            text=line.text,
            lang=settings["lang"],
            instruct=settings["instruct"],
            duration=settings["duration"],
            speed=settings["speed"],
            seed=int(settings["seed"]),
            ref=ref,
            generation=generation,
        )
        line.warnings = list(validate_request(request))
    except InvalidRequest as e:
        line.error = f"line {n}: {_name_field(str(e), f)}"
        return
    line.request = request


def _voice_prompt(
    line: Line,
    settings: Mapping[str, Any],
    base: Path,
    voice_base: Path,
    voices: dict[Path, Any],
    voice_from: str = "line",
):
    """The VoicePrompt of a line that clones a saved voice, else None.

    `ref` (a recording, with `ref_text`, else the .txt file beside it) is only checked here and
    set on line.ref: it is encoded once the model is loaded (`encode_refs`). `voice` is a saved
    voice's name or a voice file, read now. Relative paths in a line are relative to the input
    file's folder (`base`); a preset's voice to the preset's folder (`voice_base`).
    """
    from . import voices as store

    f, n = line.fields, line.number
    ref, ref_text = f.get("ref"), f.get("ref_text")
    if ref_text is not None and ref is None:
        line.error = f"line {n}: field 'ref_text' needs 'ref', the recording it transcribes"
        return None
    if ref is not None:
        if f.get("voice") is not None:
            line.error = f"line {n}: give either 'ref' or 'voice', not both"
            return None
        path = _resolve(ref, base)
        if not path.is_file():
            shown = f"'{ref}'" if path == Path(ref) else f"'{ref}' ({path})"
            line.error = f"line {n}: field 'ref': audio file {shown} does not exist"
            return None
        try:
            transcript = store.reference_transcript(path, ref_text, flag="field 'ref_text'")
        except InvalidRequest as e:
            line.error = f"line {n}: field 'ref': {e}"
            return None
        line.ref = (path, transcript)
        return None
    voice = settings.get("voice")
    if voice is None:
        return None
    where = {
        "line": "field 'voice'",
        "flag": f"--voice {voice!r}",
        "preset": f"voice {voice!r} (from the preset)",
    }[voice_from]
    try:
        path = store.resolve_voice(voice, voice_base)
    except InvalidRequest as e:
        line.error = f"line {n}: {where}: {e}"
        return None
    if path not in voices:
        try:
            voices[path] = store.load_voice_file(path)
        except InvalidRequest as e:
            voices[path] = e
    loaded = voices[path]
    if isinstance(loaded, Exception):
        line.error = f"line {n}: {where}: {loaded}"
        return None
    return loaded


def _resolve(spec: str, base: Path) -> Path:
    p = Path(spec).expanduser()
    return p if p.is_absolute() else base / p


def encode_refs(engine, lines: list[Line]) -> list[tuple[Line, str]]:
    """Encode the recordings of lines with `ref` (the model is loaded now) and finish their requests.

    Returns (line, error message) for the lines that failed; the others get their request's ref.
    """
    import dataclasses

    from .engine.pipeline import validate_request

    encode = getattr(engine, "voice_from_audio", None)
    cache: dict[tuple[Path, str | None], Any] = {}
    failed = []
    for line in lines:
        if line.ref is None:
            continue
        if encode is None:
            failed.append((line, f"line {line.number}: field 'ref': {VOICE_CLONING_MISSING}"))
            continue
        try:
            if line.ref not in cache:
                cache[line.ref] = encode(str(line.ref[0]), line.ref[1])
            prompt = cache[line.ref]
            request = dataclasses.replace(line.request, ref=prompt)
            warnings = list(validate_request(request))
        except (OmniVoiceError, OSError, ValueError) as e:
            msg = " ".join((str(e).strip() or type(e).__name__).splitlines())
            failed.append((line, f"line {line.number}: field 'ref': {msg}"))
            continue
        line.request = request
        line.warnings = list(dict.fromkeys([*line.warnings, *warnings, *getattr(prompt, "warnings", ())]))
    return failed


def _name_field(msg: str, fields: Mapping[str, Any]) -> str:
    """Make an engine message name the field it is about ("instruct" items, mostly)."""
    for key in ("text", *SETTING_FIELDS):
        if msg.startswith(key + " ") or msg.startswith(key + ":"):
            return f"field {key!r}: {msg}" if key in fields else msg
    if "instruct" in msg and "instruct" in fields:
        return f"field 'instruct': {msg}"
    return msg


def _safe_id(value: str) -> bool:
    return bool(value.strip()) and value not in (".", "..") and not any(c in value for c in "/\\\0")


def _output_name(spec: str, fmt: str) -> tuple[str, str, str | None]:
    """(relative name, format, error) for a line's "output" field."""
    p = PurePath(spec.replace("\\", "/"))
    if p.is_absolute() or spec.startswith(("/", "~")) or ".." in p.parts or not p.parts or p.name in ("", "."):
        return "", fmt, f"{spec!r} must be a file name inside the output folder (no absolute path, no '..')"
    suffix = p.suffix.lower()
    if suffix in AUDIO_SUFFIXES:
        return p.as_posix(), AUDIO_SUFFIXES[suffix], None
    if suffix and not suffix[1:].isdigit():
        return "", fmt, f"{spec!r} must end in .wav, .flac or .ogg, or have no extension"
    return f"{p.as_posix()}.{fmt}", fmt, None


def check_duplicates(lines: list[Line]) -> None:
    """Two lines that would write the same file (case-insensitively) both fail."""
    by_name: dict[str, list[Line]] = {}
    for line in lines:
        if line.error is None and line.name is not None:
            by_name.setdefault(line.name.casefold(), []).append(line)
    for group in by_name.values():
        if len(group) < 2:
            continue
        for line in group:
            others = ", ".join(str(o.number) for o in group if o is not line)
            line.error = (
                f"line {line.number}: output '{line.name}' is also written by line {others}: "
                "give each line its own id or output"
            )
            line.request = None


# --------------------------------------------------------------------------------------------
# The output folder and the manifest
# --------------------------------------------------------------------------------------------


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
        for tmp in target.parent.glob(f".{_glob_escape(target.name)}.*.part"):
            try:
                if tmp.is_file():
                    tmp.unlink()
                    removed.append(tmp)
            except OSError:
                pass
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """The records of an existing manifest (lines that do not parse, e.g. torn by a kill, are ignored)."""
    try:
        content = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for raw in content.splitlines():
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


class ManifestWriter:
    """Appends records (one JSON line each, flushed to disk); `rewrite` replaces the file atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = None

    def append(self, record: Mapping[str, Any]) -> None:
        if self._f is None:
            needs_newline = False
            try:
                with open(self.path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    if f.tell() > 0:
                        f.seek(-1, os.SEEK_END)
                        needs_newline = f.read(1) != b"\n"  # a record torn by a kill
            except FileNotFoundError:
                pass
            self._f = open(self.path, "a", encoding="utf-8")
            if needs_newline:
                self._f.write("\n")
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def rewrite(self, records: list[Mapping[str, Any]]) -> None:
        from .output import replace_atomically

        self.close()
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        replace_atomically(self.path, lambda f: f.write(data))


def _record(line: Line, status: str, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "line": line.number,
        "id": line.id,
        "status": status,
        "output": line.name,
        "text": line.text,
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
# Progress
# --------------------------------------------------------------------------------------------


class BatchProgress:
    """Two rich bars on stderr: lines (done / failed / skipped) and the diffusion steps of the
    current forward loop (the engine's on_step)."""

    def __init__(self, total_lines: int, enabled: bool) -> None:
        self.total = total_lines
        self.enabled = enabled
        self.done = self.failed = self.skipped = 0
        self._progress = None

    def __enter__(self) -> "BatchProgress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description:>5}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._lines = self._progress.add_task("lines", total=self.total, info="")
            self._steps = self._progress.add_task("steps", total=None, info="current forward loop")
            self._refresh()
        return self

    def line(self, status: str) -> None:
        if status == "done":
            self.done += 1
        elif status == "failed":
            self.failed += 1
        elif status == "skipped":
            self.skipped += 1
        self._refresh()

    def step(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._steps, completed=done, total=total)

    def _refresh(self) -> None:
        if self._progress is not None:
            info = f"done {self.done} · failed {self.failed} · skipped {self.skipped}"
            self._progress.update(
                self._lines, completed=self.done + self.failed + self.skipped, info=info
            )

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def run_batch(
    input_path: str | Path,
    output_dir: str | Path,
    *,
    preset: st.Preset | None,
    flags: Mapping[str, Any],
    overwrite: bool = False,
    quiet: bool = False,
    echo: Callable[[str], None] = print,
    random_seed: Callable[[], int] | None = None,
) -> BatchReport:
    """Run a batch. `flags` are the checked command-line flags (None = not given).

    Input-level problems (missing or empty input, bad output folder) raise InvalidRequest or
    OSError before anything is written; a model that fails to load raises after the manifest has
    been written. Per-line problems are reported through `echo` and the manifest, never raised.
    """
    t_start = time.perf_counter()
    random_seed = random_seed or (lambda: secrets.randbelow(2**31))
    lines, physical = read_input(input_path)
    report = BatchReport(lines=len(lines))

    run = st.resolve_settings(st.DEFAULTS, preset.settings if preset else None, flags)
    presets: dict[str, Any] = {}
    voices: dict[Path, Any] = {}
    base = Path(input_path).expanduser().parent
    width = max(4, len(str(physical)))
    for line in lines:
        check_fields(line)
        if line.error is None:
            plan_line(line, preset, flags, run, presets, width, random_seed, base, voices)
    check_duplicates(lines)

    out = prepare_output_dir(output_dir)
    remove_stale_temporaries(out, [ln.name for ln in lines if ln.name])
    manifest_path = out / MANIFEST
    report.manifest = manifest_path
    earlier: dict[str, dict[str, Any]] = {}
    for rec in read_manifest(manifest_path):
        if rec.get("status") == "done" and isinstance(rec.get("output"), str):
            earlier[rec["output"].casefold()] = rec
    manifest = ManifestWriter(manifest_path)

    shown: set[str] = set()

    def warn(line: Line, warnings: list[str]) -> None:
        for w in warnings:
            if w not in shown:
                shown.add(w)
                echo(f"Warning: line {line.number}: {w}")

    pending: list[Line] = []
    progress = BatchProgress(len(lines), enabled=not quiet)
    signals = _Signals().__enter__()
    try:
        with progress:
            # failures found before the model, and outputs that already exist
            for line in lines:
                if line.error is not None:
                    line.status = "failed"
                    line.record = _record(line, "failed")
                    manifest.append(line.record)
                    echo(f"Error: {line.error}")
                    progress.line("failed")
                    continue
                target = out / line.name
                if target.exists() and not overwrite:
                    line.status = "skipped"
                    old = earlier.get(line.name.casefold())
                    if old is not None:
                        line.record = {**old, "line": line.number}
                    else:
                        line.record = _record(line, "skipped", audio_seconds=_audio_seconds(target))
                        line.record["settings"] = None  # unknown: the file was not written by this run
                        line.record["seed"] = None
                        manifest.append(line.record)
                    progress.line("skipped")
                    continue
                pending.append(line)

            if pending:
                from .engine import pipeline

                def notice(msg: str) -> None:
                    if not quiet:
                        echo(msg)

                t_load = time.perf_counter()
                engine = pipeline.Engine.load(
                    run["model"], device=run["device"], dtype=run["dtype"], on_notice=notice, **st.engine_kwargs(run)
                )
                t_gen = time.perf_counter()
                report.load_seconds = t_gen - t_load
                for line, message in encode_refs(engine, pending):
                    _fail(line, message, manifest, progress, echo)
                pending = [ln for ln in pending if ln.status is None]
            for line in pending:
                warn(line, line.warnings)
            if pending:
                for start in range(0, len(pending), GROUP_SIZE):
                    group = pending[start : start + GROUP_SIZE]
                    _run_group(engine, group, out, manifest, progress, echo, warn, report, signals)
                report.generate_seconds = time.perf_counter() - t_gen
    except KeyboardInterrupt as e:
        report.interrupted = int(getattr(e, "signum", signal.SIGINT))
    finally:
        signals.depth += 1  # no stop while the manifest is rewritten; the run is ending anyway
        error = (
            "the run was interrupted before this line was spoken"
            if report.interrupted
            else "the run stopped before this line was spoken"
        )
        final = []
        for line in lines:
            if line.record is None:
                line.record = _record(line, "pending", error=error)
                report.pending += 1
            final.append(line.record)
        try:
            manifest.rewrite(final)
        finally:
            signals.__exit__()

    report.done = sum(1 for ln in lines if ln.status == "done")
    report.failed = sum(1 for ln in lines if ln.status == "failed")
    report.skipped = sum(1 for ln in lines if ln.status == "skipped")
    report.wall_seconds = time.perf_counter() - t_start
    return report


def _run_group(engine, group: list[Line], out: Path, manifest, progress, echo, warn, report, signals) -> None:
    from .output import FORMATS, OutputTarget, write_audio

    t0 = time.perf_counter()

    def on_result(i: int, result) -> None:
        with signals.protect():  # the file and its record, or neither
            save(group[i], result)

    def save(line: Line, result) -> None:
        target = out / line.name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_audio(result.audio, result.sample_rate, OutputTarget(target, *FORMATS["." + line.format]))
        except OSError as e:
            fail(line, f"line {line.number}: cannot write {target}: {e.strerror or e}")
            return
        seconds = len(result.audio) / result.sample_rate
        line.warnings = list(dict.fromkeys([*line.warnings, *result.warnings]))
        warn(line, result.warnings)
        line.status = "done"
        line.record = _record(
            line,
            "done",
            audio_seconds=round(seconds, 4),
            seconds=round(time.perf_counter() - t0, 4),
            seed=result.seed,
        )
        manifest.append(line.record)
        report.audio_seconds += seconds
        progress.line("done")

    def fail(line: Line, message: str) -> None:
        _fail(line, message, manifest, progress, echo)

    try:
        engine.generate([ln.request for ln in group], on_step=progress.step, on_result=on_result)
    except (OmniVoiceError, RuntimeError, MemoryError) as e:  # e.g. out of memory: the group fails
        msg = " ".join((str(e).strip() or type(e).__name__).splitlines())
        for line in group:
            if line.status is None:
                fail(line, f"line {line.number}: generation failed: {msg}")


def _fail(line: Line, message: str, manifest, progress, echo) -> None:
    line.error = message
    line.status = "failed"
    line.record = _record(line, "failed")
    manifest.append(line.record)
    echo(f"Error: {message}")
    progress.line("failed")


def _audio_seconds(path: Path) -> float | None:
    try:
        import soundfile as sf

        info = sf.info(str(path))
        return round(info.frames / info.samplerate, 4)
    except Exception:
        return None
