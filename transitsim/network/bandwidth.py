"""Algorithm and bus bandwidth of a collective, as nccl-tests reports them.

algbw = data / time, where data is what each rank ends up with that it had to be sent: the
payload for an all-reduce, all ranks' payloads for an all-gather. busbw scales algbw by the
share of the data each rank's link must carry in an optimal algorithm, so that it is comparable
with the link's own rate whatever the number of ranks: 2(n-1)/n for an all-reduce (ring, tree,
hierarchical or in-switch alike), (n-1)/n for an all-gather.
"""

ALL_REDUCES = ("ring_allreduce", "hierarchical", "switch_sum", "tree", "double_binary_tree")


def algorithm_bandwidth_bps(algo: str, workers: int, payload_bytes: float, time_s: float) -> float:
    """Bits per second of algorithm bandwidth (0 for an exchange that took no time)."""
    data = payload_bytes if algo in ALL_REDUCES else workers * payload_bytes
    return 8.0 * data / time_s if time_s > 0 else 0.0


def bus_bandwidth_bps(algo: str, workers: int, payload_bytes: float, time_s: float) -> float:
    """Bits per second of bus bandwidth: algbw times nccl-tests' factor for the collective."""
    factor = 2.0 * (workers - 1) / workers if algo in ALL_REDUCES else (workers - 1) / workers
    return algorithm_bandwidth_bps(algo, workers, payload_bytes, time_s) * factor
