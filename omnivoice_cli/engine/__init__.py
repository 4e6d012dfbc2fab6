"""The OmniVoice engine in plain PyTorch; `pipeline.Engine` is its face (the map: docs/design.md)."""

import os

# oneDNN keeps a compiled primitive (and its buffers) for every convolution shape it has run, up to
# 1024 of them. The codec decodes each chunk of a long text at its own length, so that cache would
# make memory grow with the text; a short cache loses nothing (lengths rarely repeat). Read by
# oneDNN when torch first uses it, so it must be set before then; a user's own setting wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
