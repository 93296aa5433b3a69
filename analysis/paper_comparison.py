#!/usr/bin/python3
"""Chimera against GPipe, 1F1B and GEMS at their best layouts, predicted by `chimera plan`, next
to the range the Chimera paper reports (Li & Hoefler, SC'21: 1.16x-2.34x for GPT-2 1.3B on
2,048 Piz Daint nodes over the synchronous and asynchronous pipeline baselines); then the
schedules that came after the paper (split backward: zb-h1, chimera-zb, and the V-shaped ones
where this build has them) at their best layouts, against Chimera's best.

With --shard-study: what sharding the AdamW moments over each stage's holders
(`chimera plan --shard-optimizer`) unlocks for Chimera at D = 8 (W = nodes / 8, N = 8): the
largest micro-batch B and the deepest model (n_layer, B = 1) that fit without recomputation,
with and without sharding, and the throughput predicted for them against the best baseline
(GPipe, 1F1B, GEMS at their best layouts, sharded or not) at the same global batch; a Markdown
table.

  /usr/bin/python3 analysis/paper_comparison.py [--bin build/release/bin/chimera]
      [--nodes 2048] [--global-batch 2048,4096,8192] [--network 10us,8GB/s]
      [--costs jobscripts/configs/p100-costs.toml] [--memory 16] [--shard-study]
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ("gpipe", "1f1b", "gems")
NEWER = ("zb-h1", "chimera-zb", "zb-v", "dualpipev", "bitpipe", "bitpipe-zb", "v-half", "v-min")
PAPER_RANGE = "1.16x-2.34x"


def known_schemes(args, names) -> tuple[str, ...]:
    """The names this binary's `chimera schedule` generates (a build may lack newer ones)."""
    return tuple(n for n in names if subprocess.run(
        [args.bin, "schedule", "--scheme", n, "-D", "4", "-N", "8", "--format", "json"],
        capture_output=True).returncode == 0)


def machine_args(args) -> list[str]:
    return ["--model", args.model, "--memory", str(args.memory), "--network", args.network,
            "--costs", args.costs]


def best_layouts(args, global_batch: int, schemes: tuple[str, ...] | None = None,
                 extra: tuple[str, ...] = ()) -> dict[str, dict]:
    """The fastest layout of each scheme (the first row of each in the ranked CSV)."""
    if schemes is None:
        schemes = (("chimera", "chimera:doubling", "chimera:halving", "chimera:direct:4",
                    "chimera:direct:8") + BASELINES + args.newer)
    with tempfile.TemporaryDirectory() as d:
        table = Path(d) / "plan.csv"
        cmd = [args.bin, "plan", *machine_args(args), "--nodes", str(args.nodes),
               "--global-batch", str(global_batch), "--csv", str(table),
               "--schemes", ",".join(schemes), *extra]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode == 1 and not table.exists():
            return {}  # nothing fits
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


def predict_chimera_d8(args, batch: int, sets: tuple[str, ...], shard: bool) -> dict:
    """Chimera at D = 8, W = nodes / 8, N = 8, micro-batch `batch`, without recomputation."""
    cmd = [args.bin, "plan", *machine_args(args), "--predict", "--schemes", "chimera",
           "-W", str(args.nodes // 8), "-D", "8", "-N", "8", "-B", str(batch),
           "--format", "json", *(x for s in sets for x in ("--set", s))]
    if shard:
        cmd.append("--shard-optimizer")
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {result.stderr.strip()}")
    return json.loads(result.stdout.splitlines()[0])


def best_baseline(args, global_batch: int, sets: tuple[str, ...]) -> dict | None:
    """The fastest of GPipe, 1F1B and GEMS at any layout, sharded or not."""
    sets_args = tuple(x for s in sets for x in ("--set", s))
    rows = [row for extra in ((), ("--shard-optimizer",))
            for row in best_layouts(args, global_batch, BASELINES, sets_args + extra).values()]
    return max(rows, key=lambda r: float(r["samples_per_s"]), default=None)


def largest(fits, candidates):
    """The last candidate for which fits(candidate) holds, scanning up until one does not."""
    found = None
    for c in candidates:
        if not fits(c):
            break
        found = c
    return found


def shard_study(args) -> None:
    """What sharding the optimizer state unlocks for Chimera D = 8, as a Markdown table."""
    if args.nodes % 8:
        raise SystemExit("error: --shard-study needs --nodes divisible by 8 (Chimera D = 8)")
    gib = 1024 ** 3
    print(f"Chimera D=8 W={args.nodes // 8} N=8 without recomputation, {args.memory:g} GiB "
          f"per device, network {args.network}, costs {Path(args.costs).name}")
    print()
    print("| what is maximised | optimizer state | largest that fits | global batch | "
          "peak GiB | Chimera seq/s | best baseline at that batch and model | its seq/s | "
          "Chimera vs it |")
    print("|---|---|---|---|---|---|---|---|---|")
    studies = (
        ("micro-batch B", lambda v: (v, ()), [1, 2, 4, 8, 16, 32], lambda v: f"B = {v}"),
        ("model depth (B = 1)", lambda v: (1, (f"model.n_layer={v}",)),
         list(range(64, 257, 8)), lambda v: f"n_layer = {v}"),
    )
    for what, setup, candidates, label in studies:
        for shard in (False, True):
            def fits(v, shard=shard):
                batch, sets = setup(v)
                return predict_chimera_d8(args, batch, sets, shard)["fits"]
            v = largest(fits, candidates)
            state = "sharded" if shard else "full"
            if v is None:
                print(f"| {what} | {state} | nothing fits | | | | | | |")
                continue
            batch, sets = setup(v)
            p = predict_chimera_d8(args, batch, sets, shard)
            g = args.nodes // 8 * 8 * batch
            base = best_baseline(args, g, sets)
            if base is None:
                base_text, base_rate, ratio = "none fits", "", ""
            else:
                rate = float(base["samples_per_s"])
                sharded = " sharded" if base.get("shard_optimizer") == "1" else ""
                base_text = describe(base) + sharded
                base_rate = f"{rate:.1f}"
                ratio = f"{p['samples_per_s'] / rate:.2f}x"
            print(f"| {what} | {state} | {label(v)} | {g} | "
                  f"{p['peak_memory_bytes'] / gib:.2f} | {p['samples_per_s']:.1f} | "
                  f"{base_text} | {base_rate} | {ratio} |")


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
    p.add_argument("--shard-study", action="store_true",
                   help="what sharded optimizer state unlocks for Chimera D = 8 (a Markdown "
                        "table) instead of the comparison")
    args = p.parse_args(argv)
    if args.shard_study:
        shard_study(args)
        return 0
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
