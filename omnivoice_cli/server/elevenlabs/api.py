"""ElevenLabs' request and error shapes, read onto the server's one door (a body of
`POST /v1/audio/speech`, checked by speech.parse_speech as any other).

A body of `POST /v1/text-to-speech/{voice_id}` becomes the speech body
`{"input": text, "voice": voice_id, "response_format", "sample_rate", "lang": language_code,
"seed", "speed": voice_settings.speed, "model"}`: `output_format` (a query parameter, theirs:
codec_rate[_bitrate]) is our format at that rate (the bit rate is ours: mp3 64 kbit/s, Opus
libopus's default), `model_id` an ElevenLabs model (any `eleven_...`: our model) or one of
ours or a preset; their fields that have no meaning here (`voice_settings` but `speed`,
`previous_text`, pronunciation dictionaries, ...) are taken and left out; a field of our settings
schema that a request may give (`num_step`, `instruct`, ...) is passed on as on our route; any
other field is a 400 with a did-you-mean. Errors are theirs, `{"detail": {"status", "message"}}`,
with our status codes and one-line messages; a missing or wrong `xi-api-key` is their 401
`invalid_api_key`.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping

from ...app.settings.schema import HTTP_SETTINGS
from ...app.settings.values import did_you_mean, shown_value, type_name
from ...media.formats import served_formats
from ...media.rates import SAMPLE_RATES
from ..errors import ApiError, check_key, unknown_field

KEY_HEADER = "xi-api-key"
TTS_PREFIX = "/v1/text-to-speech/"
VOICES_PATH = "/v1/voices"
MODELS_PATH = "/v1/models"
DEFAULT_FORMAT = "mp3_44100_128"  # theirs

# ElevenLabs' output_format codecs -> our response_format; their rates and bit rates per codec
CODECS = {"mp3": "mp3", "pcm": "pcm", "ulaw": "mulaw", "alaw": "alaw", "opus": "opus", "wav": "wav"}
_THEIRS = (
    "mp3_22050_32 mp3_24000_48 mp3_44100_32 mp3_44100_64 mp3_44100_96 mp3_44100_128 mp3_44100_192 "
    "pcm_8000 pcm_16000 pcm_22050 pcm_24000 pcm_32000 pcm_44100 pcm_48000 ulaw_8000 alaw_8000 "
    "opus_48000_32 opus_48000_64 opus_48000_96 opus_48000_128 opus_48000_192 "
    "wav_8000 wav_16000 wav_22050 wav_24000 wav_32000 wav_44100 wav_48000"
).split()


def _ours(name: str) -> bool:
    codec, rate = name.split("_")[:2]
    fmt = served_formats()[CODECS[codec]]
    return int(rate) in SAMPLE_RATES and (fmt.rates is None or int(rate) in fmt.rates)


OUTPUT_FORMATS = tuple(n for n in _THEIRS if _ours(n))  # theirs that we can give (pcm_32000: no)

# Their body's fields: read here, or taken and left out (no meaning on this server)
FIELDS = ("text", "model_id", "language_code", "voice_settings", "seed")
IGNORED_FIELDS = (
    "pronunciation_dictionary_locators",
    "previous_text",
    "next_text",
    "previous_request_ids",
    "next_request_ids",
    "use_pvc_as_ivc",
    "apply_text_normalization",
    "apply_language_text_normalization",
    "audio_effects",
)
VOICE_SETTINGS = ("stability", "similarity_boost", "style", "use_speaker_boost", "speed")
# our fields the door would name, as their request names them (in the refusals' words)
RENAMED = {"input": "text", "lang": "language_code", "response_format": "output_format", "voice": "voice_id"}


class ElevenError(ApiError):
    """An error reply in ElevenLabs' shape: {"detail": {"status", "message"}} (`param` beside
    them when one field is wrong)."""

    def body(self) -> bytes:
        status = self.code or ("invalid_request" if self.status < 500 else "internal_error")
        detail = {"status": status, "message": self.message}
        if self.param:
            detail["param"] = self.param
        try:
            return json.dumps({"detail": detail}, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate echoed back: JSON's \\u escapes
            return json.dumps({"detail": detail}).encode("ascii")


def eleven(error: ApiError) -> ElevenError:
    """Our error in their shape, its fields named as their request names them."""
    if isinstance(error, ElevenError):
        return error
    message, param = error.message, error.param
    for ours, theirs in RENAMED.items():
        message = message.replace(f"field {ours!r}", f"field {theirs!r}")
    param = RENAMED.get(param, param) if param else param
    return ElevenError(error.status, message, param=param, code=error.code, type=error.type, headers=error.headers)


def bad(message: str, param: str | None = None, code: str | None = None) -> ElevenError:
    return ElevenError(400, message, param=param, code=code)


def is_eleven(path: str, headers: Mapping[bytes, bytes]) -> bool:
    """An ElevenLabs route: text-to-speech, voices, and GET /v1/models asked with their key header
    (without it, OpenAI's list)."""
    if path.startswith(TTS_PREFIX) or path == VOICES_PATH or path.startswith(VOICES_PATH + "/"):
        return True
    return path == MODELS_PATH and KEY_HEADER.encode() in headers


def speaks(path: str, ours: tuple[str, ...]) -> bool:
    """A path of ours in `ours`, or one of their text-to-speech routes (the gate's counts, wake-up)."""
    return path in ours or path.startswith(TTS_PREFIX)


def key_check(scope: Mapping, key: str) -> ApiError | None:
    """The gate's key check: `Authorization: Bearer`, or on their routes `key_refusal`."""
    headers = dict(scope["headers"])
    if is_eleven(scope["path"], headers):
        return key_refusal(headers, key)
    return check_key(headers.get(b"authorization", b""), key)


def shaped(scope: Mapping, error: ApiError | None) -> ApiError | None:
    """A refusal of the gate, in their shape on their routes."""
    if error is None or not is_eleven(scope["path"], dict(scope["headers"])):
        return error
    return eleven(error)


def key_refusal(headers: Mapping[bytes, bytes], key: str) -> ElevenError | None:
    """None when `xi-api-key` holds the server's key (or, as on our routes, `Authorization:
    Bearer`); else their 401."""
    given = headers.get(KEY_HEADER.encode())
    if given is None and headers.get(b"authorization"):
        refused = check_key(headers[b"authorization"], key)
        return eleven(refused) if refused is not None else None
    if given is None:
        return ElevenError(401, f"missing API key: send the header '{KEY_HEADER}: KEY'", code="invalid_api_key")
    if not hmac.compare_digest(given.strip(), key.encode("utf-8")):
        return ElevenError(401, "Invalid API key", code="invalid_api_key")
    return None


def output_format(value: str | None) -> tuple[str, int]:
    """Their `output_format` as our (response_format, sample_rate); else their 400."""
    name = DEFAULT_FORMAT if value is None else value
    if name not in OUTPUT_FORMATS:
        hint = did_you_mean(name, OUTPUT_FORMATS)
        raise bad(
            f"output_format {shown_value(name)} is not one this server gives{hint}; known: {', '.join(OUTPUT_FORMATS)}",
            "output_format",
            "invalid_output_format",
        )
    codec, rate = name.split("_")[:2]
    return CODECS[codec], int(rate)


def _voice_settings(value: object) -> dict:
    """`voice_settings`: its `speed` (ours), the rest taken and left out."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad(f"field 'voice_settings' must be an object, got {type_name(value)}", "voice_settings")
    for key in value:
        if key not in VOICE_SETTINGS:
            raise bad(
                f"field 'voice_settings' has no {shown_value(key)}{did_you_mean(str(key), VOICE_SETTINGS)}; "
                f"known: {', '.join(VOICE_SETTINGS)}",
                "voice_settings",
            )
    return {"speed": value["speed"]} if value.get("speed") is not None else {}


def _model(value: object) -> dict:
    """`model_id`: one of theirs is our model; one of ours (or a preset) is passed on as `model`."""
    if value is None or (isinstance(value, str) and value.startswith("eleven_")):
        return {}
    return {"model": value}


def speech_body(data: object, voice_id: str, query: Mapping[str, str]) -> dict:
    """Their body (JSON, already read) and query as a body of POST /v1/audio/speech."""
    if not isinstance(data, dict):
        raise bad(f"the body must be a JSON object of fields, got {type_name(data)}")
    ours = [k for k in HTTP_SETTINGS if k not in ("speed", "seed", "lang")]
    known = (*FIELDS, *IGNORED_FIELDS, *ours)
    for key in data:
        if key not in known:
            listed = f"{', '.join((*FIELDS, *IGNORED_FIELDS))} and our settings ({', '.join(ours)})"
            raise unknown_field(key, known, listed=listed, error=ElevenError)
    if "text" not in data:
        raise bad("field 'text' is missing: give the text to speak", "text")
    name, rate = output_format(query.get("output_format"))
    body: dict = {"input": data["text"], "voice": voice_id, "response_format": name, "sample_rate": rate}
    body.update({k: data[k] for k in ours if data.get(k) is not None})
    body.update(_model(data.get("model_id")))
    body.update(_voice_settings(data.get("voice_settings")))
    if data.get("language_code") is not None:
        body["lang"] = data["language_code"]
    if data.get("seed") is not None:
        body["seed"] = data["seed"]
    return body
