"""A WyomingServer on the tiny checkpoint in a thread of its own, and a coroutine run to its end:
test_wyoming.py, test_telephony.py."""

from __future__ import annotations

import asyncio
import threading

from conftest import TINY_CKPT
from wyoming.client import AsyncTcpClient

from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
from omnivoice_cli.app.settings.layers import FLAG_SOURCE
from omnivoice_cli.server.wyoming.wyoming import WyomingOptions, WyomingServer

SEED = 17  # the server's --seed: every request's (a stream's parts: 17, 18, ...)


NUM_STEP = 4


class Running:
    """A WyomingServer in a thread of its own (its own event loop), on a free port."""

    def __init__(self, engine, uri="tcp://127.0.0.1:0", wyoming=None, **options):
        flags = {"num_step": NUM_STEP, "seed": SEED}
        self.speaker = Speaker(
            SpeakerOptions(layers=((FLAG_SOURCE, flags),), model=str(TINY_CKPT), **options), load=lambda: engine
        )
        self.speaker.start()
        self.server = WyomingServer(self.speaker, WyomingOptions(uri=uri, quiet=True, **(wyoming or {})))
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="test-wyoming", daemon=True)
        self.thread.start()
        assert self.ready.wait(120), "the server did not start"
        self.port = int(self.server.address.rsplit(":", 1)[1]) if uri.startswith("tcp") else None

    def _run(self):
        self.loop.run_until_complete(self.server.serve(lambda address: self.ready.set()))

    @property
    def service(self):
        return self.speaker.service()

    def client(self):
        return AsyncTcpClient("127.0.0.1", self.port, connect_timeout=60, read_timeout=120)

    def close(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.thread.join(120)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))
