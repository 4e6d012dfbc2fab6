"""A fine-tuned checkpoint's own instruct items, languages and voices, read from its folder.

Fine-tunes of OmniVoice teach the model words the base model does not know: emotions or speaker
names as instruct items, dialects as languages (ids that may collide with ISO 639-1, such as
'sa'), and voices shipped in the repository. A checkpoint folder declares them, all optional
(docs/finetunes.md):

- `instructs.json`: a list of items, or {"items": [...]} (or `config.json`'s "instruct_items");
- `languages.json`: {"id": "Name", ...}, or {"languages": {...}} (or `config.json`'s "languages");
  the id is what the model is given, the id or the name selects it;
- `references.json`: {"Name": {"audio": "reference_speakers/name.wav", "text": "...",
  "language": "id"}, ...} (or a list of objects with a "name"): the checkpoint's own voices.

Everything is untrusted input, read bounded and checked: files of at most `MAX_FILE_BYTES`,
nested at most `MAX_DEPTH` deep (counted before parsing), at most `MAX_ENTRIES` entries each, each
name once (in any case: an item, a language id or name, a voice), short printable strings (no
C0/C1 control, bidi or line-separator character, no lone surrogate) without the model's marker
tokens, and voice recordings that lie inside the folder (no absolute paths, no '..', no link out).
A file that breaks a rule is a `CheckpointError` naming the file and the entry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UNSAFE_CHARACTERS, CheckpointError

__all__ = ["CheckpointOwn", "OwnVoice", "read_own"]

MAX_FILE_BYTES = 1 << 20  # one declaration file
MAX_ENTRIES = 512  # items, languages or voices of one checkpoint
MAX_NAME_CHARS = 64  # an item, a language id or name, a voice name
MAX_TEXT_CHARS = 2000  # a voice's transcript
MAX_AUDIO_BYTES = 64 << 20  # one voice recording
MAX_DEPTH = 8  # arrays and objects inside each other (the layouts nest 3 deep)
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")
# what a terminal must never be sent (C0, DEL, C1, line separators, bidi marks, lone surrogates);
# the model's marker tokens
_BAD_RE = re.compile(f"[{UNSAFE_CHARACTERS}]|<\\||\\|>")
_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # a JSON string (skipped) or a bracket


@dataclass(frozen=True)
class OwnVoice:
    """A voice a checkpoint ships: a recording inside its folder and the words spoken in it."""

    name: str
    audio: str  # an absolute path, inside the checkpoint folder
    text: str
    lang: str | None = None
    file: str = ""  # the recording as the declaration names it, inside the folder (shown in messages)


@dataclass(frozen=True)
class CheckpointOwn:
    """What a checkpoint declares beyond the base model (empty for the base model)."""

    instructs: tuple[str, ...] = ()
    languages: tuple[tuple[str, str], ...] = ()  # (id given to the model, display name)
    voices: tuple[OwnVoice, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.instructs or self.languages or self.voices)

    def instruct_item(self, item: str) -> str | None:
        """The checkpoint's spelling of an instruct item (any case), or None."""
        key = item.strip().casefold()
        return next((x for x in self.instructs if x.casefold() == key), None)

    def language(self, text: str) -> tuple[str, str] | None:
        """(id, name) of the checkpoint's language whose id or name is `text` (any case), or None."""
        key = " ".join(text.split()).casefold()
        return next((row for row in self.languages if key in (row[0].casefold(), row[1].casefold())), None)

    def voice(self, name: str) -> OwnVoice | None:
        key = name.strip().casefold()
        return next((v for v in self.voices if v.name.casefold() == key), None)


class _Twice(ValueError):
    """A key given twice in one JSON object (json.loads would keep the last silently)."""


def _once(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


def _too_deep(raw: bytes) -> bool:
    """Whether the JSON text `raw` nests arrays and objects deeper than MAX_DEPTH (strings skipped),
    counted before json.loads would recurse into it."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _BRACKETS.finditer(raw):
        token = m.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _load(path: Path) -> object:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CheckpointError(f"{path}: {size} bytes, at most {MAX_FILE_BYTES} for a declaration file")
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if _too_deep(raw):
            raise CheckpointError(f"{path}: lists and objects nest deeper than {MAX_DEPTH} levels, the most allowed")
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_once)
    except _Twice as e:
        raise CheckpointError(f"{path}: {str(e)[:60]!r} is given twice; each name at most once") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{path}: not readable JSON ({str(e)[:120]!r})") from None


def _string(value: object, where: str, limit: int = MAX_NAME_CHARS, comma: bool = False) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CheckpointError(f"{where}: {str(value)[:60]!r} is not a non-empty string")
    text = " ".join(value.split()) if limit == MAX_NAME_CHARS else value.strip()
    if len(text) > limit:
        raise CheckpointError(f"{where}: {text[:40]!r}... is {len(text)} characters, at most {limit}")
    bad = _BAD_RE.search(text)
    if bad and "\ud800" <= bad.group()[0] <= "\udfff":
        raise CheckpointError(f"{where}: {text[:60]!r} holds a lone surrogate (not valid Unicode); UTF-8 text only")
    if bad or (not comma and ("," in text or "，" in text)):
        raise CheckpointError(f"{where}: {text[:60]!r} holds a control character, a marker token or a comma")
    return text


def _unique(names: list[str], where: str, what: str) -> None:
    """Each of `names` once, in any case; CheckpointError naming the second otherwise."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        first = names[seen.setdefault(name.casefold(), i)]
        if seen[name.casefold()] != i:
            raise CheckpointError(
                f"{where}: {what} {name!r} is given twice (as {first!r}); each at most once, in any case"
            )


def _count(rows: list | dict, where: str) -> None:
    if len(rows) > MAX_ENTRIES:
        raise CheckpointError(f"{where}: {len(rows)} entries, at most {MAX_ENTRIES}")


def _instructs(data: object, where: str) -> tuple[str, ...]:
    if isinstance(data, dict):
        data = data.get("items")
    if not isinstance(data, list):
        raise CheckpointError(f'{where}: expected a list of instruct items (or {{"items": [...]}})')
    _count(data, where)
    items = [_string(x, f"{where}: item {i + 1}") for i, x in enumerate(data)]
    _unique(items, where, "item")
    return tuple(items)


def _languages(data: object, where: str) -> tuple[tuple[str, str], ...]:
    if isinstance(data, dict) and isinstance(data.get("languages"), (dict, list)):
        data = data["languages"]
    if isinstance(data, list):  # ids only: each its own name
        data = [(x, x) for x in data] if all(isinstance(x, str) for x in data) else None
    elif isinstance(data, dict):
        data = list(data.items())
    if not isinstance(data, list):
        raise CheckpointError(f'{where}: expected {{"id": "Name", ...}}')
    _count(data, where)
    rows = tuple((_string(k, f"{where}: id"), _string(v, f"{where}: '{k}'")) for k, v in data)
    _unique([k for k, _ in rows], where, "language id")
    _unique([v for _, v in rows], where, "language name")
    ids = {k.casefold(): k for k, _ in rows}
    for k, v in rows:  # the id or the name selects a language: one that is another's id is ambiguous
        other = ids.get(v.casefold())
        if other is not None and other != k:
            raise CheckpointError(
                f"{where}: language '{k}' is named {v!r}, the id of another; a name selects one language"
            )
    return rows


def _audio(root: Path, value: object, where: str) -> tuple[str, str]:
    """(the recording's absolute path, its path as declared) of a voice's audio, checked."""
    rel = _string(value, where, limit=512, comma=True)
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts or "\\" in rel:
        raise CheckpointError(f"{where}: '{rel}' must be a path inside the checkpoint folder")
    full = (root / p).resolve()
    if not full.is_relative_to(root.resolve()):
        raise CheckpointError(f"{where}: '{rel}' leads outside the checkpoint folder")
    if full.suffix.lower() not in AUDIO_SUFFIXES:
        raise CheckpointError(f"{where}: '{rel}' is not a recording ({', '.join(AUDIO_SUFFIXES)})")
    if not full.is_file():
        raise CheckpointError(f"{where}: '{rel}' does not exist")
    if full.stat().st_size > MAX_AUDIO_BYTES:
        raise CheckpointError(f"{where}: '{rel}' is over {MAX_AUDIO_BYTES >> 20} MiB")
    return str(full), p.as_posix()


def _voices(root: Path, data: object, where: str) -> tuple[OwnVoice, ...]:
    if isinstance(data, list):
        named = [(row.get("name") if isinstance(row, dict) else None, row) for row in data]
    elif isinstance(data, dict):
        named = list(data.items())
    else:
        raise CheckpointError(f'{where}: expected {{"Name": {{"audio": ..., "text": ...}}, ...}}')
    _count(named, where)
    voices: dict[str, OwnVoice] = {}
    for i, (name, row) in enumerate(named):
        name = _string(name, f"{where}: voice {i + 1} name")
        at = f"{where}: voice '{name}'"
        if not isinstance(row, dict):
            raise CheckpointError(f"{at}: expected an object with 'audio' and 'text'")
        audio, file = _audio(root, row.get("audio", row.get("ref_audio")), f"{at}: audio")
        text = _string(row.get("text", row.get("ref_text")), f"{at}: text", MAX_TEXT_CHARS, comma=True)
        lang = row.get("language", row.get("lang"))
        lang = None if lang is None else _string(lang, f"{at}: language")
        if name.casefold() in voices:
            raise CheckpointError(f"{at}: named twice (in any case); each voice at most once")
        voices[name.casefold()] = OwnVoice(name, audio, text, lang, file)
    return tuple(voices.values())


def read_own(root: Path, config: dict | None = None) -> CheckpointOwn:
    """The instruct items, languages and voices the checkpoint at `root` declares (see the module
    doc); its own files win over `config` (config.json, read already) fields."""
    root = Path(root)
    config = config or {}
    instructs: tuple[str, ...] = ()
    languages: tuple[tuple[str, str], ...] = ()
    voices: tuple[OwnVoice, ...] = ()
    if (root / "instructs.json").is_file():
        instructs = _instructs(_load(root / "instructs.json"), str(root / "instructs.json"))
    elif config.get("instruct_items") is not None:
        instructs = _instructs(config["instruct_items"], f"{root / 'config.json'}: instruct_items")
    if (root / "languages.json").is_file():
        languages = _languages(_load(root / "languages.json"), str(root / "languages.json"))
    elif config.get("languages") is not None:
        languages = _languages(config["languages"], f"{root / 'config.json'}: languages")
    if (root / "references.json").is_file():
        voices = _voices(root, _load(root / "references.json"), str(root / "references.json"))
    return CheckpointOwn(instructs, languages, voices)
