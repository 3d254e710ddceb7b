"""A run's results as a person reads them on a terminal."""
