"""transitsim: replay training traces through a network model to estimate time-to-loss.

Importing this package never imports torch; only the `trainer` package needs it.
"""

__version__ = "0.1.0"

_LAZY = {"simulate": "simulate", "SimulationResult": "SimulationResult"}


def __getattr__(name: str):
    """`transitsim.simulate` without importing pandas and the simulator on `import transitsim`."""
    if name not in _LAZY:
        raise AttributeError(f"module 'transitsim' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module("transitsim.simulation"), _LAZY[name])
    globals()[name] = value
    return value
