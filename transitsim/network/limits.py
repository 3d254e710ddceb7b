"""Upper bounds on a network's size, shared by scenario validation, the CLI and the API.

Bigger networks take minutes to hours a step to simulate (a ring of 4,096 hosts already takes
seconds on the fast path): beyond these a value is a typo, and it is refused with the limit.
Kept apart from `transitsim.scenario` so that `transitsim collective` need not import pydantic,
pandas and YAML to check its flags.
"""

MAX_WORKERS = 65536  # a ring of 65,536 is timed lean (fast/ring/lean.py); see MAX_MESSAGES
MAX_DATACENTRES = 64  # a full mesh of WAN links: 2,016 cables
MAX_WAN_LINKS = 64
MAX_GPUS_PER_NODE = 1024
# A cluster fabric's hierarchical all-reduce runs one ring per rail across the nodes, in
# processor sharing on the links the rails share: 2 x workers x (nodes - 1) transfers an
# exchange, about 10 us each here. 4,096 GPUs in 512 nodes make 4.2 million (44 s for one
# exchange); 2,048 in 256 one million (23 s a replay, 165 s with overlap: a unit per bucket).
# 2**18 admits 1,024 GPUs in 128 nodes (5 s a replay, 34 s with overlap); the shipped cluster
# scenario (512 GPUs in 64 nodes) makes 64,512.
MAX_HIERARCHICAL_TRANSFERS = 1 << 18
# A schedule of messages held as arrays (the DES, hierarchical, the trees, a switch sum) past
# this is refused: 32 Mi is a ring all-reduce of 4,096 workers, minutes a step on the DES and
# gigabytes of arrays. Rings alone go further, on their fast path, without a schedule.
MAX_MESSAGES = 1 << 25
# The trees' schedule is planned transfer by transfer in Python (about 5 us each): past this
# (a double binary tree of 16,384 ranks in 64 chunks) it is refused.
MAX_TREE_TRANSFERS = 1 << 22
