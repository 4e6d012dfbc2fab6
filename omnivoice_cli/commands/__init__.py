"""The commands of `omnivoice`, one file each; `cli.py` assembles them into the app (the map: docs/design.md)."""
