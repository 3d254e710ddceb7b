"""The torch trainer that produces transitsim traces (needs the `train` extra: torch)."""
