"""The server's one speech recogniser (serve --asr-model), shared by the requests that need it:
`verify` (each piece's words checked) and `timestamps` (the reply's words timed); its failures
worded without the server's folder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..app.listening.listen import Recogniser, RecogniserFailed, Transcript, recogniser
from ..app.listening.verify import Verifier
from ..engine.errors import InvalidRequest, MissingExtra, ModelUnavailable
from .errors import ApiError, scrub_asr, scrub_paths
from .speech import SpeechBody
from .state import ServerState

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..engine.pieces import PieceCheck


def server_recogniser(state: ServerState, parsed: SpeechBody, field: str) -> Recogniser:
    """The server's one speech recogniser (serve --asr-model), loaded on the first request that
    needs it. One that cannot be had (the asr extra missing, its model not cached offline, a
    folder that is not one, a broken one) is a 501 / 500 in the CLI's words, its folder not
    shown, before the request is generated (and the next request tries again)."""
    with state.recogniser_lock:
        if state.recogniser is None:
            spec = state.options.asr_model
            try:
                loaded = recogniser(spec, parsed.built.settings["device"] or "auto", f"field {field!r}")
            except (MissingExtra, ModelUnavailable) as e:
                raise ApiError(501, str(e), param=field, type="server_error", code="no_recogniser") from None
            except (InvalidRequest, RecogniserFailed) as e:  # the server's --asr-model is not a (whole) recogniser
                message = scrub_paths(scrub_asr(str(e), spec))
                raise ApiError(500, message, param=field, type="server_error", code="no_recogniser") from None
            state.recogniser = ScrubbedRecogniser(loaded, spec)
        return state.recogniser


class ScrubbedRecogniser:
    """The server's recogniser, its failures on some audio (listen.RecogniserFailed) worded
    without the server's --asr-model folder."""

    def __init__(self, inner: Recogniser, spec: str | None) -> None:
        self.inner, self.spec = inner, spec

    def transcribe(
        self,
        audio: ArrayLike,
        sample_rate: int,
        lang: str | None = None,
        max_tokens: int | None = None,
        words: bool = True,
    ) -> Transcript:
        try:
            return self.inner.transcribe(audio, sample_rate, lang, max_tokens=max_tokens, words=words)
        except RecogniserFailed as e:
            raise RecogniserFailed(scrub_paths(scrub_asr(str(e), self.spec))) from None

    def close(self) -> None:
        self.inner.close()


def verify_check(state: ServerState, parsed: SpeechBody) -> PieceCheck | None:
    """A request's `verify` check (verify.py), by the server's one recogniser."""
    settings = parsed.built.settings
    if not settings["verify"]:
        return None
    verifier = Verifier(
        server_recogniser(state, parsed, "verify"), settings["verify_max_error"], settings["verify_retries"]
    )
    return verifier.for_request(parsed.request.lang)


def timestamps_recogniser(state: ServerState, parsed: SpeechBody) -> Recogniser | None:
    """`timestamps`: the recogniser that times the reply's words (None: not asked for)."""
    return server_recogniser(state, parsed, "timestamps") if parsed.timestamps else None
