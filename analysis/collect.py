#!/usr/bin/python3
"""Collect the job outputs of scaling studies into one CSV per study.

  /usr/bin/python3 analysis/collect.py results/weak [--out-dir DIR] [--warmup K]

Reads every NAME.run.json under the folders (with NAME.metrics.jsonl and the job log NAME*.out
next to it, see docs/scaling.md) and writes DIR/<study>.csv: the configuration, the job status
(ok, running, pending, missing, failed) and the medians of the timed steps.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chimera_analysis import AnalysisError  # noqa: E402
from chimera_analysis.runs import collect_study, write_csv  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path,
                        help="study output folders (searched recursively for *.run.json)")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where to write <study>.csv (default: the first folder)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="leading steps left out of the medians (default 1)")
    args = parser.parse_args(argv)
    if args.warmup < 0:
        parser.error(f"--warmup is {args.warmup}; it must be >= 0")
    try:
        by_study = defaultdict(list)
        for folder in args.folders:
            for row in collect_study(folder, args.warmup):
                by_study[row["study"]].append(row)
        out_dir = args.out_dir or args.folders[0]
        out_dir.mkdir(parents=True, exist_ok=True)
        for study, rows in sorted(by_study.items()):
            path = out_dir / f"{study}.csv"
            write_csv(rows, path)
            ok = sum(r["status"] == "ok" for r in rows)
            print(f"{path}: {len(rows)} runs, {ok} ok")
            for r in rows:
                if r["status"] != "ok":
                    print(f"  {r['name']}: {r['status']} {r['error']}".rstrip())
                elif not math.isnan(r["samples_per_s"]):
                    print(f"  {r['name']}: {r['iter_ms']:.1f} ms/iter, "
                          f"{r['samples_per_s']:.2f} sequences/s")
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
