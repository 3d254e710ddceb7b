"""The data: the corpus read from a file or the bundled plays, cut into per-worker batches."""
