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
preset, the voice and the request are the server's one `Speaker`'s (app/door/speaker.py, as Wyoming
and MCP have them): this module only reads the body's fields and words the refusals as fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ..app.door.speaker import Layer, Speaker, SpeakerOptions, preset_layer
from ..app.door.voicechoice import VoiceChoice, VoiceRefused
from ..app.request import VOICE_MAP, Built
from ..app.settings.layers import Resolved, Source, check_layer
from ..app.settings.presets import preset_index
from ..app.settings.schema import HTTP_SETTINGS, SCHEMA
from ..app.settings.setting import HTTP, SettingsError
from ..app.settings.values import did_you_mean, or_list, shown_value, type_name
from ..app.ssml.parse import is_ssml
from ..app.ssml.spoken import Parts
from ..app.voices import voices
from ..app.voices.design import voice_prompt
from ..app.voices.instruct import header_text, merge, read_free, shown
from ..engine.errors import InvalidRequest
from ..engine.planning import Request
from ..engine.stream.cut import StreamConfig
from ..engine.text.textcheck import check_text, unicode_problem
from ..media.encoders import FormatUnavailable
from ..media.formats import AudioFormat, check_available, check_rate, served_formats
from ..media.loudness import streaming_refused
from .config import ServeOptions
from .errors import ApiError, bad_request, request_field, scrub, unknown_field

OPENAI_FIELDS = ("model", "input", "voice", "instructions", "response_format", "speed", "stream_format")
SERVER_FIELDS = ("preset", "stream", "timestamps")
RESPONSE_FORMATS = served_formats()  # response_format -> format: OpenAI's six, then ogg, mulaw, alaw (the table's)
MODELS = ("omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # accepted names of the model (no preset)
STREAM_FORMATS = ("audio", "sse")
REQUEST = Source("request")
MAX_INSTRUCTIONS_CHARS = 4096  # characters of `instructions` at most
INSTRUCT_HEADER = "X-OmniVoice-Instruct"  # the voice-design items used ('none': the model's own voice)
VOICE_PROMPT_HEADER = "X-OmniVoice-Voice-Prompt"  # the sha256 of the voice prompt cloned ('none': a fresh voice)
INSTRUCT_NOTES_HEADER = "X-OmniVoice-Instruct-Notes"  # what of `instructions` was left out, and why


@dataclass
class SpeechBody:
    """A checked body of POST /v1/audio/speech."""

    built: Built  # request.Built: the engine request, its settings and warnings
    format: AudioFormat  # the reply's encoding
    response_format: str  # as the request named it ('pcm', 'mp3', ...)
    sse: bool  # stream_format "sse": server-sent events of base64 audio
    stream: bool  # pieces sent as they are ready (False: one whole file with its length)
    voice: str  # 'auto', a saved voice's name or an OpenAI voice name
    chars: int  # characters of the input
    instruct_notes: tuple[str, ...] = ()  # what `instructions` gave that was not used
    timestamps: bool = False  # a JSON reply: the whole audio in base64 and its words' times
    parts: Parts | None = None  # SSML of several parts (`built` is the first): joined, sent whole

    @property
    def request(self) -> Request:
        request: Request = self.built.request
        return request

    def headers(self) -> dict[str, str]:
        """The reply's headers about the voice: the items used (a designed voice's, cloned), the voice
        prompt cloned (design.voice_prompt), and notes on `instructions`."""
        out = {
            INSTRUCT_HEADER: shown(self.request.instruct),
            VOICE_PROMPT_HEADER: voice_prompt(self.request.ref) or "none",
        }
        if self.instruct_notes:
            out[INSTRUCT_NOTES_HEADER] = header_text("; ".join(self.instruct_notes))
        return out


def known_fields() -> tuple[str, ...]:
    return tuple(dict.fromkeys((*OPENAI_FIELDS, *SERVER_FIELDS, *HTTP_SETTINGS)))


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
        raise bad_request(f"the body must be a JSON object of fields, got {type_name(data)}")
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
        hint: str | None = None  # the closest known field
        if key in _NOT_HERE:
            hint = f" ({_NOT_HERE[key]})"
        elif key in SCHEMA:
            hint = " (it is set when the server starts)"
        raise unknown_field(key, known, hint=hint)


def _string(data: dict, key: str, allowed: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"field {key!r} must be {allowed}, got {shown_value(value)} ({type_name(value)})", key)
    return value


def _choice(data: dict, key: str, choices: tuple[str, ...], default: str) -> str:
    words = or_list(choices)
    value = _string(data, key, words)
    if value is None:
        return default
    if value.strip().lower() not in choices:
        raise bad_request(f"field {key!r} must be {words}, got {shown_value(value)}", key)
    return value.strip().lower()


def _input(data: dict, limit: int) -> str:
    text = _string(data, "input", "the text to speak (a string)")
    if text is None:
        raise bad_request("field 'input' is missing: give the text to speak", "input")
    if len(text) > limit:
        raise bad_request(
            f"field 'input' is {len(text)} characters long: at most {limit} are allowed (the server's --max-chars)",
            "input",
            code="input_too_long",
        )
    try:  # the text keeps its line breaks for `markdown` (request.spoken_text joins the lines)
        check_text(text)  # the CLI's check: valid Unicode, something to speak
    except InvalidRequest as e:
        raise bad_request(f"field 'input': {e}", "input") from None
    return text


def check_unicode(data: dict) -> None:
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
    name = _choice(data, "response_format", tuple(RESPONSE_FORMATS), "mp3")
    fmt = RESPONSE_FORMATS[name]
    try:
        check_available(fmt)
    except (FormatUnavailable, InvalidRequest) as e:  # InvalidRequest: output.EncoderMissing (aac)
        raise bad_request(f"field 'response_format' {name!r}: {e}", "response_format") from None
    return name, fmt


# Formats whose streamed form is a lesser file (a WAV's unknown-size header: `soxi` reads 24 h 51 min):
# sent whole, with their real sizes, unless the request asks for a stream.
WHOLE_BY_DEFAULT = frozenset(f.name for f in RESPONSE_FORMATS.values() if f.encoder.header_sizes)


def _streaming(data: dict, fmt: AudioFormat) -> tuple[bool, bool]:
    sse = _choice(data, "stream_format", STREAM_FORMATS, "audio") == "sse"
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_request(f"field 'stream' must be true or false, got {shown_value(stream)}", "stream")
    if sse and stream is False:
        raise bad_request("field 'stream' is false but stream_format 'sse' streams: leave one out", "stream")
    if sse and not fmt.streams:
        streamable = or_list(n for n, f in RESPONSE_FORMATS.items() if f.streams)
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
        raise bad_request(f"field 'timestamps' must be true or false, got {shown_value(value)}", "timestamps")
    if value and (sse or data.get("stream") is True):
        given = "stream_format 'sse'" if sse else "'stream' true"
        raise bad_request(
            f"field 'timestamps' times the words on the whole audio, so the reply cannot stream: leave out {given}",
            "timestamps",
        )
    return bool(value)


def _preset_layers(data: dict, options: ServeOptions) -> list[Layer]:
    """The request's preset (from `preset`, or a `model` that names one) as a settings layer."""
    model = _string(data, "model", "a model's or a preset's name")
    preset = _string(data, "preset", "a preset's name")
    if model is not None and model not in (*MODELS, options.model) and model not in preset_index():
        names = [*MODELS, *preset_index()]
        raise bad_request(
            f"field 'model' must be {', '.join(MODELS)} or a preset ({', '.join(preset_index())}), "
            f"got {shown_value(model)}{did_you_mean(model, names)}",
            "model",
        )
    if model in preset_index() and model not in MODELS:
        if preset is not None and preset != model:
            raise bad_request(f"fields 'model' and 'preset' name different presets ({model!r}, {preset!r})", "preset")
        preset = model
    if preset is None:
        return []
    try:
        return [preset_layer(preset, "preset" if "preset" in data else "model")]
    except InvalidRequest as e:
        raise bad_request(str(e), e.setting) from None
    except SettingsError as e:
        raise ApiError(500, f"preset {preset!r} is broken: {e}", type="server_error", code="broken_preset") from None


def _settings_layer(data: dict) -> tuple[dict, bool, tuple[str, ...]]:
    """The request's schema settings, each checked; True when `instructions` gave `instruct`; the
    notes on what of `instructions` was not used."""
    fields = {k: data[k] for k in HTTP_SETTINGS if k in data}
    renamed = data.get("instructions") is not None
    if renamed:
        if fields.get("instruct") is not None:
            raise bad_request("give either 'instructions' or 'instruct', not both", "instructions")
        fields["instruct"] = data["instructions"]
    layer = {}
    for key, value in fields.items():
        try:
            layer.update(check_layer({key: value}, REQUEST, HTTP))
        except SettingsError as e:
            param = "instructions" if renamed and key == "instruct" else key
            raise bad_request(_rename(str(e), renamed), param) from None
    notes: tuple[str, ...] = ()
    if renamed:
        layer, notes = _free_instructions(layer)
    return layer, renamed, notes


def _free_instructions(layer: dict) -> tuple[dict, tuple[str, ...]]:
    """`instructions` read as free text: its voice-design items, or no `instruct` when it has none."""
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


def _voice_items(layers: list[Layer], layer: dict, mapped: str, renamed: bool) -> None:
    """A mapped voice's items under the request's: merged into the request's `instruct`, else a layer."""
    if layer.get("instruct") is None:
        layers.append((Source("request", "voice"), {"instruct": mapped}))
        return
    try:
        layer["instruct"] = merge(mapped, layer["instruct"])
    except InvalidRequest as e:
        param = "instructions" if renamed else "instruct"
        raise bad_request(f"field {param!r}: {e}", param) from None


def _rename(message: str, renamed: bool) -> str:
    return message.replace("field 'instruct'", "field 'instructions'") if renamed else message


def _voice(data: dict, speaker: Speaker) -> VoiceChoice | None:
    """What the request's `voice` means (the Speaker's reading, refusals worded as the field's);
    None when not given."""
    spec = data.get("voice")
    if isinstance(spec, dict) and isinstance(spec.get("id"), str):  # OpenAI's {"id": ...} form
        spec = spec["id"]
    try:
        return speaker.choose_voice(spec)
    except VoiceRefused as e:
        if e.kind == "type":
            raise bad_request(
                f"field 'voice' must be a voice's name, got {shown_value(spec)} ({type_name(spec)})", "voice"
            ) from None
        if e.kind == "path":
            raise bad_request(
                f"field 'voice' must be a voice's name, got {shown_value(spec)}: a request cannot name "
                "a file (GET /v1/audio/voices lists the voices)",
                "voice",
            ) from None
        raise bad_request(f"field 'voice': {e}", "voice", code="unknown_voice") from None


def speaker_for(options: ServeOptions) -> Speaker:
    """The server's Speaker: its layers, queue, input limit, pieces and voice map (`load`: the
    model, once; a Speaker that only builds requests has none)."""
    return Speaker(serve_speaker_options(options), load=lambda: None)


def serve_speaker_options(options: ServeOptions) -> SpeakerOptions:
    """The SpeakerOptions of `serve`, from its options (commands/common.speaker_options: wyoming's, mcp's)."""
    seconds = options.piece_seconds
    return SpeakerOptions(
        layers=options.layers,
        model=options.model,
        max_queue=options.max_queue,
        max_chars=options.max_input_chars,
        first_seconds=seconds,  # a text up to it one piece: what `say` makes of it
        piece_seconds=min(seconds, StreamConfig.piece_seconds),  # a longer one's sentences leave one by one
        sentence_seconds=seconds,
        voice_map=options.voice_map,
        idle_unload=options.idle_unload,
        phrase_seed=options.phrase_cache is not None,
    )


def parse_speech(body: bytes, options: ServeOptions, speaker: Speaker | None = None) -> SpeechBody:
    """Check a speech request's body and build its engine request by the server's Speaker (ApiError
    400 when it is wrong; by default a Speaker of `options` that only builds)."""
    speaker = speaker or speaker_for(options)
    data = parse_json(body)
    check_unicode(data)
    _check_fields(data)
    text = _input(data, options.max_input_chars)
    name, fmt = _format(data)
    sse, stream = _streaming(data, fmt)
    timestamps = _timestamps(data, sse)
    layers = _preset_layers(data, options)
    layer, renamed, notes = _settings_layer(data)
    voice = _voice(data, speaker)
    mapped = voice is not None and voice.items is not None
    if voice is not None and voice.items is not None:
        _voice_items(layers, layer, voice.items, renamed)
        voice = dataclasses.replace(voice, items=None)  # its items are layered: no `voice` setting
    settings = speaker.resolve([*layers, (REQUEST, layer)], voice)
    if mapped:  # an OpenAI name's (or the voice map's) items: a designed voice, rendered once and cloned
        settings = settings.with_values({"instruct": settings["instruct"]}, VOICE_MAP)
    rate_for(fmt, settings["sample_rate"])
    stream = _whole_for_loudness(data, settings, sse, stream)
    built, parts = _build(speaker, text, settings, renamed)
    if parts is not None and (sse or timestamps or settings["verify"]):  # its parts are joined: one whole reply
        field = "stream_format" if sse else "timestamps" if timestamps else "verify"
        raise bad_request(f"field {field!r}: SSML that changes the voice, language or rate is sent whole", field)
    stream = stream and not timestamps and parts is None
    shown_voice = voice.shown if voice else "auto"
    return SpeechBody(built, fmt, name, sse, stream, shown_voice, len(text), notes, timestamps, parts)


def rate_for(fmt: AudioFormat, sample_rate: int | None) -> None:
    """The reply's format can carry `sample_rate` (formats.check_rate, the CLI's check): else a 400."""
    try:
        check_rate(fmt, sample_rate)
    except InvalidRequest as e:
        raise bad_request(str(e), "sample_rate") from None


def _whole_for_loudness(data: dict, settings: Resolved, sse: bool, stream: bool) -> bool:
    """`loudness` is measured over the whole reply: one whole file, and a stream asked for is refused."""
    if settings["loudness"] is None:
        return stream
    if sse or data.get("stream") is True:
        streamer = "stream_format 'sse'" if sse else "stream: true"
        instead = "leave out 'stream' and 'stream_format' (the reply is then one whole file)"
        raise bad_request(streaming_refused(settings.name("loudness"), streamer, instead), "loudness")
    return False


def _build(speaker: Speaker, text: str, settings: Resolved, renamed: bool) -> tuple[Built, Parts | None]:
    """The request (an SSML document of several parts: the first, and all its parts)."""
    try:
        if is_ssml(text):
            parts = speaker.make_parts(text, settings)
            return parts.built[0], parts if len(parts.built) > 1 else None
        return speaker.make(text, settings), None
    except InvalidRequest as e:
        param = "instructions" if renamed and e.setting == "instruct" else request_field(e.setting)
        message = scrub(_rename(str(e), renamed), (voices.voice_dir(), "<voices>"))
        raise bad_request(message, param) from None
