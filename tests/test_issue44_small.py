"""Issue 44 item 6, the small ones: the hierarchical replay says its straggler steps' wire /
wait split is approximate, numba's compiling is announced on stderr once, and a host that sets
the pace is named as the bottleneck."""

import os
import subprocess
import sys

import pytest
from test_replay import make_trace
from test_replay_stragglers import TWO_DC

from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.network.spec import HostSpec
from transitsim.replay.compute import Stragglers
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest


def test_the_hierarchical_straggler_split_is_called_approximate_in_the_notes(tmp_path):
    steps = [1, 2, 3, 4, 5, 6]
    trace = make_trace(tmp_path, steps=steps, rows="every_step")
    stragglers = Stragglers(distribution="exponential", scale=0.05)
    notes = {}
    for algo in ("hierarchical", "ring_allreduce"):
        request = ReplayRequest(TWO_DC, collective=algo, stragglers=stragglers, seed=1)
        notes[algo] = replay(trace, request).timeline.attrs["notes"]
    assert any(n.startswith("approximate: the wire / wait split") for n in notes["hierarchical"])
    assert not any(n.startswith("approximate") for n in notes["ring_allreduce"])  # exact there


def test_numba_compiling_is_announced_once_on_stderr(tmp_path):
    """A real compilation (an empty cache) prints the notice once; loading from the cache
    prints nothing."""
    script = tmp_path / "kernels.py"  # numba caches only functions defined in a file
    script.write_text(
        "import transitsim.network.fast.shared.jit as j\n"
        "f = j.jit(lambda x: x + 1)\n"
        "g = j.jit(lambda x: x * 2)\n"
        "print(f(1) + g(2))\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    for run, notices in ((1, 1), (2, 0)):  # compiled, then loaded from the cache
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "6"
        assert done.stderr.count("compiling fast kernels (once") == notices, run


@pytest.mark.parametrize(("host_gbps", "named"), [(300, "host"), (390, "host"), (500, "link")])
def test_a_host_that_sets_the_pace_is_the_bottleneck(host_gbps: int, named: str):
    """Two ranks a host on 200 Gb/s links: a host of 300 or 390 Gb/s gives each rank 150 or
    195, below its link, and is what the ring waits on; one of 500 (250 a rank) is not. Until
    issue 44 the host was named only below half the link's rate (200 Gb/s a host here): the
    link's serial time was charged to the link even where the host set the pace."""
    host = HostSpec(rate_bps=host_gbps * 1e9, ranks_per_host=2)
    network = NetworkSpec("sw", "switch", 8, LinkSpec(200e9), host=host)
    for method in ("fast", "des"):
        result = simulate_exchange(network, Exchange("ring_allreduce", 8 << 20), method=method)
        assert (result.method, result.bottleneck) == (method, named)
