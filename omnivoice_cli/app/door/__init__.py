"""The one door of every network request: the Speaker (one model, one engine loop), a request's voice, streamed text parts, idle unloading (the map: docs/design.md)."""
