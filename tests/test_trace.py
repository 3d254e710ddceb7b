"""The trace contract: what is written is read back exactly, by us and by plain pyarrow/pandas,
and every malformed file or table is a TraceError that names the file."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transitsim.base.errors import TraceError, TransitsimError
from transitsim.traces import format as trace_module
from transitsim.traces.format import (
    DIAG_KEY,
    FORMAT_VERSION,
    META_KEY,
    STEP_COLUMNS,
    config_name,
    find_traces,
    read_meta,
    read_trace,
    write_trace,
)


def make_steps(n: int = 5) -> pd.DataFrame:
    """A step table with every required and optional column plus two extra ones."""
    step = np.arange(1, n + 1, dtype="int64")
    return pd.DataFrame(
        {
            "step": step,
            "train_loss": 5.0 - 0.1 * step,
            "val_loss": [math.nan if s % 2 else 5.0 - 0.2 * s for s in step],
            "lr": np.full(n, 1e-3),
            "payload_bytes": np.full(n, 1_979_184, dtype="int64"),
            "collective": ["all_gather"] * n,
            "reducible": [True] * n,
            "compute_s": np.full(n, 0.125),
            "compress_s": np.full(n, 0.0),
            "payload_int64_bytes": np.full(n, 9_895_920, dtype="int64"),
            "wire_bytes": np.full(n, 13_854_288.0),
            "update_s": np.full(n, 0.01),
            "wall_s": np.full(n, 1.5),
            "clip_rate": [math.nan] * (n - 1) + [0.25],
            "clip_rate_interval": [math.nan] * (n - 1) + [0.5],
            "tokens": np.full(n, 16_384, dtype="int32"),
            "grad_norm": np.linspace(1.0, 2.0, n).astype("float32"),
        }
    )


def make_meta(**changes) -> dict:
    meta = {
        "name": "tinystories-band-low-k16-1d256-lr0.001-s2",
        "variant": "C",
        "seed": 2,
        "workers": 8,
        "n_params": 15_833_472,
        "dense_bytes_per_step": 31_666_944,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
        "variant_params": {"band": "low", "chunk_mode": "1d", "chunk": 256, "enob": None},
        "model": {"n_layer": 8, "n_head": 6, "n_embd": 384, "block": 256, "vocab": 4096},
        "notes": ["a note"],
        "payload_bytes_per_step": 1_979_184,
    }
    meta.update(changes)
    return meta


def make_diagnostics() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [2, 2, 4],
            "source": ["delta", "momentum", "grad"],
            "group": ["all", "attn", "embed"],
            "selector": ["topk", "low", "calib"],
            "share": [0.5, 0.125, 1e-5],
        }
    )


@pytest.fixture
def written(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "run.parquet", make_steps(), make_meta(), make_diagnostics())


def test_round_trip_keeps_every_column_dtype_metadata_and_diagnostics(written: Path) -> None:
    trace = read_trace(written)
    expected = make_steps()
    assert list(trace.steps.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(trace.steps, expected, check_dtype=False)
    for name in ("step", "payload_bytes", "payload_int64_bytes"):
        assert trace.steps[name].dtype == np.int64
    assert trace.steps["reducible"].dtype == bool
    assert trace.steps["tokens"].dtype == np.int32
    assert trace.steps["grad_norm"].dtype == np.float32
    assert trace.steps["val_loss"].isna().tolist() == [True, False, True, False, True]
    assert trace.meta == {**make_meta(), "format": "transitsim.trace", "format_version": 1}
    pd.testing.assert_frame_equal(trace.diagnostics, make_diagnostics(), check_dtype=False)
    assert trace.path == written


def test_trace_properties(written: Path) -> None:
    trace = read_trace(written)
    assert (trace.name, trace.variant, trace.seed, trace.workers) == (
        "tinystories-band-low-k16-1d256-lr0.001-s2",
        "C",
        2,
        8,
    )
    assert trace.config_name == "tinystories-band-low-k16-1d256-lr0.001"
    assert trace.final_val_loss == pytest.approx(5.0 - 0.2 * 4)  # last evaluated row, not NaN
    assert trace.payload_bytes_per_step == 1_979_184


def test_plain_pyarrow_and_pandas_read_a_trace(written: Path) -> None:
    table = pq.read_table(written)
    for name, kind in STEP_COLUMNS.items():
        assert table.schema.field(name).type == kind
    meta = json.loads(table.schema.metadata[META_KEY])
    assert meta["name"] == make_meta()["name"]
    assert json.loads(table.schema.metadata[DIAG_KEY])["share"] == [0.5, 0.125, 1e-5]
    frame = pd.read_parquet(written)
    assert frame["payload_bytes"].sum() == 5 * 1_979_184
    assert set(frame["collective"].astype(str)) == {"all_gather"}


def test_read_meta_gives_metadata_only(written: Path) -> None:
    meta = read_meta(written)
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["variant_params"]["enob"] is None


def test_write_is_deterministic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a.parquet", make_steps(), make_meta(), make_diagnostics())
    b = write_trace(tmp_path / "b.parquet", make_steps(), make_meta(), make_diagnostics())
    assert a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    path = write_trace(tmp_path / "run.parquet", make_steps(), make_meta())
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(trace_module.pq, "write_table", crash)
    with pytest.raises(OSError):
        write_trace(path, make_steps(3), make_meta())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.parquet"]


def test_config_name_strips_only_the_seed_part() -> None:
    assert config_name("tinystories-adamw-lr0.003-s12") == "tinystories-adamw-lr0.003"
    assert config_name("x-s1-lr0.1") == "x-s1-lr0.1"


def test_find_traces_expands_folders_sorted_and_rejects_missing(tmp_path: Path) -> None:
    for name in ("b", "a"):
        write_trace(tmp_path / f"{name}.parquet", make_steps(), make_meta())
    (tmp_path / "notes.txt").write_text("x")
    assert [p.name for p in find_traces([tmp_path])] == ["a.parquet", "b.parquet"]
    with pytest.raises(TraceError, match="nowhere"):
        find_traces([tmp_path / "nowhere"])


def _drop(column: str):
    return lambda steps: steps.drop(columns=column)


def _set(column: str, index: int, value):
    def change(steps: pd.DataFrame) -> pd.DataFrame:
        steps = steps.copy()
        if column == "step":
            steps[column] = steps[column].astype("float64") if value is None else steps[column]
            if value is not None:
                steps.loc[index, column] = value
            return steps
        steps[column] = steps[column].astype(object)
        steps.loc[index, column] = value
        return steps

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_drop("compute_s"), "lacks column"),
        (lambda s: s.iloc[0:0], "no rows"),
        (_set("train_loss", 1, None), "missing values"),
        (_set("step", 2, 2), "strictly increase"),
        (_set("step", 0, 0), "start at 1"),
        (_set("step", None, None), "integers"),
        (_set("payload_bytes", 0, -1), "negative"),
        (_set("compute_s", 0, -0.5), "negative"),
        (_set("collective", 0, "broadcast"), "unknown value"),
    ],
)
def test_bad_step_tables_are_refused_naming_the_file(tmp_path: Path, change, message) -> None:
    path = tmp_path / "bad.parquet"
    with pytest.raises(TraceError, match=message) as error:
        write_trace(path, change(make_steps()), make_meta())
    assert str(path) in str(error.value)
    assert not path.exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"variant": "Q"}, "unknown variant"),
        ({"seed": "0"}, "'seed' must be int"),
        ({"workers": True}, "'workers' must be int"),
        ({"rows": "some"}, "'rows' must be one of"),
        ({"origin": "elsewhere"}, "'origin'"),
        ({"status": "done"}, "'status'"),
        ({"workers": 0}, "at least 1"),
        ({"n_params": 0}, "positive"),
    ],
)
def test_bad_metadata_is_refused(tmp_path: Path, changes, message) -> None:
    with pytest.raises(TraceError, match=message):
        write_trace(tmp_path / "bad.parquet", make_steps(), make_meta(**changes))


def test_missing_metadata_key_is_refused(tmp_path: Path) -> None:
    meta = make_meta()
    del meta["dense_bytes_per_step"]
    with pytest.raises(TraceError, match="lacks required key 'dense_bytes_per_step'"):
        write_trace(tmp_path / "bad.parquet", make_steps(), meta)


def test_diagnostics_without_a_column_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="diagnostics table lacks column"):
        write_trace(
            tmp_path / "x.parquet",
            make_steps(),
            make_meta(),
            make_diagnostics().drop("share", axis=1),
        )


def _rewrite_metadata(path: Path, key: bytes, value: bytes | str) -> None:
    table = pq.read_table(path)
    table = table.replace_schema_metadata({**table.schema.metadata, key: value})
    pq.write_table(table, path)


def _short_diagnostics_column(path: Path) -> bytes:
    columns = json.loads(pq.read_schema(path).metadata[DIAG_KEY])
    columns["share"] = columns["share"][:-1]
    return json.dumps(columns).encode()


def _other_meta(**changes) -> bytes:
    return json.dumps({**make_meta(), "format": "transitsim.trace", "format_version": 1, **changes})


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda p: p.unlink(), "no such file"),
        (lambda p: (p.unlink(), p.mkdir()), "is a folder"),
        (lambda p: p.write_text("step,val_loss\n1,2.0\n"), "not a Parquet file"),
        (lambda p: p.write_bytes(b""), "not a Parquet file"),
        (lambda p: pd.DataFrame({"step": [1]}).to_parquet(p), "not a trace"),
        (lambda p: _rewrite_metadata(p, META_KEY, b"{oops"), "not valid JSON"),
        (
            lambda p: _rewrite_metadata(p, META_KEY, _other_meta(format_version=99)),
            "version 99 is not supported",
        ),
        (
            lambda p: _rewrite_metadata(p, META_KEY, _other_meta(format="other")),
            "does not describe a transitsim trace",
        ),
        (
            lambda p: _rewrite_metadata(p, META_KEY, _other_meta(variant="Z")),
            "unknown variant",
        ),
        (lambda p: _rewrite_metadata(p, DIAG_KEY, b"[1, 2"), "diagnostics"),
        (  # pandas would pad the short column with NaN (a warning, then a future error)
            lambda p: _rewrite_metadata(p, DIAG_KEY, _short_diagnostics_column(p)),
            "diagnostics table is corrupt",
        ),
    ],
)
def test_reading_a_bad_file_raises_trace_error_naming_it(written: Path, spoil, message) -> None:
    spoil(written)
    with pytest.raises(TraceError, match=message) as error:
        read_trace(written)
    assert str(written) in str(error.value)
    assert isinstance(error.value, TransitsimError)
    assert len(str(error.value).splitlines()) == 1


def test_parquet_with_trace_metadata_but_missing_column_is_refused(written: Path) -> None:
    table = pq.read_table(written)
    pq.write_table(table.drop_columns(["lr"]), written)
    with pytest.raises(TraceError, match="lacks column.*lr"):
        read_trace(written)


def test_read_meta_refuses_a_plain_parquet(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    with pytest.raises(TraceError, match="not a trace"):
        read_meta(path)
