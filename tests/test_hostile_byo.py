"""Generated hostile profiles and loss logs (issue 23, item 6), fuzzed like the experiment's
importer in tests/test_hostile_fuzz.py: `traces import --profile ... --loss ...` either writes
one valid trace that shows and replays to finite numbers, or refuses with one line on stderr,
exit 2, and no output folder. A traceback fails the test."""

import copy
import gzip
import json
import math
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from cli_run import assert_refused, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kineto_gpu_fixtures import RCCL, make_gpu_profile
from test_byo_cli import make_profile

from transitsim.traces.format import read_trace

FUZZ = settings(
    # 20 a test keeps the suite quick (each import that succeeds is also replayed);
    # TRANSITSIM_FUZZ_EXAMPLES=500 for a longer hunt
    max_examples=int(os.environ.get("TRANSITSIM_FUZZ_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            -1,
            0,
            2**62,
            -1e-9,
            1e300,
            "",
            "x" * 200,
            "nan",
            "\x00",
            [],
            {},
            [[-1]],
            10**30,
            [[2**61]],
            [[[[[[1]]]]]],
        ]
    ),  # fmt: skip
    st.text(max_size=10),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
)
EVENT_KEYS = ("ph", "name", "ts", "dur", "pid", "tid", "cat", "args")
ARG_KEYS = ("Input Dims", "Input type", "In msg nelems", "dtype", "Group size", "Collective name",
            "correlation", "stream")  # fmt: skip
NAMES = ("ProfilerStep#5", "ProfilerStep#x", "gloo:all_reduce", "c10d::allreduce_",
         "record_param_comms", "nccl:all_gather", "Optimizer.step#SGD.step",
         "autograd::engine::evaluate_function: X", "ncclDevKernel_AllReduce", RCCL,
         "cudaLaunchKernel")  # fmt: skip


@st.composite
def hostile_profile(draw, gpu: bool = False) -> bytes:
    """The shared small gloo trace (or, gpu, the small GPU one with a quirk) with a few of its
    events' fields replaced, dropped or duplicated, its header broken, or its bytes cut."""
    steps = draw(st.integers(1, 3))
    if gpu:
        quirk = draw(st.sampled_from([{}, {"flows": True}, {"gpu_marks": "short"},
                                      {"host_period": 3000.0}, {"shapes": False}]))  # fmt: skip
        document = make_gpu_profile(steps=steps, **quirk)
    else:
        document = make_profile(steps=steps, rank=0, world=2)
    events = document["traceEvents"]
    rng = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 6))
        target = events[rng.randrange(len(events))] if events else {}
        if choice == 0:
            target[rng.choice(EVENT_KEYS)] = draw(HOSTILE)
        elif choice == 1:
            target.pop(rng.choice(EVENT_KEYS), None)
        elif choice == 2 and isinstance(target.get("args"), dict):
            target["args"][rng.choice(ARG_KEYS)] = draw(HOSTILE)
        elif choice == 3:
            target["name"] = rng.choice(NAMES)
        elif choice == 4 and events:
            events.append(copy.deepcopy(target))
        elif choice == 5:
            document["distributedInfo"] = draw(
                st.one_of(HOSTILE, st.fixed_dictionaries({"world_size": HOSTILE, "rank": HOSTILE}))
            )
        else:
            document["traceEvents"] = draw(st.one_of(HOSTILE, st.just(events[: len(events) // 2])))
    data = json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")
    cut = draw(st.integers(0, 9))
    if cut == 0:
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        data = gzip.compress(data)
        if cut == 1:
            data = data[: draw(st.integers(0, len(data)))]
    return data


CELLS = st.one_of(
    st.sampled_from(
        ["", "nan", "inf", "-1", "1e309", "abc", "0", "3.5", "True", " ", "\t", "1" + "0" * 400]
    ),  # fmt: skip
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-5, max_value=10**13).map(str),
    st.text(max_size=6),
)


@st.composite
def hostile_loss_log(draw) -> tuple[str, bytes]:
    """A CSV or JSONL loss log with hostile cells, headers and steps."""
    headers = [["step", "loss"], ["iter", "train_loss", "val_loss"], ["epoch", "acc"]]
    header = draw(st.sampled_from([*headers, ["step", "loss", "loss"], ["step"]]))
    rows = draw(st.lists(st.lists(CELLS, min_size=len(header), max_size=len(header)), max_size=6))
    if draw(st.booleans()):
        if rows and draw(st.booleans()):  # a ragged row: a field more or fewer (issue 45)
            index = draw(st.integers(0, len(rows) - 1))
            rows[index] = rows[index][:-1] if draw(st.booleans()) else [*rows[index], "9"]
        text = "\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n"
        return ".csv", text.encode("utf-8", "surrogatepass")
    records = []
    for row in rows:
        record: dict[str, Any] = {}
        for key, cell in zip(header, row, strict=False):
            try:
                record[key] = json.loads(cell)
            except ValueError:
                record[key] = cell
        records.append(json.dumps(record, allow_nan=True))
    return ".jsonl", ("\n".join(records) + "\n").encode("utf-8", "surrogatepass")


DTYPES = [
    "float",
    "c10::BFloat16",
    "unsigned int",
    "long long",
    "c10::Float8_e4m3fnuz",
    "c10::complex<c10::Half>",
    "c10::quint4x2",
    "Float",
    "c10::NoSuchType",
    "",
    "Scalar",
]


@st.composite
def shaped_profile(draw) -> bytes:
    """The shared gloo trace with the shapes of issue 45: step spans enclosing or overlapping
    others, element types of every kind (and unknown ones), sizes beyond any model."""
    document = make_profile(steps=draw(st.integers(1, 4)), rank=0, world=2)
    events = document["traceEvents"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 3))
        if choice == 0:  # a span around some steps, or one shifted into its neighbour
            first = draw(st.sampled_from(steps))
            grow = draw(st.sampled_from([0.0, 0.5, 100.0, 9000.0, 30000.0]))
            events.append({**first, "name": f"ProfilerStep#{draw(st.integers(0, 99))}",
                           "ts": first["ts"] - draw(st.sampled_from([0.0, 50.0, -4000.0])),
                           "dur": first["dur"] + grow})  # fmt: skip
        elif choice == 1:
            dtype = draw(st.sampled_from(DTYPES))
            for e in events:
                if e["name"] == "gloo:all_reduce":
                    e["args"]["Input type"] = [dtype]
        elif choice == 2:
            dims = draw(st.sampled_from([[[2**61]], [[2**31, 2**31]], [[10**30]], [[]], [[0]]]))
            target = draw(st.sampled_from([e for e in events if e["name"] == "gloo:all_reduce"]))
            target["args"]["Input Dims"] = dims
        else:
            step = draw(st.sampled_from(steps))
            step["ts"] += draw(st.sampled_from([-8000.0, -0.5, 0.5, 8100.0]))
    return json.dumps(document).encode()


def check_import(profile: bytes, loss: tuple[str, bytes] | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        path = folder / "p.json"
        path.write_bytes(profile)
        out = folder / "out"
        argv = ["traces", "import", "--profile", str(path), "-o", str(out), "-q"]
        if loss is not None:
            log = folder / f"l{loss[0]}"
            log.write_bytes(loss[1])
            argv += ["--loss", str(log)]
        code, _, stderr = run_cli(argv)
        event(f"import exit {code}")
        if code != 0:
            assert_refused(argv, code, stderr, out)
            return
        (written,) = out.glob("*.parquet")  # one trace, no temporary file beside it
        assert {p.name for p in out.iterdir()} <= {written.name, "measured.yaml"}
        trace = read_trace(written)
        assert trace.meta["origin"] == "import"
        code, _, stderr = run_cli(["traces", "show", str(written)])
        assert code == 0, stderr
        argv = ["replay", str(written), "-n", "8x200g-switch", "--json", "-q"]
        code, stdout, stderr = run_cli(argv)
        if code != 0:
            assert_refused(argv, code, stderr)
            return
        (row,) = json.loads(stdout)
        for key in ("time_s", "step_s", "wire_bytes"):
            assert math.isfinite(row[key]) and row[key] >= 0, (key, row)


@FUZZ
@given(profile=hostile_profile())
def test_generated_hostile_profiles_import_whole_or_not_at_all(profile: bytes) -> None:
    check_import(profile, None)


@FUZZ
@given(profile=hostile_profile(gpu=True))
def test_generated_hostile_gpu_profiles_import_whole_or_not_at_all(profile: bytes) -> None:
    check_import(profile, None)


@FUZZ
@given(profile=shaped_profile())
def test_generated_nested_steps_and_odd_shapes_import_whole_or_not_at_all(profile: bytes) -> None:
    check_import(profile, None)


GOOD_PROFILE = json.dumps(make_profile()).encode()


@FUZZ
@given(loss=hostile_loss_log())
def test_generated_hostile_loss_logs_import_whole_or_not_at_all(loss: tuple[str, bytes]) -> None:
    check_import(GOOD_PROFILE, loss)
