"""A replica per site (issue 26, item 2): each datacentre one data-parallel replica.

By hand: every step each site's workers compute 1/(W/D) of the replica's batch and all-reduce
the dense gradient over their own LAN (the sites in parallel, each as a 2-worker switch network
of its own); a sync step then adds the outer exchange across the WAN on the whole network.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from test_replay import DENSE_BYTES, RACK, make_trace

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, simulate_exchange
from transitsim.network.closed_form import closed_form_time_s
from transitsim.network.spec import LinkSpec, NetworkSpec
from transitsim.replay.replay import check_replay, replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import read_trace, write_trace

SYNC_BYTES = 2_000_000
STEPS, EVERY = 20, 10
COMPUTE_S, COMPRESS_S = 0.05, 0.002
TWO_SITES = NetworkSpec(
    name="2dc",
    topology="datacentres",
    workers=4,
    datacentres=2,
    host_link=RACK,
    wan_link=LinkSpec(rate_bps=10e9, length_m=1e5),
)
# one site as a network built by hand: its 2 hosts on one switch, the same host links
ONE_SITE = NetworkSpec(name="site", topology="switch", workers=2, host_link=RACK)


def _site_trace(tmp_path, replicas: int = 2, variant: str = "H"):
    """An H trace of `replicas` replicas (one per site), syncing every EVERY steps."""
    payload = [SYNC_BYTES if step % EVERY == 0 else 0 for step in range(1, STEPS + 1)]
    trace = make_trace(
        tmp_path,
        variant=variant,
        steps=list(range(1, STEPS + 1)),
        payload_bytes=payload,
        name=f"{variant}-sites{replicas}-s0",
    )
    meta = {**trace.meta, "workers": replicas, "local_sgd": {"replicas": replicas}}
    path = tmp_path / f"{variant}-sites{replicas}-s0.parquet"
    return read_trace(write_trace(path, trace.steps, meta))


def test_every_step_all_reduces_inside_each_site_and_syncs_cross_the_wan(tmp_path):
    trace = _site_trace(tmp_path)
    timeline = replay(trace, ReplayRequest(TWO_SITES, replicas="site")).timeline
    lan = closed_form_time_s(ONE_SITE, Exchange("ring_allreduce", DENSE_BYTES))
    inner = COMPUTE_S / 2 + lan + COMPRESS_S  # 2 workers a site: each computes half the batch
    syncs = timeline["step"] % EVERY == 0
    np.testing.assert_allclose(timeline.loc[~syncs, "step_s"], inner, rtol=1e-9)
    outer = simulate_exchange(TWO_SITES, Exchange("hierarchical", SYNC_BYTES)).time_s
    np.testing.assert_allclose(timeline.loc[syncs, "step_s"], inner + outer, rtol=1e-9)
    np.testing.assert_allclose(timeline.loc[~syncs, "exposed_s"], lan, rtol=1e-9)
    parts = timeline[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s", "update_s"]]
    np.testing.assert_allclose(parts.sum(axis=1), timeline["step_s"], rtol=1e-9)
    np.testing.assert_allclose(timeline["compress_s"], COMPRESS_S)  # the trace's, unchanged
    # the intra-site dense gradient every step, the sync's payload on sync steps
    assert timeline["payload_bytes"].iloc[-1] == STEPS * DENSE_BYTES + 2 * SYNC_BYTES
    assert not timeline["extrapolated"].any()  # 2 replicas of the same tokens, not 4 workers


def test_the_per_worker_layout_of_the_same_trace_sends_nothing_on_inner_steps(tmp_path):
    trace = _site_trace(tmp_path)
    worker = replay(
        trace, ReplayRequest(TWO_SITES)
    ).timeline  # replicas worker: 2-replica trace on 4 workers
    assert worker["extrapolated"].all()
    inner = worker["step"] % EVERY != 0
    np.testing.assert_allclose(worker.loc[inner, "step_s"], COMPUTE_S + COMPRESS_S, rtol=1e-12)
    assert worker["payload_bytes"].iloc[-1] == 2 * SYNC_BYTES


def test_the_lan_carries_both_exchanges_and_the_wan_only_the_outer_sync(tmp_path):
    trace = _site_trace(tmp_path)
    site = replay(trace, ReplayRequest(TWO_SITES, replicas="site")).link_stats.set_index("link")
    worker = replay(trace, ReplayRequest(TWO_SITES)).link_stats.set_index("link")
    assert site.loc["dc0->dc1", "bytes"] == pytest.approx(worker.loc["dc0->dc1", "bytes"])
    one_site = simulate_exchange(ONE_SITE, Exchange("ring_allreduce", DENSE_BYTES)).link_stats
    lan_per_step = float(one_site.set_index("link").loc["h0->sw", "bytes"])
    # host 2 is site 1's first host: its uplink carries the site's ring every step, plus the sync
    for host in ("h0", "h2"):
        uplink = next(name for name in site.index if name.startswith(f"{host}->"))
        extra = site.loc[uplink, "bytes"] - worker.loc[uplink, "bytes"]
        assert extra == pytest.approx(STEPS * lan_per_step, rel=1e-9)


def test_overlap_hides_part_of_the_intra_site_all_reduce_behind_backward(tmp_path):
    trace = _site_trace(tmp_path)
    plain = replay(trace, ReplayRequest(TWO_SITES, replicas="site")).timeline
    overlapped = replay(
        trace, ReplayRequest(TWO_SITES, replicas="site", overlap="buckets")
    ).timeline
    assert overlapped["time_s"].iloc[-1] <= plain["time_s"].iloc[-1]
    assert (overlapped["hidden_s"] >= 0).all()
    parts = overlapped[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s", "update_s"]]
    np.testing.assert_allclose(parts.sum(axis=1), overlapped["step_s"], rtol=1e-9)


@pytest.mark.parametrize(
    ("replicas", "network", "message"),
    [
        (3, TWO_SITES, "has 3 replicas but network '2dc' has 2 datacentres"),
        (2, dataclasses.replace(TWO_SITES, topology="switch", datacentres=1), "no datacentres"),
        (2, dataclasses.replace(TWO_SITES, workers=5), "unevenly"),
    ],
)
def test_a_layout_that_cannot_place_a_replica_per_site_is_one_line(
    tmp_path, replicas, network, message
):
    trace = _site_trace(tmp_path, replicas=replicas)
    for call in (replay, check_replay):
        with pytest.raises(TransitsimError, match=message) as caught:
            call(trace, ReplayRequest(network, replicas="site"))
        assert "\n" not in str(caught.value)


def test_a_trace_that_is_not_local_sgd_has_no_site_layout(tmp_path):
    trace = make_trace(tmp_path)  # A
    with pytest.raises(TransitsimError, match="not a local-SGD trace"):
        replay(trace, ReplayRequest(TWO_SITES, replicas="site"))
    with pytest.raises(TransitsimError, match="replicas 'sites' is not one of worker, site"):
        replay(trace, ReplayRequest(TWO_SITES, replicas="sites"))


def test_a_scenario_entry_says_replicas_site(tmp_path):
    from transitsim.run import scenario_jobs
    from transitsim.scenario import load_scenario
    from transitsim.traces.format import read_trace as read

    site = _site_trace(tmp_path)
    plain = make_trace(tmp_path)
    text = (
        "traces:\n"
        f"  - {{path: {site.path.name}, replicas: site}}\n"
        f"  - {plain.path.name}\n"
        "networks:\n"
        "  - {name: 2dc, topology: datacentres, workers: 4, datacentres: 2,\n"
        "     host_link: {rate: 100 Gb/s}, wan_link: {rate: 10 Gb/s, length: 100 km}}\n"
        "targets: [4.0]\n"
    )
    path = tmp_path / "sites.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    traces = {trace.name: read(trace.path) for trace in scenario.trace_files}
    jobs = scenario_jobs(scenario, traces)
    assert {job.trace_name: job.request.replicas for job in jobs} == {
        site.name: "site",
        plain.name: "worker",
    }
    assert [job.request.record_step for job in jobs] == [
        False,
        True,
    ]  # step events: the as-trained one
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("replicas: site", "replicas: sites"))
    with pytest.raises(TransitsimError, match=r"traces\[0\]\.replicas") as caught:
        load_scenario(bad)
    assert "\n" not in str(caught.value)


def test_the_recorded_site_traces_replay_as_a_replica_per_site():
    """The committed traces/shakespeare-mini-sites runs: 2 replicas of batch 16, the same 64
    sequences a step as shakespeare-mini's 8 workers of 4."""
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "traces" / "shakespeare-mini-sites"
    paths = sorted(folder.glob("*.parquet"))
    assert len(paths) == 12
    for path in paths[:1]:
        trace = read_trace(path)
        assert trace.workers == 2 and trace.meta["batch"] == 16
        timeline = replay(trace, ReplayRequest(TWO_SITES, replicas="site")).timeline
        assert isinstance(timeline, pd.DataFrame) and len(timeline) == len(trace.steps)
        assert (timeline["wire_s"] > 0).all()  # every step all-reduces inside the sites
