"""A body of POST /v1/audio/speech, checked and mapped onto the one settings schema.

OpenAI's fields are the server's own: `model` (omnivoice, tts-1, tts-1-hd, gpt-4o-mini-tts, or a
preset's name), `input`, `voice` (a saved voice, an OpenAI voice name mapped to voice-design
items, or auto), `instructions` (free text, read for voice-design items by `instruct.read_free`:
"a deep British male voice" is "male, low pitch, british accent"; the rest is ignored, and the
reply's X-OmniVoice-Instruct header says what was used), `response_format`, `speed` (the
schema's), `stream_format` (audio or sse). Three more are ours: `preset` (a preset's
name), `stream` (false: one whole file; true: sent as the pieces are ready; the default streams
every format that can, but for wav: a whole file with its real sizes unless `stream` is true or
`stream_format` is sse, so a saved reply is a complete WAV) and `timestamps` (true: a JSON reply with the audio in
base64 and each word's time, heard by the speech recogniser: replies.py). Every other field must be a setting the schema lets
a request give (`Setting.where` has HTTP): it is checked by `settings.check_layer` with the source
"request", so a bad value reads as on the command line after "field 'num_step'". An unknown field
is an error with a did-you-mean, never ignored; nothing in a request names a file on the server.

Layers, later wins: defaults < `serve --preset` < the serve flags < the request's preset < the
voice's mapped items < the request's fields; the request's items (`instructions` or the strict
`instruct`) replace a mapped voice's items of their categories only (`instruct.merge`). The
request is then built by `request.build_request`, the same checks as `say`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..app import settings as st
from ..engine.errors import InvalidRequest
from ..engine.text import check_text, unicode_problem
from ..media.output import AudioFormat
from .config import ServeOptions
from .errors import ApiError, bad_request, request_field, scrub

OPENAI_FIELDS = ("model", "input", "voice", "instructions", "response_format", "speed", "stream_format")
SERVER_FIELDS = ("preset", "stream", "timestamps")
RESPONSE_FORMATS = {
    "mp3": "mp3",
    "opus": "opus",
    "aac": "aac",
    "flac": "flac",
    "wav": "wav",
    "pcm": "raw",
    "ogg": "ogg",
    "mulaw": "mulaw",  # raw G.711 (telephony: with sample_rate 8000)
    "alaw": "alaw",
}
MODELS = ("omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # accepted names of the model (no preset)
STREAM_FORMATS = ("audio", "sse")
REQUEST = st.Source("request")
_DROPPED_PRESET_KEYS = (*st.RUN_WIDE, "format")  # fixed by the server's start / by response_format
MAX_LISTED = 40  # names listed in an unknown-voice message
MAX_INSTRUCTIONS_CHARS = 4096  # characters of `instructions` at most
INSTRUCT_HEADER = "X-OmniVoice-Instruct"  # the voice-design items used ('none': the model's own voice)
INSTRUCT_NOTES_HEADER = "X-OmniVoice-Instruct-Notes"  # what of `instructions` was left out, and why


@dataclass
class Speech:
    """A checked speech request."""

    built: Any  # request.Built: the engine request, its settings and warnings
    format: AudioFormat  # the reply's encoding
    response_format: str  # as the request named it ('pcm', 'mp3', ...)
    sse: bool  # stream_format "sse": server-sent events of base64 audio
    stream: bool  # pieces sent as they are ready (False: one whole file with its length)
    voice: str  # 'auto', a saved voice's name or an OpenAI voice name
    chars: int  # characters of the input
    instruct_notes: tuple[str, ...] = ()  # what `instructions` gave that was not used
    timestamps: bool = False  # a JSON reply: the whole audio in base64 and its words' times

    @property
    def request(self) -> Any:
        return self.built.request

    def headers(self) -> dict[str, str]:
        """The reply's headers about the voice: the items used, and notes on `instructions`."""
        from ..app.instruct import header_text, shown

        out = {INSTRUCT_HEADER: shown(self.request.instruct)}
        if self.instruct_notes:
            out[INSTRUCT_NOTES_HEADER] = header_text("; ".join(self.instruct_notes))
        return out


def known_fields() -> tuple[str, ...]:
    return tuple(dict.fromkeys((*OPENAI_FIELDS, *SERVER_FIELDS, *st.HTTP_SETTINGS)))


def parse_json(body: bytes) -> dict:
    """A JSON object, or a 400 saying what is wrong with the body."""
    try:
        data = json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise bad_request(f"the body is not UTF-8 text (bad byte at offset {e.start}): send JSON") from None
    except RecursionError:
        raise bad_request("the body's JSON is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, or an integer of too many digits
        raise bad_request(f"the body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise bad_request(f"the body must be a JSON object of fields, got {st.type_name(data)}")
    return data


_UPLOAD_HINT = "a request cannot name a file: upload a voice (POST /v1/audio/voices) and give its name as 'voice'"
_NOT_HERE = {
    "ref": _UPLOAD_HINT,
    "ref_text": _UPLOAD_HINT,
    "format": "did you mean 'response_format'?",
    "lexicon": "a request cannot name a file: the server's lexicon is set when it starts, by `serve --lexicon FILE`",
}


def _check_fields(data: dict) -> None:
    known = known_fields()
    for key in data:
        if key in known:
            continue
        if key in _NOT_HERE:
            hint = f" ({_NOT_HERE[key]})"
        elif key in st.SCHEMA:
            hint = " (it is set when the server starts)"
        else:
            hint = st.did_you_mean(key, known)
        raise bad_request(
            f"field {st.shown_value(key)} is not a known field{hint}; known: {', '.join(known)}",
            param=str(key)[:80],
            code="unknown_field",
        )


def _string(data: dict, key: str, allowed: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"field {key!r} must be {allowed}, got {st.shown_value(value)} ({st.type_name(value)})", key)
    return value


def _choice(data: dict, key: str, choices: tuple[str, ...], default: str) -> str:
    words = st.or_list(choices)
    value = _string(data, key, words)
    if value is None:
        return default
    if value.strip().lower() not in choices:
        raise bad_request(f"field {key!r} must be {words}, got {st.shown_value(value)}", key)
    return value.strip().lower()


def _input(data: dict, limit: int) -> str:
    if data.get("input") is None:
        raise bad_request("field 'input' is missing: give the text to speak", "input")
    text = _string(data, "input", "the text to speak (a string)")
    if len(text) > limit:
        raise bad_request(
            f"field 'input' is {len(text)} characters long: at most {limit} are allowed "
            "(the server's --max-input-chars)",
            "input",
            code="input_too_long",
        )
    try:  # the text keeps its line breaks for `markdown` (request.spoken_text joins the lines)
        check_text(text)  # the CLI's check: valid Unicode, something to speak
    except InvalidRequest as e:
        raise bad_request(f"field 'input': {e}", "input") from None
    return text


def _check_unicode(data: dict) -> None:
    """Every string of the body is valid Unicode (a JSON escape such as \\ud800 makes a lone
    surrogate, which nothing downstream takes): else a 400 naming the field."""
    for key, value in data.items():
        if unicode_problem(key):
            raise bad_request(f"a field's name is {unicode_problem(key)}: give UTF-8 text")
        stack, found = [value], None
        while stack and found is None:  # a walk, not recursion: the body may nest deeply
            item = stack.pop()
            if isinstance(item, str):
                found = unicode_problem(item)
            elif isinstance(item, dict):
                stack += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                stack += item
        if found:
            what = "text" if key == "input" and isinstance(value, str) else "its value"
            raise bad_request(f"field {key!r}: {what} is {found}: give UTF-8 text", key)


def _format(data: dict) -> tuple[str, AudioFormat]:
    from ..media.output import FormatUnavailable, check_available, format_named

    name = _choice(data, "response_format", tuple(RESPONSE_FORMATS), "mp3")
    fmt = format_named(RESPONSE_FORMATS[name])
    try:
        check_available(fmt)
    except (FormatUnavailable, InvalidRequest) as e:  # InvalidRequest: output.EncoderMissing (aac)
        raise bad_request(f"field 'response_format' {name!r}: {e}", "response_format") from None
    return name, fmt


# Formats whose streamed form is a lesser file (a WAV's unknown-size header: `soxi` reads 24 h 51 min):
# sent whole, with their real sizes, unless the request asks for a stream.
WHOLE_BY_DEFAULT = frozenset({"wav"})


def _streaming(data: dict, fmt: AudioFormat) -> tuple[bool, bool]:
    from ..media.output import format_named

    sse = _choice(data, "stream_format", STREAM_FORMATS, "audio") == "sse"
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_request(f"field 'stream' must be true or false, got {st.shown_value(stream)}", "stream")
    if sse and stream is False:
        raise bad_request("field 'stream' is false but stream_format 'sse' streams: leave one out", "stream")
    if sse and not fmt.streams:
        streamable = st.or_list(n for n, f in RESPONSE_FORMATS.items() if format_named(f).streams)
        raise bad_request(
            f"field 'stream_format' 'sse' needs a format that streams ({streamable}), not {fmt.name}", "stream_format"
        )
    if fmt.name in WHOLE_BY_DEFAULT:
        return sse, sse or stream is True
    return sse, fmt.streams and stream is not False


def _timestamps(data: dict, sse: bool) -> bool:
    """`timestamps`: true asks for a JSON reply (the words are timed on the whole audio, so it
    is never streamed)."""
    value = data.get("timestamps")
    if value is not None and not isinstance(value, bool):
        raise bad_request(f"field 'timestamps' must be true or false, got {st.shown_value(value)}", "timestamps")
    if value and (sse or data.get("stream") is True):
        given = "stream_format 'sse'" if sse else "'stream' true"
        raise bad_request(
            f"field 'timestamps' times the words on the whole audio, so the reply cannot stream: leave out {given}",
            "timestamps",
        )
    return bool(value)


def _preset_named(name: str, key: str) -> st.Preset:
    index = st.preset_index()
    if st.is_preset_path(name) or name not in index:
        hint = " (a request cannot name a file)" if st.is_preset_path(name) else st.did_you_mean(name, index)
        raise bad_request(
            f"field {key!r} must be a preset's name ({', '.join(index) or 'none'}), got {st.shown_value(name)}{hint}",
            key,
        )
    try:
        return st.find_preset(name)
    except st.SettingsError as e:
        raise ApiError(500, f"preset {name!r} is broken: {e}", type="server_error", code="broken_preset") from None


def _preset_layers(data: dict, options: ServeOptions) -> list[tuple[st.Source, dict]]:
    """The request's preset (from `preset`, or a `model` that names one) as a settings layer."""
    model = _string(data, "model", "a model's or a preset's name")
    preset = _string(data, "preset", "a preset's name")
    if model is not None and model not in (*MODELS, options.model) and model not in st.preset_index():
        names = [*MODELS, *st.preset_index()]
        raise bad_request(
            f"field 'model' must be {', '.join(MODELS)} or a preset ({', '.join(st.preset_index())}), "
            f"got {st.shown_value(model)}{st.did_you_mean(model, names)}",
            "model",
        )
    if model in st.preset_index() and model not in MODELS:
        if preset is not None and preset != model:
            raise bad_request(f"fields 'model' and 'preset' name different presets ({model!r}, {preset!r})", "preset")
        preset = model
    if preset is None:
        return []
    found = _preset_named(preset, "preset" if "preset" in data else "model")
    values = {k: v for k, v in found.settings.items() if k not in _DROPPED_PRESET_KEYS}
    return [(st.Source("preset", found.name), values)]


def _settings_layer(data: dict) -> tuple[dict, bool, tuple[str, ...]]:
    """The request's schema settings, each checked; True when `instructions` gave `instruct`; the
    notes on what of `instructions` was not used."""
    fields = {k: data[k] for k in st.HTTP_SETTINGS if k in data}
    renamed = data.get("instructions") is not None
    if renamed:
        if fields.get("instruct") is not None:
            raise bad_request("give either 'instructions' or 'instruct', not both", "instructions")
        fields["instruct"] = data["instructions"]
    layer = {}
    for key, value in fields.items():
        try:
            layer.update(st.check_layer({key: value}, REQUEST, st.HTTP))
        except st.SettingsError as e:
            param = "instructions" if renamed and key == "instruct" else key
            raise bad_request(_rename(str(e), renamed), param) from None
    notes: tuple[str, ...] = ()
    if renamed:
        layer, notes = _free_instructions(layer)
    return layer, renamed, notes


def _free_instructions(layer: dict) -> tuple[dict, tuple[str, ...]]:
    """`instructions` read as free text: its voice-design items, or no `instruct` when it has none."""
    from ..app.instruct import read_free

    text = layer.pop("instruct")
    if len(text) > MAX_INSTRUCTIONS_CHARS:
        raise bad_request(
            f"field 'instructions' is {len(text)} characters long: at most {MAX_INSTRUCTIONS_CHARS} are allowed",
            "instructions",
        )
    found = read_free(text)
    if found.instruct is not None:
        layer["instruct"] = found.instruct
    return layer, found.notes


def _voice_items(layers: list, layer: dict, mapped: str, renamed: bool) -> None:
    """A mapped voice's items under the request's: merged into the request's `instruct`, else a layer."""
    from ..app.instruct import merge

    if layer.get("instruct") is None:
        layers.append((st.Source("request", "voice"), {"instruct": mapped}))
        return
    try:
        layer["instruct"] = merge(mapped, layer["instruct"])
    except InvalidRequest as e:
        param = "instructions" if renamed else "instruct"
        raise bad_request(f"field {param!r}: {e}", param) from None


def _rename(message: str, renamed: bool) -> str:
    return message.replace("field 'instruct'", "field 'instructions'") if renamed else message


def _voice(data: dict, options: ServeOptions) -> tuple[str, str | None, str | None] | None:
    """(shown name, saved voice, mapped items) of the request's `voice`; None when not given."""
    from ..app import voices

    spec = data.get("voice")
    if isinstance(spec, dict) and isinstance(spec.get("id"), str):  # OpenAI's {"id": ...} form
        spec = spec["id"]
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise bad_request(
            f"field 'voice' must be a voice's name, got {st.shown_value(spec)} ({st.type_name(spec)})", "voice"
        )
    name = spec.strip()
    if not name or name.lower() == "auto":
        return "auto", None, None
    if voices.is_voice_path(name):
        raise bad_request(
            f"field 'voice' must be a voice's name, got {st.shown_value(spec)}: a request cannot name "
            "a file (GET /v1/audio/voices lists the voices)",
            "voice",
        )
    index = voices.voice_index()
    folded = [n for n in index if n.casefold() == name.casefold()]
    if name in index or len(folded) == 1:
        return name, name if name in index else folded[0], None
    if name.lower() in options.voice_map:
        return name, None, options.voice_map[name.lower()]
    known = [*index, *(n for n in options.voice_map if n not in index), "auto"]
    shown = ", ".join(known[:MAX_LISTED]) + (f" and {len(known) - MAX_LISTED} more" if len(known) > MAX_LISTED else "")
    raise bad_request(
        f"field 'voice': unknown voice {st.shown_value(name)}{st.did_you_mean(name, known)}; known voices: {shown}",
        "voice",
        code="unknown_voice",
    )


def parse_speech(body: bytes, options: ServeOptions) -> Speech:
    """Check a speech request's body and build its engine request (ApiError 400 when it is wrong)."""
    data = parse_json(body)
    _check_unicode(data)
    _check_fields(data)
    text = _input(data, options.max_input_chars)
    name, fmt = _format(data)
    sse, stream = _streaming(data, fmt)
    timestamps = _timestamps(data, sse)
    layers = _preset_layers(data, options)
    layer, renamed, notes = _settings_layer(data)
    voice = _voice(data, options)
    if voice is not None and voice[2] is not None:
        _voice_items(layers, layer, voice[2], renamed)
    settings = st.resolve(*options.layers, *layers, (REQUEST, layer))
    if voice is not None:
        settings = settings.with_values({"voice": voice[1]}, REQUEST)
    stream = _whole_for_loudness(data, settings, sse, stream)
    built = _build(text, settings, renamed)
    stream = stream and not timestamps
    return Speech(built, fmt, name, sse, stream, voice[0] if voice else "auto", len(text), notes, timestamps)


def _whole_for_loudness(data: dict, settings: st.Resolved, sse: bool, stream: bool) -> bool:
    """`loudness` is measured over the whole reply: one whole file, and a stream asked for is refused."""
    if settings["loudness"] is None:
        return stream
    if sse or data.get("stream") is True:
        from ..media.loudness import streaming_refused

        streamer = "stream_format 'sse'" if sse else "stream: true"
        instead = "leave out 'stream' and 'stream_format' (the reply is then one whole file)"
        raise bad_request(streaming_refused(settings.name("loudness"), streamer, instead), "loudness")
    return False


def _build(text: str, settings: st.Resolved, renamed: bool):
    from ..app import voices
    from ..app.request import References, Voices, build_request

    try:
        return build_request(text, settings, refs=References(), voices=Voices())
    except InvalidRequest as e:
        param = "instructions" if renamed and e.setting == "instruct" else request_field(e.setting)
        message = scrub(_rename(str(e), renamed), (voices.voice_dir(), "<voices>"))
        raise bad_request(message, param) from None
