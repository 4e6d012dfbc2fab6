"""SSML in: a document read into parts of one voice, language and rate, and built as requests (the map: docs/design.md)."""
