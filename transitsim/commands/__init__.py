"""CLI command groups, one module each; `transitsim.cli` wires them.

Text every command's help shares lives here, so that a command module can name it without
importing pandas (a cold `transitsim collective` should load only what it runs)."""

QUIET_HELP = "Only the result: no titles, notes, warnings or progress (errors still print)."
