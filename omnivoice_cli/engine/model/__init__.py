"""The OmniVoice network and its loop, plain: config, canvas, backbone, scheduler, generation, the codec (decode and encode) and HuBERT (the map: docs/design.md)."""
