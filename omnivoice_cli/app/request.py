"""From resolved settings to an engine request: `build_request`, used by every command that speaks.

    refs, voices = References(), Voices()
    built = build_request(text, resolved, refs=refs, voices=voices)   # no model yet: fail fast
    ...load the model...
    request = finish_request(engine, built, refs)                     # encodes a --ref recording once

Everything that can be checked without the model is checked here, and a bad value is named by
where it came from (`Resolved.name`: "--instruct", "line 3: field 'instruct'", a preset's key):
the engine's own checks (the instruct vocabulary, pause tags with a fixed duration, a voice's
codes) raise in the engine's words and get that prefix here, in one place.

A reference recording (`ref`) is read and prepared once, before the model is loaded (so a file
that is not audio, silent or too short fails early), and its prepared waveform is what the
encoder gets once the model is there. Relative paths are relative to where the setting came
from: a JSON line's to the input file's folder, a preset's to the preset's folder, a flag's to
the current folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.errors import InvalidRequest, MissingExtra, ModelUnavailable, install_hint
from ..engine.model.config import GenerationConfig, ModelConfig
from ..engine.planning import Plan, Planned, Request, VoiceShape, check_transcript, plan_request, validate_request
from ..engine.text import markup
from ..engine.text.duration import check_ref_transcript
from ..engine.text.languages import unknown_language
from ..engine.text.normalize import normalize_text
from ..engine.text.symbols import drop_symbol_runs
from ..engine.text.tags import drop_unknown_tags
from ..engine.text.textcheck import check_text
from ..media.loudness import require as require_loudness
from .checkpoint import checkpoint_folder, model_config
from .lexicon import load_lexicon
from .listening import listen
from .phrases.phrasekey import derived_seed, voice_key
from .session import random_seed
from .settings.layers import Resolved, Source, generation_kwargs
from .settings.schema import SCHEMA
from .settings.values import join_lines
from .ssml.parse import is_ssml
from .ssml.spoken import one_part, saved_voice
from .voices import design as voice_design
from .voices import designcache
from .voices import voices as store
from .voices.design import BUILTIN_SEED, Design, default_sample, line_sample
from .voices.instruct import merge as merge_instruct

if TYPE_CHECKING:
    from ..engine.pipeline import Engine
    from ..engine.planning import Result
    from ..engine.sound.voice import PreparedReference, VoicePrompt


@dataclass(frozen=True)
class Reference:
    """A recording to clone, read and prepared (encoded once the model is loaded)."""

    path: Path
    transcript: str
    prepared: PreparedReference  # read, resampled, trimmed: ready for the encoder
    transcript_source: str = "ref_text"  # "ref_text" (given), "file" (the .txt beside it) or "asr" (heard)
    design: Design | None = None  # a designed voice to render (then `prepared` is its estimated length)
    key: str | None = None  # the checkpoint's key its render is kept under (designcache.py; None: not kept)
    model: str | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.prepared.warnings)

    def designs_with(self, seed: int | None) -> bool:
        """A design not kept on disk whose seed is `seed`: a line of that seed may be its designing line."""
        return self.design is not None and self.key is None and self.design.seed == seed


class References:
    """Recordings read and prepared once per (file, transcript), and their encodings once per run.
    `keep_designs`: a run of many lines (a script, cues, JSON lines) where a voice designed by
    items is rendered once, from the first line that asks for it, and cloned by every line."""

    def __init__(self, keep_designs: bool = False) -> None:
        self.keep_designs = keep_designs
        self.designs: dict[tuple, Design] = {}  # (instruct, instruct_text, lang) -> the first line's design
        self._prepared: dict[tuple[Path, str | None], Reference | InvalidRequest | ModelUnavailable] = {}  # None: heard
        self._encoded: dict[tuple[Path, str], VoicePrompt] = {}

    def prepare(self, path: Path, transcript: str, source: str = "ref_text", shown: str | None = None) -> Reference:
        """The recording at `path` read and prepared, once; `shown`: what its messages call it in
        place of its path (a checkpoint's voice: a server's reply never shows its own paths)."""
        key = (path.resolve(), transcript)
        if key not in self._prepared:
            from ..engine.sound import voice as vmod

            label = shown or str(path)
            try:
                wav = vmod.load_reference(path)
                prepared = vmod.prepare_reference(wav, transcript, source=f"reference audio {label}")
                mismatch = check_ref_transcript(transcript, prepared.seconds)
                warnings = (*prepared.warnings, *([f"{label}: {mismatch}"] if mismatch else []))
                prepared = dataclasses.replace(prepared, source=str(path), warnings=warnings)
                self._prepared[key] = Reference(path, transcript, prepared, source)
            except InvalidRequest as e:
                message = str(e)
                if shown is not None:
                    for spelling in {str(path.resolve()), str(path)}:
                        message = message.replace(spelling, shown)
                self._prepared[key] = InvalidRequest(message, e.setting)
        found = self._prepared[key]
        if not isinstance(found, Reference):  # its error, kept for the next line that names it
            raise found
        return found

    def transcribed(self, path: Path, lang: str | None, asr_model: str | None, device: str = "auto") -> Reference:
        """A recording without a transcript: prepared as the reference prepares one (a long one
        trimmed), its words heard by the speech recogniser (listen.py: loaded, used and freed
        here, before any TTS model loads), once per file."""
        key = (path.resolve(), None)
        if key not in self._prepared:
            from ..engine.model.config import SAMPLE_RATE
            from ..engine.sound import voice as vmod

            try:
                wav = vmod.load_reference(path)
                prepared = vmod.prepare_reference(wav, None, source=f"reference audio {path}")
                text = listen.transcribe_reference(
                    prepared.wav, SAMPLE_RATE, lang, asr_model, device, source=f"reference audio {path}"
                )
                mismatch = check_ref_transcript(text, prepared.seconds)
                warnings = (*prepared.warnings, *([f"{path}: {mismatch}"] if mismatch else []))
                prepared = dataclasses.replace(prepared, source=str(path), warnings=warnings)
                self._prepared[key] = Reference(path, text, prepared, "asr")
            except (MissingExtra, ModelUnavailable) as e:  # no recogniser to be had: how to give the words instead
                heard = (  # one sentence: the recogniser's own message would nest another in it
                    f"or install a speech recogniser to hear them: {install_hint(e.extra)}"
                    if isinstance(e, MissingExtra)
                    else f"or give --asr-model a local model folder ({_why_not(e, asr_model)})"
                )
                message = (
                    f'no transcript for the reference audio {path}: give --ref-text "the words spoken in it", '
                    f"write them into {store.transcript_file(path)}, {heard}"
                )
                # the extra missing is a usage error (exit 2); a model that cannot be had, a failure (exit 1)
                self._prepared[key] = (
                    ModelUnavailable(message) if isinstance(e, ModelUnavailable) else InvalidRequest(message)
                )
            except InvalidRequest as e:
                self._prepared[key] = e
        found = self._prepared[key]
        if isinstance(found, (InvalidRequest, ModelUnavailable)):
            raise found
        return found

    def render_line(self, engine: Engine, built: Built, **how) -> tuple[VoicePrompt, Result] | None:
        """A line designing its voice (Reference.designs_with), not rendered yet, spoken once as the render
        (design.render_line, `how`: check, first_only, seed): its result and the run's voice. None: a clone."""
        ref, req = built.reference, built.request
        if ref is None or ref.design is None or not ref.designs_with(req.seed):
            return None
        key = (ref.path.resolve(), ref.transcript)
        done = None if key in self._encoded else voice_design.render_line(engine, req, ref.design.sample, **how)
        if done is not None:
            self._encoded[key] = done[0]
        return done

    def encode(self, engine: Engine, ref: Reference) -> VoicePrompt:
        """The VoicePrompt of a prepared reference (encoded once per run)."""
        key = (ref.path.resolve(), ref.transcript)
        if key not in self._encoded:
            self._encoded[key] = reference_prompt(engine, ref)
        return self._encoded[key]


def reference_prompt(engine: Engine, ref: Reference) -> VoicePrompt:
    """A reference's voice prompt: a recording encoded, or a design rendered (kept per checkpoint
    when it has a key: designcache.kept)."""
    design = ref.design
    if design is not None:
        return designcache.kept(ref.key, design, lambda: voice_design.render(engine, design), ref.model)
    return engine.voice_from_audio(ref.prepared, ref.transcript)


def designed_reference(design: Design, key: str | None, model: str | None, cfg: ModelConfig) -> Reference:
    """A design still to render, as a reference: its length estimated from its sample."""
    import numpy as np

    from ..engine.sound.voice import HOP_LENGTH, PreparedReference
    from ..engine.text.duration import resolve_target_len

    frames, _ = resolve_target_len(design.sample, None, None, None, None, cfg.frame_rate)
    path = designcache.entry_path(key or "run", design)
    prepared = PreparedReference(np.zeros(max(1, frames) * HOP_LENGTH, dtype=np.float32), 0.0)
    return Reference(path, design.sample, prepared, "design", design, key, model)


class Voices:
    """Saved voices and voice files, read once per file."""

    def __init__(self) -> None:
        self._loaded: dict[Path, VoicePrompt | InvalidRequest] = {}

    def find(self, spec: str, base: Path | None) -> tuple[Path, VoicePrompt]:
        path = store.resolve_voice(spec, base)
        if path not in self._loaded:
            try:
                self._loaded[path] = store.load_voice_file(path)
            except InvalidRequest as e:
                self._loaded[path] = e
        found = self._loaded[path]
        if isinstance(found, InvalidRequest):
            raise found
        return path, found


@dataclass
class Built:
    """A request ready for the engine, but for a recording still to encode."""

    request: Request  # a Planned one from build_request (ref is None while `reference` waits for the encoder)
    settings: Resolved
    reference: Reference | None = None
    voice_file: Path | None = None
    warnings: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)  # (words, replacement) the lexicon made

    @property
    def plan(self) -> Plan | None:
        """The request's plan, made when it was built (engine.pipeline.Planned), while it is its own."""
        own = getattr(self.request, "own_plan", None)
        return own() if own is not None else None


VOICE_MAP = Source("request", "voice map")  # the items of a `serve --voice-map` entry (Speaker.resolve)
_RANK = {"default": 0, "preset": 1, "flag": 2, "line": 3, "request": 3}  # later layers win


def _base(source: Source, line_base: Path | None) -> Path | None:
    """Where a relative path given in `source` is relative to."""
    if source.kind == "preset":
        return Path(source.where).parent
    if source.kind == "line":
        return line_base
    return None  # the current folder


def _why_not(e: Exception, asr_model: str | None) -> str:
    """Why the recogniser cannot be had, in a clause: its message's about the recogniser ("speech
    recogniser M is not in the Hugging Face cache and ..."), without its own advice (--ref-text
    again)."""
    text = str(e)
    start = text.find("speech recogniser")
    if start < 0:
        return f"{asr_model or 'the default one'} cannot be had here"
    return text[start:].split(";")[0].strip()


def named(settings: Resolved, e: InvalidRequest, key: str | None = None) -> InvalidRequest:
    """An engine error about one setting (`key`, else the one the error names), named by where
    that setting came from: "--instruct: ...", "line 3: field 'instruct': ...". A missing extra is
    about the installation, not the value: its one line (with the pip command) is kept as it is."""
    key = key or e.setting
    if isinstance(e, MissingExtra):
        e.setting = e.setting or key
        return e
    if key is None or key not in SCHEMA:
        return e
    return InvalidRequest(f"{settings.name(key)}: {e}", key)


def _voice(settings: Resolved, voices: Voices, line_base: Path | None) -> tuple[Path | None, VoicePrompt | None]:
    spec = settings["voice"]
    if spec is None:
        return None, None
    try:
        return voices.find(spec, _base(settings.source("voice"), line_base))
    except InvalidRequest as e:
        raise named(settings, e, "voice") from None


def _builtin_voice(settings: Resolved) -> tuple[Resolved, Design | None]:
    """A built-in voice (an OpenAI voice name no saved voice has) is its voice-design items; the
    instruct given replaces its items of the same categories (`instruct.merge`): the settings
    with those items as the instruct and no voice (the sources kept, for messages), and the
    design it is rendered from once per checkpoint (BUILTIN_SEED, the English sample)."""
    if settings["voice"] is None and settings.source("instruct") == VOICE_MAP:  # Speaker.resolve's
        return settings, builtin_design(settings["instruct"])
    items = store.builtin_instruct(settings["voice"])
    if items is None:
        return settings, None
    try:
        instruct = merge_instruct(items, settings["instruct"])
    except InvalidRequest as e:
        raise named(settings, e, "instruct") from None
    return settings.with_values({"instruct": instruct, "voice": None}), builtin_design(instruct)


def builtin_design(instruct: str | None) -> Design:
    """The design of a built-in name or a voice-map entry: its items, BUILTIN_SEED, English."""
    return Design(instruct, BUILTIN_SEED, default_sample("en"), "en")


def _line_design(request: Request, settings: Resolved, refs: References, cfg: ModelConfig) -> Design | None:
    """A run of lines (refs.keep_designs): a voice designed by items (no voice, no recording) is
    the first line's that asks for it (`request`: its seed, its sample, design.line_sample); every
    later line clones it."""
    if not refs.keep_designs or not (settings["instruct"] or settings["instruct_text"]):
        return None
    key = (settings["instruct"], settings["instruct_text"], settings["lang"])
    if key not in refs.designs:
        sample = line_sample(request, cfg)
        refs.designs[key] = Design(request.instruct, request.seed, sample, request.lang, request.instruct_text)
    return refs.designs[key]


def _reference(settings: Resolved, refs: References, line_base: Path | None) -> Reference | None:
    ref, ref_text = settings["ref"], settings["ref_text"]
    if ref_text is not None and ref is None:
        short = settings.source("ref_text").short
        raise InvalidRequest(f"{settings.name('ref_text')} needs {short('ref')}, the recording it transcribes")
    if ref is None:
        return None
    if settings["voice"] is not None:
        ref_rank, voice_rank = (_RANK[settings.source(k).kind] for k in ("ref", "voice"))
        if ref_rank == voice_rank:
            short = settings.source("ref").short
            raise InvalidRequest(f"give either {short('ref')} or {short('voice')}, not both")
        if voice_rank > ref_rank:
            return None  # the voice was given later (e.g. a line's voice over a --ref flag)
    base = _base(settings.source("ref"), line_base)
    path = Path(ref).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    try:
        path = store.check_reference_file(path, shown=ref)
        if ref_text is None and not store.transcript_file(path).is_file():  # no transcript: the recogniser's
            return refs.transcribed(path, settings["lang"], settings["asr_model"], settings["device"])
        transcript = store.reference_transcript(path, ref_text, flag=settings.source("ref").short("ref_text"))
        return refs.prepare(path, transcript, "ref_text" if ref_text is not None else "file")
    except InvalidRequest as e:
        raise named(settings, e, "ref") from None


def _own_voice(settings: Resolved, cfg: ModelConfig, refs: References) -> tuple[Resolved, Reference | None]:
    """A voice the checkpoint ships (engine/checkpoint/finetune.py), named by --voice where no saved voice
    has that name: its recording as the reference (encoded once the model is loaded), its
    language when none is given; the settings without the voice."""
    spec = settings["voice"]
    own = cfg.own.voice(spec) if spec is not None and cfg.own.voices else None
    if spec is None or own is None or store.is_voice_path(spec) or spec in store.voice_index():
        return settings, None
    try:  # named by its path in the checkpoint, never the folder's (a server's reply shows it)
        reference = refs.prepare(Path(own.audio), own.text, "file", shown=own.file or own.name)
    except InvalidRequest as e:
        raise named(settings, InvalidRequest(f"the checkpoint's voice {own.name!r}: {e}"), "voice") from None
    changes: dict[str, object] = {"voice": None}
    if settings["lang"] is None and own.lang is not None:
        changes["lang"] = own.lang
    return settings.with_values(changes), reference


def spoken_text(text: str, settings: Resolved, replaced: list | None = None) -> tuple[str, list[str]]:
    """The text as the model will be given it, and warnings: SSML breaks become pause tags (other
    tags dropped, with a warning), Markdown is read as its words with `markdown`, the words of the
    runs of a repeated symbol become a pause (underscores) or nothing (engine/text/symbols.py), a tag
    the model does not know is dropped with a warning (engine/text/tags.py), the words of the
    `lexicon` are replaced (lexicon.py; what was replaced is added to `replaced`), and numbers,
    dates, units and currency are written out with `normalize` (in that order: the control tags
    [laughter], [pause 1s], [B EY1 S] pass through untouched)."""
    text, warning = markup.convert_ssml(text)
    warnings = [warning] if warning else []
    if settings["markdown"]:
        text = markup.markdown_to_text(text)
    text = drop_symbol_runs(text)  # a blank to fill in is a pause, a separator nothing
    text, warning = drop_unknown_tags(text)
    warnings += [warning] if warning else []
    if settings["lexicon"] is not None:
        text, done = load_lexicon(settings["lexicon"]).apply(text)
        if replaced is not None:
            replaced += done
    if settings["normalize"]:
        try:
            text = normalize_text(text, settings["lang"])
        except InvalidRequest as e:
            raise named(settings, e, "normalize") from None
    return join_lines(text), warnings


def build_request(
    text: str,
    settings: Resolved,
    *,
    refs: References,
    voices: Voices,
    line_base: Path | None = None,
    seed: int | None = None,
    phrase_seed: bool = False,
) -> Built:
    """Check everything about one request that needs no model and build it (see the module doc).

    `settings` are resolved and checked; `seed` is the seed when the settings give none (default:
    a random one, recorded in the result; with `phrase_seed`, the phrase cache's, derived from the
    text and the voice: app/phrases/phrasekey.py). The decisions taken here are layers on top of them,
    in the returned `Built.settings`: a recording given later than a voice takes the voice away,
    a built-in voice becomes its instruct items, a drawn seed comes from "random"."""
    check_text(text)  # before any conversion; validate_request checks what the model will be given
    ssml_warnings: list[str] = []
    if is_ssml(text):  # a document of one part (a door that splits parts gives each its own text)
        text, settings, ssml_warnings = one_part(text, settings, saved_voice, "this command")
    if settings["loudness"] is not None:  # its extra there before a model loads (media/loudness.py)
        require_loudness()
    cfg = model_config(settings["model"])  # a fine-tune's own items, languages and voices
    check_language(settings, cfg)
    replaced: list[tuple[str, str]] = []
    text, text_warnings = spoken_text(text, settings, replaced)
    text_warnings = ssml_warnings + text_warnings
    reference = _reference(settings, refs, line_base)
    if reference is not None:
        settings = settings.with_values({"voice": None})  # a recording given later than a voice replaces it
    else:
        settings, reference = _own_voice(settings, cfg, refs)
    settings, design = _builtin_voice(settings)
    voice_file, prompt = _voice(settings, voices, line_base)
    drawn = settings["seed"]
    if drawn is None and seed is None and phrase_seed:  # the same words in the same voice: the same seed
        voice = voice_key(
            reference.prepared if reference else None,
            prompt,
            settings["instruct"],
            settings["instruct_text"],
            settings["lang"],
            reference.transcript if reference else None,
        )
        drawn = derived_seed(text, voice)
        settings = settings.with_values({"seed": drawn}, Source("derived", label="from the text and voice"))
    elif drawn is None:
        drawn = random_seed() if seed is None else seed
        settings = settings.with_values({"seed": drawn}, Source("random"))
    request = Request(
        text=text,
        lang=settings["lang"],
        instruct=settings["instruct"],  # a designed voice cloned keeps its items, as piece 0's later pieces do
        instruct_text=settings["instruct_text"],
        duration=settings["duration"],
        speed=settings["speed"],
        seed=drawn,
        generation=GenerationConfig(**generation_kwargs(settings.values)),
    )
    if reference is None and prompt is None and design is None:
        design = _line_design(request, settings, refs, cfg)
    if design is not None:  # rendered once (kept per checkpoint: a built-in name, a voice-map entry), then cloned
        builtin = design not in refs.designs.values()
        key = designcache.checkpoint_key(checkpoint_folder(settings["model"])) if builtin else None
        prompt = designcache.lookup(key, design)
        if prompt is None:
            reference = designed_reference(design, key, settings["model"], cfg)
    request = dataclasses.replace(request, ref=prompt)
    try:
        warnings = text_warnings + list(validate_request(request, cfg))
        request = Planned.of(request, check_size(request, reference, cfg))  # the plan, made once, goes with it
    except InvalidRequest as e:
        raise named(settings, e) from None
    if settings["duration"] is not None and settings["speed"] is not None:
        warnings.append(f"{settings.name('duration')} sets the length, so {settings.name('speed')} is ignored")
    if reference is not None:
        warnings += list(reference.warnings)
    return Built(request, settings, reference, voice_file, warnings, replaced)


def check_language(settings: Resolved, cfg: ModelConfig | None = None) -> None:
    """The settings' language is one of the model's (a fine-tune's own included), or none: an
    unknown or misspelt one is refused with a did-you-mean (InvalidRequest, named by where it
    came from), not spoken language-agnostic as the reference does after a warning."""
    cfg = cfg or model_config(settings["model"])
    unknown = unknown_language(settings["lang"], cfg.own)
    if unknown is not None:
        raise named(settings, InvalidRequest(unknown, "lang"))


def check_size(request: Request, reference: Reference | None = None, cfg: ModelConfig | None = None) -> Plan:
    """The engine's bounds on a request's pieces and length (plan_request), checked before the
    model loads: a recording still to encode stands in by its prepared length. Returns the plan
    (with a recording still to encode, an estimate: the encoded request is planned again)."""
    cfg = cfg or ModelConfig()
    voice = None
    if reference is not None:
        check_transcript(reference.transcript, cfg, "ref")
        voice = VoiceShape.of_recording(len(reference.prepared.wav), reference.transcript, cfg)
    return plan_request(request, cfg, voice)


def finish_request(engine: Engine, built: Built, refs: References) -> Request:
    """The engine request of `built`, with its recording encoded (the model is loaded now)."""
    if built.reference is None:
        return built.request
    prompt = refs.encode(engine, built.reference)
    return dataclasses.replace(built.request, ref=prompt)
