#!/usr/bin/env python3
"""What a checkpoint save costs the training loop, asynchronous vs synchronous.

Three runs of the same job (default: GPT-2 L4 C512 V50257 on 2 ranks, a ~460 MB checkpoint):
no saves, a save every K steps with checkpoint.async = true, and the same with false. Prints
each run's wall time (the `done:` line), the extra time per save of each mode over the run
without saves, their ratio, and whether the three runs' losses are identical.

Usage: bench/checkpoint_saves.py [--chimera build/release/bin/chimera] [--np 2] [--steps 12]
                                 [--every 2] [--set key=value ...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "support"))
from token_data import write_tokens  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = ["model.n_layer=4", "model.n_embd=512", "model.n_head=8", "model.n_ctx=64",
         "model.vocab_size=50257", "data.seq_len=64", "parallel.stages=2",
         "parallel.micro_batches=2", "parallel.scheme=1f1b"]


def run(args, chimera, np_, sets, extra, tmp, name):
    metrics = os.path.join(tmp, name + ".jsonl")
    cmd = [os.path.join(ROOT, "scripts", "mpirun-local"), "-np", str(np_), chimera, "train",
           "--steps", str(args.steps), "--metrics", metrics]
    for s in sets + extra:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode != 0:
        sys.exit(f"{name} failed:\n{r.stdout}\n{r.stderr}")
    seconds = float(re.search(r"done: \d+ steps in ([0-9.]+) s", r.stdout).group(1))
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if l.strip()]
    waited = len(re.findall(r"waited [0-9.]+ s for the save", r.stdout))
    return seconds, losses, waited


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--set", action="append", default=[], dest="sets")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="chimera-saves-") as tmp:
        data = os.path.join(tmp, "tokens.h5")
        write_tokens(data, 1 << 16, 1)
        sets = MODEL + [f"data.train={data}"] + args.sets
        base, base_losses, _ = run(args, args.chimera, args.np, sets, [], tmp, "none")
        results = {}
        for mode in ("true", "false"):
            ckpt = os.path.join(tmp, "ckpt-" + mode)
            extra = [f"checkpoint.dir={ckpt}", f"checkpoint.every={args.every}",
                     f"checkpoint.async={mode}"]
            results[mode] = run(args, args.chimera, args.np, sets, extra, tmp, "async-" + mode)
            size = max(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt)
                       if f.endswith(".h5"))
        saves = args.steps // args.every
        print(f"{args.np} ranks, {args.steps} steps, a save every {args.every} steps ({saves} "
              f"saves of {size / 1e6:.1f} MB)")
        print(f"no saves:            {base:7.2f} s")
        extra = {}
        for mode, (seconds, losses, waited) in results.items():
            extra[mode] = (seconds - base) / saves
            print(f"checkpoint.async={mode:<5} {seconds:7.2f} s: {extra[mode]:+.3f} s per save"
                  f"{f', {waited} saves waited for the one before' if mode == 'true' else ''}")
        same = base_losses == results["true"][1] == results["false"][1]
        ratio = extra["true"] / extra["false"] if extra["false"] > 0 else float("nan")
        print(f"async / sync extra time per save: {100 * ratio:.0f}%")
        print(f"losses identical in the three runs: {'yes' if same else 'NO'}")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
