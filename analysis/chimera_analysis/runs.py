"""Job outputs of a scaling study -> one table (CSV) per study.

Every run of jobscripts/ (sbatch or local twin) leaves three files named after its configuration
NAME in the study's output folder (docs/scaling.md):
  NAME.run.json        the run descriptor: study, scheme, variant, pipes, nodes, W, D, N, B, ...
  NAME.metrics.jsonl   `chimera train --metrics` (DESIGN §5)
  NAME[.JOBID].out     the job's stdout/stderr, ending with `chimera-job: exit status S`
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from . import AnalysisError, read_csv_rows, read_json
from .metrics import read_metrics, summarize

DESCRIPTOR_SUFFIX = ".run.json"
METRICS_SUFFIX = ".metrics.jsonl"
EXIT_LINE = re.compile(r"^chimera-job: exit status (\d+)(?: \([^)]*\))?\s*$")
ERROR_LINE = re.compile(r"^(?:\[rank \d+\] )?error: ")

# Descriptor fields and their types; `variant`, `cost` may be empty strings.
DESCRIPTOR_FIELDS = {
    "study": str, "name": str, "scheme": str, "variant": str, "pipes": int, "nodes": int,
    "W": int, "D": int, "N": int, "B": int, "seq_len": int, "model": str, "compute": str,
    "cost": str,
}

CSV_COLUMNS = list(DESCRIPTOR_FIELDS) + [
    "global_batch", "status", "steps", "iter_ms", "tokens_per_s", "samples_per_s",
    "bubble_ratio", "peak_act_bytes", "final_loss", "val_loss", "error",
]
INT_COLUMNS = {k for k, t in DESCRIPTOR_FIELDS.items() if t is int} | {
    "global_batch", "steps", "peak_act_bytes"}
FLOAT_COLUMNS = {"iter_ms", "tokens_per_s", "samples_per_s", "bubble_ratio", "final_loss",
                 "val_loss"}


def read_descriptor(path: str | Path) -> dict:
    """Reads and checks a NAME.run.json descriptor."""
    path = Path(path)
    obj = read_json(path, "run descriptor")
    if not isinstance(obj, dict):
        raise AnalysisError(f"{path}: expected a JSON object")
    desc = {}
    for field, kind in DESCRIPTOR_FIELDS.items():
        if field not in obj:
            raise AnalysisError(f"{path}: missing field '{field}'; a run descriptor has "
                                f"{', '.join(DESCRIPTOR_FIELDS)}")
        value = obj[field]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise AnalysisError(f"{path}: field '{field}' is {value!r}, expected an integer")
        if kind is str and not isinstance(value, str):
            raise AnalysisError(f"{path}: field '{field}' is {value!r}, expected a string")
        desc[field] = value
    for field in ("nodes", "W", "D", "N", "B", "seq_len"):
        if desc[field] < 1:
            raise AnalysisError(f"{path}: field '{field}' is {desc[field]}, expected >= 1")
    expected = path.name[: -len(DESCRIPTOR_SUFFIX)]
    if desc["name"] != expected:
        raise AnalysisError(f"{path}: name '{desc['name']}' does not match the file name "
                            f"(expected '{expected}')")
    return desc


def read_job_log(path: Path | None) -> tuple[int | None, str]:
    """The exit status from the job's last `chimera-job: exit status S` line (None while the job
    has not finished) and its first error line ('' if none)."""
    if path is None:
        return None, ""
    status, first_error = None, ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = EXIT_LINE.match(line)
            if m:
                status = int(m.group(1))
            elif not first_error and ERROR_LINE.match(line):
                first_error = line
    return status, first_error


def _job_log_for(folder: Path, name: str) -> Path | None:
    # Slurm appends the job id (NAME.JOBID.out); a resubmission leaves several: take the newest.
    logs = [p for p in folder.glob(f"{glob_escape(name)}*.out")
            if re.fullmatch(re.escape(name) + r"(\.\d+)?\.out", p.name)]
    return max(logs, key=lambda p: p.stat().st_mtime) if logs else None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def collect_run(descriptor_path: Path, warmup: int = 1) -> dict:
    """One CSV row: the descriptor, the job's status and the metrics summary."""
    desc = read_descriptor(descriptor_path)
    folder = descriptor_path.parent
    row = dict(desc)
    row["global_batch"] = desc["W"] * desc["N"] * desc["B"]
    exit_status, error = read_job_log(_job_log_for(folder, desc["name"]))
    metrics_path = folder / (desc["name"] + METRICS_SUFFIX)
    records = read_metrics(metrics_path) if metrics_path.exists() else []
    if exit_status not in (None, 0):
        row["status"] = "failed"
    elif not records:
        row["status"] = "missing" if exit_status == 0 else "pending"
    else:
        row["status"] = "ok" if exit_status == 0 else "running"
    row["error"] = error
    if records:
        summary = summarize(records, warmup)
        row.update(summary)
        row["samples_per_s"] = summary["tokens_per_s"] / desc["seq_len"]
    else:
        row.update({c: math.nan for c in FLOAT_COLUMNS})
        row.update({"steps": 0, "peak_act_bytes": 0})
    return row


def collect_study(folder: str | Path, warmup: int = 1) -> list[dict]:
    """Every run under `folder` (searched recursively), sorted by study, scheme and size."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AnalysisError(f"study folder '{folder}' does not exist")
    descriptors = sorted(folder.rglob("*" + DESCRIPTOR_SUFFIX))
    if not descriptors:
        raise AnalysisError(f"no run descriptors (*{DESCRIPTOR_SUFFIX}) under '{folder}'; "
                            "jobscripts/ writes one per run")
    rows = [collect_run(p, warmup) for p in descriptors]
    rows.sort(key=lambda r: (r["study"], r["scheme"], r["variant"], r["pipes"], r["nodes"],
                             r["D"], r["N"], r["B"]))
    return rows


def _format(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_csv(rows: list[dict], path: str | Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([_format(row[c]) for c in CSV_COLUMNS])


def read_csv(path: str | Path) -> list[dict]:
    """Reads a study CSV written by write_csv back into typed rows (empty numbers become NaN)."""
    path = Path(path)
    rows = []
    for lineno, raw in enumerate(read_csv_rows(path, "study table", CSV_COLUMNS,
                                               "write the table with analysis/collect.py"),
                                 start=2):
        row = {}
        for c in CSV_COLUMNS:
            text = raw[c]
            try:
                if c in INT_COLUMNS:
                    row[c] = int(text)
                elif c in FLOAT_COLUMNS:
                    row[c] = float(text) if text else math.nan
                else:
                    row[c] = text
            except ValueError:
                raise AnalysisError(f"{path}:{lineno}: column '{c}' is '{text}', expected a "
                                    "number") from None
        rows.append(row)
    return rows
