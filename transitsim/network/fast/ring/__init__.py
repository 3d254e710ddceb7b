"""The ring all-reduce and all-gather: per-phase recurrence, lean checkpoints, max-plus form."""
