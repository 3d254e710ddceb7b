"""The reference for step.py: the same overlapped step as SimPy processes, per worker.

Each worker has a GPU process (forward, then the backward in segments between the units' ready
points, compressing each unit as it is ready) that hands units to its communication process
through a store; the communication process issues them in order. A unit's exchange starts when
every worker has issued it: the network floor's DES times it from their issue times and each
worker's process resumes at its own finish. Slow and literal on purpose: the recurrence in
step.py is tested against it.
"""

import numpy as np
import simpy

from transitsim.network import Exchange, NetworkSpec, simulate_exchange
from transitsim.overlap.plan import Unit


def reference_step_s(
    units: list[Unit],
    compute_w_s: np.ndarray,
    compress_s: float,
    backward_share: float,
    network: NetworkSpec,
    exchanges: list[Exchange],
) -> float:
    """When the last worker has every unit and a free GPU (step-relative seconds)."""
    env = simpy.Environment()
    workers = network.workers
    stores = [simpy.Store(env) for _ in range(workers)]
    issued: list[list[simpy.Event]] = [[env.event() for _ in range(workers)] for _ in units]
    done: list[list[simpy.Event]] = [[env.event() for _ in range(workers)] for _ in units]

    def gpu(w: int):
        compute = float(compute_w_s[w])
        yield env.timeout(compute * (1.0 - backward_share))
        at = 0.0
        for u, unit in enumerate(units):
            yield env.timeout(max(unit.ready - at, 0.0) * compute * backward_share)
            at = max(at, unit.ready)
            yield env.timeout(compress_s * unit.compress_share)
            yield stores[w].put(u)
        yield env.timeout((1.0 - at) * compute * backward_share)

    def stream(w: int):
        for _ in units:
            u = yield stores[w].get()
            issued[u][w].succeed(env.now)
            yield done[u][w]

    def collective(u: int):
        starts = yield simpy.AllOf(env, issued[u])
        start_s = np.array([starts[e] for e in issued[u]])
        result = simulate_exchange(network, exchanges[u], start_s=start_s, method="des")
        for w in range(workers):
            env.process(_finish_at(env, done[u][w], float(result.finish_s[w])))

    procs = [env.process(gpu(w)) for w in range(workers)]
    procs += [env.process(stream(w)) for w in range(workers)]
    for u in range(len(units)):
        env.process(collective(u))
    env.run(simpy.AllOf(env, procs))
    return env.now


def _finish_at(env: simpy.Environment, event: simpy.Event, at_s: float):
    if at_s < env.now:
        raise AssertionError("an exchange finished before it started")
    yield env.timeout(at_s - env.now)
    event.succeed()
