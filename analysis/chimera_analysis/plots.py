"""PNG figures of the scaling studies (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from . import AnalysisError  # noqa: E402
from .theory import bubble_ratio  # noqa: E402
from .trace import ALLREDUCE, COMPUTE, P2P, TraceEvent, parse_op_name, steps  # noqa: E402

# (forward, backward) colours per pipe, as in the paper's figures: down pipe blue, up pipe orange.
PIPE_COLOURS = [("#9ecae1", "#2171b5"), ("#fdae6b", "#d94801"), ("#a1d99b", "#238b45"),
                ("#bcbddc", "#6a51a3")]
LANE_COLOURS = {P2P: "#969696", ALLREDUCE: "#31a354"}
# Distinct markers and dashes so that schemes with equal figures (GPipe and 1F1B) stay visible.
MARKERS = "os^Dvp*h"
DASHES = ["-", "--", "-.", ":"]


def series_label(row: dict) -> str:
    """The legend name of a run's scheme: 'chimera', 'chimera doubling', 'chimera 4 pipes'."""
    label = row["scheme"]
    if row["variant"] and row["variant"] != "direct":
        label += f" {row['variant']}"
    if row["pipes"] > 2:
        label += f" {row['pipes']} pipes"
    return label


def _ok(rows: list[dict]) -> list[dict]:
    good = [r for r in rows if r["status"] == "ok" and not math.isnan(r["samples_per_s"])]
    if not good:
        raise AnalysisError("the study table has no completed runs (status 'ok') to plot")
    return good


def best_per_nodes(rows: list[dict]) -> dict[str, dict[int, dict]]:
    """For each scheme, the fastest completed configuration at each node count (the paper
    compares every scheme at its best W, D, B)."""
    best: dict[str, dict[int, dict]] = defaultdict(dict)
    for r in _ok(rows):
        series = best[series_label(r)]
        if r["nodes"] not in series or r["samples_per_s"] > series[r["nodes"]]["samples_per_s"]:
            series[r["nodes"]] = r
    return best


def parallel_efficiency(points: dict[int, dict]) -> dict[int, float]:
    """Throughput per node relative to the smallest node count: 1 is perfect scaling, in weak
    scaling (work grows with nodes) and strong scaling (work fixed) alike."""
    base = min(points)
    per_node = points[base]["samples_per_s"] / base
    return {n: points[n]["samples_per_s"] / n / per_node for n in points}


def _node_axis(ax, nodes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(nodes)
    ax.set_xticklabels([str(n) for n in nodes])
    ax.set_xlabel("nodes")
    ax.grid(True, which="major", alpha=0.3)


def plot_scaling(rows: list[dict], out: str | Path, title: str = "") -> Path:
    """Throughput (sequences/s) and parallel efficiency against nodes, one line per scheme."""
    best = best_per_nodes(rows)
    nodes = sorted({n for series in best.values() for n in series})
    fig, (ax_thr, ax_eff) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, label in enumerate(sorted(best)):
        points = best[label]
        xs = sorted(points)
        style = {"marker": MARKERS[i % len(MARKERS)], "linestyle": DASHES[i % len(DASHES)],
                 "label": label}
        ax_thr.plot(xs, [points[n]["samples_per_s"] for n in xs], **style)
        eff = parallel_efficiency(points)
        ax_eff.plot(xs, [eff[n] for n in xs], **style)
    _node_axis(ax_thr, nodes)
    ax_thr.set_ylim(bottom=0)
    ax_thr.set_ylabel("throughput (sequences/s)")
    ax_thr.legend()
    _node_axis(ax_eff, nodes)
    ax_eff.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax_eff.set_ylim(0, 1.1)
    ax_eff.set_ylabel("parallel efficiency")
    studies = sorted({r["study"] for r in rows})
    fig.suptitle(title or f"{'/'.join(studies)} scaling")
    return _save(fig, out)


def plot_bubble(rows: list[dict], out: str | Path, title: str = "") -> Path:
    """Measured bubble ratio against N (markers) and the closed form (lines), one panel per D."""
    good = [r for r in _ok(rows) if not math.isnan(r["bubble_ratio"])]
    if not good:
        raise AnalysisError("the study table has no measured bubble ratios")
    depths = sorted({r["D"] for r in good})
    fig, axes = plt.subplots(1, len(depths), figsize=(5.5 * len(depths), 4.2), squeeze=False)
    for ax, D in zip(axes[0], depths):
        by_label: dict[str, list[dict]] = defaultdict(list)
        for r in good:
            if r["D"] == D:
                by_label[series_label(r)].append(r)
        for i, label in enumerate(sorted(by_label)):
            runs = sorted(by_label[label], key=lambda r: r["N"])
            colour = f"C{i}"
            ax.plot([r["N"] for r in runs], [r["bubble_ratio"] for r in runs],
                    MARKERS[i % len(MARKERS)], color=colour, label=f"{label} measured")
            n_lo, n_hi = runs[0]["N"], runs[-1]["N"]
            ns = list(range(n_lo, n_hi + 1))
            theory = [bubble_ratio(runs[0]["scheme"], D, n, runs[0]["pipes"]) for n in ns]
            if theory[0] is not None and runs[0]["variant"] in ("", "direct"):
                ax.plot(ns, theory, DASHES[i % len(DASHES)], color=colour, alpha=0.7,
                        label=f"{label} theory")
        ax.set_xlabel("micro-batches N")
        ax.set_ylabel("bubble ratio")
        ax.set_title(f"D = {D}")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title or "bubble ratio (theory: F = B)")
    return _save(fig, out)


def plot_gantt(events: list[TraceEvent], out: str | Path, step: int | None = None,
               title: str = "") -> Path:
    """Per-rank timeline of one iteration like the paper's figures: forward light, backward
    dark, one colour family per pipe, micro-batch ids in the boxes; p2p and allreduce as thin
    bars under each rank."""
    available = steps(events)
    step = available[-1] if step is None else step
    if step not in available:
        raise AnalysisError(f"the trace has no step {step}; it has steps "
                            f"{', '.join(map(str, available))}")
    chosen = [e for e in events if e.step == step]
    origin = min(e.ts_us for e in chosen)
    span_ms = (max(e.end_us for e in chosen) - origin) / 1e3
    ranks = sorted({e.rank for e in chosen})
    fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, 1.2 * len(chosen) / len(ranks))),
                                    0.6 * len(ranks) + 1.5))
    pipes_seen, kinds_seen = set(), set()
    for e in chosen:
        start, width = (e.ts_us - origin) / 1e3, e.dur_us / 1e3
        if e.lane == COMPUTE:
            op = parse_op_name(e.name)
            light, dark = PIPE_COLOURS[op.pipe % len(PIPE_COLOURS)]
            hatch = {"I": "//", "W": ".."}.get(op.kind, "")
            ax.broken_barh([(start, width)], (e.rank - 0.4, 0.6),
                           facecolors=light if op.kind == "F" else dark, edgecolor="black",
                           linewidth=0.4, hatch=hatch)
            pipes_seen.add(op.pipe)
            kinds_seen.add(op.kind)
            if width > span_ms / 120:
                ax.text(start + width / 2, e.rank - 0.1, ",".join(map(str, op.mbs)),
                        ha="center", va="center", fontsize=7,
                        color="black" if op.kind == "F" else "white")
        else:
            y = e.rank + (0.22 if e.lane == P2P else 0.32)
            ax.broken_barh([(start, width)], (y, 0.08), facecolors=LANE_COLOURS[e.lane])
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.set_ylim(max(ranks) + 0.6, min(ranks) - 0.6)
    ax.set_xlim(0, span_ms)
    ax.set_xlabel("time in iteration (ms)")
    handles = []
    # Two pipes are Chimera's down and up pipelines; with more, the trace numbers them (p<k>).
    two_way = pipes_seen == {0, 1}
    for pipe in sorted(pipes_seen):
        light, dark = PIPE_COLOURS[pipe % len(PIPE_COLOURS)]
        name = ("down", "up")[pipe] if two_way else (f"pipe {pipe}" if len(pipes_seen) > 1 else "")
        handles.append(Patch(facecolor=light, edgecolor="black", label=f"forward {name}".strip()))
        handles.append(Patch(facecolor=dark, edgecolor="black", label=f"backward {name}".strip()))
    if "I" in kinds_seen:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label="input gradient (I)"))
    if "W" in kinds_seen:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="..",
                             label="weight gradient (W)"))
    handles.append(Patch(facecolor=LANE_COLOURS[P2P], label="p2p"))
    handles.append(Patch(facecolor=LANE_COLOURS[ALLREDUCE], label="allreduce"))
    # The legend sits above the chart, where it stays close whatever the number of ranks.
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=min(len(handles), 6), fontsize="small", frameon=False)
    ax.set_title(title or f"step {step}", pad=12 + 14 * ((len(handles) + 5) // 6))
    return _save(fig, out)


def plot_memory(per_scheme: dict[str, dict[int, float]], out: str | Path, ylabel: str,
                title: str = "") -> Path:
    """Grouped bars: one group per worker, one bar per scheme."""
    if not per_scheme:
        raise AnalysisError("no schemes to plot memory for")
    workers = sorted({w for values in per_scheme.values() for w in values})
    width = 0.8 / len(per_scheme)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(workers) * len(per_scheme) + 2), 4.2))
    for i, label in enumerate(per_scheme):
        xs = [w - 0.4 + width * (i + 0.5) for w in workers]
        ax.bar(xs, [per_scheme[label].get(w, 0) for w in workers], width, label=label)
    ax.set_xticks(workers)
    ax.set_xlabel("worker")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.25 * max(max(v.values(), default=0) for v in per_scheme.values()) or 1)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(ncol=len(per_scheme), loc="upper center")
    ax.set_title(title or "memory per worker")
    return _save(fig, out)


def plot_memory_breakdown(by_scheme: dict[str, list[dict]], out: str | Path,
                          title: str = "") -> Path:
    """Stacked bars per worker and scheme from `chimera plan --memory-csv`: model states
    (weights, gradients, AdamW moments), peak activations and workspace, in GiB."""
    gib = 1024.0 ** 3
    labels = list(by_scheme)
    workers = sorted({r["worker"] for rows in by_scheme.values() for r in rows})
    width = 0.8 / len(labels)
    fig, ax = plt.subplots(figsize=(min(18.0, max(7.0, 0.35 * len(workers) * len(labels) + 3)), 4.5))
    stacks = (("model states", ("weights_bytes", "gradients_bytes", "optimizer_bytes"), ""),
              ("activations", ("activations_bytes",), "//"), ("workspace", ("workspace_bytes",),
                                                              ".."))
    for i, label in enumerate(labels):
        rows = {r["worker"]: r for r in by_scheme[label]}
        xs = [w - 0.4 + width * (i + 0.5) for w in workers]
        bottom = [0.0] * len(workers)
        for name, parts, hatch in stacks:
            heights = [sum(rows[w][p] for p in parts) / gib if w in rows else 0.0 for w in workers]
            ax.bar(xs, heights, width, bottom=bottom, color=f"C{i}", hatch=hatch,
                   edgecolor="white", linewidth=0.3,
                   label=f"{label} ({by_scheme[label][0]['layout']})" if name == "model states"
                   else None)
            bottom = [b + h for b, h in zip(bottom, heights)]
    handles, names = ax.get_legend_handles_labels()
    handles += [Patch(facecolor="grey", hatch=h, edgecolor="white", label=n)
                for n, _, h in stacks]
    ax.legend(handles=handles, fontsize="small", loc="upper center",
              bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    ax.set_xticks(workers)
    ax.set_xlabel("worker")
    ax.set_ylabel("memory per device (GiB)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title or "predicted memory per worker (chimera plan)")
    return _save(fig, out)


def _save(fig, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out
