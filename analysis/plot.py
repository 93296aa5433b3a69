#!/usr/bin/python3
"""Plots of the scaling studies (PNG).

  plot.py scaling STUDY.csv -o weak.png       throughput and parallel efficiency vs nodes
  plot.py bubble  STUDY.csv -o bubble.png     bubble ratio vs N per scheme, measured and theory
  plot.py gantt   TRACE.json -o gantt.png     per-rank timeline of one iteration
  plot.py memory  --trace chimera=T1.json --trace 1f1b=T2.json -o memory.png
                                              peak in-flight activations per worker per scheme
  plot.py memory  --plan-csv memory.csv -o memory.png
                                              predicted memory per worker per scheme

STUDY.csv is written by analysis/collect.py, TRACE.json by `chimera train --trace`, memory.csv
by `chimera plan --memory-csv`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chimera_analysis import AnalysisError  # noqa: E402
from chimera_analysis import plots  # noqa: E402
from chimera_analysis.plan_memory import read_plan_memory  # noqa: E402
from chimera_analysis.runs import read_csv  # noqa: E402
from chimera_analysis.trace import peak_in_flight, read_trace  # noqa: E402


def _labelled_path(text: str) -> tuple[str, Path]:
    label, sep, path = text.partition("=")
    if not sep or not label or not path:
        raise argparse.ArgumentTypeError(f"'{text}' is not LABEL=PATH (e.g. chimera=trace.json)")
    return label, Path(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="plot", required=True)

    p = sub.add_parser("scaling", help="throughput and parallel efficiency vs nodes")
    p.add_argument("table", type=Path, help="study CSV from analysis/collect.py")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    p.add_argument("--title", default="", help="figure title (default: the study names)")

    p = sub.add_parser("bubble", help="bubble ratio vs micro-batches N, measured and theory")
    p.add_argument("table", type=Path, help="study CSV from analysis/collect.py")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    p.add_argument("--title", default="", help="figure title")

    p = sub.add_parser("gantt", help="per-rank timeline of one iteration from a trace")
    p.add_argument("trace", type=Path, help="Chrome trace from `chimera train --trace`")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    p.add_argument("--step", type=int, default=None,
                   help="iteration to draw (default: the last one in the trace)")
    p.add_argument("--title", default="", help="figure title (default: the step)")

    p = sub.add_parser("memory", help="memory per worker, one bar per scheme: measured peak "
                                      "in-flight activations (traces) or the plan's prediction")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", dest="traces", type=_labelled_path, action="append",
                        metavar="LABEL=TRACE", help="a scheme's trace (W = 1); repeat per scheme")
    source.add_argument("--plan-csv", type=Path,
                        help="per-worker memory from `chimera plan --memory-csv`")
    p.add_argument("--act-mib", type=float, default=None,
                   help="activation MiB per micro-batch: plot MiB instead of micro-batches")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    p.add_argument("--title", default="", help="figure title")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.plot == "scaling":
            out = plots.plot_scaling(read_csv(args.table), args.output, args.title)
        elif args.plot == "bubble":
            out = plots.plot_bubble(read_csv(args.table), args.output, args.title)
        elif args.plot == "gantt":
            out = plots.plot_gantt(read_trace(args.trace), args.output, args.step, args.title)
        elif args.plan_csv:
            out = plots.plot_memory_breakdown(read_plan_memory(args.plan_csv), args.output,
                                              args.title)
        else:
            scale = args.act_mib if args.act_mib is not None else 1.0
            per_scheme = {label: {rank: peak * scale
                                  for rank, peak in peak_in_flight(read_trace(path)).items()}
                          for label, path in args.traces}
            ylabel = ("peak activation memory (MiB)" if args.act_mib is not None
                      else "peak in-flight micro-batches")
            out = plots.plot_memory(per_scheme, args.output, ylabel, args.title)
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
