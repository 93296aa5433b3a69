"""Chimera analysis: metrics, job outputs and traces -> CSV tables and PNG plots.

Modules:
  metrics  - the `--metrics` JSON-lines file (DESIGN §5) and its per-run summary
  runs     - run descriptors written by jobscripts/, job outputs -> one CSV per study
  trace    - the `--trace` Chrome trace (DESIGN §5): events, compute-op names, in-flight counts
  theory   - closed-form bubble ratios of the schemes
  plots    - the PNG figures (scaling, bubble ratio, Gantt chart, memory per worker)
"""
from __future__ import annotations

import csv
import json
from pathlib import Path


class AnalysisError(ValueError):
    """An input file is missing or malformed; the message names the file and what was expected."""


def read_json(path: Path, what: str):
    """The parsed JSON document at `path`; `what` names it in the error of an unreadable file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise AnalysisError(f"cannot read {what} '{path}': {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None


def read_csv_rows(path: Path, what: str, columns, how_to_write: str) -> list[dict]:
    """The rows of the CSV table at `path` as dicts of strings (the first data row is line 2),
    after checking that it has every one of `columns`; `how_to_write` ends the error if not."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise AnalysisError(f"cannot read {what} '{path}': {e.strerror}") from None
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise AnalysisError(f"{path}: missing column(s) {', '.join(missing)}; {how_to_write}")
        return list(reader)
