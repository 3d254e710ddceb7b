"""transitsim: replay training traces through a network model to estimate time-to-loss.

The public API (what `dir(transitsim)` lists; each has its own docstring):

    simulate(traces, networks, targets=...)   traces x networks -> SimulationResult
    SimulationResult                          timeline, summary (= the CLI's summary.csv), verdict
    load_scenario(path) / run_scenario(s)     a scenario file, as `transitsim run` does it
    read_trace(path) / Trace                  one training run (Parquet + metadata)
    import_logs(paths, out_dir)               the published JSONL logs -> traces
    NetworkSpec, LinkSpec                     a network, in SI units
    network_preset(name) / preset_names()     the named networks ("8x200g-switch", ...)
    ComputeModel                              where a step's compute seconds come from
    ReplayRequest                             one replay's network and options
    verdict_sentences(summary, params)        the answer in words from a summary table
    TransitsimError                           every user error (one line)

Importing this package never imports torch (only `trainer` does), and loads the simulator and
pandas only when one of these is first used.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "simulate": "transitsim.simulation",
    "SimulationResult": "transitsim.simulation",
    "load_scenario": "transitsim.scenario",
    "run_scenario": "transitsim.run",
    "read_trace": "transitsim.traces.format",
    "Trace": "transitsim.traces.format",
    "import_logs": "transitsim.traces.experiment_logs",
    "NetworkSpec": "transitsim.network",
    "LinkSpec": "transitsim.network",
    "network_preset": "transitsim.scenario",
    "preset_names": "transitsim.scenario.presets",
    "ReplayRequest": "transitsim.replay.request",
    "ComputeModel": "transitsim.replay.compute",
    "verdict_sentences": "transitsim.analysis.verdict",
    "TransitsimError": "transitsim.base.errors",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    """The public names, imported on first use (so `import transitsim` stays light)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'transitsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
