"""A checkpoint on disk: finding it (the hub), reading its safetensors, what a fine-tune declares (the map: docs/design.md)."""
