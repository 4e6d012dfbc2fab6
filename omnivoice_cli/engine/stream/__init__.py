"""Streamed rendering: a text spoken piece by piece, each piece handed out as soon as it is ready (the map: docs/design.md)."""
