"""Replay: one trace through one network, giving the simulated wall-clock of every step."""
