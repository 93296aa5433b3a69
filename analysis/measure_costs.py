#!/usr/bin/python3
"""Measure the per-layer costs of `chimera plan --costs` on this machine with `chimera bench model`.

  /usr/bin/python3 analysis/measure_costs.py --config jobscripts/configs/local.toml \\
      [--micro-batch-size 1] [--steps 3] [--bin build/release/bin/chimera] -o costs.toml

Times the three stages of the partition [1, L-2, 1]: the middle stage gives a block's forward
and backward (its time / (L-2)), the first stage the embedding (its time minus one block), the
last stage the head (its time minus one block); AdamW's time per parameter comes from the middle
stage. Threads: OMP_NUM_THREADS, as for `chimera train`.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = re.compile(r"time/step\s+[\d.]+ ms\s+\(forward ([\d.]+), backward ([\d.]+), "
                  r"optimizer ([\d.]+)\)")
PARAMS = re.compile(r"parameters\s+([\d.]+) MB")


def bench_stage(args, blocks: int, stage: int) -> dict:
    """Forward, backward and optimizer ms, and parameter count, of one stage of [1, L-2, 1]."""
    cmd = [args.bin, "bench", "model", "--config", args.config, "--steps", str(args.steps),
           "--sgemm-size", "0", "--stages", "3", "--stage", str(stage),
           "--set", f"parallel.partition=[1,{blocks - 2},1]",
           "--set", f"parallel.micro_batch_size={args.micro_batch_size}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
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
                   "to measure (the model needs at least 3 blocks)")
    p.add_argument("--micro-batch-size", type=int, default=1,
                   help="B0, the samples per op the costs are measured at (default 1)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per stage (default 3)")
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
    if blocks < 3:
        print(f"error: {args.config}: model.n_layer = {blocks}; measuring needs at least 3 blocks",
              file=sys.stderr)
        return 2

    first, middle, last = (bench_stage(args, blocks, s) for s in range(3))
    block_f, block_b = middle["forward"] / (blocks - 2), middle["backward"] / (blocks - 2)
    costs = {
        "embedding": (max(0.0, first["forward"] - block_f), max(0.0, first["backward"] - block_b)),
        "block": (block_f, block_b),
        "head": (max(0.0, last["forward"] - block_f), max(0.0, last["backward"] - block_b)),
    }
    optimizer_ns = middle["optimizer"] * 1e6 / middle["params"]
    machine = args.machine or f"measured with chimera bench model ({Path(args.config).name})"
    text = [f'machine = "{machine}"', "", "[model]", f"n_embd = {model['n_embd']}",
            f"n_head = {model['n_head']}", f"seq_len = {seq_len}",
            f"vocab_size = {model['vocab_size']}", "", "[scaling]",
            f"micro_batch_size = {args.micro_batch_size}", "overhead_ms = 0.0",
            f"optimizer_ns_per_param = {optimizer_ns:.4g}"]
    for name, (f_ms, b_ms) in costs.items():
        text += ["", f"[{name}]", f"forward_ms = {f_ms:.4g}", f"backward_ms = {b_ms:.4g}"]
    args.output.write_text("\n".join(text) + "\n")
    print(f"{args.output}: block F {block_f:.3g} ms, B {block_b:.3g} ms; head F "
          f"{costs['head'][0]:.3g} ms, B {costs['head'][1]:.3g} ms; AdamW {optimizer_ns:.3g} "
          "ns/param")
    return 0


if __name__ == "__main__":
    sys.exit(main())
