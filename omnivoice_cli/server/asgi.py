"""The ASGI interface's types, as the server's middleware (app.Gate, metrics.Counted) uses them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]  # an ASGI scope: its values are the server's (strings, bytes, tuples)
Message = MutableMapping[str, Any]  # an ASGI message (http.request, http.response.start, ...)
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
