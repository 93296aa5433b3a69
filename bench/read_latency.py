#!/usr/bin/env python3
"""What a slow file system's read latency costs a training step, with the next step's samples
read while this step computes.

Runs the same job twice, without and with CHIMERA_TEST_READ_LATENCY_MS (test only: every sample
read waits that long, as a parallel file system's latency would), and prints the mean iteration
of each (the `done:` line), the difference as a share of the step, and whether the losses are
identical (pairs alternate, and medians are printed, as a shared machine is noisy). Default:
the demo (inputs/demo.toml, Chimera on 4 ranks), 20 ms per read.

Usage: bench/read_latency.py [--chimera build/release/bin/chimera] [--np 4] [--steps 20]
                             [--latency-ms 20] [--config inputs/demo.toml] [--set key=value ...]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(args, latency_ms, tmp):
    metrics = os.path.join(tmp, f"latency-{latency_ms}.jsonl")
    cmd = [os.path.join(ROOT, "scripts", "mpirun-local"), "-np", str(args.np), args.chimera,
           "train", "--config", args.config, "--steps", str(args.steps), "--metrics", metrics,
           "--set", "checkpoint.dir=", "--set", "train.eval_every=0", "--set", "log.trace="]
    for s in args.sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CHIMERA_TEST_READ_LATENCY_MS": str(latency_ms)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"the run with {latency_ms} ms per read failed:\n{r.stdout}\n{r.stderr}")
    mean_ms = float(re.search(r"mean iteration ([0-9.]+) ms", r.stdout).group(1))
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if l.strip()]
    return mean_ms, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--config", default="inputs/demo.toml")
    p.add_argument("--repeat", type=int, default=3,
                   help="run pairs, alternating (the median of each is printed; default 3)")
    p.add_argument("--set", action="append", default=[], dest="sets")
    args = p.parse_args()
    bases, slows = [], []
    with tempfile.TemporaryDirectory(prefix="chimera-latency-") as tmp:
        for _ in range(args.repeat):
            base, base_losses = run(args, 0, tmp)
            slow, slow_losses = run(args, args.latency_ms, tmp)
            bases.append(base)
            slows.append(slow)
    base, slow = statistics.median(bases), statistics.median(slows)
    print(f"{args.config} on {args.np} ranks, {args.steps} steps, median of {args.repeat} "
          f"alternating runs each (all: {', '.join(f'{b:.0f}' for b in bases)} ms and "
          f"{', '.join(f'{x:.0f}' for x in slows)} ms)")
    print(f"mean iteration, reads as fast as the disk:        {base:8.1f} ms")
    print(f"mean iteration, {args.latency_ms:g} ms more per sample read: {slow:8.1f} ms "
          f"({100 * (slow - base) / base:+.1f}% of the step)")
    same = base_losses == slow_losses
    print(f"losses identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
