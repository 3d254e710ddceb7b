"""Issue 43 item 6: a result reads in a terminal and a notebook (a short repr and an HTML view:
the verdict, then the summary's head), and a configuration whose seeds ran on different GPUs
says so, in a note and with a mark on its name in the verdict."""

from pathlib import Path

import pytest

import transitsim
from transitsim.analysis.hardware import MARK, marked_labels, mixed_devices
from transitsim.traces.format import read_trace

PUBLISHED = Path(__file__).resolve().parents[1] / "traces" / "published" / "tinystories-gpu"
TOPK = sorted(PUBLISHED.glob("*topk*.parquet"))


@pytest.fixture(scope="module")
def result():
    if len(TOPK) < 3:
        pytest.skip("the published top-k traces are not there")
    return transitsim.simulate([str(p) for p in TOPK], "8x200g-switch", targets=[3.3])


def test_the_published_top_k_seeds_ran_on_two_kinds_of_gpu() -> None:
    """The case the issue names: s2 ran on an L4, s0 and s1 on A100s."""
    traces = [read_trace(p) for p in TOPK]
    (counts,) = mixed_devices(traces).values()
    assert counts == {"NVIDIA A100-SXM4-40GB": 2, "NVIDIA L4": 1}
    labels, notes = marked_labels({traces[0].config_name: "B top-k"}, traces)
    assert labels[traces[0].config_name] == "B top-k" + MARK
    assert len(notes) == 1 and "NVIDIA L4 x1" in notes[0]
    same = [t for t in traces if "A100" in t.meta["hardware"]["device"]]
    assert marked_labels({"x": "y"}, same) == ({"x": "y"}, [])


def test_repr_is_the_verdict_then_the_summary_head(result) -> None:
    text = repr(result)
    assert len(text) < 1500, len(text)  # was ~5,600 characters of dataclass fields
    first, second = text.splitlines()[:2]
    assert first == f"Verdict: {result.verdict[0]}"
    assert MARK.strip() in first, "the mixed-hardware configuration is marked in the verdict"
    assert second.startswith("note: ") and "NVIDIA L4" in second
    assert "time_to_target_s" in text and "summary rows" in text
    assert all(len(line) <= 200 for line in text.splitlines()[2:])


def test_the_notebook_view_is_html_with_the_verdict_and_a_table(result) -> None:
    page = result._repr_html_()
    assert page.startswith("<p><b>Verdict:</b> To loss 3.3")
    assert "<table" in page and "NVIDIA L4" in page
    assert result.summary["call"].tolist() == ["leads"]


def test_tables_fit_the_width_without_cutting_a_number() -> None:
    """Issue 43: at 80 columns a time printed as "4.408-4.… s". In 100 (or 80) columns a table
    wraps its text and drops its last columns, naming them, and never cuts a number."""
    import io

    import pandas as pd

    from transitsim.base.tables import emit_table

    frame = pd.DataFrame(
        {
            "label": ["C low band 1d256 summed at the switch", "A AdamW"],
            "network": ["rack[host_link.rate=2.5 Gb/s] +overlap", "rack"],
            "steps": [1876.0, 208.0],
            "time": ["4.408-4.412 s", "96.41 s"],
            "bytes": [25987506563.0, 11531982537.0],
            "bottleneck": ["wire 57%", "wire 96%"],
        }
    )
    for width in (100, 80):
        out = io.StringIO()
        emit_table(frame, title="Val loss 3.3", out=out, width=width)
        text = out.getvalue()
        assert max(len(line) for line in text.splitlines()) <= width
        assert "…" not in text
        for number in ("1,876", "4.408-4.412", "96.41"):
            assert number in text, (width, text)
        if "25,987,506,563" not in text:
            assert "not shown at 80 columns: bytes, bottleneck" in text


def test_a_scenario_run_reads_as_its_verdict_not_its_fields(tmp_path: Path) -> None:
    """run_scenario's RunResult showed ~its whole dataclass (every table's repr); now the same
    short view as simulate's: the verdict sentences, then the summary's head."""
    from transitsim.run import run_scenario
    from transitsim.scenario import load_scenario

    quickstart = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
    run = run_scenario(load_scenario(quickstart), tmp_path / "out", serial=True, quiet=True)
    text = repr(run)
    assert len(text) < 2500, len(text)
    lines = text.splitlines()
    assert lines[: len(run.verdict)] == [f"Verdict: {line}" for line in run.verdict]
    assert "time_to_target_s" in text and f"of {len(run.summary)} summary rows" in text
    assert "DataFrame" not in text and "timeline=" not in text
    page = run._repr_html_()
    assert page.startswith("<p><b>Verdict:</b> ") and "<table" in page
