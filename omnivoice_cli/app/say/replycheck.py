"""What `say --server` takes from a server (app/say/remote.py), checked: the server could be broken,
or not ours, or hostile.

    url = check_url(text, "--server")      # a usage error (InvalidRequest) unless http(s)://HOST[:PORT]
    meta = reply_meta(reply.headers)       # seed, loudness, verify: each checked, else BadReply
    limit = longest_reply(speech, rate)    # bytes past which a reply is not one this request can make
    audio = wav_samples(data, rate)        # the server's 16-bit mono WAV, whole, else BadReply

A reply is read only up to the longest one the request can make: the model generates a fixed
canvas, at most `max_target_seconds` a piece, and a text cannot be cut into more pieces than it
has characters, so (characters x that) + its pauses, at the reply's rate, bounds it (or the
request's fixed duration; never past `max_request_seconds`). An error body is read up to
`MAX_ERROR_BYTES` and its message cut to `MAX_MESSAGE_CHARS`.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

from ...engine.errors import InvalidRequest, OmniVoiceError
from ...engine.model.config import ModelConfig
from ...media.marks import parse_mark
from ..settings.schema import MAX_SEED
from ..voices.voices import printable

if TYPE_CHECKING:
    import numpy as np

    from .speakrun import Speech

__all__ = [
    "BadReply",
    "ReplyMeta",
    "check_url",
    "reply_meta",
    "longest_reply",
    "bounded",
    "read_bounded",
    "samples",
    "wav_samples",
    "message_of",
]

MAX_URL_CHARS = 2048
MAX_HOST_CHARS = 253  # a DNS name (RFC 1035), each label at most 63
MAX_ERROR_BYTES = 2 << 20  # of a reply that is not audio (its JSON message, or a page)
MAX_MESSAGE_CHARS = 300  # of the server's message, as printed
HEADER_BYTES = 1 << 16  # a WAV's header chunks, besides its samples
MAX_ROWS = 5000  # verify rows (a request's pieces at most)
RATES = (8000, 48000)  # Hz: a reply's rate when none was asked (the model's own)
SEED = "X-OmniVoice-Seed"
LOUDNESS = "X-OmniVoice-Loudness"
VERIFY = "X-OmniVoice-Verify"
VOICE_PROMPT = "X-OmniVoice-Voice-Prompt"  # the sha256 of the voice prompt cloned ('none': a fresh voice)
MARK = "X-OmniVoice-Mark"  # the server's AI mark (docs/marking.md): its checkpoint names the model in ours
_USAGE = "give http://HOST[:PORT] or https://HOST[:PORT] of `omnivoice serve`"


class BadReply(OmniVoiceError):
    """A reply that is not what was asked for, or not whole (exit 1): the message reads after
    "the server's reply"."""


def _shown(text: str, limit: int = 60) -> str:
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def check_url(url: str, where: str) -> str:
    """`url` without a trailing slash, when it is http(s)://HOST[:PORT][/PATH]; else InvalidRequest
    in one line naming `where` (--server, or the environment variable) and what is allowed."""
    from urllib.parse import urlsplit

    if not url.startswith(("http://", "https://")):
        raise InvalidRequest(
            f"{where} must be an http:// or https:// URL of `omnivoice serve`, got {_shown(url)}; {_USAGE}"
        )
    if len(url) > MAX_URL_CHARS:
        raise InvalidRequest(f"{where}: {_shown(url)} is {len(url)} characters long, at most {MAX_URL_CHARS}; {_USAGE}")
    if not url.isprintable() or " " in url:
        raise InvalidRequest(f"{where}: {_shown(url)} holds a space or a control character; {_USAGE}")
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port  # .port: ValueError for a second port, or one past 65535
    except ValueError as e:
        raise InvalidRequest(f"{where}: {_shown(url)} is not a URL ({e}); {_USAGE}") from None
    if not host:
        raise InvalidRequest(f"{where}: {_shown(url)} names no host; {_USAGE}")
    if not parts.netloc.endswith("]") and ":" not in host:  # a name (an IPv6 address is in brackets)
        try:
            labels = host.encode("idna").split(b".")
        except UnicodeError:
            labels = [b"x" * 64]
        if len(host) > MAX_HOST_CHARS or any(len(label) > 63 for label in labels):
            raise InvalidRequest(
                f"{where}: the host {_shown(host)} is not a host name (at most {MAX_HOST_CHARS} characters, "
                f"63 between dots); {_USAGE}"
            )
    return url.rstrip("/")


@dataclass(frozen=True)
class ReplyMeta:
    """What a reply's headers say besides its audio."""

    seed: int
    loudness: dict | None  # --loudness: what levelling did
    verify: list | None  # --verify: a row per piece
    checkpoint: str | None = None  # the model the server's mark names (None: it sent none)
    voice_prompt: str | None = None  # the voice prompt it cloned (None: 'none', or no header)


def _json(value: str, name: str) -> object:
    try:
        return json.loads(value)
    except RecursionError:
        raise BadReply(f"has an {name} header nested too deeply (a flat JSON object or list is sent)") from None
    except ValueError:
        raise BadReply(f"has an {name} header that is not JSON: {_shown(value)}") from None


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _clean(row: dict) -> dict:
    """A flat object's strings with control characters escaped (a reply may be printed)."""
    return {printable(k): printable(v) if isinstance(v, str) else v for k, v in row.items()}


def reply_meta(headers: Mapping[str, str]) -> ReplyMeta:
    """The seed (0 when not sent), loudness, verify, mark and voice prompt headers of a reply, each
    checked; BadReply naming the header otherwise."""
    raw = headers.get(SEED)
    seed = 0
    if raw is not None:
        value = raw.strip()
        if not (value.isascii() and value.isdigit() and len(value) <= len(str(MAX_SEED)) and int(value) <= MAX_SEED):
            raise BadReply(f"has an {SEED} header {_shown(value)} that is not a seed: a whole number in 0..{MAX_SEED}")
        seed = int(value)
    loudness: dict | None = None
    verify: list | None = None
    if headers.get(LOUDNESS) is not None:
        sent = _json(headers[LOUDNESS], LOUDNESS)
        if not isinstance(sent, dict) or len(sent) > 32 or not all(map(_scalar, sent.values())):
            raise BadReply(f'has an {LOUDNESS} header that is not {{"name": number, ...}}: {_shown(headers[LOUDNESS])}')
        loudness = _clean(sent)
    if headers.get(VERIFY) is not None:
        listed = _json(headers[VERIFY], VERIFY)
        rows = listed if isinstance(listed, list) else None
        if (
            rows is None
            or len(rows) > MAX_ROWS
            or not all(isinstance(r, dict) and all(map(_scalar, r.values())) for r in rows)
        ):
            raise BadReply(
                f"has an {VERIFY} header that is not a list of flat objects (a row a piece): {_shown(headers[VERIFY])}"
            )
        verify = [_clean(r) for r in rows]
    fields = parse_mark(headers.get(MARK))
    checkpoint = fields.get("checkpoint") if fields else None
    if checkpoint is not None and not (checkpoint.isprintable() and 0 < len(checkpoint) <= 256):
        raise BadReply(f"has an {MARK} header whose checkpoint is not a model's name: {_shown(checkpoint)}")
    prompt = headers.get(VOICE_PROMPT)
    if prompt is not None:
        prompt = prompt.strip()
        if prompt == "none":
            prompt = None
        elif not (len(prompt) == 64 and all(c in "0123456789abcdef" for c in prompt)):
            raise BadReply(
                f"has an {VOICE_PROMPT} header that is not 'none' nor a sha256 (64 hex digits): {_shown(prompt)}"
            )
    return ReplyMeta(seed, loudness, verify, checkpoint, prompt)


def longest_seconds(speech: "Speech", text: str) -> float:
    """The most audio the server can send for `text` under the request (see the module doc)."""
    cfg = ModelConfig()
    plan = speech.built.plan
    gaps = sum(plan.gaps) if plan is not None else cfg.max_request_seconds
    duration = speech.built.settings.get("duration")
    if duration:
        speech_seconds = float(duration)
    else:
        chars = max(sum(not c.isspace() for c in text), sum(not c.isspace() for c in speech.built.request.text))
        speech_seconds = max(chars, len(plan.pieces) if plan is not None else 1) * cfg.max_target_seconds
    return min(speech_seconds + gaps, cfg.max_request_seconds) + 1.0


def longest_reply(speech: "Speech", text: str, rate: int) -> int:
    """Bytes of 16-bit mono audio (and a WAV's header) past which a reply to `text` cannot be one."""
    return HEADER_BYTES + 2 * math.ceil(longest_seconds(speech, text) * rate)


def bounded(chunks: Iterator[bytes], limit: int, what: str) -> Iterator[bytes]:
    """`chunks` until more than `limit` bytes came: then BadReply (`what`: why that is too many)."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise BadReply(f"went on past {limit:,} bytes, {what}: stopped")
        yield chunk


def read_bounded(chunks: Iterator[bytes], limit: int) -> tuple[bytes, bool]:
    """(at most `limit` bytes of `chunks`, whether there were more)."""
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            return bytes(out[:limit]), True
    return bytes(out), False


def message_of(data: bytes, cut: bool = False) -> str:
    """The server's message in an error reply (its JSON's error.message, else its text), on one
    line, at most MAX_MESSAGE_CHARS characters."""
    try:
        text = str(json.loads(data)["error"]["message"])
    except (ValueError, KeyError, TypeError, RecursionError):
        text = data.decode("utf-8", "replace")
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE_CHARS or cut:
        text = text[:MAX_MESSAGE_CHARS].rstrip() + " ..."
    return text or "no message"


def samples(data: bytes) -> "np.ndarray":
    """float32 samples of 16-bit PCM (the server's s16le), as a 16-bit file reads back: k / 32768."""
    import numpy as np

    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def wav_samples(data: bytes, rate: int | None) -> tuple["np.ndarray", int]:
    """(float32 samples (k / 32768), rate) of the server's 16-bit mono WAV at `rate` (None: the
    model's own, within RATES), whole; BadReply for another layout or a reply cut short of what
    its header says."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise BadReply("is not a WAV file (it does not begin with RIFF/WAVE)")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        kind, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if kind == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise BadReply("is not a WAV file (its format chunk is cut)")
            tag, channels, found_rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            fmt = (tag, channels, found_rate, bits)
        elif kind == b"data":
            if fmt is None:
                raise BadReply("is not a WAV file (its samples come before their format)")
            tag, channels, found_rate, bits = fmt
            if tag not in (1, 0xFFFE) or bits != 16:
                raise BadReply(f"is a WAV of {bits}-bit samples (format {tag}); 16-bit PCM was asked for")
            if channels != 1:
                raise BadReply(f"is a WAV of {channels} channels; one (mono) was asked for")
            if rate is not None and found_rate != rate:
                raise BadReply(f"is a WAV at {found_rate} Hz; {rate} Hz was asked for")
            if rate is None and not RATES[0] <= found_rate <= RATES[1]:
                raise BadReply(f"is a WAV at {found_rate} Hz; a model's rate is {RATES[0]}..{RATES[1]} Hz")
            came = len(data) - body
            if size > came:
                raise BadReply(f"is cut off: its WAV header says {size:,} bytes of samples, {came:,} came")
            return samples(data[body : body + size - size % 2]), found_rate
        pos = body + size + (size & 1)
    raise BadReply("is not a WAV file (no samples in it)")
