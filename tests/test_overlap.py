"""Overlap of exchange and backward (transitsim/overlap): plans, hand-derived steps, the DES."""

import numpy as np
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.overlap import (
    DDP_BUCKET_BYTES,
    BackwardProfile,
    Unit,
    UnitTiming,
    backward_profile,
    overlapped_step,
    plan_units,
)
from transitsim.overlap.plan import single_unit
from transitsim.overlap.reference import reference_step_s

MB = 1_000_000


def fixed_exchange(alpha_s: float, rate_bytes_per_s: float):
    """An exchange that takes alpha + bytes / rate from its last worker's start."""

    def run(unit: Unit, start_s: np.ndarray) -> UnitTiming:
        took = alpha_s + unit.payload_bytes / rate_bytes_per_s
        finish = np.full(len(start_s), float(np.max(start_s)) + took)
        return UnitTiming(finish, 0.0, took, 0.0, unit.payload_bytes, 1)

    return run


# --- hand-derived steps -----------------------------------------------------------------------

C = 0.3  # compute: forward 0.1, backward 0.2 at the default 2/3 share
SHARE = 2.0 / 3.0
WORKERS = np.full(4, C)


def test_one_bucket_is_compute_then_exchange():
    units = single_unit(100 * MB, 100 * MB)
    step = overlapped_step(units, WORKERS, 0.0, SHARE, fixed_exchange(0.0, 1e9))
    assert step.finish_s == pytest.approx(C + 0.1)
    assert step.exchange_s == pytest.approx(0.1)


def test_two_buckets_exchange_shorter_than_backward_hides_the_first():
    # bucket 1 ready half-way through backward (t = 0.1 + 0.1), takes 0.05 < the 0.1 left
    units = [Unit(0.5, 50 * MB, 50 * MB, 0.5), Unit(1.0, 30 * MB, 30 * MB, 0.5)]
    step = overlapped_step(units, WORKERS, 0.0, SHARE, fixed_exchange(0.0, 1e9))
    assert step.start_s == pytest.approx((0.2, 0.3))
    assert step.finish_s == pytest.approx(C + 0.03)  # only the last bucket is exposed
    assert step.exchange_s == pytest.approx(0.08)


def test_two_buckets_exchange_longer_than_backward_chains_them():
    # bucket 1 ready at 0.2, takes 0.5 > 0.1 left: bucket 2 waits for it, not for backward
    units = [Unit(0.5, 500 * MB, 500 * MB, 0.5), Unit(1.0, 300 * MB, 300 * MB, 0.5)]
    step = overlapped_step(units, WORKERS, 0.0, SHARE, fixed_exchange(0.0, 1e9))
    assert step.start_s == pytest.approx((0.2, 0.7))
    assert step.finish_s == pytest.approx(0.2 + 0.5 + 0.3)
    # max(compute, exchange)-style: never less than either, never more than their sum
    assert max(C, 0.8) <= step.finish_s <= C + 0.8


def test_compression_runs_on_the_gpu_and_delays_the_rest_of_backward():
    # DeMo: unit 1 compressed when ready (0.2 + 0.5 * 0.04), its values then go out
    units = [Unit(0.5, 50 * MB, 5 * MB, 0.5), Unit(1.0, 50 * MB, 5 * MB, 0.5)]
    step = overlapped_step(units, WORKERS, 0.04, SHARE, fixed_exchange(0.0, 1e9))
    assert step.start_s == pytest.approx((0.22, 0.34))
    assert step.gpu_s == pytest.approx(C + 0.04)
    assert step.finish_s == pytest.approx(0.34 + 0.005)


def test_a_bucket_ready_early_still_waits_for_its_predecessor():
    units = [Unit(0.9, 10 * MB, 10 * MB, 0.5), Unit(0.2, 10 * MB, 10 * MB, 0.5)]
    step = overlapped_step(units, WORKERS, 0.0, SHARE, fixed_exchange(0.0, 1e9))
    assert step.start_s[1] == pytest.approx(step.end_s[0])


# --- plans ------------------------------------------------------------------------------------


def measured(numel, ready, share=0.6):
    return BackwardProfile(tuple(numel), tuple(ready), share, measured=True)


def test_ddp_buckets_pack_reverse_registration_order_with_a_small_first_bucket():
    # tensors of 2, 2, 2, 2 MB (bytes = numel here); ready last-registered first
    profile = measured([2 * MB] * 4, [0.9, 0.6, 0.3, 0.1])
    units = plan_units(
        profile, 8 * MB, 8 * MB, dense=True, bucket_bytes=4 * MB, first_bucket_bytes=1 * MB
    )
    assert [u.payload_bytes for u in units] == [2 * MB, 4 * MB, 2 * MB]
    assert [u.ready for u in units] == [0.1, 0.6, 0.9]
    assert sum(u.compress_share for u in units) == pytest.approx(1.0)


def test_demo_units_are_tensors_in_ready_order_with_payload_by_size():
    profile = measured([1000, 3000], [0.8, 0.2])
    units = plan_units(profile, 8000, 400, dense=False)
    assert [u.ready for u in units] == [0.2, 0.8]
    assert [u.payload_bytes for u in units] == [300, 100]
    assert [u.dense_bytes for u in units] == [6000, 2000]
    assert [u.compress_share for u in units] == pytest.approx([0.75, 0.25])


def test_uniform_assumption_cuts_ddp_sized_pieces_ready_by_their_bytes():
    profile = backward_profile({"name": "x"})
    assert not profile.measured and profile.backward_share == pytest.approx(2 / 3)
    dense = 3 * DDP_BUCKET_BYTES
    units = plan_units(profile, dense, dense, dense=True)
    assert [u.payload_bytes for u in units] == [
        2**20,
        DDP_BUCKET_BYTES,
        DDP_BUCKET_BYTES,
        DDP_BUCKET_BYTES - 2**20,
    ]
    assert units[-1].ready == 1.0
    assert sum(u.payload_bytes for u in units) == dense


def test_empty_payloads_fold_into_a_neighbour():
    profile = measured([1, 1, 10**6], [0.1, 0.2, 0.9])
    units = plan_units(profile, 10**6, 10, dense=False)
    assert sum(u.payload_bytes for u in units) == 10
    assert all(u.payload_bytes > 0 for u in units)


def test_a_malformed_profile_is_one_clear_error():
    with pytest.raises(TransitsimError, match="backward_profile"):
        backward_profile({"name": "x", "backward_profile": {"tensors": [{"numel": 3}]}})
    with pytest.raises(TransitsimError, match="ready fractions"):
        backward_profile(
            {
                "name": "x",
                "backward_profile": {
                    "tensors": [{"numel": 3, "ready": 1.5}],
                    "backward_share": 0.6,
                },
            }
        )


# --- against the DES ---------------------------------------------------------------------------

RING = NetworkSpec(
    name="rack", topology="switch", workers=4, host_link=LinkSpec(rate_bps=10e9, latency_s=5e-6)
)


def floor_exchange(network, algo, method):
    def run(unit: Unit, start_s: np.ndarray) -> UnitTiming:
        result = simulate_exchange(
            network, Exchange(algo, unit.payload_bytes), start_s=start_s, method=method
        )
        return UnitTiming(
            result.finish_s,
            result.transform_s,
            result.wire_s,
            result.wait_s,
            float(np.mean(result.bytes_sent)),
            result.events,
        )

    return run


@pytest.mark.parametrize("compute_s", [0.002, 0.05])  # exchange longer / shorter than backward
@pytest.mark.parametrize("algo", ["ring_allreduce", "ring_allgather"])
def test_recurrence_on_the_fast_path_equals_simpy_processes_on_the_des(compute_s, algo):
    profile = measured([40_000, 30_000, 20_000, 10_000], [0.95, 0.7, 0.4, 0.15])
    units = plan_units(
        profile, 2_000_000, 2_000_000, dense=True, bucket_bytes=600_000, first_bucket_bytes=1
    )
    assert len(units) >= 3
    compute = np.array([compute_s, compute_s * 1.3, compute_s, compute_s * 0.9])
    fast = overlapped_step(units, compute, 1e-4, 0.6, floor_exchange(RING, algo, "fast"))
    exchanges = [Exchange(algo, u.payload_bytes) for u in units]
    des = reference_step_s(units, compute, 1e-4, 0.6, RING, exchanges)
    assert fast.finish_s == pytest.approx(des, rel=1e-9)
    single = overlapped_step(
        single_unit(2_000_000, 2_000_000), compute, 1e-4, 0.6, floor_exchange(RING, algo, "fast")
    )
    if compute_s > 0.01:  # backward long enough to hide all but the last bucket
        assert fast.finish_s < single.finish_s
