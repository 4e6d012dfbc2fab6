"""The phrase cache: the same request spoken again read from disk (the map: docs/design.md)."""
