"""LiveKit's ElevenLabs plugin (livekit-plugins-elevenlabs: its multi-stream-input client) against a
running `omnivoice serve`, run by test_elevenlabs_socket.py in a Python that has livekit-agents
(not the test extra's: see .ci/run).

    python tests/elevenlabs_livekit_client.py http://127.0.0.1:PORT KEY OUT_DIR < commands

1. The agent's reply (argv's OUT_DIR/reply.txt) pushed as 20-character tokens, then the end of
   input: OUT_DIR/reply.raw (s16le) and OUT_DIR/report.json (the rate, the timed words).
2. A long text pushed without an end; at its first audio it prints "audio", waits for a line on
   stdin, closes the stream (a barge-in: close_context without a flush), prints "closed".
"""

import asyncio
import json
import sys
from pathlib import Path

TIMED = "lk.timed_transcripts"  # livekit.agents.types.USERDATA_TIMED_TRANSCRIPT


async def main(base: str, key: str, out: Path) -> None:
    import aiohttp
    from livekit.plugins import elevenlabs

    reply = (out / "reply.txt").read_text()
    async with aiohttp.ClientSession() as session:
        tts = elevenlabs.TTS(
            voice_id="alloy", api_key=key, base_url=base + "/v1", encoding="pcm_24000", http_session=session
        )
        stream = tts.stream()
        for i in range(0, len(reply), 20):
            stream.push_text(reply[i : i + 20])
        stream.flush()
        stream.end_input()
        pcm, words, rate = b"", [], 0
        async for event in stream:
            pcm += bytes(event.frame.data)
            rate = event.frame.sample_rate
            words += [[str(t), t.start_time, t.end_time] for t in event.frame.userdata.get(TIMED, [])]
        (out / "reply.raw").write_bytes(pcm)
        (out / "report.json").write_text(json.dumps({"rate": rate, "words": words}))

        long_text = " ".join(f"This is sentence number {i} of a long answer." for i in range(40))
        stream = tts.stream()
        stream.push_text(long_text + " ")
        async for _event in stream:
            break
        print("audio", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await stream.aclose()
        print("closed", flush=True)
        await tts.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
