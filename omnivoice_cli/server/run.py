"""Running the app under uvicorn, with a drain on SIGTERM / Ctrl-C.

    code = run_server(state)     # blocks; 0 after a clean stop, 1 when the model failed to load

The first SIGTERM or Ctrl-C stops taking requests (503 with Retry-After, the socket stays open so
clients hear why) and lets the requests in flight finish, for up to `grace` seconds; then the
server exits. A second Ctrl-C or SIGTERM exits at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
import time
from types import FrameType
from typing import Callable

import uvicorn

from .app import create_app
from .state import ServerState


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with the drain described in the module doc."""

    def __init__(self, config: uvicorn.Config, state: ServerState, on_listening: Callable[[str], None] | None = None):
        super().__init__(config)
        self.state, self.on_listening = state, on_listening
        self.deadline: float | None = None  # when the drain gives up on requests in flight
        self.url: str | None = None
        self.exit_code = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:  # signal handler: no re-raise at the end
        if self.deadline is None:
            self.drain()
        else:
            self.should_exit = self.force_exit = True
            self.exit_code = 128 + sig

    def drain(self) -> None:
        """Stop taking requests; exit once those in flight are done or `grace` has passed."""
        self.deadline = time.monotonic() + self.state.options.grace
        self.state.status = "stopping"

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.servers and self.servers[0].sockets:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            self.url = f"http://{shown}:{port}"
        if self.url:
            if self.on_listening is not None:
                self.on_listening(self.url)
            self.state.listening(self.url)  # the socket accepts: state.on_ready once it is ready too

    async def on_tick(self, counter: int) -> bool:
        if await super().on_tick(counter):
            return True
        if self.state.status == "failed":
            self.exit_code, self.should_exit = 1, True
            return True
        if self.deadline is None:
            return False
        service = self.state.service
        busy = self.state.inflight > 0 or (service is not None and service.open > 0)
        if busy and time.monotonic() < self.deadline:
            return False
        if busy:
            sys.stderr.write(
                f"omnivoice serve: the grace of {self.state.options.grace:g} s is over: "
                f"{self.state.inflight} requests cut short\n"
            )
            await asyncio.to_thread(self.state.stop)  # their replies say so (503)
        self.should_exit = True
        return True


def make_server(state: ServerState, on_listening: Callable[[str], None] | None = None) -> DrainingServer:
    options = state.options
    config = uvicorn.Config(
        create_app(state),
        host=options.host,
        port=options.port,
        log_level="warning",
        loop="asyncio",  # the same server whatever else is installed (ray[serve] brings uvloop and httptools)
        http="h11",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        server_header=False,
        proxy_headers=False,
        limit_concurrency=options.connection_limit,  # connections at once: beyond, uvicorn's own 503 (at
        # most half of them /tts/ws sockets: options.max_sockets)
        ws_max_size=4 * options.json_limit,  # /tts/ws: a larger frame closes the socket (1009); above the
        # message limit (json_limit, an error event and the socket goes on), far below uvicorn's 16 MiB
    )
    return DrainingServer(config, state, on_listening)


def run_server(state: ServerState, on_listening: Callable[[str], None] | None = None) -> int:
    """Run until stopped; the exit code (0, or 1 when the model failed to load)."""
    server = make_server(state, on_listening)
    server.run()  # a port that cannot be bound: uvicorn says why and exits 1
    return server.exit_code
