"""The application layer: settings, requests, the session and the runs of every command, in rooms by feature (the map: docs/design.md)."""
