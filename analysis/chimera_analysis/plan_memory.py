"""The per-worker memory table of `chimera plan --memory-csv FILE`: one row per scheme and worker
with the bytes of weights, gradients, optimizer state, activations and workspace."""
from __future__ import annotations

from pathlib import Path

from . import AnalysisError, read_csv_rows

PARTS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
         "workspace_bytes")
COLUMNS = ("scheme", "layout", "worker") + PARTS


def read_plan_memory(path: str | Path) -> dict[str, list[dict]]:
    """Rows by scheme label, each sorted by worker."""
    path = Path(path)
    by_scheme: dict[str, list[dict]] = {}
    raws = read_csv_rows(path, "plan memory table", COLUMNS,
                         "write it with `chimera plan --memory-csv`")
    for lineno, raw in enumerate(raws, start=2):
        try:
            row = {"scheme": raw["scheme"], "layout": raw["layout"], "worker": int(raw["worker"])}
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
