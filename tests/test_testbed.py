"""The namespace testbed: a tiny real measurement against transitsim, and certain teardown.

Skips (with the reason) where namespaces cannot be made or torch is missing. Every test starts
by removing what killed runs left (`cleanup_leftovers`), and checks that `ip netns` holds none
of its own namespaces when it ends, including after its child process was SIGKILLed.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from netns_skip import (  # noqa: F401 (no_leftovers: an autouse fixture)
    REASON,
    measured_within,
    needs_netns,
    no_leftovers,
)

from transitsim.base.errors import TransitsimError
from transitsim.testbed import netns
from transitsim.testbed.netns import Shaping, Testbed, TestbedError, cleanup_leftovers

REPO = Path(__file__).resolve().parents[1]


def _ours(run_id: str) -> list[str]:
    return [n for n in netns.list_namespaces() if n.startswith(run_id)]


@needs_netns
def test_tiny_testbed_matches_the_simulation():
    """2 hosts at 200 Mb/s: the endpoint (per-message cost and rate, the model `testbed compare`
    fits) fitted on the 64 KiB and 4 MiB all-reduce predicts the 1 MiB one within 15 %. The
    legacy alpha fitted on 1 MiB alone missed 4 MiB by more than 15 % in 3 of 5 runs on 3 Dec
    2026 (15.0 % and 16.4 % where printed): the ranks' time on 2 shared cores grows with the
    bytes, which one additive alpha cannot follow. The endpoint fit missed once in a CI run
    (15.5 %): a miss is measured again, up to 3 times (`measured_within`)."""
    pytest.importorskip("torch", reason="the testbed's workers need torch")
    from transitsim.testbed.measure import (
        Point,
        _payload_sent,
        measure_rtt,
        run_ranks,
        summarise,
    )
    from transitsim.testbed.model import compare

    rate = 200e6

    def measure(k: int) -> pd.DataFrame:  # a new testbed each try
        t0 = time.monotonic()
        with Testbed(2, Shaping.for_rate(rate)) as testbed:
            run_id = testbed.run_id
            assert len(_ours(run_id)) == 3  # switch + 2 hosts
            rtt = measure_rtt(testbed, 29591, count=200)
            before = testbed.qdisc_bytes()
            points = [Point("all_reduce", n, 1, 5) for n in (64 << 10, 1 << 20)]
            points.append(Point("all_reduce", 4 << 20, 1, 4))
            merged = run_ranks(testbed, 2, points, 29592)
            after = testbed.qdisc_bytes()
        assert _ours(run_id) == []
        wire = sum(after[h][0] - before[h][0] for h in after)
        efficiency = _payload_sent(merged, 2) / wire
        assert 0.85 < efficiency < 0.97  # TCP/IP/Ethernet framing and ACKs: about 0.94
        rows = pd.DataFrame(
            [
                {**summarise(m, 2), "rate_bps": rate, "rtt_s": rtt, "qdisc_efficiency": efficiency}
                for m in merged
            ]
        )
        table = compare(rows, (64 << 10, 4 << 20), fit="endpoint")
        assert len(table[~table["fitted"]]) == 1
        assert time.monotonic() - t0 < 60
        return table

    def miss(table: pd.DataFrame) -> str | None:
        error = float(table[~table["fitted"]]["rel_error"].iloc[0])
        shown = table[["bytes", "median_s", "simulated_s", "rel_error"]].to_string()
        return None if abs(error) <= 0.15 else f"1 MiB off by {error:+.1%}\n{shown}"

    measured_within(measure, miss)


def _child(body: str) -> subprocess.Popen:
    """A python child that builds a 2-host testbed, prints its run id, then runs `body`."""
    code = (
        "import sys, time\n"
        "from transitsim.testbed.netns import Testbed, Shaping\n"
        "from transitsim.base.atomic import signals_raise\n"
        "with signals_raise(), Testbed(2, Shaping.for_rate(50e6)) as tb:\n"
        "    print(tb.run_id, flush=True)\n"
        f"    {body}\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO
    )


@needs_netns
def test_sigterm_tears_down():
    child = _child("time.sleep(30)")
    run_id = child.stdout.readline().strip()
    assert len(_ours(run_id)) == 3
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=20)
    assert _ours(run_id) == []


@needs_netns
def test_a_killed_run_is_cleaned_up_at_next_start():
    child = _child("time.sleep(30)")
    run_id = child.stdout.readline().strip()
    child.kill()  # SIGKILL: no trap runs
    child.wait(timeout=10)
    assert len(_ours(run_id)) == 3  # left behind, recognisable by its prefix and dead pid
    removed = cleanup_leftovers()
    assert sorted(removed) == sorted(f"{run_id}-{n}" for n in ("sw", "h0", "h1"))
    assert _ours(run_id) == []


@needs_netns
def test_down_command_removes_leftovers(capsys):
    from transitsim.cli import main

    child = _child("time.sleep(30)")
    run_id = child.stdout.readline().strip()
    child.kill()
    child.wait(timeout=10)
    with pytest.raises(SystemExit) as exit_info:
        main(["testbed", "down"])
    assert exit_info.value.code == 0
    assert f"{run_id}-sw" in capsys.readouterr().out
    assert _ours(run_id) == []


def test_not_root_is_one_line_and_exit_2(monkeypatch, capsys):
    from transitsim.cli import main

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as exit_info:
        main(["testbed", "down"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["transitsim: error: testbed: needs root (network namespaces and tc)"]


def test_missing_tc_is_an_error(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "tc" else "/x")
    with pytest.raises(TransitsimError, match="`tc` not found"):
        netns.preflight()


def test_refused_namespace_is_an_error(monkeypatch, tmp_path):
    """`ip netns add` failing (no CAP_SYS_ADMIN in a container) is one line, nothing left."""
    from transitsim.testbed import ledger

    monkeypatch.setattr(ledger, "STATE_DIR", tmp_path / "records")
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: "/x")
    real = netns._run

    def refuse(argv, check=True):
        if argv[:3] == ["ip", "netns", "add"]:
            return subprocess.CompletedProcess(argv, 1, "", "mount: permission denied\n")
        return real(argv, check)

    monkeypatch.setattr(netns, "_run", refuse)
    with pytest.raises(TestbedError, match="cannot create network namespace.*permission denied"):
        Testbed(2, Shaping.for_rate(50e6)).up()
    assert list((tmp_path / "records").iterdir()) == []  # the record went with the attempt


def test_committed_comparison_is_reproduced():
    """`testbed compare docs/testbed/previous/measured.parquet --fit alpha --calibrate 1MiB`
    gives the committed table (the old table, measured before the endpoint fit)."""
    from transitsim.testbed.model import compare

    measured = pd.read_parquet(REPO / "docs" / "testbed" / "previous" / "measured.parquet")
    committed = pd.read_csv(REPO / "docs" / "testbed" / "previous" / "comparison.csv")
    rate = measured["rate_bps"].min()
    ours = compare(measured[measured["rate_bps"] == rate], (1 << 20,), fit="alpha")
    theirs = committed[committed["rate_bps"] == rate].reset_index(drop=True)
    assert len(ours) == len(theirs) > 0
    assert ours["simulated_s"].to_numpy() == pytest.approx(theirs["simulated_s"], rel=1e-4)


@pytest.mark.parametrize("folder", ["", "two-sites", "repeat-3-rates"])
def test_committed_quiet_runs_are_reproduced_with_the_endpoint_fit(folder):
    """`transitsim testbed compare docs/testbed/<folder>/measured.parquet` (issue 25's quiet runs,
    endpoint fitted on 64 KiB and 4 MiB) gives the committed comparison.csv, at the slowest
    rate (every rate is fitted apart: one is enough to catch a change in the model)."""
    from transitsim.testbed.model import compare
    from transitsim.testbed.tables import check_measured

    path = REPO / "docs" / "testbed" / folder / "measured.parquet"
    measured = check_measured(pd.read_parquet(path), path)
    committed = pd.read_csv(path.parent / "comparison.csv")
    rate = measured["rate_bps"].min()
    ours = compare(measured[measured["rate_bps"] == rate])
    theirs = committed[committed["rate_bps"] == rate].reset_index(drop=True)
    assert len(ours) == len(theirs) > 0 and ours["host_fitted"].all()
    # the CSV holds 6 significant digits
    assert ours["simulated_s"].to_numpy() == pytest.approx(theirs["simulated_s"], rel=1e-5)
    assert (measured["loadavg_1m_at_start"] <= 1.5).all()  # begun on a quiet machine


def test_a_miss_is_measured_again_and_three_misses_fail():
    """`measured_within`, which the real-timing tests use: the first passing try is kept, a
    measurement that misses every try fails with every miss said."""
    tries = []
    kept = measured_within(lambda k: tries.append(k) or k, lambda k: None if k == 1 else "off")
    assert kept == 1 and tries == [0, 1]
    with pytest.raises(pytest.fail.Exception, match="try 1: off\ntry 2: off\ntry 3: off"):
        measured_within(lambda k: k, lambda k: "off")
