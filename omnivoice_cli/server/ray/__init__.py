"""`serve --ray`: the model replicas and the light front on Ray Serve (the map: docs/design.md)."""
