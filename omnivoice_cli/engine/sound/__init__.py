"""Audio around the model, numpy and torch only: reference voices and voice files, resampling, post-processing, silence removal (the map: docs/design.md)."""
