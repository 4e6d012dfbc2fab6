"""`omnivoice edit`: words changed inside a recording, the rest of its codes kept (the map: docs/design.md)."""
