"""The per-worker memory table of `chimera plan --memory-csv FILE`: one row per scheme and worker
with the bytes of weights, gradients, optimizer state, activations and workspace."""
from __future__ import annotations

import csv
from pathlib import Path

from . import AnalysisError

PARTS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
         "workspace_bytes")
COLUMNS = ("scheme", "layout", "worker") + PARTS


def read_plan_memory(path: str | Path) -> dict[str, list[dict]]:
    """Rows by scheme label, each sorted by worker."""
    path = Path(path)
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise AnalysisError(f"cannot read plan memory table '{path}': {e.strerror}") from None
    by_scheme: dict[str, list[dict]] = {}
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise AnalysisError(f"{path}: missing column(s) {', '.join(missing)}; write it with "
                                "`chimera plan --memory-csv`")
        for lineno, raw in enumerate(reader, start=2):
            try:
                row = {"scheme": raw["scheme"], "layout": raw["layout"],
                       "worker": int(raw["worker"])}
                row.update({p: float(raw[p]) for p in PARTS})
            except ValueError:
                raise AnalysisError(f"{path}:{lineno}: worker and byte columns must be "
                                    "numbers") from None
            by_scheme.setdefault(row["scheme"], []).append(row)
    if not by_scheme:
        raise AnalysisError(f"{path}: no rows")
    for rows in by_scheme.values():
        rows.sort(key=lambda r: r["worker"])
    return by_scheme
