"""Hypothesis fuzz of the readers issue 27 hardened: background CSVs and backward profiles.

Apart from test_hostile_fuzz.py (whose testbed section made it long); shares its settings and
the traces it fuzzes around.
"""

import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_hostile_fuzz import (
    BASES,
    FUZZ,
    JSON_VALUE,
    NETWORK,
    REPLAY,
    SCENARIO,
    _finite_outputs,
    check_every_reader,
    exit_codes,
)

from transitsim.traces.format import (
    META_KEY,
)

# --- issue 27: the readers of background CSVs and backward profiles ----------------------------

FUZZ_27 = settings(FUZZ, max_examples=max(FUZZ.max_examples // 2, 1))  # half: each runs more

CSV_NUMBERS = st.sampled_from(
    ["0", "0.5", "1", "-0.1", "nan", "inf", "1e309", "9" * 5000, "", " ", "x", '"0.2"', "0x1"]
)
CSV_RATES = st.sampled_from(["5 Gb/s", "10 Gb/s", "11 Gb/s", "0 Gb/s", "-1 Gb/s", "5", "5 GB/s"])
CSV_HEADERS = st.sampled_from(
    ["time_s,background_share", "time_s,available_share", "time_s,available_rate", "time_s",
     "background_share", "time_s,background_share,available_share", "\ufefftime_s,available_share",
     "time_s,background_share,note"]
)  # fmt: skip


@st.composite
def hostile_csv(draw) -> bytes:
    """A background CSV: one of the headers, then rows of hostile cells (times out of order,
    numbers out of range or not numbers, rates above the link's, short rows, NULs)."""
    header = draw(st.one_of(st.just("time_s,available_share"), CSV_HEADERS))
    rates = header.endswith("available_rate")
    rows = []
    for i in range(draw(st.integers(0, 30))):
        value = "5 Gb/s" if rates else f"{0.2 + 0.1 * (i % 3):g}"
        rows.append(f"{i * 0.004:g},{value}")
    if rows and draw(st.booleans()):  # half the series valid, half with one hostile row
        time_s = draw(st.one_of(st.just("0.5"), CSV_NUMBERS))
        value = draw(CSV_RATES if rates and draw(st.booleans()) else CSV_NUMBERS)
        hostile = [f"{time_s},{value}", time_s, f"{time_s},{value},1"]
        rows[draw(st.integers(0, len(rows) - 1))] = draw(st.sampled_from(hostile))
    text = "\n".join([header, *rows]) + "\n"
    if draw(st.integers(0, 9)) == 0:
        text = text.replace(",", draw(st.sampled_from(["\x00", ";", '"'])), 1)
    return text.encode("utf-8")


@FUZZ_27
@given(data=hostile_csv())
def test_generated_background_csvs_are_refused_or_replayed_alike(data: bytes) -> None:
    """validate, run and replay --set read the CSV alike: all refuse it (one line, nothing
    written) or all accept it and write whole, finite outputs."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "bg.csv").write_bytes(data)
        trace = folder / "traces" / "run-s0.parquet"
        trace.parent.mkdir()
        pq.write_table(BASES[0][0], trace)
        net = (
            '{preset: 2dc-wan, workers: 8, wan_link: {rate: "10 Gb/s", background: {csv: bg.csv}}}'
        )
        (folder / "s.yaml").write_text(SCENARIO.replace(NETWORK, net), encoding="utf-8")
        setting = f"wan_link.background={{csv: {folder / 'bg.csv'}}}"
        commands = {
            "validate": ["validate", str(folder / "s.yaml")],
            "run": ["run", str(folder / "s.yaml"), "--serial", "-q", "-o", str(folder / "run")],
            "replay": [*REPLAY[:1], str(trace), "-n", "2dc-wan", "--set", "workers=8"]
            + ["--set", "wan_link.rate=10 Gb/s", "--set", setting, "-t", "3.5", "-q"]
            + ["-o", str(folder / "out")],
        }
        codes = exit_codes(commands)
        event(f"background CSV {'refused' if codes['validate'] else 'read'}")
        assert len(set(codes.values())) == 1, f"the readers disagree: {codes}"
        if codes["replay"] == 0:
            _finite_outputs(folder / "out")
        else:
            assert {p.name for p in folder.iterdir()} == {"bg.csv", "traces", "s.yaml"}


PROFILE = BASES[0][1]["backward_profile"]  # a recorded run's: 15 tensors


@st.composite
def hostile_profile(draw) -> tuple[str, bytes]:
    """A trace (AdamW, or a band whose units are its tensors) whose backward profile has one
    key of one tensor, or of the profile, replaced or removed, or as many tensors as a hostile
    file may list."""
    table, meta = BASES[draw(st.sampled_from([0, 1]))]
    profile = json.loads(json.dumps(PROFILE))
    kind = draw(st.sampled_from(["tensor", "tensor", "profile", "count"]))
    if kind == "count":
        profile["tensors"] = profile["tensors"] * draw(st.sampled_from([0, 2, 274]))  # 274: 4,110
    else:
        node = profile if kind == "profile" else draw(st.sampled_from(profile["tensors"]))
        key = draw(st.sampled_from([*node, "extra"]))
        if draw(st.integers(0, 4)) == 0:
            node.pop(key, None)
        else:
            node[key] = draw(st.one_of(JSON_VALUE, st.sampled_from([True, "0.5", 0.5, 1, 2**53])))
    metadata = dict(table.schema.metadata)
    metadata[META_KEY] = json.dumps({**meta, "backward_profile": profile}).encode()
    buffer = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(metadata), buffer)
    return f"profile {kind}", buffer.getvalue().to_pybytes()


@FUZZ_27
@given(case=hostile_profile())
def test_generated_broken_backward_profiles_are_refused_by_every_reader(case) -> None:
    check_every_reader(*case)
