#!/usr/bin/python3
"""Chimera against GPipe, 1F1B and GEMS at their best layouts, predicted by `chimera plan`, next
to the range the Chimera paper reports (Li & Hoefler, SC'21: 1.16x-2.34x for GPT-2 1.3B on
2,048 Piz Daint nodes over the synchronous and asynchronous pipeline baselines); then the
schedules that came after the paper (split backward: zb-h1, chimera-zb, and the V-shaped ones
where this build has them) at their best layouts, against Chimera's best.

  /usr/bin/python3 analysis/paper_comparison.py [--bin build/release/bin/chimera]
      [--nodes 2048] [--global-batch 2048,4096,8192] [--network 10us,8GB/s]
      [--costs jobscripts/configs/p100-costs.toml] [--memory 16]
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ("gpipe", "1f1b", "gems")
NEWER = ("zb-h1", "chimera-zb", "zb-v", "dualpipev", "v-half", "v-min")
PAPER_RANGE = "1.16x-2.34x"


def known_schemes(args, names) -> tuple[str, ...]:
    """The names this binary's `chimera schedule` generates (a build may lack newer ones)."""
    return tuple(n for n in names if subprocess.run(
        [args.bin, "schedule", "--scheme", n, "-D", "4", "-N", "8", "--format", "json"],
        capture_output=True).returncode == 0)


def best_layouts(args, global_batch: int) -> dict[str, dict]:
    """The fastest layout of each scheme (the first row of each in the ranked CSV)."""
    with tempfile.TemporaryDirectory() as d:
        table = Path(d) / "plan.csv"
        cmd = [args.bin, "plan", "--model", args.model, "--nodes", str(args.nodes),
               "--memory", str(args.memory), "--network", args.network, "--costs", args.costs,
               "--global-batch", str(global_batch), "--csv", str(table),
               "--schemes", ",".join(("chimera", "chimera:doubling", "chimera:halving",
                                      "chimera:direct:4", "chimera:direct:8") + BASELINES +
                                     args.newer)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0 or not table.exists():
            raise SystemExit(f"error: {' '.join(cmd)} failed: "
                             f"{(result.stderr or result.stdout).strip()}")
        best: dict[str, dict] = {}
        with open(table, newline="") as f:
            for row in csv.DictReader(f):
                best.setdefault(row["scheme"], row)
    return best


def describe(row: dict) -> str:
    label = row["scheme"]
    if row["variant"] not in ("", "direct"):
        label += f" {row['variant']}"
    if int(row["pipes"]) > 2:
        label += f" {row['pipes']} pipes"
    return (f"{label} W={row['W']} D={row['D']} B={row['B']} N={row['N']}"
            f"{' recompute' if row['recompute'] == '1' else ''}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=str(ROOT / "build/release/bin/chimera"),
                   help="the chimera binary")
    p.add_argument("--model", default=str(ROOT / "jobscripts/configs/gpt2-1.3b.toml"))
    p.add_argument("--costs", default=str(ROOT / "jobscripts/configs/p100-costs.toml"))
    p.add_argument("--nodes", type=int, default=2048)
    p.add_argument("--memory", type=float, default=16.0, help="GiB per device")
    p.add_argument("--network", default="10us,8GB/s", help="ALPHA,BETA (chimera plan --network)")
    p.add_argument("--global-batch", default="2048,4096,8192",
                   help="comma-separated global batch sizes")
    args = p.parse_args(argv)
    args.newer = known_schemes(args, NEWER)
    batches = [int(x) for x in args.global_batch.split(",")]

    print(f"GPT-2 1.3B on {args.nodes} nodes, {args.memory:g} GiB per device, network "
          f"{args.network}, costs {Path(args.costs).name}")
    print(f"{'batch':>6}  {'chimera (best layout)':<44} {'seq/s':>8}" +
          "".join(f"  {'vs ' + b:>9}" for b in BASELINES))
    for g in batches:
        best = best_layouts(args, g)
        if "chimera" not in best:
            print(f"{g:>6}  no chimera layout fits or exists")
            continue
        chimera = best["chimera"]
        speedups = [f"{float(chimera['samples_per_s']) / float(best[b]['samples_per_s']):>8.2f}x"
                    if b in best else f"{'-':>9}" for b in BASELINES]
        print(f"{g:>6}  {describe(chimera):<44} {float(chimera['samples_per_s']):>8.1f}  " +
              "  ".join(speedups))
        for b in BASELINES:
            if b in best:
                print(f"{'':>8}{b:<6} at its best: {describe(best[b])}, "
                      f"{float(best[b]['samples_per_s']):.1f} seq/s")
        for b in args.newer:
            if b in best:
                ratio = float(best[b]["samples_per_s"]) / float(chimera["samples_per_s"])
                print(f"{'':>8}{b:<10} at its best: {describe(best[b])}, "
                      f"{float(best[b]['samples_per_s']):.1f} seq/s ({ratio:.2f}x Chimera's best)")
    print(f"paper (Li & Hoefler, SC'21): Chimera {PAPER_RANGE} over the synchronous and "
          "asynchronous pipeline approaches, GPT-2 1.3B on 2,048 Piz Daint nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
