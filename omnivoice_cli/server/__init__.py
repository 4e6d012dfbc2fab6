"""`omnivoice serve`: OpenAI's speech API over the engine's continuous-batching loop.

- config.py: ServeOptions (what the server was started with), the OpenAI voice-name table
- speech.py: a request body checked by the settings schema and built like `say` builds one
- replies.py: the reply, streamed as pieces are ready (chunked or SSE) or whole
- voices.py: the voice endpoints (list, upload, delete)
- schema.py: GET /v1/omnivoice/schema (settings, presets, voice-design vocabulary, languages)
- ui.py: the page on GET / and its files (static/: one HTML, one script, one stylesheet)
- app.py: the Starlette app, its gate (key, body limits, 503 while stopping) and the log line
- run.py: uvicorn with a drain on SIGTERM / Ctrl-C
The engine side is engine/service.py (no web framework there). Needs the `serve` extra.
"""
