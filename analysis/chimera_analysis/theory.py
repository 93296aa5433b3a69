"""Closed-form bubble ratios (DESIGN §3), for equal forward and backward costs (F = B).

Per worker an iteration is 2N busy slots (N forwards, N backwards) plus its idle slots:
GPipe and 1F1B idle 2(D-1) slots of which the ratio counts (D-1) F+B pairs, Chimera D-2 slots,
and Chimera with 2f pipelines D/f - 2 slots.
"""
from __future__ import annotations


def bubble_ratio(scheme: str, D: int, N: int, pipes: int = 0) -> float | None:
    """Theoretical bubble ratio, or None for schemes without a closed form here."""
    if scheme in ("gpipe", "1f1b"):
        return (D - 1) / (N + D - 1)
    if scheme == "chimera":
        f = max(pipes, 2) // 2
        idle = D // f - 2
        return idle / (2 * N + idle)
    return None
