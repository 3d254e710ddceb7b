"""`transitsim findings` section (h) (issue 26) on tiny traces with known losses and bytes."""

from pathlib import Path

import numpy as np
import pytest
from test_selection_findings import BAND, TOPK, write_run

from transitsim.commands import findings_cmd
from transitsim.findings.tables import findings
from transitsim.traces.format import read_trace, write_trace

DILOCO = dict(algorithm="diloco", inner_steps=10, outer_lr=0.7, outer_momentum=0.9)


def write_local_sgd(folder: Path, seed: int, final: float) -> Path:
    """H every 10 steps: 1,000 bytes on steps 10, 20, ... and nothing on the inner steps."""
    path = write_run(folder, "H", DILOCO, "diloco-h10", seed, final, payload=1000)
    trace = read_trace(path)
    steps = trace.steps.copy()
    steps["payload_bytes"] = np.where(steps["step"] % 10 == 0, 1000, 0)
    return write_trace(path, steps, trace.meta)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("local-sgd")
    for seed, offset in ((0, -0.01), (1, 0.01)):
        write_run(folder, "A", {"algorithm": "adamw"}, "adamw", seed, 2.0 + offset, payload=1000)
        write_run(folder, "B", TOPK, "topk", seed, 2.3 + offset, payload=200)
        write_run(folder, "C", BAND, "band", seed, 2.6 + offset, payload=150)
        write_local_sgd(folder, seed, 2.5 + offset)
    return folder


def test_section_h_counts_only_the_steps_that_send(runs: Path) -> None:
    traces = [read_trace(path) for path in sorted(runs.glob("*.parquet"))]
    table = findings(traces)["local_sgd"].set_index("variant")
    assert list(table.index) == ["A", "B", "C", "H"]
    h, a = table.loc["H"], table.loc["A"]
    # val = final + 2 (1 - step/60) every 10 steps; C's mean final is 2.6. H (2.49 and 2.51)
    # gets there at step 60 on both seeds: 6 syncs of 1,000 B. A at step 50: 50 x 1,000 B.
    assert h.steps_to_c == 60 and h.reached_c == "2/2"
    assert h.payload_to_c_bytes == 6000
    assert a.steps_to_c == 50 and a.payload_to_c_bytes == 50_000
    assert h.payload_to_c_vs_adamw == pytest.approx(6000 / 50_000)
    assert h.sync_steps == 6 and h.steps == 60 and a.sync_steps == 60
    assert h.vs_topk == "higher" and bool(h.local_sgd) and not bool(a.local_sgd)
    assert (table["status"] == "complete").all()


def test_section_h_answers_its_three_questions(runs: Path) -> None:
    traces = [read_trace(path) for path in sorted(runs.glob("*.parquet"))]
    claims = findings(traces)["local_sgd_claims"]
    verdicts = dict(zip(claims["question"], claims["verdict"], strict=True))
    measured = dict(zip(claims["question"], claims["measured"], strict=True))
    below_topk, fewer_bytes, fewer_steps = list(verdicts)
    assert verdicts[below_topk] == "no (n=2)"  # 2.50 against 2.30, two seeds
    # to 2.6, C's own seeds end at 2.59 and 2.61, so C is not there on both; B is, at step 60:
    # 60 x 200 = 12,000 B, the least of the every-step methods; H 6,000 B
    assert verdicts[fewer_bytes] == "yes (n=2)"
    assert "vs B top-k 2d64" in measured[fewer_bytes] and "0.500x" in measured[fewer_bytes]
    assert verdicts[fewer_steps] == "no (n=2)"  # 60 steps against AdamW's 50


def test_without_a_local_sgd_run_the_section_says_not_recorded(runs: Path, capsys) -> None:
    every_step = [path for path in sorted(runs.glob("*.parquet")) if "diloco" not in path.name]
    assert findings([read_trace(path) for path in every_step])["local_sgd"].empty
    assert findings_cmd.findings_command(every_step, 1.0, False, False, False) == 0
    out = capsys.readouterr().out
    assert "(h) Local SGD" in out and "not recorded" in out.split("(h) Local SGD")[1]
