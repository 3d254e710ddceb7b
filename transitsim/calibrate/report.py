"""The measured table beside the calibrated prediction, per size: time, algbw and busbw (with
nccl-tests' own busbw factors), the error of each row, and the summary lines under it."""

import math

import pandas as pd

from transitsim.calibrate.accuracy import (
    HELD_OUT_MEDIAN_TOLERANCE,
    HELD_OUT_TOLERANCE,
    Accuracy,
    Errors,
)
from transitsim.calibrate.fit import Calibration, busbw_gbps
from transitsim.calibrate.nccl_tests import Row
from transitsim.calibrate.network_file import protocol_line, regime_line, size_text

COLUMNS = {
    "size_bytes": "Size",
    "ranks": "Ranks",
    "role": "Row",
    "regime": "Regime",
    "protocol": "Protocol",
    "measured_us": "Measured (us)",
    "predicted_us": "Predicted (us)",
    "error": "Error",
    "algbw_gbps": "algbw (GB/s)",
    "predicted_algbw_gbps": "pred. algbw",
    "busbw_gbps": "busbw (GB/s)",
    "predicted_busbw_gbps": "pred. busbw",
}
ROLES = {"fit": "fitted", "holdout": "held out", "small": "below --min-size"}


def _printed(row: Row, measured_s: float) -> tuple[float, float]:
    """The table's own algbw and busbw for the time used (out-of-place or in-place)."""
    if measured_s == row.time_s or math.isnan(row.in_algbw_gbps):
        return row.algbw_gbps, row.busbw_gbps
    return row.in_algbw_gbps, row.in_busbw_gbps


def comparison_frame(calibration: Calibration) -> pd.DataFrame:
    """One row per measured size: raw numbers (times in microseconds, bandwidths in GB/s; the
    measured algbw and busbw as the table printed them)."""
    records = []
    nccl = hasattr(calibration, "protocol_at")  # --model nccl: the protocol auto took
    for index, (point, predicted) in enumerate(
        zip(calibration.points, calibration.predicted_s, strict=True)
    ):
        size, ranks, collective = point.row.size_bytes, point.ranks, calibration.collective
        records.append(
            {
                "size_bytes": size,
                "ranks": ranks,
                "role": point.role,
                "regime": 0 if nccl else calibration.regime_for(size) + 1,
                "protocol": calibration.protocol_at(index) if nccl else "",
                "measured_us": round(point.measured_s * 1e6, 6),  # as printed, not 1916.3999...
                "predicted_us": predicted * 1e6,
                "error": predicted / point.measured_s - 1.0,
                "algbw_gbps": _printed(point.row, point.measured_s)[0],
                "predicted_algbw_gbps": size / predicted / 1e9 if predicted > 0 else 0.0,
                "busbw_gbps": _printed(point.row, point.measured_s)[1],
                "predicted_busbw_gbps": busbw_gbps(collective, ranks, size, predicted),
            }
        )
    frame = pd.DataFrame(records, columns=list(COLUMNS))
    frame = frame.drop(columns="regime" if nccl else "protocol")
    if len({t.ranks for t in calibration.tables}) == 1:
        frame = frame.drop(columns="ranks")
    return frame


def _time(us: float) -> str:
    return f"{us:,.1f}" if us >= 100 else f"{us:.3g}"


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """The same rows as people read them (sizes in binary units, signed percentages)."""
    shown = pd.DataFrame()
    for column in frame.columns:
        values = frame[column]
        if column == "size_bytes":
            shown[column] = [size_text(v) for v in values]
        elif column == "role":
            shown[column] = [ROLES[v] for v in values]
        elif column.endswith("_us"):
            shown[column] = [_time(v) for v in values]
        elif column == "error":
            shown[column] = [f"{v * 100:+.1f} %" for v in values]
        elif column.endswith("_gbps"):
            shown[column] = [f"{v:,.1f}" if v >= 100 else f"{v:.4g}" for v in values]
        else:
            shown[column] = [str(v) for v in values]
    return shown


def summary_lines(calibration: Calibration) -> list[str]:
    """The regimes (or NCCL protocols), the worst fitted error, and each held-out row's error."""
    nccl = hasattr(calibration, "protocol_at")
    if nccl:
        lines = [protocol_line(calibration, i) for i in range(len(calibration.fits))]
        how = "by thresholds" if calibration.switch_bytes else "the fastest"
        what = (
            f"{len(calibration.fits)} protocol(s), {how}, x latency, channel rate; "
            f"{sum(f.channel_bytes > 0 for f in calibration.fits)} channel_bytes"
        )
    else:
        lines = [regime_line(calibration, i) for i in range(len(calibration.regimes))]
        what = f"{len(calibration.regimes)} regime(s) x payload rate, latency"
    worst = calibration.worst("fit")
    fitted = sum(p.role == "fit" for p in calibration.points)
    verdict = "within" if worst is not None and worst <= calibration.tolerance else "NOT within"
    lines.append(
        f"rows of at least {size_text(calibration.min_size)}: {fitted} fitted, worst |error| "
        f"{(worst if worst is not None else math.nan) * 100:.1f} % ({verdict} "
        f"{calibration.tolerance * 100:.0f} %); {calibration.parameters} fitted parameters "
        f"({what})"
    )
    for point, predicted in zip(calibration.points, calibration.predicted_s, strict=True):
        if point.role == "holdout":
            error = predicted / point.measured_s - 1.0
            lines.append(
                f"held out {size_text(point.row.size_bytes)}: predicted "
                f"{_time(predicted * 1e6)} us, measured {_time(point.measured_s * 1e6)} us, "
                f"error {error * 100:+.1f} %"
            )
    return lines


def _pair(errors: Errors | None) -> str:
    if errors is None:
        return "-"
    return f"{errors.worst * 100:.1f} % / {errors.median * 100:.1f} %"


def accuracy_lines(accuracy: Accuracy, model: str, tolerance: float, median: float) -> list[str]:
    """The fit's errors on the rows it saw and on rows it never saw, alpha-beta's beside."""
    held = accuracy.held_sizes
    lines = [
        f"accuracy over rows of at least {size_text(accuracy.min_size)}, |error| worst / median "
        f"(targets: fitted {tolerance * 100:.0f} % / {median * 100:.0f} %, held out "
        f"{HELD_OUT_TOLERANCE * 100:.0f} % / {HELD_OUT_MEDIAN_TOLERANCE * 100:.0f} %):"
    ]
    if accuracy.held_out is not None:
        kept = accuracy.fitted.rows - accuracy.held_out.rows
        held_text = (
            f"held out {_pair(accuracy.held_out)} ({accuracy.held_out.rows} rows predicted by "
            f"the fit on the other {kept}, {accuracy.held_parameters} parameters)"
        )
        ab_held = f"held out {_pair(accuracy.alpha_beta_held_out)}"
    else:
        held_text = ab_held = "held out: none (--no-holdout, or fewer than 4 sizes)"
    lines.append(
        f"  {model} ({accuracy.parameters} parameters): fitted {_pair(accuracy.fitted)} "
        f"({accuracy.fitted.rows} rows); {held_text}"
    )
    lines.append(
        f"  alpha-beta (2 parameters: alpha {accuracy.alpha_s * 1e6:.4g} us, beta "
        f"{accuracy.beta_bps / 1e9:,.4g} GB/s): fitted {_pair(accuracy.alpha_beta_fitted)}; "
        f"{ab_held}"
    )
    if held:
        lines.append(
            "  held out: every second size, the ends kept: "
            + ", ".join(size_text(size) for size in held)
        )
    return lines
