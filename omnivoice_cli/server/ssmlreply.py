"""POST /v1/audio/speech given SSML of several parts (app/ssml/spoken.py: the voice, language or
rate changes): each part its own request with seed S + i, through one admission as a script's
lines go (script.speak_lines), joined with the breaks between them, and sent whole (at `loudness`, when given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from starlette.responses import Response

from ..app.deliver import Outputs, Take, deliver
from ..media.tracks import join_with_gaps
from .script import share, speak_lines

if TYPE_CHECKING:
    from .speech import SpeechBody
    from .state import ServerState


async def ssml_reply(state: ServerState, parsed: SpeechBody) -> Response:
    """The reply to a speech request of several SSML parts: one file, its parts joined."""
    parts = parsed.parts
    assert parts is not None
    audios = await speak_lines(state.speaker, list(parts.built), share(state.options.max_queue))
    rate = int(state.require_service().engine.sample_rate)
    settings = parsed.built.settings
    out_rate = int(settings["sample_rate"] or rate)
    mix, _ = join_with_gaps(audios, [round(p * rate) for p in parts.pauses[1:]])

    def encode() -> bytes:
        outputs = Outputs(loudness=settings["loudness"], sample_rate=out_rate, encoded=parsed.format)
        data = deliver(Take(mix, rate), outputs).data
        assert data is not None
        return data

    data = await anyio.to_thread.run_sync(encode)
    headers = {**parsed.headers(), "X-OmniVoice-Seed": str(parts.seed)}
    return Response(data, media_type=parsed.format.mime, headers=headers)
