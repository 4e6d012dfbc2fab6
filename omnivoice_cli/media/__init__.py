"""Media in and out: audio formats, the player, subtitle cues, tracks (the map: docs/design.md)."""
