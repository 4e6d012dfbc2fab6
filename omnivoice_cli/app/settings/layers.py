"""Where the settings of one run (or one request) come from: four layers, later ones win
(`resolve`, the one place that merges them), each value with its `Source`:

    built-in defaults  <  a preset  <  the command-line flags  <  the fields of a JSON line / request

An environment variable named by a setting (`envvar`) is read as that setting's default. Then the
engine options a load would refuse are checked or dropped (`engine_options`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, MutableMapping

from ...engine.fast import cpu
from ...engine.hardware import Hardware
from ...engine.model.config import INT8_NEEDS, int8_clash, int8_problem
from .schema import CHUNK_FIELDS, DEFAULTS, GENERATION_KEYS, SCHEMA
from .setting import FLAG, SettingsError, Value, flag_name
from .settingreads import SettingReads
from .values import check_setting, did_you_mean, parse_text


@dataclass(frozen=True)
class Source:
    """One layer of settings: where its values came from, for messages and for `--dry-run`."""

    kind: str  # "default", "env", "preset", "flag", "line", "request", "random" (a seed drawn for the run) or "derived" (the phrase cache's seed)
    where: str = ""  # the preset file, the line number, ...
    label: str = ""  # how `--dry-run` shows it, when not `where` (a preset's name)

    def name(self, key: str) -> str:
        """The prefix of a message about `key` given here: '--num-step', "line 3: field 'num_step'"."""
        if self.kind == "flag":
            return flag_name(key)
        if self.kind == "env":
            return f"environment variable {self.where}"
        if self.kind == "preset":
            return f"preset file '{self.where}': key {key!r}"
        if self.kind == "line":
            return f"line {self.where}: field {key!r}"
        if self.kind == "request":
            return f"field {key!r}"
        return key

    def short(self, key: str) -> str:
        """How a message names another setting of the same source: '--ref', "'ref'"."""
        return flag_name(key) if self.kind == "flag" else repr(key)

    def describe(self) -> str:
        """'default', 'preset fast', 'flag', 'line 3' (for `--dry-run`)."""
        return f"{self.kind} {self.label or self.where}".strip()


DEFAULT_SOURCE = Source("default")
FLAG_SOURCE = Source("flag")


def check_layer(values: Mapping[str, object], source: Source, way: str) -> dict[str, Value]:
    """Check every value of one layer (None = not given). Unknown keys and keys this way in does not
    accept are errors naming the known ones; a bad value's message starts with its source."""
    out: dict[str, Value] = {}
    for key, value in values.items():
        if value is None:
            continue
        s = SCHEMA.get(key)
        if s is None or way not in s.where:
            known = [k for k, v in SCHEMA.items() if way in v.where]
            hint = did_you_mean(key, known)
            if s is not None and FLAG in s.where:  # e.g. a request's 'lexicon': the command's own
                hint = f" (it is set when the command starts: {flag_name(key)})"
            raise SettingsError(f"{source.name(key)} is not a known setting{hint}; known: {', '.join(known)}")
        try:
            out[key] = check_setting(key, value)
        except SettingsError as e:
            raise SettingsError(f"{source.name(key)} {e}") from None
    return out


@dataclass(frozen=True)
class Resolved(SettingReads):
    """Settings after merging the layers: the values, and the source of each, read-only. A
    decision taken later (a seed drawn, the format of `-o`, a recording over a voice) is a new
    layer on top: `with_values` gives a new Resolved and leaves this one as it was. Its reads,
    `resolved["num_step"]` and `get`, are typed from the schema (SettingReads)."""

    values: Mapping[str, Any]  # a value of each setting's kind (Value), by name (read typed by key: SettingReads)
    sources: Mapping[str, Source] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def with_values(self, changes: Mapping[str, object], source: Source | None = None) -> "Resolved":
        """These values on top (None too: a setting taken away), given by `source`; without a
        source each keeps the one it had (a value derived from it, e.g. a format from `-o`)."""
        unknown = [key for key in changes if key not in self.values]
        if unknown:
            raise KeyError(f"unknown settings {unknown}")
        sources = {**self.sources, **(dict.fromkeys(changes, source) if source is not None else {})}
        return Resolved({**self.values, **changes}, sources)

    def source(self, key: str) -> Source:
        return self.sources.get(key, DEFAULT_SOURCE)

    def name(self, key: str) -> str:
        """How a message names this setting: by the source it came from ('--instruct', ...)."""
        return self.source(key).name(key)


def environment_defaults() -> dict[str, tuple[Value, Source]]:
    """key -> (value, source) of the settings whose environment variable is set (and not empty),
    read now and checked: SettingsError "environment variable OMNIVOICE_MODEL must be ..."."""
    out: dict[str, tuple[Value, Source]] = {}
    for key, s in SCHEMA.items():
        raw = os.environ.get(s.envvar, "") if s.envvar else ""
        if raw.strip():
            source = Source("env", s.envvar or "")
            try:
                out[key] = (parse_text(key, raw), source)
            except SettingsError as e:
                raise SettingsError(f"{source.name(key)} {e}") from None
    return out


def resolve(*layers: tuple[Source, Mapping[str, object] | None], defaults: Mapping[str, object] = DEFAULTS) -> Resolved:
    """Merge checked layers in order (later wins; None = not given) over the defaults, which the
    environment may set (`environment_defaults`)."""
    values, sources = dict(defaults), {}
    for key, (setting, source) in environment_defaults().items():
        if key in values:
            values[key], sources[key] = setting, source
    for source, layer in layers:
        for key, value in (layer or {}).items():
            if key not in values:
                raise SettingsError(
                    f"{source.describe()}: unknown setting {key!r}; known settings: {', '.join(sorted(values))}"
                )
            if value is not None:
                values[key], sources[key] = value, source
    return Resolved(values, sources)


def resolve_settings(
    defaults: Mapping[str, object],
    preset: Mapping[str, object] | None,
    flags: Mapping[str, object],
    line: Mapping[str, object] | None = None,
) -> Mapping[str, Any]:
    """The merged values of defaults < preset < flags < line (see `resolve`)."""
    layers = ((Source("preset"), preset), (FLAG_SOURCE, flags), (Source("line"), line))
    return resolve(*layers, defaults=defaults).values


def generation_kwargs(settings: Mapping[str, object]) -> dict[str, Any]:
    """The part of resolved settings that goes to GenerationConfig(**kwargs)."""
    kwargs = {k: settings[k] for k in GENERATION_KEYS if k in settings}
    kwargs.update({CHUNK_FIELDS[k]: settings[k] for k in CHUNK_FIELDS if settings.get(k) is not None})
    return kwargs


def check_engine_options(
    settings: MutableMapping[str, Value], sources: Mapping[str, Source] | None = None
) -> str | None:
    """Refuse combinations Engine.load would refuse, before the model is loaded (SettingsError,
    in flag names). quantize int8 wants the CPU, float32 weights and no compile. A preset's int8
    (the `fast` preset's) that meets another device, dtype or compile given elsewhere is dropped
    instead: `settings["quantize"]` becomes "none" and the notice saying so is returned. So is
    "auto" (from anywhere) where it means int8 on this CPU (engine/fast/cpu.py) and meets them: auto is
    the fastest path that fits; with a GPU named it is nothing (the table is the CPU's)."""
    if settings.get("quantize") == "auto":
        return _check_auto(settings, sources or {})
    if settings.get("quantize") != "int8":
        return None
    clash = int8_clash(_text(settings.get("device")), _text(settings.get("dtype")), bool(settings.get("compile")))
    if clash is None:
        return None
    sources = sources or {}
    origin = sources.get("quantize", DEFAULT_SOURCE)
    if origin.kind == "preset" and sources.get(clash) != origin:
        settings["quantize"] = "none"
        return (
            f"{origin.describe()} runs the body in int8, which needs {INT8_NEEDS}: "
            f"without it here ({clash} {settings[clash]})"
        )
    shown = repr(settings[clash]) if clash == "device" else str(settings[clash])
    raise SettingsError(int8_problem(clash, shown, lambda key: f"--{key}"))


def _text(value: Value) -> str | None:
    """A str setting's value (device, dtype) as int8_clash takes it."""
    return None if value is None else str(value)


def engine_options(resolved: Resolved) -> tuple[Resolved, str | None]:
    """`check_engine_options` on resolved settings: the settings it leaves (a preset's int8
    dropped, as a new layer that keeps the sources) and its notice (None: nothing dropped)."""
    values = dict(resolved.values)  # TODO(lead): check_engine_options edits the dict it is given
    notice = check_engine_options(values, resolved.sources)
    changed = {k: v for k, v in values.items() if v != resolved.values[k]}
    return (resolved.with_values(changed) if changed else resolved), notice


def _check_auto(settings: MutableMapping[str, Value], sources: Mapping[str, Source]) -> str | None:
    """quantize "auto": what this CPU runs for the settings is cpu.decide's; where it would be int8
    but meets a dtype or compile asked for, it is dropped and the notice says so."""
    if int8_clash(_text(settings.get("device")), None, False) == "device":
        settings["quantize"] = "none"  # a GPU runs its own dtype: nothing to say
        return None
    threads = settings.get("threads")
    asked = Hardware(
        dtype=_text(settings.get("dtype")) or "auto",
        quantize="auto",
        compile=bool(settings.get("compile")),
        threads=threads if isinstance(threads, int) else None,
    )
    clash = cpu.decide(asked).dropped
    if clash is None:
        return None
    settings["quantize"] = "none"
    origin = sources.get("quantize", DEFAULT_SOURCE)
    who = "--quantize auto" if origin.kind == "flag" else f"{origin.describe()} (quantize auto)"
    return (
        f"{who} runs the body in int8 on this CPU ({cpu.cpu_class()}), which needs float32 and no "
        f"compile: without it here ({clash} {settings[clash]})"
    )
