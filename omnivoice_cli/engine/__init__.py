"""The OmniVoice engine in plain PyTorch: config, hub (finding and fetching the checkpoint),
tensorfile (safetensors), loading, text, canvas, backbone and linears, scheduler, generation,
pieces (the piece policy of every driver), codec, encoder, voice, audio, memory. It never imports typer or rich;
`pipeline.Engine` (with `pipeline.plan_request`) is its public face.
"""

import os

# oneDNN keeps a compiled primitive (and its buffers) for every convolution shape it has run, up to
# 1024 of them. The codec decodes each chunk of a long text at its own length, so that cache would
# make memory grow with the text; a short cache loses nothing (lengths rarely repeat). Read by
# oneDNN when torch first uses it, so it must be set before then; a user's own setting wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
