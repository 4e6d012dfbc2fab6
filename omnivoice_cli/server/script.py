"""POST /v1/audio/script: a dialogue on the server, spoken as `say --cast` speaks a script.

    {"lines": [{"voice": "alloy", "text": "Hi."}, {"voice": "alice", "speaker": "ALICE", "text": "Hello."}],
     "pause": 0.3, "seed": 5, "response_format": "wav", "tracks": "one", ...settings}

Each line is its own request, in its voice (a saved voice, an OpenAI voice name or auto, as the
speech endpoint's `voice`), with seed S + i for the i-th line (S: `seed`, else a random one), the
other fields being settings of the one schema for every line (num_step, speed, lang, ...). All the
lines go to the packed engine at once, and are joined with `pause` seconds of silence (default
0.3, as `--gap`): the same samples `say --cast` gives with the same seeds. `tracks`:
- "one" (default): the reply is the audio file (headers: X-OmniVoice-Seed, Content-Type);
- "speakers": JSON {"format", "sample_rate", "seed", "tracks": [{"speaker", "audio": base64}]}:
  one track per speaker (`speaker`, else the voice's name), each as long as the dialogue, silent
  where the others speak, so that the tracks summed are the one track.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import anyio
import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..app import settings as st
from ..app.deliver import Outputs, Take, deliver
from ..app.request import Built
from ..app.session import check_seed_range, random_seed, seed_for
from ..app.speaker import USAGE_ERRORS, Speaker, one_line
from ..engine.service import Busy, Event, Stopped, Ticket
from ..media.output import AudioFormat, format_named
from ..media.tracks import join_with_gaps
from .config import ServeOptions
from .errors import bad_request, busy, from_engine
from .speech import RESPONSE_FORMATS, parse_json, rate_for, speaker_for

if TYPE_CHECKING:
    from .state import ServerState

FIELDS = ("lines", "pause", "seed", "response_format", "tracks")
TRACKS = ("one", "speakers")
MAX_LINES = 200  # lines of one request
MAX_PAUSE = 60.0


@dataclass(frozen=True)
class ScriptBody:
    """A checked body of POST /v1/audio/script."""

    lines: list[dict]  # {"text", "voice"?, "speaker"?} each
    built: list[Built]  # each line's request, by the server's Speaker
    pause: float  # seconds of silence between lines
    seed: int  # line i has seed + i
    format: AudioFormat  # the reply's encoding
    tracks: str  # "one" or "speakers"


def _lines(data: dict, limit: int) -> list[dict]:
    lines = data.get("lines")
    if not isinstance(lines, list) or not lines:
        raise bad_request("field 'lines' must be a list of {voice, text} objects, one a line", "lines")
    if len(lines) > MAX_LINES:
        raise bad_request(f"field 'lines' has {len(lines)} lines: at most {MAX_LINES} are allowed", "lines")
    total = 0
    for i, line in enumerate(lines):
        where = f"lines[{i}]"
        if not isinstance(line, dict) or not isinstance(line.get("text"), str):
            raise bad_request(f"{where} must be an object with 'text' (a string) and 'voice'", "lines")
        extra = [k for k in line if k not in ("voice", "text", "speaker")]
        if extra:
            raise bad_request(
                f"{where}: field {st.shown_value(extra[0])} is not known; known: voice, text, speaker", "lines"
            )
        for key in ("voice", "speaker"):
            if line.get(key) is not None and not isinstance(line[key], str):
                raise bad_request(f"{where}: '{key}' must be a string", "lines")
        total += len(line["text"])
    if total > limit:
        raise bad_request(
            f"the lines have {total} characters: at most {limit} are allowed (the server's --max-input-chars)",
            "lines",
            code="input_too_long",
        )
    return lines


def parse_script(body: bytes, options: ServeOptions, speaker: Speaker | None = None) -> ScriptBody:
    """The checked request: lines, pause, seed, format, tracks and the requests built by the
    server's Speaker (by default a Speaker of `options` that only builds)."""
    speaker = speaker or speaker_for(options)
    data = parse_json(body)
    lines = _lines(data, options.max_input_chars)
    settings = {k: v for k, v in data.items() if k not in FIELDS}
    unknown = [k for k in settings if k not in st.HTTP_SETTINGS and k != "preset"]
    if unknown:
        known = (*FIELDS, *st.HTTP_SETTINGS)
        raise bad_request(
            f"field {st.shown_value(unknown[0])} is not a known field{st.did_you_mean(str(unknown[0]), known)}; "
            f"known: {', '.join(known)}",
            str(unknown[0])[:80],
            code="unknown_field",
        )
    pause = data.get("pause", 0.3)
    if isinstance(pause, bool) or not isinstance(pause, (int, float)) or not 0 <= pause <= MAX_PAUSE:
        raise bad_request(f"field 'pause' must be seconds in 0..{MAX_PAUSE:g}, got {st.shown_value(pause)}", "pause")
    name = data.get("response_format", "wav")
    if name not in RESPONSE_FORMATS:
        raise bad_request(
            f"field 'response_format' must be {st.or_list(RESPONSE_FORMATS)}, got {st.shown_value(name)}",
            "response_format",
        )
    tracks = data.get("tracks", "one")
    if tracks not in TRACKS:
        raise bad_request(f"field 'tracks' must be {st.or_list(TRACKS)}, got {st.shown_value(tracks)}", "tracks")
    seed = data.get("seed")
    try:
        if seed is not None:
            st.check_layer({"seed": seed}, st.Source("request"), st.HTTP)
        base = int(seed) if seed is not None else random_seed()
        check_seed_range(base, len(lines))
    except USAGE_ERRORS as e:
        raise bad_request(one_line(e), "seed") from None
    built = []
    for i, line in enumerate(lines):
        try:
            b = speaker.build(line["text"], voice=line.get("voice"), settings={**settings, "seed": seed_for(base, i)})
        except USAGE_ERRORS as e:
            raise bad_request(f"lines[{i}]: {one_line(e)}", "lines") from None
        built.append(b)
    fmt = format_named(RESPONSE_FORMATS[name])
    rate_for(fmt, built[0].settings["sample_rate"])
    return ScriptBody(lines, built, float(pause), base, fmt, tracks)


async def render(speaker: Speaker, built: list[Built]) -> list[np.ndarray]:
    """Every line's audio, all submitted at once (packed together), in order."""
    loop = asyncio.get_running_loop()
    queues: list[asyncio.Queue[Event]] = []
    tickets: list[Ticket] = []

    def putter(q: asyncio.Queue[Event]) -> Callable[[Event], None]:
        def put(e: Event) -> None:  # the engine loop's thread
            loop.call_soon_threadsafe(q.put_nowait, e)

        return put

    try:
        for b in built:
            q: asyncio.Queue[Event] = asyncio.Queue()
            tickets.append(speaker.submit(b.request, putter(q)))
            queues.append(q)
        out = []
        for q in queues:
            pieces = []
            while True:
                event = await q.get()
                if event.kind == "error":
                    raise from_engine(event.error or RuntimeError("the line failed"))
                if event.kind == "done":
                    break
                assert event.piece is not None
                pieces.append(event.piece.audio)
            out.append(np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32))
        return out
    except Busy as e:
        raise busy(str(e), e.retry_after) from None
    except Stopped as e:
        raise busy(str(e), 5, "shutting_down") from None
    finally:
        for t in tickets:
            t.cancel()  # a no-op for those done; frees the others when the client left or one failed


def tracks_of(audios: list[np.ndarray], starts: list[int], speakers: list[str], length: int) -> dict[str, np.ndarray]:
    """One track per speaker, in order of first line: [length] float each, the lines placed."""
    out: dict[str, np.ndarray] = {}
    for audio, start, who in zip(audios, starts, speakers):
        track = out.setdefault(who, np.zeros(length, dtype=np.float32))
        track[start : start + len(audio)] = audio
    return out


async def script(request: Request) -> Response:
    """The endpoint."""
    state: ServerState = request.app.state.server
    service = state.require_service()
    parsed = await anyio.to_thread.run_sync(parse_script, await request.body(), state.options, state.speaker)
    audios = await render(state.speaker, parsed.built)
    rate = int(service.engine.sample_rate)
    out_rate = int(parsed.built[0].settings["sample_rate"] or rate)
    mix, starts = join_with_gaps(audios, round(parsed.pause * rate))
    fmt = parsed.format

    def encode_at(audio: np.ndarray) -> bytes:  # deliver's: at the output's rate, encoded
        data = deliver(Take(audio, rate), Outputs(sample_rate=out_rate, encoded=fmt)).data
        assert data is not None
        return data

    headers = {"X-OmniVoice-Seed": str(parsed.seed)}
    if parsed.tracks == "one":
        data = await anyio.to_thread.run_sync(encode_at, mix)
        return Response(data, media_type=fmt.mime, headers=headers)
    speakers = [line.get("speaker") or line.get("voice") or "auto" for line in parsed.lines]
    tracks = tracks_of(audios, starts, speakers, len(mix))
    sent = []
    for who, track in tracks.items():
        data = await anyio.to_thread.run_sync(encode_at, track)
        sent.append({"speaker": who, "audio": base64.b64encode(data).decode("ascii")})
    body = {"format": request_format(fmt), "sample_rate": out_rate, "seed": parsed.seed, "tracks": sent}
    return JSONResponse(body, headers=headers)


def request_format(fmt: AudioFormat) -> str:
    return next(n for n, f in RESPONSE_FORMATS.items() if f == fmt.name)
