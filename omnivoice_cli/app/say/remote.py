"""`say --server URL` (or OMNIVOICE_SERVER): the text spoken by a running `omnivoice serve`, a
warm engine, and delivered here as a local run delivers it.

    check_remote(settings, subtitles=..., words=...)     # before anything is sent: what cannot go
    run = RemoteRun(speech, url, voice, session, shown)  # a Speech built here, checked as ever
    report = run.run(signals)                            # a speakrun.SpeechReport, as a local run's

The request is built and checked here first (`request.build_request`, no model), so a bad value
is the same one-line usage error as without --server, before anything is sent. The server is sent
every request setting the run resolved (`settings.HTTP_SETTINGS`, but for those left unset) and
asked for 16-bit PCM at the output's rate with the output's loudness (the server's `deliver` does
the same resampling and levelling as a local run's), so its samples are the local file's samples;
they are written here through `deliver` (or, streamed, `PieceWriter`) into whatever -o names.

A 4xx reply is a usage error (exit 2) with the server's message, which uses the CLI's words; a 5xx
or a server that is not there is a failure (exit 1), one line. The server is not trusted
(app/say/replycheck.py): a malformed URL is a usage error; a reply with a bad header, a WAV of
another layout or cut short, or one longer than the request can make is a failure, and no file. The settings of the model and the
machine (`LOCAL_ONLY`) are the server's: given as flags they are refused (exit 2); from the
environment or a preset they are left to the server. `--voice NAME` names the server's saved voice.
The report (`--json`) names the seed and the voice prompt the reply's headers say the server used.
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator

from ...engine.errors import InvalidRequest, MissingExtra, OmniVoiceError, one_line
from ...engine.model.config import SAMPLE_RATE
from ...media.player import open_player
from ..deliver import Outputs, PieceWriter, Take, deliver, send_piece, stopping
from ..session import Session
from ..settings.layers import Resolved
from ..settings.schema import HTTP_SETTINGS
from ..settings.setting import flag_name
from .replycheck import (
    MAX_ERROR_BYTES,
    RATES,
    BadReply,
    ReplyMeta,
    bounded,
    check_url,
    longest_reply,
    message_of,
    read_bounded,
    reply_meta,
    samples,
    wav_samples,
)

if TYPE_CHECKING:
    import numpy as np

    from ..signals import HoldSignals
    from .speakrun import Shown, Speech, SpeechReport

ENV = "OMNIVOICE_SERVER"  # the server's URL when --server is not given
KEY_ENV = "OMNIVOICE_API_KEY"  # sent as 'Authorization: Bearer KEY' (serve --api-key)
SPEECH_PATH = "/v1/audio/speech"
TIMEOUT = 3600.0  # seconds a reply may take between two reads (a long text on a busy server)
CONNECT_TIMEOUT = 10.0
# settings of the model and the machine: the server was started with its own
LOCAL_ONLY = ("model", "device", "dtype", "threads", "quantize", "compile", "asr_model", "lexicon", "ref", "ref_text")


class ServerUnreachable(OmniVoiceError):
    """No server answered at the URL (exit 1)."""


def server_url(flag: str | None) -> str | None:
    """--server, else OMNIVOICE_SERVER; a URL of http(s), without a trailing slash (replycheck.check_url:
    a usage error otherwise). Empty (`--server ''`, or the variable set empty): none, the run is local."""
    url = flag if flag is not None else os.environ.get(ENV)
    if not url:
        return None
    return check_url(url, "--server" if flag is not None else f"environment variable {ENV}")


def check_remote(settings: Resolved, *, subtitles: bool, words: bool) -> None:
    """Before anything is sent: what a run through a server cannot do (usage errors)."""
    for key in LOCAL_ONLY:
        if settings.source(key).kind == "flag":
            flag = flag_name(key)
            why = (
                "a recording is not sent: save it as a voice where the server runs (omnivoice voice add, or "
                "POST /v1/audio/voices) and give --voice NAME"
                if key in ("ref", "ref_text")
                else "the server's model and machine are set when it starts (omnivoice serve)"
            )
            raise InvalidRequest(f"{flag} cannot go with --server: {why}; leave out {flag}, or --server to run here")
    for given, what in ((subtitles, "--subtitles"), (words, "--words")):
        if given:
            raise InvalidRequest(f"{what} cannot go with --server (the reply does not say where its pieces lie)")


def request_body(speech: "Speech", text: str, voice: str | None, stream: bool) -> dict[str, object]:
    """The JSON body of POST /v1/audio/speech: the text as given and every setting the run resolved."""
    values = speech.built.settings.values
    body: dict[str, object] = {
        "model": "omnivoice",
        "input": text,
        "voice": voice or "auto",
        "response_format": "pcm" if stream else "wav",
        "stream": stream,
    }
    body.update({k: values[k] for k in HTTP_SETTINGS if values.get(k) is not None})
    return body


def _need_httpx() -> None:
    """MissingExtra when httpx (the serve extra) is not installed."""
    try:
        import httpx  # noqa: F401
    except ImportError:
        raise MissingExtra("say --server", "httpx", "serve") from None


def refused(url: str, status: int, data: bytes, cut: bool = False) -> OmniVoiceError:
    """A reply that is not audio, as the CLI's error: 4xx a usage error, else a failure (the
    server's message on one line, cut: replycheck.message_of)."""
    message = message_of(data, cut)
    if 400 <= status < 500:
        return InvalidRequest(message)
    return OmniVoiceError(f"the server at {url} failed (HTTP {status}): {message}")


@dataclass
class _Reply:
    audio: "np.ndarray"  # float32 samples at `rate`
    rate: int
    first: float | None  # streamed: seconds until the first samples came
    meta: ReplyMeta  # its headers' seed, loudness, verify and voice prompt


class RemoteRun:
    """One text spoken by the server, written or played here (see the module doc)."""

    def __init__(
        self, speech: "Speech", text: str, url: str, voice: str | None, session: Session, shown: "Shown"
    ) -> None:
        self.speech, self.text, self.url, self.voice = speech, text, url, voice
        self.session, self.shown = session, shown
        self.mark = speech.mark  # ours (None: --no-mark), naming the server's model once its reply says it

    def headers(self) -> dict[str, str]:
        key = os.environ.get(KEY_ENV)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def run(self, signals: "HoldSignals") -> "SpeechReport":
        """Speak on the server, deliver here; StoppedBySignal on Ctrl-C / SIGTERM."""
        from .speakrun import Writes, playback_stopped, speech_report, stopped_after

        speech, writes = self.speech, Writes(signals)
        t0 = time.perf_counter()
        try:
            got = self.fetch(signals)
            to_file = speech.target is not None and not (speech.streamed and speech.target.to_stdout)
            player = open_player(got.rate) if speech.play and not speech.streamed else None
            deliver(
                Take(got.audio, got.rate, self.text),
                Outputs(target=speech.target if to_file else None, stdout=self.session.stdout, mark=self.mark),
                protect=writes.protect,
                player=player,
            )
        except KeyboardInterrupt as e:
            if speech.target is None:
                raise playback_stopped(e) from None
            raise stopped_after(e, writes.done, speech.target) from None
        plan = speech.built.plan
        report = speech_report(
            speech,
            self.shown,
            result=got.audio,
            sample_rate=got.rate,
            seconds=time.perf_counter() - t0,
            load=0.0,
            voice=None,
            first=got.first,
            seed=got.meta.seed,
            pieces=len(plan.pieces) if plan is not None else 1,
            verify=got.meta.verify,
            voice_prompt=got.meta.voice_prompt,
        )
        return report if got.meta.loudness is None else replace(report, loudness=got.meta.loudness)

    def fetch(self, signals: "HoldSignals") -> _Reply:
        """POST the request; the reply's samples (streamed: played and sent on as they come)."""
        _need_httpx()
        import httpx

        streamed = self.speech.streamed
        body = request_body(self.speech, self.text, self.voice, streamed)
        timeout = httpx.Timeout(TIMEOUT, connect=CONNECT_TIMEOUT)
        try:
            with httpx.Client(timeout=timeout, headers=self.headers()) as client:
                with client.stream("POST", self.url + SPEECH_PATH, json=body) as reply:
                    if reply.status_code != 200:
                        raise refused(self.url, reply.status_code, *read_bounded(reply.iter_bytes(), MAX_ERROR_BYTES))
                    meta = reply_meta(reply.headers)  # checked before any audio is taken
                    if self.mark is not None and meta.checkpoint is not None:
                        self.mark = replace(self.mark, model=meta.checkpoint)
                    asked = self.speech.sample_rate
                    why = "the longest reply this text can make"
                    if streamed:
                        rate = int(asked or SAMPLE_RATE)
                        chunks = bounded(reply.iter_bytes(), longest_reply(self.speech, self.text, rate), why)
                        audio, first = self.streamed(chunks, rate, signals)
                        return _Reply(audio, rate, first, meta)
                    limit = longest_reply(self.speech, self.text, int(asked or RATES[1]))
                    with self.session.status(f"speaking on {self.url} ..."):
                        data = b"".join(bounded(reply.iter_bytes(), limit, why))
                    audio, rate = wav_samples(data, None if asked is None else int(asked))
                    return _Reply(audio, rate, None, meta)
        except BadReply as e:
            raise BadReply(f"the server's reply {e}") from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            raise ServerUnreachable(f"no omnivoice server answered at {self.url}: {one_line(e)}") from None
        except httpx.TransportError as e:  # cut off, or silent past TIMEOUT: the reply is not whole
            raise OmniVoiceError(f"the server at {self.url} stopped answering: {one_line(e)}") from None

    def streamed(self, chunks: Iterator[bytes], rate: int, signals: "HoldSignals") -> tuple["np.ndarray", float | None]:
        """The reply's PCM as it comes: played, and to stdout (--stream -o -); kept whole."""
        import numpy as np

        target = self.speech.target
        writer = None
        if target is not None and target.to_stdout:
            writer = PieceWriter(self.session.stdout(), target.audio_format, rate, None, self.mark)
        player = open_player(rate) if self.speech.play else None
        kept: list[np.ndarray] = []
        first, t0 = None, time.perf_counter()
        with stopping(writer), player or nullcontext():  # left normally: waits until all has played
            for piece in _pieces(chunks):
                if first is None:
                    first = time.perf_counter() - t0
                if player is not None:
                    player.play(piece)
                if writer is not None:
                    send_piece(lambda: writer.write(piece), signals)
                kept.append(piece)
            if writer is not None:
                send_piece(writer.close, signals)
        return (np.concatenate(kept) if kept else np.zeros(0, np.float32)), first


def _pieces(chunks: Iterator[bytes]) -> Iterator["np.ndarray"]:
    """float32 samples of a stream of s16le bytes, whatever its chunks' sizes."""
    rest = b""
    for chunk in chunks:
        data = rest + chunk
        cut = len(data) - len(data) % 2
        rest = data[cut:]
        if cut:
            yield samples(data[:cut])
