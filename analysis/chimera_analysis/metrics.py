"""The metrics file of `chimera train --metrics FILE` (DESIGN §5): one JSON object per iteration."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from . import AnalysisError

REQUIRED_FIELDS = ("step", "loss", "lr", "grad_norm", "iter_ms", "tokens_per_s",
                   "bubble_ratio", "peak_act_bytes")
OPTIONAL_FIELDS = ("val_loss",)


def _as_number(value, field: str, where: str) -> float:
    # The runtime writes null for a non-finite value (JSON has no NaN): keep it as NaN.
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnalysisError(f"{where}: field '{field}' is {value!r}, expected a number")
    return float(value)


def parse_record(obj, where: str) -> dict:
    """Validates one decoded JSON object and returns it with numeric fields as float/int."""
    if not isinstance(obj, dict):
        raise AnalysisError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    missing = [f for f in REQUIRED_FIELDS if f not in obj]
    if missing:
        raise AnalysisError(f"{where}: missing field(s) {', '.join(missing)}; a metrics line has "
                            f"{', '.join(REQUIRED_FIELDS)}")
    record = {f: _as_number(obj[f], f, where) for f in REQUIRED_FIELDS}
    record["step"] = int(record["step"])
    record["peak_act_bytes"] = int(record["peak_act_bytes"])
    for f in OPTIONAL_FIELDS:
        if f in obj:
            record[f] = _as_number(obj[f], f, where)
    return record


def read_metrics(path: str | Path) -> list[dict]:
    """Reads every step of a metrics file, in file order.

    A run killed mid-write can leave a truncated last line; that line alone is skipped. Any other
    malformed line is an error naming the file and line.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise AnalysisError(f"cannot read metrics file '{path}': {e.strerror}") from None
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    records = []
    for index, (lineno, line) in enumerate(numbered):
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if index == len(numbered) - 1 and not line.rstrip().endswith("}"):
                break  # truncated last line of an interrupted run
            raise AnalysisError(f"{where}: not a JSON object ({e.msg})") from None
        records.append(parse_record(obj, where))
    return records


def summarize(records: list[dict], warmup: int = 1) -> dict:
    """One run's figures: medians over the steps after `warmup` (the first steps include
    allocation and connection set-up), at least the last step when the run is that short."""
    if not records:
        raise AnalysisError("no metrics records to summarize")
    timed = records[min(warmup, len(records) - 1):]
    finite = lambda xs: [x for x in xs if not math.isnan(x)]  # noqa: E731
    iter_ms = finite([r["iter_ms"] for r in timed])
    tokens = finite([r["tokens_per_s"] for r in timed])
    bubbles = finite([r["bubble_ratio"] for r in timed])
    val = [r["val_loss"] for r in records if not math.isnan(r.get("val_loss", math.nan))]
    return {
        "steps": len(records),
        "iter_ms": statistics.median(iter_ms) if iter_ms else math.nan,
        "tokens_per_s": statistics.median(tokens) if tokens else math.nan,
        "bubble_ratio": statistics.fmean(bubbles) if bubbles else math.nan,
        "peak_act_bytes": max(r["peak_act_bytes"] for r in records),
        "final_loss": records[-1]["loss"],
        "val_loss": val[-1] if val else math.nan,
    }
