"""The replies of ElevenLabs' text-to-speech routes: our speech reply (replies.SpeechReply: the
same bytes, the same streaming and cancellation) with their errors and their timed shapes.

- `ElevenReply`: the audio as our route sends it (whole for convert, chunked for /stream);
- `TimedReply` (/with-timestamps): one JSON, {"audio_base64", "alignment",
  "normalized_alignment"} (alignment.py: from the heard words, else the pieces' spans);
- `StreamedTimedReply` (/stream/with-timestamps): one JSON line per piece as it is ready, its
  audio bytes (the same stream as /stream's, cut where the pieces end) and its characters' times
  from its span (the words need the whole audio).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from ..errors import ApiError
from ..replies import Send, SpeechReply
from .alignment import Alignment, from_spans, from_words, of_piece
from .api import eleven

if TYPE_CHECKING:
    from ...app.listening.words import WordTime
    from ...engine.stream.render import StreamPiece


class ElevenReply(SpeechReply):
    """Our reply, its errors in their shape."""

    async def send_error(self, send: Send, error: ApiError) -> None:
        await super().send_error(send, eleven(error))

    @property
    def model_rate(self) -> int:
        return int(self.ticket.service.engine.sample_rate)


def _timed(data: bytes, alignment: Alignment | None) -> dict[str, object]:
    return {
        "audio_base64": base64.b64encode(data).decode("ascii"),
        "alignment": alignment,
        "normalized_alignment": alignment,
    }


class TimedReply(ElevenReply):
    """/with-timestamps: the whole audio in base64 and its characters' times."""

    plain_audio = False  # JSON: audio and alignment

    @property
    def json_reply(self) -> bool:
        return True

    def captioned(self, data: bytes, rate: int, samples: int, words: list[WordTime]) -> dict[str, object]:
        if self.speech.timestamps:
            alignment = from_words(words)
        else:
            rate = self.model_rate
            alignment = from_spans((text, start / rate, end / rate) for text, start, end in self.spans)
        return _timed(data, alignment)


class StreamedTimedReply(ElevenReply):
    """/stream/with-timestamps: a JSON line per piece."""

    plain_audio = False  # JSON: audio and alignment

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return super().headers({"Content-Type": "application/x-ndjson", **(extra or {})})

    async def send_bytes(self, send: Send, data: bytes, piece: StreamPiece | None = None) -> None:
        spoken = piece is not None and bool(piece.text.strip())
        if not data and not spoken:
            return
        alignment = None
        if piece is not None and spoken:
            start, end = piece.kept if piece.kept is not None else (0, len(piece.audio))
            rate = self.model_rate
            alignment = of_piece(piece.text, (piece.start + start) / rate, (piece.start + end) / rate)
        line = json.dumps(_timed(data, alignment), ensure_ascii=False) + "\n"
        await send({"type": "http.response.body", "body": line.encode("utf-8"), "more_body": True})
