"""Hostile profiles for `traces import --profile` (issue 45): every element type PyTorch profiles
has its size, step spans that nest or overlap are resolved or refused, sizes beyond any model
are one line, and a profile is read within bounds of memory and time."""

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest
from cli_run import assert_refused, run_cli
from test_byo_cli import make_profile, write_profile

from transitsim.base.errors import TransitsimError
from transitsim.traces import kineto_events
from transitsim.traces.dtypes import element_size
from transitsim.traces.format import read_trace
from transitsim.traces.kineto import read_rank_profile

# Every c10::ScalarType as the profiler names it: the C++ type's demangled name (`Input type`)
# and the ScalarType's own name (record_param_comms' `dtype`), with its bytes per element.
SCALAR_TYPES = {
    ("unsigned char", "Byte"): 1, ("signed char", "Char"): 1, ("short int", "Short"): 2,
    ("int", "Int"): 4, ("long int", "Long"): 8, ("c10::Half", "Half"): 2,
    ("float", "Float"): 4, ("double", "Double"): 8,
    ("c10::complex<c10::Half>", "ComplexHalf"): 4, ("c10::complex<float>", "ComplexFloat"): 8,
    ("c10::complex<double>", "ComplexDouble"): 16, ("bool", "Bool"): 1,
    ("c10::qint8", "QInt8"): 1, ("c10::quint8", "QUInt8"): 1, ("c10::qint32", "QInt32"): 4,
    ("c10::BFloat16", "BFloat16"): 2, ("c10::quint4x2", "QUInt4x2"): 1,
    ("c10::quint2x4", "QUInt2x4"): 1, ("c10::bits1x8", "Bits1x8"): 1,
    ("c10::bits2x4", "Bits2x4"): 1, ("c10::bits4x2", "Bits4x2"): 1, ("c10::bits8", "Bits8"): 1,
    ("c10::bits16", "Bits16"): 2, ("c10::Float8_e5m2", "Float8_e5m2"): 1,
    ("c10::Float8_e4m3fn", "Float8_e4m3fn"): 1, ("c10::Float8_e5m2fnuz", "Float8_e5m2fnuz"): 1,
    ("c10::Float8_e4m3fnuz", "Float8_e4m3fnuz"): 1, ("unsigned short", "UInt16"): 2,
    ("unsigned int", "UInt32"): 4, ("long unsigned int", "UInt64"): 8,
    ("c10::dummy_uint1_7_t<1>", "UInt1"): 1, ("c10::dummy_uint1_7_t<7>", "UInt7"): 1,
    ("c10::dummy_int1_7_t<3>", "Int3"): 1, ("c10::Float8_e8m0fnu", "Float8_e8m0fnu"): 1,
    ("c10::Float4_e2m1fn_x2", "Float4_e2m1fn_x2"): 1,
    # other platforms' and spellings' names for the same widths
    ("long long", "Long"): 8, ("unsigned long long", "UInt64"): 8, ("short", "Short"): 2,
}  # fmt: skip


def _with_type(document: dict, dtype: str) -> dict:
    for event in document["traceEvents"]:
        if event["name"] == "gloo:all_reduce":
            event["args"]["Input type"] = [dtype]
    return document


@pytest.mark.parametrize("names", list(SCALAR_TYPES), ids=lambda n: n[1])
def test_every_scalar_type_has_its_size(names: tuple[str, str]) -> None:
    cpp, scalar = names
    assert element_size(cpp) == element_size(scalar) == SCALAR_TYPES[names]


@pytest.mark.parametrize(
    "dtype", ["unsigned int", "long long", "unsigned short", "c10::Float8_e4m3fnuz",
              "c10::complex<c10::Half>", "c10::Float8_e8m0fnu"],
)  # fmt: skip
def test_a_profile_of_any_scalar_type_imports_with_its_payload(tmp_path, dtype: str) -> None:
    """Regression: these types were missing, so their all-reduces had no size (issue 45)."""
    profile = write_profile(tmp_path / "p.json.gz", _with_type(make_profile(), dtype))
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(tmp_path)])
    assert code == 0, stderr
    trace = read_trace(tmp_path / "p-s0.parquet")
    assert trace.meta["payload_bytes_per_step"] == 1500 * element_size(dtype) > 0


def test_an_unknown_element_type_is_refused_naming_it(tmp_path) -> None:
    profile = write_profile(tmp_path / "p.json.gz", _with_type(make_profile(), "c10::Float3_x"))
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "'c10::Float3_x'" in stderr and "unknown" in stderr


@pytest.mark.parametrize("params", ["0", "-5", str(10**30)])
def test_params_out_of_range_is_one_line(tmp_path, params: str) -> None:
    profile = write_profile(tmp_path / "p.json.gz", make_profile())
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "--params", params, "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "--params" in stderr


def test_a_span_around_the_steps_is_dropped_with_a_note(tmp_path) -> None:
    """Regression (issue 45): a ProfilerStep span around three steps counted every collective
    twice and n_params three times over."""
    document = make_profile(steps=3)
    document["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#100", "pid": 7, "tid": 1,
         "ts": 1000.0, "dur": 3 * 8100.0, "args": {}}
    )  # fmt: skip
    profile = write_profile(tmp_path / "p.json.gz", document)
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(tmp_path)])
    assert code == 0, stderr
    trace = read_trace(tmp_path / "p-s0.parquet")
    assert trace.steps["step"].tolist() == [5, 6, 7]
    assert trace.meta["n_params"] == 1500
    assert (trace.steps["payload_bytes"] == 6000).all()
    assert "enclosing other steps' spans dropped (#100)" in stderr


def test_nested_steps_keep_the_innermost(tmp_path) -> None:
    document = make_profile(steps=1)
    step = next(e for e in document["traceEvents"] if e["name"] == "ProfilerStep#5")
    for number, grow in ((6, 100.0), (7, 200.0)):
        document["traceEvents"].append(
            {**step, "name": f"ProfilerStep#{number}", "ts": step["ts"] - grow,
             "dur": step["dur"] + 2 * grow}
        )  # fmt: skip
    path = write_profile(tmp_path / "p.json.gz", document)
    profile = read_rank_profile(path)
    assert [s.number for s in profile.steps] == [5]
    assert sum(len(s.collectives) for s in profile.steps) == 2
    assert any("2 ProfilerStep span(s) enclosing" in note for note in profile.notes)


def test_overlapping_steps_are_refused(tmp_path) -> None:
    document = make_profile(steps=2)
    second = next(e for e in document["traceEvents"] if e["name"] == "ProfilerStep#6")
    second["ts"] -= 2000.0  # starts 2 ms before #5 ends, ends after it
    profile = write_profile(tmp_path / "p.json.gz", document)
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "ProfilerStep#5 and ProfilerStep#6 overlap by 1.9 ms" in stderr


@pytest.mark.parametrize(
    "args",
    [{"Input Dims": [[2**61]], "Input type": ["float"]},
     {"Input Dims": [[2**40, 2**40]], "Input type": ["float"]},
     {"Input Dims": [[[[[[3]]]]]], "Input type": ["TensorList"]}],
)  # fmt: skip
def test_shapes_beyond_any_model_are_one_line(tmp_path, args: dict) -> None:
    """Regression (issue 45): 2^61 floats ended in an OverflowError traceback."""
    document = make_profile()
    for event in document["traceEvents"]:
        if event["name"] == "gloo:all_reduce":
            event["args"].update(args)
    profile = write_profile(tmp_path / "p.json.gz", document)
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)


def _tiny_events_profile(path: Path, tiny: int) -> Path:
    """The small gloo profile with `tiny` instant events ahead of it: bytes of JSON that the
    reader skips, as the 40 M events of the issue's 0.85 MB .json.gz."""
    document = make_profile(steps=2)
    head = json.dumps({k: v for k, v in document.items() if k != "traceEvents"})[:-1]
    events = ",".join(json.dumps(e) for e in document["traceEvents"])
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(head + ', "traceEvents": [')
        handle.write('{"ph":"i","ts":1},' * tiny)
        handle.write(events + "]}")
    return path


def test_a_profile_is_read_in_memory_of_the_events_kept(tmp_path) -> None:
    """Regression (issue 45): the whole document was parsed at once, so a small .json.gz of many
    tiny events ran out of memory. 300,000 skipped events (6 MB of JSON, 6 M+ of Python objects
    parsed whole) now cost the reader no more than the few events it keeps."""
    path = _tiny_events_profile(tmp_path / "p.json.gz", 300_000)
    tracemalloc.start()
    try:
        raw = kineto_events.read_raw_profile(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(raw.events) == 18 and raw.world_size == 2
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB to keep 18 events"


def test_more_events_than_the_cap_are_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(kineto_events, "MAX_EVENTS", 20)
    small = write_profile(tmp_path / "small.json.gz", make_profile(steps=2))  # 18 events
    assert len(kineto_events.read_raw_profile(small).events) == 18
    profile = write_profile(tmp_path / "p.json.gz", make_profile(steps=3))  # 27 events
    out = tmp_path / "out"
    argv = ["traces", "import", "--profile", str(profile), "-o", str(out)]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert "more than 20 complete events and flow arrows" in stderr


def test_more_json_than_the_cap_is_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(kineto_events, "MAX_PROFILE_BYTES", 50_000)
    path = _tiny_events_profile(tmp_path / "p.json.gz", 10_000)  # 180 KB of JSON, 1 KB packed
    with pytest.raises(TransitsimError, match="more than 50,000 bytes of JSON"):
        kineto_events.read_raw_profile(path)


def test_a_header_after_the_events_is_read(tmp_path) -> None:
    document = make_profile(steps=2, rank=1, world=4)
    info = document.pop("distributedInfo")
    document["deviceProperties"] = [{"name": "Test GPU"}]
    document["distributedInfo"] = info  # written after traceEvents
    raw = kineto_events.read_raw_profile(write_profile(tmp_path / "p.json.gz", document))
    assert (raw.rank, raw.world_size, raw.device) == (1, 4, "Test GPU")


def test_many_steps_read_each_step_as_one_step_alone(tmp_path) -> None:
    """The steps' events are found by bisection and gloo's launches matched from queues (issue
    45: the import was O(steps x events)); each of 60 steps reads as the first step alone."""
    alone = read_rank_profile(write_profile(tmp_path / "one.json.gz", make_profile(steps=1)))
    many = read_rank_profile(write_profile(tmp_path / "many.json.gz", make_profile(steps=60)))
    assert [s.number for s in many.steps] == list(range(5, 65))
    (first,) = alone.steps
    for step in many.steps:
        shift = step.start_us - first.start_us
        for key in ("wall_s", "compute_s", "update_s", "comm_s", "exposed_s", "hidden_s"):
            assert getattr(step, key) == pytest.approx(getattr(first, key)), (step.number, key)
        assert [c.nbytes for c in step.collectives] == [c.nbytes for c in first.collectives]
        assert [c.launch_us - shift for c in step.collectives] == pytest.approx(
            [c.launch_us for c in first.collectives]
        )


def test_an_unknown_type_beside_known_ones_is_named_in_the_warning(tmp_path) -> None:
    document = make_profile()
    for event in document["traceEvents"]:
        if event["name"] == "gloo:all_reduce" and event["args"]["Input Dims"] == [[500]]:
            event["args"]["Input type"] = ["c10::Float3_x"]
    profile = write_profile(tmp_path / "p.json.gz", document)
    code, _, stderr = run_cli(["traces", "import", "--profile", str(profile), "-o", str(tmp_path)])
    assert code == 0, stderr
    assert "3 of 6 all_reduce(s) have no readable size (element type 'c10::Float3_x'" in stderr
    assert read_trace(tmp_path / "p-s0.parquet").meta["payload_bytes_per_step"] == 1000 * 4
