"""`omnivoice wyoming`: the Wyoming protocol server (Home Assistant) (the map: docs/design.md)."""
