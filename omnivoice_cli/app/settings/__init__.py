"""The one settings schema: what a setting is, its values, the layers they come from, presets, typed reads (the map: docs/design.md)."""
