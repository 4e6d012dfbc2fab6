"""POST /v1/audio/script: a dialogue on the server, spoken as `say --cast` speaks a script.

    {"lines": [{"voice": "alloy", "text": "Hi."}, {"voice": "alice", "speaker": "ALICE", "text": "Hello."}],
     "pause": 0.3, "seed": 5, "response_format": "wav", "tracks": "one", ...settings}

Each line is its own request, in its voice (a saved voice, an OpenAI voice name or auto, as the
speech endpoint's `voice`), with seed S + i for the i-th line (S: `seed`, else a random one), the
other fields being settings of the one schema for every line (num_step, speed, lang, ...). The
lines go to the packed engine together (as many at once as the script's admission holds: below),
and are joined with `pause` seconds of silence (default 0.3, as `--gap`): the same samples `say
--cast` gives with the same seeds. `tracks`:
- "one" (default): the reply is the audio file (headers: X-OmniVoice-Seed, Content-Type);
- "speakers": JSON {"format", "sample_rate", "seed", "tracks": [{"speaker", "audio": base64}]}:
  one track per speaker (`speaker`, else the voice's name), each as long as the dialogue, silent
  where the others speak, so that the tracks summed are the one track; sent as it is encoded,
  one track after another (one track's audio held at a time).

Bounds, checked before anything is generated (400 naming the value and the limit): at most
MAX_LINES lines and the server's --max-chars characters; the dialogue at most
MAX_SCRIPT_SECONDS long (the lines' estimated lengths, their pause tags and the pauses between
them), and with "speakers" its length times the tracks at most MAX_TRACK_SECONDS (what the reply
holds and sends grows with both). Admission: a script is one admission, `Speaker.reserve` of
`share(max_queue)` places (a quarter of --max-queue, at least one) or a 503 when they are not free;
its lines go to the engine through those places only, as many at once, the next as one ends.
So a script of any allowed length fits, and leaves the rest of the queue to other clients.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import numpy as np
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..app.deliver import Outputs, Take, deliver
from ..app.door.speaker import USAGE_ERRORS, Speaker
from ..app.request import Built
from ..app.session import check_seed_range, random_seed, seed_for
from ..app.settings.layers import Source, check_layer
from ..app.settings.schema import HTTP_SETTINGS
from ..app.settings.setting import HTTP
from ..app.settings.values import or_list, shown_value
from ..engine.errors import one_line
from ..engine.model.config import ModelConfig
from ..engine.planning import plan_of
from ..engine.tickets import Busy, Event, ServiceStopped, Ticket
from ..media.formats import AudioFormat
from ..media.tracks import join_with_gaps
from .config import ServeOptions
from .errors import bad_request, busy, from_engine, unknown_field
from .speech import RESPONSE_FORMATS, parse_json, rate_for, speaker_for

if TYPE_CHECKING:
    from .state import ServerState

FIELDS = ("lines", "pause", "seed", "response_format", "tracks")
TRACKS = ("one", "speakers")
MAX_LINES = 200  # lines of one request
MAX_PAUSE = 60.0
MAX_SCRIPT_SECONDS = 1200.0  # the dialogue's estimated length, pauses included (20 minutes)
MAX_TRACK_SECONDS = 2400.0  # "speakers": tracks x that length (e.g. 2 speakers of 20 minutes, 8 of 5)


def share(max_queue: int) -> int:
    """The places of the engine's queue (--max-queue) one script takes: its lines at once."""
    return max(1, max_queue // 4)


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
                f"{where}: field {shown_value(extra[0])} is not known; known: voice, text, speaker", "lines"
            )
        for key in ("voice", "speaker"):
            if line.get(key) is not None and not isinstance(line[key], str):
                raise bad_request(f"{where}: '{key}' must be a string", "lines")
        total += len(line["text"])
    if total > limit:
        raise bad_request(
            f"the lines have {total} characters: at most {limit} are allowed (the server's --max-chars)",
            "lines",
            code="input_too_long",
        )
    return lines


def parse_script_body(body: bytes, options: ServeOptions, speaker: Speaker | None = None) -> ScriptBody:
    """The checked request: lines, pause, seed, format, tracks and the requests built by the
    server's Speaker (by default a Speaker of `options` that only builds)."""
    speaker = speaker or speaker_for(options)
    data = parse_json(body)
    lines = _lines(data, options.max_input_chars)
    settings = {k: v for k, v in data.items() if k not in FIELDS}
    unknown = [k for k in settings if k not in HTTP_SETTINGS and k != "preset"]
    if unknown:
        raise unknown_field(unknown[0], (*FIELDS, *HTTP_SETTINGS))
    pause = data.get("pause", 0.3)
    if isinstance(pause, bool) or not isinstance(pause, (int, float)) or not 0 <= pause <= MAX_PAUSE:
        raise bad_request(f"field 'pause' must be seconds in 0..{MAX_PAUSE:g}, got {shown_value(pause)}", "pause")
    name = data.get("response_format", "wav")
    if name not in RESPONSE_FORMATS:
        raise bad_request(
            f"field 'response_format' must be {or_list(RESPONSE_FORMATS)}, got {shown_value(name)}",
            "response_format",
        )
    tracks = data.get("tracks", "one")
    if tracks not in TRACKS:
        raise bad_request(f"field 'tracks' must be {or_list(TRACKS)}, got {shown_value(tracks)}", "tracks")
    seed = data.get("seed")
    try:
        if seed is not None:
            check_layer({"seed": seed}, Source("request"), HTTP)
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
    check_length(lines, built, float(pause), tracks)
    fmt = RESPONSE_FORMATS[name]
    rate_for(fmt, built[0].settings["sample_rate"])
    return ScriptBody(lines, built, float(pause), base, fmt, tracks)


def line_seconds(built: Built) -> float:
    """A line's estimated audio (its plan: the pieces' frames and its pause tags), in seconds."""
    plan = plan_of(built.request)  # the one made when it was built
    rate = (plan.cfg or ModelConfig()).frame_rate
    return sum(plan.frames) / rate + sum(plan.gaps)


def check_length(lines: list[dict], built: list[Built], pause: float, tracks: str) -> None:
    """The dialogue's bounds (see the module doc), before anything is generated."""
    seconds = sum(line_seconds(b) for b in built) + pause * (len(built) - 1)
    if seconds > MAX_SCRIPT_SECONDS:
        raise bad_request(
            f"the dialogue would be about {seconds / 60:.1f} minutes long (its lines and pauses): at most "
            f"{MAX_SCRIPT_SECONDS / 60:g} minutes in one request (fewer or shorter lines, or a shorter 'pause')",
            "lines",
            code="script_too_long",
        )
    if tracks == "speakers":
        n = len(set(speakers_of(lines)))
        if n * seconds > MAX_TRACK_SECONDS:
            raise bad_request(
                f"'tracks': 'speakers' would send {n} tracks of about {seconds / 60:.1f} minutes each "
                f"({n * seconds / 60:.0f} minutes of audio): at most {MAX_TRACK_SECONDS / 60:g} minutes of tracks "
                "in one request (fewer speakers, a shorter dialogue, or 'tracks': 'one')",
                "tracks",
                code="script_too_long",
            )


def speakers_of(lines: list[dict]) -> list[str]:
    """Each line's speaker: its `speaker`, else its voice's name, else auto."""
    return [line.get("speaker") or line.get("voice") or "auto" for line in lines]


async def speak_lines(speaker: Speaker, built: list[Built], places: int) -> list[np.ndarray]:
    """Every line's audio, in order: one admission of `places` places (Busy: 503), the lines
    submitted through them, as many at once (packed together), the next as one ends."""
    loop = asyncio.get_running_loop()
    tickets: list[Ticket] = []
    try:
        held = speaker.reserve(min(places, len(built)))
    except Busy as e:
        raise busy(str(e), e.retry_after) from None
    except ServiceStopped as e:
        raise busy(str(e), 5, "shutting_down") from None
    gate = asyncio.Semaphore(held.size)  # FIFO: the lines go in order

    async def line(b: Built) -> np.ndarray:
        async with gate:  # a place is free again once a line's last event came (the service frees it first)
            q: asyncio.Queue[Event] = asyncio.Queue()

            def put(e: Event) -> None:  # the engine loop's thread
                loop.call_soon_threadsafe(q.put_nowait, e)

            tickets.append(speaker.submit(b.request, put, places=held))
            pieces = []
            while True:
                event = await q.get()
                if event.kind == "error":
                    raise from_engine(event.error or RuntimeError("the line failed"))
                if event.kind == "done":
                    break
                assert event.piece is not None
                pieces.append(event.piece.audio)
            return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)

    tasks = [asyncio.ensure_future(line(b)) for b in built]
    try:
        return list(await asyncio.gather(*tasks))
    except ServiceStopped as e:
        raise busy(str(e), 5, "shutting_down") from None
    finally:
        for task in tasks:
            task.cancel()  # a no-op for those done: a line failed, or the client left
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tickets:
            t.cancel()  # a no-op for those done; frees the others
        held.release()


def track_of(audios: list[np.ndarray], starts: list[int], speakers: list[str], who: str, length: int) -> np.ndarray:
    """`who`'s track: [length] float, its lines placed, silent elsewhere."""
    track = np.zeros(length, dtype=np.float32)
    for audio, start, said in zip(audios, starts, speakers):
        if said == who:
            track[start : start + len(audio)] = audio
    return track


async def script(request: Request) -> Response:
    """The endpoint."""
    state: ServerState = request.app.state.server
    service = state.require_service()
    parsed = await anyio.to_thread.run_sync(parse_script_body, await request.body(), state.options, state.speaker)
    audios = await speak_lines(state.speaker, parsed.built, share(state.options.max_queue))
    rate = int(service.engine.sample_rate)
    out_rate = int(parsed.built[0].settings["sample_rate"] or rate)
    fmt = parsed.format
    mark = state.speaker.mark

    def encode_at(audio: np.ndarray) -> bytes:  # deliver's: at the output's rate, encoded
        data = deliver(Take(audio, rate), Outputs(sample_rate=out_rate, encoded=fmt, mark=mark)).data
        assert data is not None
        return data

    headers = {"X-OmniVoice-Seed": str(parsed.seed)}
    if parsed.tracks == "one":
        mix, _ = join_with_gaps(audios, round(parsed.pause * rate))
        data = await anyio.to_thread.run_sync(encode_at, mix)
        return Response(data, media_type=fmt.mime, headers=headers)
    gap = round(parsed.pause * rate)
    starts = list(itertools.accumulate((len(a) + gap for a in audios[:-1]), initial=0))
    length = sum(len(a) for a in audios) + gap * (len(audios) - 1)
    speakers = speakers_of(parsed.lines)

    def encoded(who: str) -> bytes:  # one track at a time: its audio freed once it is encoded
        return base64.b64encode(encode_at(track_of(audios, starts, speakers, who, length)))

    order = list(dict.fromkeys(speakers))  # in order of first line
    first = [await anyio.to_thread.run_sync(encoded, order[0])]  # a failure is still a reply of its own

    async def body() -> AsyncIterator[bytes]:
        head = {"format": request_format(fmt), "sample_rate": out_rate, "seed": parsed.seed}
        yield json.dumps(head)[:-1].encode() + b', "tracks": ['
        for i, who in enumerate(order):
            audio = first.pop() if i == 0 else await anyio.to_thread.run_sync(encoded, who)
            yield (b", " if i else b"") + b'{"speaker": ' + json.dumps(who).encode() + b', "audio": "'
            yield audio
            del audio  # sent: one track's bytes held at a time
            yield b'"}'
        yield b"]}"

    return StreamingResponse(body(), media_type="application/json", headers=headers)


def request_format(fmt: AudioFormat) -> str:
    return next(n for n, f in RESPONSE_FORMATS.items() if f is fmt)
