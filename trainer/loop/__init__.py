"""The training loop and its records: steps, checkpoints, backward profiles, the trace it writes."""
