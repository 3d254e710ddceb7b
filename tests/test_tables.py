"""Byte formatting: published-scale tables read in GB as the slides do; small runs stay readable."""

from transitsim.base.tables import format_gb


def test_published_scale_reads_in_gigabytes() -> None:
    assert format_gb(400 * 31_666_944) == "12.67 GB"


def test_small_runs_use_the_largest_unit_that_keeps_figures() -> None:
    assert format_gb(100 * 836_864) == "83.69 MB"
    assert format_gb(52_304) == "52.30 kB"
    assert format_gb(512) == "512 B"


def test_a_piped_table_keeps_a_title_longer_than_itself_on_one_line() -> None:
    import io

    import pandas as pd

    from transitsim.base.tables import emit_table

    title = "all_reduce (" + "/a/long/path" * 12 + "/measured.parquet: 4 ranks on 4 host(s))"
    out = io.StringIO()
    emit_table(pd.DataFrame({"size": [1, 2]}), "table", title=title, out=out)
    assert out.getvalue().splitlines()[0].strip() == title
