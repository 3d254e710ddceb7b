"""CLI command groups, one module each; `transitsim.cli` wires them."""
