"""`omnivoice serve`: OpenAI's speech API over the engine's continuous-batching loop.

- config.py: ServeOptions (what the server was started with), the OpenAI voice-name table
- state.py: what the app shares: its options, its one Speaker (app/door/speaker.py: presets, voices,
  the request's build and the engine loop, as Wyoming's and MCP's), the lifecycle
- speech.py: a request body's fields read and handed to the Speaker, its refusals worded as fields
- replies.py: the reply, streamed as pieces are ready (chunked or SSE) or whole
- voices.py: the voice endpoints (list, upload, delete)
- schema.py: GET /v1/omnivoice/schema (settings, presets, voice-design vocabulary, languages)
- ui.py: the page on GET / and its files (static/: one HTML, one script, one stylesheet)
- app.py: the Starlette app, its gate (key, body limits, 503 while stopping) and the log line
  (asgi.py: the ASGI types of its middleware)
- run.py: uvicorn with a drain on SIGTERM / Ctrl-C
The engine side is engine/service.py (no web framework there). Needs the `serve` extra.
"""
