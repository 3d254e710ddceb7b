"""A real network to hold the simulator against: namespaces, a bridge, tc tbf, gloo over TCP.

netns.py builds and tears down the testbed (root, iproute2); worker.py is the torch.distributed
rank run inside each host namespace (the only module here that imports torch); measure.py runs
the grid; gloo_algos.py says which algorithm gloo runs; model.py replays each point through
transitsim and fits the one free parameter; plot.py draws the comparison. Command:
`transitsim testbed run|compare|down`; write-up: docs/testbed.md.
"""
