"""Traces: the format the trainer and the simulator share, the importers that make them, and
the Chrome-trace export of a simulated step."""
