"""omnivoice: text to speech on the command line, in plain PyTorch (the map of the package: docs/design.md)."""
