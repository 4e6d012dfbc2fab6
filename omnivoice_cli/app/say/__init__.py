"""`omnivoice say`: one text or a dialogue script spoken into a file, stdout or the player, locally or by a server (the map: docs/design.md)."""
