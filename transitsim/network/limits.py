"""Upper bounds on a network's size, shared by scenario validation and the CLI.

Bigger networks take minutes to hours a step to simulate (a ring of 4,096 hosts already takes
seconds on the fast path): beyond these a value is a typo, and it is refused with the limit.
Kept apart from `transitsim.scenario` so that `transitsim collective` need not import pydantic,
pandas and YAML to check its flags.
"""

MAX_WORKERS = 4096
MAX_DATACENTRES = 64  # a full mesh of WAN links: 2,016 cables
