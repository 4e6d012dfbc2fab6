"""ElevenLabs' API on `omnivoice serve`: their routes and sockets (the map: docs/design.md)."""
