"""Every section of `transitsim findings` for a set of runs, one table each (spec §14).

final_loss ... energy_claims   (a)-(c) losses, orderings, energies: sections.py
optics ... switch              (d), (e) the optics and the switch: optics.py
selections ... optics_oob      (f), (g) issue 14's questions: selection.py
local_sgd, local_sgd_claims    (h) issue 26's: communicate less often, or less? local_sgd.py
"""

from collections.abc import Callable

import pandas as pd

from transitsim.findings.claims import UNKNOWN  # noqa: F401  (a section's "cannot say")
from transitsim.findings.local_sgd import BUILDERS as LOCAL_SGD_BUILDERS
from transitsim.findings.optics import optics_claims, optics_table, switch_table
from transitsim.findings.published import FIXED_BAND_GAP_NATS
from transitsim.findings.runs import ConfigResult, RunScale, summarise
from transitsim.findings.sections import (
    energy_claims,
    energy_table,
    final_loss_table,
    ordering_claims,
    ordering_table,
)
from transitsim.findings.selection import BUILDERS
from transitsim.traces.format import Trace

SECTIONS = (
    "final_loss",
    "ordering",
    "ordering_claims",
    "energy",
    "energy_claims",
    "optics",
    "optics_claims",
    "switch",
    # issue 14 (transitsim.findings.selection): moving bands and the optics hypothesis
    "selections",
    "selection_claims",
    "optics_oob",
    "optics_oob_claims",
    # issue 26 (transitsim.findings.local_sgd): the local-SGD family against the every-step ones
    "local_sgd",
    "local_sgd_claims",
)


def findings(traces: list[Trace], gap_nats: float = FIXED_BAND_GAP_NATS) -> dict[str, pd.DataFrame]:
    """Every section's table for a set of runs; each scale's configurations are compared among
    themselves and the tables concatenated, scales in first-seen order."""
    scales: dict[RunScale, list[ConfigResult]] = {}
    for result in summarise(traces):
        scales.setdefault(result.scale, []).append(result)
    builders: dict[str, Callable[[list[ConfigResult], RunScale], pd.DataFrame]] = {
        "final_loss": final_loss_table,
        "ordering": ordering_table,
        "ordering_claims": lambda results, scale: ordering_claims(results, scale, gap_nats),
        "energy": energy_table,
        "energy_claims": energy_claims,
        "optics": optics_table,
        "optics_claims": optics_claims,
        "switch": switch_table,
        **BUILDERS,
        **LOCAL_SGD_BUILDERS,
    }
    return {
        section: pd.concat(
            [build(results, scale) for scale, results in scales.items()], ignore_index=True
        )
        for section, build in builders.items()
    }
