"""Saved voices: the store, export and import, voice-design items (the map: docs/design.md)."""
