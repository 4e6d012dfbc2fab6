"""The face's helpers: typer options from the schema, help layout, progress display (the map: docs/design.md)."""
