"""The livekit-streaming-tts plugin's own `StreamingTTS` against a running `omnivoice serve`, run by
test_socket.py in a Python that has livekit-agents (not the test extra's: see docs/agents.md).

    python tests/livekit_client.py ws://127.0.0.1:PORT/tts/ws OUT_DIR

Writes OUT_DIR/synthesize.raw, OUT_DIR/stream.raw (s16le) and OUT_DIR/report.json."""

import asyncio
import json
import sys
from pathlib import Path


async def collect(stream) -> tuple[bytes, int]:
    data, rate = b"", 0
    async for event in stream:
        frame = event.frame
        rate = frame.sample_rate
        data += bytes(frame.data)
    return data, rate


async def main(url: str, out: Path) -> None:
    import aiohttp
    from livekit_streaming_tts.plugin import StreamingTTS

    async with aiohttp.ClientSession() as session:
        tts = StreamingTTS(ws_url=url, http_session=session, extra={"seed": 9, "num_step": 2})
        synth, rate1 = await collect(tts.synthesize("Hello there, my good old friend."))
        stream = tts.stream()
        for word in "Hello there, my good old friend.".split(" "):
            stream.push_text(word + " ")
        stream.flush()
        stream.end_input()
        streamed, rate2 = await collect(stream)
        await tts.aclose()
    (out / "synthesize.raw").write_bytes(synth)
    (out / "stream.raw").write_bytes(streamed)
    (out / "report.json").write_text(json.dumps({"rates": [rate1, rate2]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
