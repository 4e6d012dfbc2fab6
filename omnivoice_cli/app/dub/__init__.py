"""`omnivoice dub`: a subtitle file spoken into one track, every cue in its own time slot (the map: docs/design.md)."""
