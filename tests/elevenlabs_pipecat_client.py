"""Pipecat's ElevenLabs TTS service (pipecat-ai[elevenlabs]: its multi-stream-input client) against a
running `omnivoice serve`, run by test_elevenlabs_socket.py in a Python that has pipecat-ai (not the
test extra's: see .ci/run).

    python tests/elevenlabs_pipecat_client.py http://127.0.0.1:PORT KEY OUT_DIR [cancel]

The agent's reply (OUT_DIR/reply.txt) goes through a Pipecat pipeline as an LLM's reply in
20-character tokens; what the service hands on is recorded: OUT_DIR/reply.raw (its audio, s16le)
and OUT_DIR/report.json (the rate, the words it timed from the alignment, in order, with their
presentation times).

With `cancel`, a barge-in, led by the test on stdin/stdout: the reply's first audio is said
("audio"); at "cancel" an InterruptionFrame goes down the pipeline (the service closes the
context: our barge-in) and "interrupted" is said; at "next" a second turn (OUT_DIR/next.txt) is
spoken to its end, then "done"; OUT_DIR/report.json: the second turn's words and audio bytes, and
whether the service kept the socket it began with.
"""

import asyncio
import json
import sys
from pathlib import Path

from pipecat.frames.frames import (  # this script runs only in a Python that has pipecat-ai
    EndFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService


async def main(base: str, key: str, out: Path) -> None:
    reply = (out / "reply.txt").read_text()
    pcm, words, rate, done = bytearray(), [], [], asyncio.Event()

    class Recorder(FrameProcessor):
        async def process_frame(self, frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame):
                pcm.extend(frame.audio)
                rate.append(frame.sample_rate)
            elif isinstance(frame, TTSTextFrame):
                words.append([frame.text, frame.pts])
            elif isinstance(frame, TTSStoppedFrame):
                done.set()
            await self.push_frame(frame, direction)

    tts = ElevenLabsTTSService(  # no end of the audio guessed from a quiet spell (3 s by default): its isFinal
        api_key=key, voice_id="alloy", url=base.replace("http://", "ws://"), stop_frame_timeout_s=600
    )
    task = PipelineTask(Pipeline([tts, Recorder()]), params=PipelineParams(audio_out_sample_rate=24000))
    runner = PipelineRunner(handle_sigint=False)
    running = asyncio.create_task(runner.run(task))
    frames = [LLMFullResponseStartFrame()]
    frames += [LLMTextFrame(reply[i : i + 20]) for i in range(0, len(reply), 20)]
    await task.queue_frames([*frames, LLMFullResponseEndFrame()])
    await done.wait()  # the reply's isFinal: all its audio is in
    await task.queue_frame(EndFrame())
    await running
    (out / "reply.raw").write_bytes(bytes(pcm))
    (out / "report.json").write_text(json.dumps({"rate": sorted(set(rate)), "words": words}))


async def cancel(base: str, key: str, out: Path) -> None:
    first: list[str] = []  # the first turn's context id
    second = {"audio": 0, "words": []}
    heard, stopped = asyncio.Event(), asyncio.Event()

    class Recorder(FrameProcessor):
        async def process_frame(self, frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            context = getattr(frame, "context_id", None)
            if isinstance(frame, TTSAudioRawFrame) and not first:
                first.append(context)
                heard.set()
            elif first and context is not None and context != first[0]:  # the second turn's
                if isinstance(frame, TTSAudioRawFrame):
                    second["audio"] += len(frame.audio)
                elif isinstance(frame, TTSTextFrame):
                    second["words"].append(frame.text)
                elif isinstance(frame, TTSStoppedFrame):
                    stopped.set()
            await self.push_frame(frame, direction)

    def say(line: str) -> None:
        print(line, flush=True)

    async def told() -> str:
        return (await asyncio.to_thread(sys.stdin.readline)).strip()

    def turn(text: str, ended: bool = True) -> list:
        tokens = [LLMTextFrame(text[i : i + 20]) for i in range(0, len(text), 20)]
        return [LLMFullResponseStartFrame(), *tokens, *([LLMFullResponseEndFrame()] if ended else [])]

    tts = ElevenLabsTTSService(
        api_key=key, voice_id="alloy", url=base.replace("http://", "ws://"), stop_frame_timeout_s=600
    )
    task = PipelineTask(Pipeline([tts, Recorder()]), params=PipelineParams(audio_out_sample_rate=24000))
    running = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await task.queue_frames(turn((out / "reply.txt").read_text(), ended=False))  # the LLM still speaking
    await heard.wait()
    socket = tts._websocket  # the connection the first turn is spoken on
    say("audio")
    assert await told() == "cancel"
    await task.queue_frame(InterruptionFrame())
    say("interrupted")
    assert await told() == "next"
    await task.queue_frames(turn((out / "next.txt").read_text()))
    await stopped.wait()  # the second turn's isFinal: its audio is in
    report = {**second, "same_socket": tts._websocket is socket}
    (out / "report.json").write_text(json.dumps(report))
    say("done")
    await task.queue_frame(EndFrame())
    await running


if __name__ == "__main__":
    run = cancel if sys.argv[4:] == ["cancel"] else main
    asyncio.run(run(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
