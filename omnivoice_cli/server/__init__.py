"""The ways in as servers: `omnivoice serve` (OpenAI's speech API), Wyoming, MCP (the map: docs/design.md)."""
