"""Chimera analysis: metrics, job outputs and traces -> CSV tables and PNG plots.

Modules:
  metrics  - the `--metrics` JSON-lines file (DESIGN §5) and its per-run summary
  runs     - run descriptors written by jobscripts/, job outputs -> one CSV per study
  trace    - the `--trace` Chrome trace (DESIGN §5): events, compute-op names, in-flight counts
  theory   - closed-form bubble ratios of the schemes
  plots    - the PNG figures (scaling, bubble ratio, Gantt chart, memory per worker)
"""


class AnalysisError(ValueError):
    """An input file is missing or malformed; the message names the file and what was expected."""
