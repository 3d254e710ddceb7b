"""Fast paths: the DES's timings by closed recurrences, max-plus forms and processor sharing.

One sub-package per collective (`ring/`, `switch_sum/`, `trees/`, `hierarchical/`), each over
`shared/`, what several of them use (link-fault delays, in-step shares of host endpoints, the
max-plus form, the compiled event heap, and `NotExact`: a fast path's "not exact, and why").
"""

from transitsim.network.fast.shared.maxplus import Linear
from transitsim.network.fast.shared.not_exact import NotExact

__all__ = ["Linear", "NotExact"]
