"""Real Kineto traces written by someone else (tests/fixtures/kineto/README.md) import to traces
whose per-step payload, wall time and bucket launches agree with the raw events, computed here
independently of the reader (plain json over the file, no transitsim code)."""

import functools
import gzip
import json
import re
from pathlib import Path

import pytest

from transitsim.traces.format import read_trace
from transitsim.traces.kineto import collective_kind, read_rank_profile
from transitsim.traces.profile_import import ImportOptions, build_trace, import_profile

HERE = Path(__file__).parent
# Committed here, or (where a session may not commit others' files) in the shared folder beside
# the checkout: the same files either way.
PLACES = [HERE / "fixtures" / "kineto", HERE.parent.parent / "shared" / "kineto"]
NEW_FORMAT = "hta-nccl-2xa100-rank0.json.gz"  # record_param_comms with Collective name, 2 GPUs
OLD_FORMAT = "hta-nccl-8xa100-rank3.json.gz"  # nccl:* ops with shapes only, rank 3 of 8
TWO_RANKS = ("hta-nccl-128gpu-rank0.json.gz", "hta-nccl-128gpu-rank1.json.gz")  # one 128-GPU job
CPU_GLOO = "hta-gloo-cpu-rank34.json.gz"  # CPU-only gloo job, rank 34 of 300


def fixture(name: str) -> Path:
    for place in PLACES:
        if (place / name).is_file():
            return place / name
    pytest.skip(f"real Kineto trace {name} not present (tests/fixtures/kineto/README.md)")


@functools.lru_cache(maxsize=8)
def raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)["traceEvents"]


def spans(events: list[dict]) -> list[dict]:
    found = [e for e in events if re.fullmatch(r"ProfilerStep#\d+", str(e.get("name", "")))]
    return sorted(found, key=lambda e: e["ts"])


def allreduce_bytes_by_span(events: list[dict]) -> list[int]:
    """Sum of all-reduce message bytes launched in each span, from the raw events: newer traces'
    record_param_comms (In msg nelems x dtype), else the host nccl:/gloo: op's shapes."""
    size = {"Float": 4, "float": 4, "c10::Half": 2, "Half": 2, "BFloat16": 2}
    gpu = {"kernel", "gpu_user_annotation", "gpu_memcpy", "gpu_memset"}
    rpcs = [
        e
        for e in events
        if e.get("name") == "record_param_comms" and e["args"].get("Collective name") == "allreduce"
    ]
    ops = [
        e
        for e in events
        if e.get("cat") not in gpu and str(e.get("name")) in ("nccl:all_reduce", "gloo:all_reduce")
    ]
    totals = []
    for span in spans(events):
        lo, hi = span["ts"], span["ts"] + span["dur"]
        if rpcs:
            inside = [e for e in rpcs if lo <= e["ts"] <= hi]
            sizes = [e["args"]["In msg nelems"] * size[e["args"]["dtype"]] for e in inside]
            totals.append(sum(sizes))
        else:
            # the op's own span start: gloo's worker thread may start it after the step's launch
            total = 0
            for e in ops:
                if lo <= e["ts"] <= hi:
                    (dims,) = e["args"]["Input Dims"]
                    (kind,) = e["args"]["Input type"]
                    count = 1
                    for d in dims:
                        count *= d
                    total += count * size[kind]
            totals.append(total)
    return totals


@pytest.mark.parametrize("name", [NEW_FORMAT, OLD_FORMAT, TWO_RANKS[0], CPU_GLOO])
def test_payload_and_wall_time_of_every_profiled_step_match_the_raw_events(name, tmp_path) -> None:
    path = fixture(name)
    events = raw_events(path)
    result = import_profile([path], None, tmp_path, ImportOptions(name="real"))
    trace = read_trace(result.trace.path)
    expected = allreduce_bytes_by_span(events)
    assert all(expected), "every profiled step of these jobs all-reduces"
    assert trace.steps["payload_bytes"].tolist() == expected
    walls = [span["dur"] * 1e-6 for span in spans(events)]
    assert trace.steps["wall_s"].tolist() == pytest.approx(walls, rel=1e-12)
    assert (trace.steps["collective"] == "all_reduce").all()
    assert trace.workers == {NEW_FORMAT: 2, OLD_FORMAT: 8, TWO_RANKS[0]: 128, CPU_GLOO: 300}[name]
    # compute + the wait on the exchange + optimiser = the step, per profiled step
    for row in trace.meta["profile"]["steps"]:
        total = row["compute_s"] + row["waited_s"] + row["update_s"]
        assert total == pytest.approx(row["wall_s"], abs=1e-6)
        assert row["exposed_s"] + row["hidden_s"] == pytest.approx(row["comm_s"], abs=1e-9)


def test_backward_profile_lists_the_bucket_launches_in_order() -> None:
    path = fixture(NEW_FORMAT)
    events = raw_events(path)
    result = build_trace([path], None, ImportOptions(name="real"))
    profile = result.trace.meta["backward_profile"]
    # DDP's registration order lists buckets last-launched first: reversed, the launch order
    launched = list(reversed(profile["tensors"]))
    readies = [t["ready"] for t in launched]
    assert readies == sorted(readies) and len(set(readies)) == len(readies)
    assert 0 < readies[0] and readies[-1] <= 1
    # the element counts, in launch order, are each step's all-reduces (raw record_param_comms)
    first = spans(events)[0]
    rpcs = sorted(
        (
            e
            for e in events
            if e.get("name") == "record_param_comms"
            and e["args"].get("Collective name") == "allreduce"
            and first["ts"] <= e["ts"] <= first["ts"] + first["dur"]
        ),
        key=lambda e: e["ts"],
    )
    assert [t["numel"] for t in launched] == [e["args"]["In msg nelems"] for e in rpcs]
    assert len(launched) == 5
    assert 0 < profile["backward_share"] < 1


def test_two_ranks_of_one_job_give_each_ranks_step_times_and_fitted_stragglers(tmp_path) -> None:
    paths = [fixture(name) for name in TWO_RANKS]
    result = import_profile(paths, None, tmp_path, ImportOptions(name="job"))
    profile = result.trace.meta["profile"]
    assert profile["ranks"] == [0, 1]
    for step in profile["steps"]:
        per_rank = step["per_rank"]
        assert set(per_rank) == {"0", "1"}
        slowest = max(per_rank.values(), key=lambda s: s["compute_s"])
        assert step["compute_s"] == slowest["compute_s"]  # a synchronous step waits for it
    walls = {r: [s["per_rank"][r]["wall_s"] for s in profile["steps"]] for r in ("0", "1")}
    rank1 = [span["dur"] * 1e-6 for span in spans(raw_events(paths[1]))]
    assert walls["1"] == pytest.approx(rank1, rel=1e-12)
    fitted = result.stragglers
    assert fitted is not None and fitted["scale"] > 0 and len(fitted["worker_factors"]) == 2
    assert max(fitted["worker_factors"]) == 1.0  # the slowest rank: the trace's compute
    # the other collectives of the job are named, not replayed
    assert any("all_to_all" in note for note in result.notes)


def test_old_and_new_formats_find_the_same_collectives_as_their_gpu_kernels() -> None:
    """Each host-side all-reduce has one NCCL all-reduce kernel on the GPU (new format: with the
    same element count in its args), so nothing is counted twice or missed."""
    path = fixture(NEW_FORMAT)
    events = raw_events(path)
    kernels = [
        e
        for e in events
        if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")
    ]
    rank = read_rank_profile(path)
    host = [c for s in rank.steps for c in s.collectives if c.kind == "all_reduce"]
    assert sorted(c.elements for c in host) == sorted(e["args"]["In msg nelems"] for e in kernels)


def test_cpu_only_gloo_trace_says_what_it_could_not_read() -> None:
    rank = read_rank_profile(fixture(CPU_GLOO))
    assert not rank.gpu and rank.backend == "gloo"
    assert any("no backward profile" in note for note in rank.notes)
    (step,) = rank.steps
    assert step.exposed_s == step.comm_s > 0  # nothing computes while gloo all-reduces


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("nccl:all_reduce", "all_reduce"),
        ("c10d::allreduce_", "all_reduce"),
        ("allreduce", "all_reduce"),
        ("nccl:_all_gather_base", "all_gather"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("nccl:reduce_scatter", "reduce_scatter"),
        ("gloo:all_to_all", "all_to_all"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("nccl:broadcast", "broadcast"),
        ("nccl:send", "send_recv"),
        ("c10d::wait", None),
        ("nccl:", None),
    ],
)
def test_collective_names_in_every_spelling(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind
