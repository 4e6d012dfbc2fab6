"""The saved-voice store: `omnivoice voice add/list/show/rm/import`, and `--voice NAME|FILE`.

A saved voice is one safetensors file, `<user data folder>/voices/<name>.safetensors`
(`engine.hub.user_home()`: `$OMNIVOICE_HOME`, else `$XDG_DATA_HOME/omnivoice`, else
`~/.local/share/omnivoice`), written by `engine.voice.save_voice`: the codec codes of the
reference recording as a tensor, its transcript and RMS in the metadata, plus what this module
records (name, source, created, model, seconds). Nothing is ever unpickled: the reference
implementation's `.pt` prompts are read by `engine.voice.import_reference_prompt`
(`torch.load(weights_only=True)`, format version checked).

`--voice SPEC` (and `voice` in presets and JSON lines) is a path when it looks like one (it holds
a '/', starts with '.' or '~', or ends in .safetensors or .pt), else a saved voice's name, else a
built-in voice: one of OpenAI's voice names (alloy, ash, ... `data/openai_voices.json`, the table
`omnivoice serve` maps them by), a voice designed from its voice-design items, rendered once per
checkpoint and cloned after that (design.py, designcache.py). A saved voice made by `voice add
--instruct` records what it was designed from (DESIGN_KEYS) beside its rendered prompt. A saved voice
of the same name (case aside) wins over a built-in one; `voice list` shows both kinds.

Also here: finding the transcript of a reference recording (`--ref-text`, else `me.txt` beside
`me.wav`) and checking a recording before the model is loaded.

Importing this module is cheap; the engine (and torch) is imported inside the functions.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ...engine.checkpoint.hub import user_home
from ...engine.errors import InvalidRequest, one_line
from ...engine.model.config import ModelConfig
from ...engine.sound.voicefile import read_voice_metadata
from ...engine.text.textcheck import unicode_problem
from ..settings.values import did_you_mean, join_lines

if TYPE_CHECKING:  # engine.voice imports torch: loaded only where a voice file is read or written
    import torch

    from ...engine.sound.voice import VoicePrompt

FRAME_RATE = ModelConfig().frame_rate  # codec frames per second of a voice's codes
VOICE_SUFFIX = ".safetensors"
PROMPT_SUFFIX = ".pt"  # the reference implementation's VoiceClonePrompt.save
MAX_NAME = 64
_NAME_RE = re.compile(r"^[^\W_](?:[\w.-]*[^\W.])?$")  # letters, digits, '_', '-', '.'; no '.' at the ends
# Metadata written by save_voice itself; ours must not collide with these.
_ENGINE_META = ("format", "version", "text", "rms")
DESIGN_KEYS = ("lang", "instruct", "instruct_text", "seed", "sample")  # what a designed voice was rendered from
ADD_HINT = "add one with `omnivoice voice add NAME --ref FILE`"


class VoiceEntry(NamedTuple):
    """One file of the store, read (meta) or not (error)."""

    name: str
    path: Path
    meta: dict[str, str] | None
    error: str | None


def voice_dir() -> Path:
    """Where saved voices live: engine.hub.user_home() / "voices"."""
    return user_home() / "voices"


# ------------------------------------------------------------------------------------ names


def check_name(name: str) -> str:
    """A voice name: 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit and
    not ending in '.'; no path separators. InvalidRequest otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("voice name is empty: use letters, digits, '-', '_' or '.', e.g. alice")
    if len(name) > MAX_NAME:
        raise InvalidRequest(f"voice name {name!r} is too long: at most {MAX_NAME} characters")
    if is_voice_path(name) or not _NAME_RE.match(name):
        raise InvalidRequest(
            f"voice name {name!r} is not allowed: use letters, digits, '-', '_' or '.' (starting with a "
            "letter or digit; no '/', spaces or file extension), e.g. alice or narrator-2"
        )
    return name


def is_voice_path(spec: str) -> bool:
    """`--voice SPEC` names a file (rather than a saved voice) when it looks like a path."""
    low = spec.lower()
    return (
        "/" in spec
        or os.sep in spec
        or (os.altsep is not None and os.altsep in spec)
        or spec.startswith((".", "~"))
        or low.endswith((VOICE_SUFFIX, PROMPT_SUFFIX))
    )


# ------------------------------------------------------------------------------------ built-in voices

BUILTIN_FILE = Path(__file__).resolve().parents[2] / "data" / "openai_voices.json"
BUILTIN_CUTOFF = 0.8  # how close an unknown name must be to a built-in one to be suggested


@lru_cache(maxsize=None)
def builtin_voices() -> dict[str, str]:
    """The built-in voices: OpenAI's voice name (lower case) -> its voice-design items."""
    data = json.loads(BUILTIN_FILE.read_text(encoding="utf-8"))
    return {name.lower(): items for name, items in data.items() if not name.startswith("_")}


def builtin_instruct(spec: str | None) -> str | None:
    """The voice-design items of the built-in voice `spec` names (case aside), unless a saved voice
    has that name (it wins) or `spec` is a path; None otherwise."""
    if not isinstance(spec, str) or not spec.strip() or is_voice_path(spec):
        return None
    items = builtin_voices().get(spec.strip().lower())
    if items is None or exists(spec.strip()) is not None:
        return None
    return items


# ------------------------------------------------------------------------------------ the store


def printable(text: str) -> str:
    """`text` safe to print on one line: bytes that are not UTF-8 (a file name's surrogate escapes)
    as \\xNN, every other character that is not printable (controls, C1, bidi marks, a lone
    surrogate from a file's JSON) as its escape."""
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _escaped(c: str) -> str:
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's escape of the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return repr(c)[1:-1]


def _voice_files(folder: Path) -> list[Path]:
    try:
        return sorted(
            (p for p in folder.glob(f"*{VOICE_SUFFIX}") if p.is_file() and not p.name.startswith(".")),
            key=lambda p: os.fsencode(p.name),
        )
    except OSError:
        return []


def _readable_name(path: Path) -> bool:
    """A file name that is valid UTF-8 (others cannot be typed as a voice's name, nor printed)."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def voice_index(folder: Path | None = None) -> dict[str, Path]:
    """name -> file of every saved voice, by name (files whose name is not UTF-8 are left out:
    `saved_voices` reports them)."""
    folder = voice_dir() if folder is None else folder
    return {p.name[: -len(VOICE_SUFFIX)]: p for p in _voice_files(folder) if _readable_name(p)}


def _known(index: dict[str, Path]) -> str:
    return ", ".join(printable(n) for n in index) if index else "none yet"


def find_saved(name: str) -> Path:
    """The file of a saved voice (exact name, else the one name equal but for case)."""
    index = voice_index()
    if name in index:
        return index[name]
    folded = [n for n in index if n.casefold() == name.casefold()]
    if len(folded) == 1:
        return index[folded[0]]
    import difflib

    hint = did_you_mean(name, index)
    if not hint:  # a built-in name only when it is close ('alloyy'), not any five letters ('alice': 'fable')
        close = difflib.get_close_matches(name.lower(), list(builtin_voices()), n=1, cutoff=BUILTIN_CUTOFF)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    builtin = f"; built in: {', '.join(builtin_voices())}" if builtin_voices() else ""
    raise InvalidRequest(
        f"unknown voice {name!r}{hint}; known voices: {_known(index)}{builtin} "
        f"({ADD_HINT}, or give the path of a voice file)"
    )


def resolve_voice(spec: str, base: Path | None = None) -> Path:
    """The file a `--voice` / `voice` setting means: a path (relative ones are relative to `base`,
    default the current folder) or a saved voice's name. A recording (`--voice alice.flac`) is
    refused with the way to clone it."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidRequest("voice is empty: give a saved voice's name or the path of a voice file")
    p = Path(spec).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    if not is_voice_path(spec):
        if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file() and spec not in voice_index():
            raise _recording(spec)
        return find_saved(spec)
    if not p.exists():
        shown = f"'{spec}'" if str(p) == spec else f"'{spec}' ({p})"
        raise InvalidRequest(f"voice file {shown} does not exist")
    if not p.is_file():
        raise InvalidRequest(f"voice file '{spec}' is a folder, not a voice file")
    if p.suffix.lower() in AUDIO_SUFFIXES or (
        p.suffix.lower() not in (VOICE_SUFFIX, PROMPT_SUFFIX) and _sounds_like_audio(p)
    ):
        raise _recording(spec)
    return p


# What a recording's name ends in, and how its file begins (WAV, FLAC, Ogg, MP3, AIFF, MP4, WebM).
AUDIO_SUFFIXES = (
    ".wav",
    ".wave",
    ".flac",
    ".ogg",
    ".oga",
    ".opus",
    ".mp3",
    ".m4a",
    ".aac",
    ".aif",
    ".aiff",
    ".webm",
    ".wma",
    ".au",
    ".caf",
)
_AUDIO_MAGIC = (b"RIFF", b"RF64", b"fLaC", b"OggS", b"ID3", b"FORM", b"\x1aE\xdf\xa3", b".snd", b"caff")


def _sounds_like_audio(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    mp3_frame = len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0
    return head.startswith(_AUDIO_MAGIC) or mp3_frame or head[4:8] == b"ftyp"


def _recording(spec: str) -> InvalidRequest:
    import shlex

    ref = shlex.quote(spec)
    return InvalidRequest(
        f"'{spec}' is a recording, not a saved voice or voice file: clone it with --ref {ref} (or save it "
        f"as a voice once: omnivoice voice add NAME --ref {ref})"
    )


def load_voice_file(path: Path) -> VoicePrompt:
    """A VoicePrompt from a saved voice (.safetensors) or a reference `.pt` prompt."""
    from ...engine.sound import voice as vmod

    path = Path(path)
    if path.suffix.lower() == PROMPT_SUFFIX:
        voice = vmod.import_reference_prompt(path)
    else:
        voice = vmod.load_voice(path)
    check_codes(voice.codes, path)
    return voice


def check_codes(codes: torch.Tensor, where: str | Path) -> None:
    """Codes must be [codebooks, frames] with at least one frame and no negative values."""
    if codes.ndim != 2 or codes.shape[-1] == 0:
        raise InvalidRequest(f"{where}: the voice's codes have shape {list(codes.shape)}, expected [codebooks, frames]")
    if int(codes.min()) < 0:
        raise InvalidRequest(f"{where}: the voice's codes hold negative values")


def exists(name: str) -> Path | None:
    """The file of a saved voice with this name, compared case-insensitively (two names that differ
    only in case would share one file on some systems)."""
    for other, path in voice_index().items():
        if other.casefold() == name.casefold():
            return path
    return None


def check_new_name(name: str, force: bool, another: str = "choose another name") -> None:
    """Before any work: the name is valid, and free unless --force (else: give --force, or `another`)."""
    check_name(name)
    old = exists(name)
    if old is not None and not force:
        raise InvalidRequest(
            f"voice {old.name[: -len(VOICE_SUFFIX)]!r} already exists ({old}): give --force to replace it, or {another}"
        )


def save(name: str, voice: VoicePrompt, *, force: bool = False, **meta: object) -> Path:
    """Write a voice into the store under `name`; returns its file."""
    from ...engine.sound import voice as vmod

    check_new_name(name, force)
    folder = voice_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, f"cannot create the voice folder '{folder}': {e.strerror or e}") from None
    old = exists(name)
    path = folder / f"{name}{VOICE_SUFFIX}"
    frames = int(voice.codes.shape[-1])
    record = {
        "name": name,
        "seconds": f"{frames / FRAME_RATE:.2f}",
        "frames": str(frames),
        "codebooks": str(int(voice.codes.shape[0])),
        "created": _now(),
        "tool": f"omnivoice-cli {_version()}",
        **{k: "" if v is None else str(v) for k, v in meta.items()},
    }
    for key in _ENGINE_META:
        record.pop(key, None)
    vmod.save_voice(path, voice, **record)
    if old is not None and old != path:  # replaced a name that differed only in case
        old.unlink(missing_ok=True)
    return path


def import_metadata(path: Path) -> dict[str, str]:
    """What `voice import` records about the file it imports (and what a voice file said of itself)."""
    meta = {
        "source": str(path.resolve()),
        "imported": "reference prompt" if path.suffix.lower() == PROMPT_SUFFIX else "voice file",
    }
    if path.suffix.lower() == VOICE_SUFFIX:
        old = read_voice_metadata(path)
        meta.update({k: old[k] for k in ("model", "source", *DESIGN_KEYS) if old.get(k)})
        meta["imported_from"] = str(path.resolve())
    return meta


def remove(name: str) -> Path:
    """Delete a saved voice; returns the file that was removed."""
    path = find_saved(name)
    path.unlink()
    return path


def read_entry(name: str, path: Path) -> VoiceEntry:
    """A voice file's entry: its metadata (values made printable), or why it cannot be read."""
    if not _readable_name(path):
        return VoiceEntry(printable(name), path, None, "the file name is not UTF-8 text: rename the file")
    try:
        meta = {k: printable(v) for k, v in read_voice_metadata(path).items()}
        return VoiceEntry(printable(name), path, meta, None)
    except (InvalidRequest, OSError) as e:
        return VoiceEntry(printable(name), path, None, printable(one_line(e)))


def saved_voices() -> list[VoiceEntry]:
    """Every saved voice, by name, with its metadata or why it cannot be read (one bad file
    never hides the others)."""
    return [read_entry(p.name[: -len(VOICE_SUFFIX)], p) for p in _voice_files(voice_dir())]


def voice_prompt_of(path: Path) -> str:
    """`voice_prompt` (the sha256 of its codes and words) of a voice file: a saved voice's read
    without torch; a `.pt` prompt's once loaded."""
    from ...engine.sound.voicefile import file_voice_prompt, prompt_checksum

    if Path(path).suffix.lower() == PROMPT_SUFFIX:
        voice = load_voice_file(path)
        return prompt_checksum(voice.codes, voice.text)
    return file_voice_prompt(path)


def describe_voice(path: Path, voice: VoicePrompt | None = None) -> dict[str, str | None]:
    """What `voice show` prints: metadata of a saved voice, or what a `.pt` prompt holds."""
    path = Path(path)
    if path.suffix.lower() == PROMPT_SUFFIX:
        voice = voice or load_voice_file(path)
        frames = int(voice.codes.shape[-1])
        return {
            "path": str(path),
            "kind": "reference prompt (.pt)",
            "text": voice.text,
            "seconds": f"{frames / FRAME_RATE:.2f}",
            "frames": str(frames),
            "codebooks": str(int(voice.codes.shape[0])),
            "rms": "" if voice.rms is None else repr(voice.rms),
        }
    meta = read_voice_metadata(path)
    out: dict[str, str | None] = {"name": meta.get("name") or path.name[: -len(VOICE_SUFFIX)], "path": str(path)}
    out["kind"] = "saved voice" + (f" (imported {meta['imported']})" if meta.get("imported") else "")
    order = (
        "text",
        "seconds",
        "frames",
        "codebooks",
        "rms",
        "source",
        "imported_from",
        "model",
        "lang",
        "instruct",
        "instruct_text",
        "seed",
        "sample",
        "created",
        "tool",
    )
    out.update({k: meta[k] for k in order if meta.get(k)})
    skip = {"format", "version", "name", "imported", *order}
    out.update({k: v for k, v in sorted(meta.items()) if k not in skip})
    out["format version"] = meta.get("version")
    return out


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("omnivoice-cli")
    except Exception:
        return "unknown"


# ------------------------------------------------------------------------------------ references


def transcript_file(audio: Path) -> Path:
    """Where a recording's transcript is looked for: `me.txt` beside `me.wav`."""
    return Path(audio).with_suffix(".txt")


def read_transcript(path: Path) -> str:
    """A transcript file's text, lines joined; InvalidRequest when unreadable or empty."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidRequest(f"transcript file {path} is not UTF-8 text") from None
    except OSError as e:
        raise InvalidRequest(f"cannot read the transcript file {path}: {e.strerror or e}") from None
    text = join_lines(text)
    if not text:
        raise InvalidRequest(f"transcript file {path} is empty: write the words spoken in the recording into it")
    return text


def reference_transcript(audio: Path, ref_text: str | None, flag: str = "--ref-text") -> str:
    """The transcript of a reference recording: `ref_text`, else the `.txt` file beside it (read
    with read_transcript's checks). A recording with neither is the speech recogniser's
    (request.References.transcribed): callers ask this only when one of them is there."""
    if ref_text is not None:
        text = join_lines(ref_text)
        if not text:
            raise InvalidRequest(f"{flag} is empty: give the words spoken in the reference audio")
        problem = unicode_problem(text)  # a byte that is not UTF-8 in the argument
        if problem:
            raise InvalidRequest(f"{flag} is {problem}: give UTF-8 text")
        return text
    return read_transcript(transcript_file(audio))


def check_reference_file(path: str | Path, shown: str | None = None) -> Path:
    """A reference recording: it must be an existing file. `shown` is how the user wrote it (the
    message adds the path it was looked for at, when that differs)."""
    p = Path(path).expanduser()
    shown = str(path) if shown is None else shown
    label = f"'{shown}'" if str(p) == shown else f"'{shown}' ({p})"
    if not p.exists():
        raise InvalidRequest(f"audio file {label} does not exist")
    if not p.is_file():
        raise InvalidRequest(f"audio file {label} is a folder, not a recording")
    return p
