"""Listening back: the speech recogniser, --verify, word timings (the map: docs/design.md)."""
