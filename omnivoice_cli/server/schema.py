"""GET /v1/omnivoice/schema: what a client needs to build any request the server takes, read-only.

    document = schema_document(options)       # a JSON-ready dict (no web framework here)

Everything in it is built from the tables the command line uses, never a copy of them:
- "settings": every setting a request may give (`settings.HTTP_SETTINGS`) with its type, what it
  allows (the words of its error messages), its sane bounds, choices, default and help line, as
  `settings.SCHEMA` holds them; "server": the values the server was started with (its --preset
  and flags) where they differ from the defaults;
- "presets": the presets a request may name (`preset` or `model`), as `omnivoice presets` lists
  them, with the settings a request takes from each;
- "voice_design": the vocabulary of `instruct` by category, as `omnivoice instructs` lists it
  (at most one item per category; `only` says which language a category forces);
- "languages": (code, name) pairs as `omnivoice languages` lists them;
- "speech": the speech endpoint's own choices (response formats that this server can encode,
  stream formats, model names) and "limits" (input characters, upload bytes and seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.metadata import version

from ..app.door.speaker import DROPPED_PRESET_KEYS
from ..app.settings.layers import resolve
from ..app.settings.presets import list_presets
from ..app.settings.schema import DEFAULTS, HTTP_SETTINGS, SCHEMA
from ..app.settings.setting import Setting
from ..engine.text.languages import list_languages
from ..engine.text.vocabulary import instruct_vocabulary
from ..media.formats import writable_formats
from .config import ServeOptions
from .errors import scrub
from .speech import MODELS, RESPONSE_FORMATS, STREAM_FORMATS

Json = str | int | float | bool | None | Sequence["Json"] | Mapping[str, "Json"]  # a value of the document
Entry = dict[str, Json]

OBJECT = "omnivoice.schema"
_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}


def package_version() -> str:
    try:
        return version("omnivoice-cli")
    except Exception:  # noqa: BLE001 - run from a checkout that is not installed
        return "0"


def setting_entry(setting: Setting) -> Entry:
    """One setting as the schema serves it."""
    entry: Entry = {
        "type": _TYPES[setting.kind],
        "default": setting.default,
        "allowed": setting.allowed,
        "help": setting.help,
        "panel": setting.panel,
    }
    if setting.low is not None:
        entry["low"] = setting.low
    if setting.high is not None:
        entry["high"] = setting.high
    if setting.choices:
        entry["choices"] = list(setting.choices)
    if setting.default_help:
        entry["default_help"] = setting.default_help
    return entry


def settings_part() -> dict[str, Entry]:
    return {key: setting_entry(SCHEMA[key]) for key in HTTP_SETTINGS}


def server_values(options: ServeOptions) -> Entry:
    """The request settings the server's own layers (serve --preset, its flags) change."""
    values = resolve(*options.layers).values
    return {k: values[k] for k in HTTP_SETTINGS if values[k] != DEFAULTS[k]}


def presets_part() -> list[Entry]:
    out = []
    for name, path, source, found, error in list_presets():
        entry: Entry = {"name": name, "source": source}
        if found is None:
            entry["error"] = scrub(error or "broken", (path, f"{name}.toml"))
        else:
            entry["description"] = found.description
            entry["settings"] = {k: v for k, v in found.settings.items() if k not in DROPPED_PRESET_KEYS}
        out.append(entry)
    return out


def voice_design_part() -> list[Entry]:
    """The instruct vocabulary by category: id (the name's first word), name, items (en, zh)."""
    out: list[Entry] = []
    for cat in instruct_vocabulary():
        ens = [en for en, _ in cat.pairs if en]
        zhs = [zh for _, zh in cat.pairs if zh]
        only = "en" if not zhs else "zh" if not ens else None  # an accent forces English, a dialect Chinese
        items = [{"en": en, "zh": zh} for en, zh in cat.pairs]
        out.append({"id": cat.name.split()[0], "name": cat.name, "only": only, "items": items})
    return out


def languages_part() -> list[dict[str, str]]:
    return [{"code": code, "name": name} for code, name in list_languages()]


def speech_part(options: ServeOptions) -> Entry:
    writable = set(writable_formats())
    formats = [name for name, fmt in RESPONSE_FORMATS.items() if fmt.name in writable]
    return {"response_formats": formats, "stream_formats": list(STREAM_FORMATS), "models": list(MODELS)}


def limits_part(options: ServeOptions) -> Entry:
    from .voices import MAX_UPLOAD_SECONDS  # the serve extra's module (python-multipart): MCP has none

    return {
        "max_input_chars": options.max_input_chars,
        "upload_bytes": options.upload_limit,
        "upload_seconds": MAX_UPLOAD_SECONDS,
    }


def schema_document(options: ServeOptions) -> Entry:
    """The whole document (see the module doc)."""
    return {
        "object": OBJECT,
        "version": package_version(),
        "settings": settings_part(),
        "server": server_values(options),
        "presets": presets_part(),
        "voice_design": voice_design_part(),
        "languages": languages_part(),
        "speech": speech_part(options),
        "limits": limits_part(options),
    }
