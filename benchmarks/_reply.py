"""The agent's reply of bench_stream.py --reply: a 13-sentence answer as `/tts/ws` speaks it and as
`say --stream` speaks it, under two cuts of the streamed text (before: later pieces of whole
sentences up to 10 s, as main cut them; after: the cut of today's defaults), alternated in one
process on one loaded engine.

The socket path is the engine path of `/tts/ws` (server/socketsession.py): the reply sent as
20-character text messages then `flush` reaches the engine as two requests, the first sentence
alone (handed on at its sentence end) and, once it is spoken, the other 12 joined into one request
in its voice (the first part's piece 0) with the next seed. Times count from the first request.
"""

from __future__ import annotations

import dataclasses
import queue
import time

REPLY = (
    "Sure, I can help you plan the trip to the coast this weekend. "
    "The weather forecast says Saturday will be sunny and warm. "
    "Sunday looks cloudier, with a chance of light rain in the afternoon. "
    "The drive takes about three hours if you leave before eight in the morning. "
    "There is a small cafe halfway there that serves excellent pastries. "
    "Once you arrive, the old harbour is a good place to start walking. "
    "Most of the seafood restaurants open for lunch at half past twelve. "
    "If you like museums, the maritime museum is open until five. "
    "Tickets are cheaper when you buy them online the day before. "
    "In the evening, the beach path is quiet and the sunset is lovely. "
    "For the night, the guest house near the lighthouse still has rooms. "
    "Remember to bring a warm jacket, since the wind gets cold after dark. "
    "Have a wonderful trip, and let me know if you need anything else."
)
FRAGMENT = 20  # characters a text message


def sentences() -> list[str]:
    out, start = [], 0
    for i, ch in enumerate(REPLY):
        if ch in ".!?" and (i + 1 == len(REPLY) or REPLY[i + 1] == " "):
            out.append(REPLY[start : i + 1].strip())
            start = i + 1
    return out


def socket_parts() -> list[str]:
    """The requests the socket hands on for REPLY in 20-character messages then flush, when the
    messages arrive while its first part is spoken (a model's tokens: all within a second)."""
    from omnivoice_cli.app.door.textparts import take_parts

    parts, buffer = [], ""
    for i in range(0, len(REPLY), FRAGMENT):
        ready, buffer = take_parts(buffer + REPLY[i : i + FRAGMENT], 4096)
        parts += ready
    first, rest = parts[0], "".join(parts[1:]) + buffer
    return [first, rest]


def arrivals(pieces: list[tuple[float, str, int]], sr: int) -> dict:
    """Figures of one run from its (time, text, samples) pieces in order."""
    spoken = [(t, text, n) for t, text, n in pieces if text.strip()]
    times = [t for t, _, _ in spoken]
    first, last = times[0], times[-1]
    total = sum(n for _, _, n in pieces)
    mid = (first + last) / 2
    by_mid = sum(n for t, _, n in pieces if t <= mid)
    ends = [sum(1 for s in sentences() if s[-15:] in text) for _, text, _ in spoken]  # sentences ending in each
    per_sentence = [round(t, 2) for (t, _, _), n in zip(spoken, ends) for _ in range(n)]  # each sentence's arrival
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {
        "first_audio": round(first, 2),
        "last_audio": round(last, 2),
        "pieces_at": [round(t, 2) for t in times],
        "piece_sentences": ends,
        "sentences_at": per_sentence,
        "longest_gap": round(max(gaps, default=0.0), 2),
        "share_by_midpoint": by_mid / max(total, 1),
        "audio_seconds": total / sr,
    }


def run_socket(engine, speaker, config, continued: bool, seed: int) -> dict:
    """The socket's two requests on a Service of `config` (continued: the second cut as a
    continuation, its first piece a later piece's size)."""
    from omnivoice_cli.app.session import seed_for
    from omnivoice_cli.engine.service import Service

    service = Service(engine, config=config, fit=True).start()
    pieces: list[tuple[float, str, int]] = []
    try:
        t0 = time.perf_counter()
        voice, solo = None, 0.0
        for k, text in enumerate(socket_parts()):
            req = speaker.build(text, settings={"seed": seed}).request
            if k:
                req = dataclasses.replace(req, seed=seed_for(seed, k), ref=voice)
            events: queue.Queue = queue.Queue()
            kwargs = {"continued": True} if (continued and k) else {}
            ticket = service.submit(req, events.put, **kwargs)
            while True:
                e = events.get(timeout=3600)
                if e.kind == "piece":
                    pieces.append((time.perf_counter() - t0, e.piece.text, len(e.piece.audio)))
                elif e.kind == "error":
                    raise e.error
                else:
                    break
            if k == 0:
                voice, solo = ticket.voice, time.perf_counter() - t0
    finally:
        service.stop()
    out = arrivals(pieces, engine.sample_rate)
    out["solo"] = round(solo, 2)  # the first sentence alone: one sentence's solo time
    return out


def run_say_stream(engine, speaker, config, seed: int) -> dict:
    """`say --stream` of the whole reply (the streamed render) with `config`."""
    from omnivoice_cli.engine.stream.render import stream

    req = speaker.build(REPLY, settings={"seed": seed}).request
    pieces: list[tuple[float, str, int]] = []
    t0 = time.perf_counter()
    summary = stream(
        engine, req, lambda p: pieces.append((time.perf_counter() - t0, p.text, len(p.audio))), config=config
    )
    out = arrivals(pieces, engine.sample_rate)
    out["waves"], out["kept_up"] = summary.waves, summary.kept_up
    return out
