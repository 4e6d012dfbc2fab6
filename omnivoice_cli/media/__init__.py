"""Media in and out: audio formats, the player, subtitle cues, tracks."""
