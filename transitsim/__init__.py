"""transitsim: replay training traces through a network model to estimate time-to-loss.

Importing this package never imports torch; only the `trainer` package needs it.
"""

__version__ = "0.1.0"
