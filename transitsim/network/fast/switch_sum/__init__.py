"""The sum at one switch (in-network all-reduce): per-piece recurrence and max-plus form."""
