"""`omnivoice batch`: many texts, one file each, resumable, in this process or on a Ray cluster (the map: docs/design.md)."""
