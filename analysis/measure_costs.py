#!/usr/bin/python3
"""Measure the per-layer costs of `chimera plan --costs` on this machine with `chimera bench model`.

  /usr/bin/python3 analysis/measure_costs.py --config jobscripts/configs/local.toml \\
      [--micro-batch-size 1] [--steps 5] [--bin build/release/bin/chimera] -o costs.toml

Times middle stages of 1 and of L-2 blocks (partitions [1, 1, L-2] and [1, L-2, 1]): their
difference over L-3 blocks is a block's forward and backward, the rest of the 1-block stage the
fixed cost of a stage op; the first and last stages of [1, L-2, 1] minus a block and that fixed
cost give the embedding and the head. AdamW's time per parameter comes from the larger middle
stage. `chimera bench model` prints 0.1 ms: measure at a micro-batch size where a block takes
well over that. Threads: OMP_NUM_THREADS, as for `chimera train`; OMP_WAIT_POLICY defaults to
passive (spinning threads distort timings on a shared machine).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = re.compile(r"time/step\s+[\d.]+ ms\s+\(forward ([\d.]+), backward ([\d.]+), "
                  r"optimizer ([\d.]+)[:)]")
PARAMS = re.compile(r"parameters\s+([\d.]+) MB")


def bench_stage(args, partition: list[int], stage: int) -> dict:
    """Forward, backward and optimizer ms, and parameter count, of one stage of a partition."""
    cmd = [args.bin, "bench", "model", "--config", args.config, "--steps", str(args.steps),
           "--sgemm-size", "0", "--stages", str(len(partition)), "--stage", str(stage),
           "--set", f"parallel.partition=[{','.join(map(str, partition))}]",
           "--set", f"parallel.micro_batch_size={args.micro_batch_size}"]
    # OpenMP threads that spin while they wait distort timings on a shared machine.
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    step, params = STEP.search(result.stdout), PARAMS.search(result.stdout)
    if result.returncode != 0 or not step or not params:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {(result.stderr or result.stdout).strip()}")
    forward, backward, optimizer = (float(x) for x in step.groups())
    return {"forward": forward, "backward": backward, "optimizer": optimizer,
            "params": float(params.group(1)) * 1e6 / 4}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--config", required=True, help="run config whose [model] and data.seq_len "
                   "to measure (the model needs at least 4 blocks)")
    p.add_argument("--micro-batch-size", type=int, default=1,
                   help="B0, the samples per op the costs are measured at (default 1)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per stage (default 5)")
    p.add_argument("--machine", default="", help="a description of this machine for the file")
    p.add_argument("--bin", default=str(ROOT / "build/release/bin/chimera"))
    p.add_argument("-o", "--output", type=Path, required=True, help="costs TOML to write")
    args = p.parse_args(argv)
    try:
        with open(args.config, "rb") as f:
            config = tomllib.load(f)
        model, seq_len = config["model"], config["data"]["seq_len"]
        blocks = model["n_layer"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
        print(f"error: {args.config}: needs [model] and [data] seq_len ({e})", file=sys.stderr)
        return 2
    if blocks < 4:
        print(f"error: {args.config}: model.n_layer = {blocks}; measuring needs at least 4 blocks",
              file=sys.stderr)
        return 2

    one = bench_stage(args, [1, 1, blocks - 2], 1)
    wide = [1, blocks - 2, 1]
    first, middle, last = (bench_stage(args, wide, s) for s in range(3))
    per_block = {k: (middle[k] - one[k]) / (blocks - 3) for k in ("forward", "backward")}
    if min(per_block.values()) <= 0:
        print(f"error: {blocks - 2} blocks did not take longer than 1 (forward {middle['forward']} "
              f"vs {one['forward']} ms, backward {middle['backward']} vs {one['backward']} ms): "
              "the timings are noise; use a larger --micro-batch-size, more --steps or a quieter "
              "machine", file=sys.stderr)
        return 1
    fixed = {k: max(0.0, one[k] - per_block[k]) for k in per_block}
    rest = lambda stage, k: max(0.0, stage[k] - per_block[k] - fixed[k])  # noqa: E731
    costs = {
        "embedding": (rest(first, "forward"), rest(first, "backward")),
        "block": (per_block["forward"], per_block["backward"]),
        "head": (rest(last, "forward"), rest(last, "backward")),
    }
    block_f, block_b = costs["block"]
    stage_overhead = (fixed["forward"] + fixed["backward"]) / 2
    optimizer_ns = middle["optimizer"] * 1e6 / middle["params"]
    machine = args.machine or f"measured with chimera bench model ({Path(args.config).name})"
    text = [f'machine = "{machine}"', "", "[model]", f"n_embd = {model['n_embd']}",
            f"n_head = {model['n_head']}", f"seq_len = {seq_len}",
            f"vocab_size = {model['vocab_size']}", "", "[scaling]",
            f"micro_batch_size = {args.micro_batch_size}", "overhead_ms = 0.0",
            f"stage_overhead_ms = {stage_overhead:.4g}",
            f"optimizer_ns_per_param = {optimizer_ns:.4g}"]
    for name, (f_ms, b_ms) in costs.items():
        text += ["", f"[{name}]", f"forward_ms = {f_ms:.4g}", f"backward_ms = {b_ms:.4g}"]
    args.output.write_text("\n".join(text) + "\n")
    print(f"{args.output}: block F {block_f:.3g} ms, B {block_b:.3g} ms; head F "
          f"{costs['head'][0]:.3g} ms, B {costs['head'][1]:.3g} ms; stage op "
          f"{stage_overhead:.3g} ms; AdamW {optimizer_ns:.3g} ns/param")
    return 0


if __name__ == "__main__":
    sys.exit(main())
