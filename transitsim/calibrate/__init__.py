"""Calibration: measured collective tables (nccl-tests output, the testbed's own) fitted to a
network that transitsim's model makes reproduce them, written as a network YAML.

`nccl_tests` reads nccl-tests' standard output as real logs hold it (`nccl_rows`: the lines
under any prefix and the columns of any version; `nccl_ranks`: the rank count and the test read
off busbw / algbw where the log does not say them), `testbed_tables` the testbed's measured table,
`model` is what transitsim predicts for one row on the network being fitted, `nccl_fit` the
default fit (the NCCL mode's protocols, channels and switch points, found by `nccl_search`),
`fit` the older one (size regimes of two parameters each), `accuracy` what a fit predicts (every
second size held out, alpha-beta beside), `network_file` the YAML that replay, `collective -n`
and scenarios read. Imports only the network model and the ground (an import-linter layer).
"""

from transitsim.calibrate.fit import Calibration, Regime, calibrate
from transitsim.calibrate.model import ALGOS, Link, flat_network
from transitsim.calibrate.nccl_tests import COLLECTIVES, Table, parse_nccl_tests, read_nccl_tests

__all__ = [
    "ALGOS",
    "COLLECTIVES",
    "Calibration",
    "Link",
    "Regime",
    "Table",
    "calibrate",
    "flat_network",
    "parse_nccl_tests",
    "read_nccl_tests",
]
