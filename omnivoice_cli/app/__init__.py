"""The application layer: the settings schema, requests, the session, batch, dubbing, dialogue (no typer, rich or web framework)."""
