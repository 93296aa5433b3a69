"""The Chrome trace of `chimera train --trace FILE` (DESIGN §5).

Complete events (`ph: "X"`), `pid` = rank, `tid` 0 compute / 1 p2p / 2 allreduce, `ts`/`dur` in
microseconds from one barrier-aligned clock, `args.step` the iteration. Compute events are named
after the schedule op: `<kind><micro-batches> s<stage>[ <pipe>]`, e.g. "F3 s1 down",
"B0,1 s2 up", "F5 s0 p2", "W4 s3" (kind F, B, I or W; pipe `down` = 0, `up` = 1, `p<k>` = k,
absent for single-pipe schemes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import AnalysisError, read_json

COMPUTE, P2P, ALLREDUCE = 0, 1, 2
LANES = (COMPUTE, P2P, ALLREDUCE)

_OP_NAME = re.compile(r"^([FBIW])(\d+(?:,\d+)*) s(\d+)(?: (down|up|p\d+))?$")


@dataclass(frozen=True)
class TraceEvent:
    rank: int
    lane: int
    name: str
    ts_us: float
    dur_us: float
    step: int

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True)
class ComputeOp:
    kind: str               # F, B, I or W
    mbs: tuple[int, ...]    # micro-batches the op covers
    stage: int
    pipe: int


def parse_op_name(name: str) -> ComputeOp:
    m = _OP_NAME.match(name)
    if not m:
        raise AnalysisError(f"compute event name '{name}' is not '<F|B|I|W><mb>[,<mb>...] "
                            "s<stage>[ down|up|p<k>]'")
    kind, mbs, stage, pipe = m.groups()
    pipe_index = {None: 0, "down": 0, "up": 1}.get(pipe)
    if pipe_index is None:
        pipe_index = int(pipe[1:])
    return ComputeOp(kind, tuple(int(x) for x in mbs.split(",")), int(stage), pipe_index)


def read_trace(path: str | Path) -> list[TraceEvent]:
    """Every complete event of the trace (metadata events are skipped), sorted by rank, lane, time."""
    path = Path(path)
    doc = read_json(path, "trace")
    raw = doc.get("traceEvents") if isinstance(doc, dict) else doc  # both Chrome trace forms
    if not isinstance(raw, list):
        raise AnalysisError(f"{path}: expected a Chrome trace with a 'traceEvents' list")
    events = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            lane = int(e["tid"])
            if lane not in LANES:
                raise ValueError
            events.append(TraceEvent(rank=int(e["pid"]), lane=lane, name=str(e["name"]),
                                     ts_us=float(e["ts"]), dur_us=float(e["dur"]),
                                     step=int((e.get("args") or {}).get("step", 0))))
        except (KeyError, TypeError, ValueError):
            raise AnalysisError(f"{path}: traceEvents[{i}] is not a complete event with name, "
                                "pid, tid (0 compute, 1 p2p, 2 allreduce), ts and dur") from None
    if not events:
        raise AnalysisError(f"{path}: no complete (ph 'X') events")
    events.sort(key=lambda ev: (ev.rank, ev.lane, ev.ts_us))
    return events


def steps(events: list[TraceEvent]) -> list[int]:
    return sorted({e.step for e in events})


def events_of_step(events: list[TraceEvent], step: int) -> list[TraceEvent]:
    chosen = [e for e in events if e.step == step]
    if not chosen:
        raise AnalysisError(f"the trace has no events of step {step}; it has steps "
                            f"{', '.join(map(str, steps(events)))}")
    return chosen


def peak_in_flight(events: list[TraceEvent]) -> dict[int, int]:
    """Peak number of micro-batches whose activations a rank holds, per rank.

    A micro-batch's activations are held from the start of its forward until the end of the op
    that frees them: B, or W when the backward is split (I keeps what W still needs). Counts are in
    schedule micro-batches (for backward halving, half micro-batches).
    """
    peaks = {}
    for rank in sorted({e.rank for e in events}):
        deltas = []
        for e in events:
            if e.rank != rank or e.lane != COMPUTE:
                continue
            op = parse_op_name(e.name)
            if op.kind == "F":
                deltas.append((e.ts_us, 1, len(op.mbs)))
            elif op.kind in ("B", "W"):
                deltas.append((e.end_us, 0, -len(op.mbs)))
        held = peak = 0
        # At equal times, frees (0) come before allocations (1): a B ending as an F starts
        # hands its memory over.
        for _, _, delta in sorted(deltas):
            held += delta
            peak = max(peak, held)
        peaks[rank] = peak
    return peaks
