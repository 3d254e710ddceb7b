"""Hierarchical all-reduce: ring stages around a processor-shared exchange across groups."""
