"""The face's helpers: typer options from the schema, help layout, progress display (rich)."""
