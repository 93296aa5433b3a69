#!/usr/bin/env python3
"""What a slow file system's read latency costs a training step, with the next step's samples
read while this step computes (data.prefetch = true) and without (false).

Runs the same job with each of data.prefetch = true and false, without and with
CHIMERA_TEST_READ_LATENCY_MS (test only: every sample read waits that long, as a parallel file
system's latency would), the four variants alternating in each round, and prints the median mean
iteration of each (the `done:` line), how long rank 0 waited for its reads per step (the
`sample reads:` line: what the reads put on the training's path, a figure a loaded machine's
noise does not swamp), what the latency adds to both with and without prefetch (as a share of
the step without latency), and whether all runs' losses are identical.
Default: the demo (inputs/demo.toml, Chimera on 4 ranks), 20 ms per read.

Usage: bench/read_latency.py [--chimera build/release/bin/chimera] [--np 4] [--steps 20]
                             [--latency-ms 20] [--repeat 3] [--config inputs/demo.toml]
                             [--set key=value ...]
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


def run(args, prefetch, latency_ms, tmp):
    metrics = os.path.join(tmp, f"prefetch-{prefetch}-latency-{latency_ms}.jsonl")
    cmd = [os.path.join(ROOT, "scripts", "mpirun-local"), "-np", str(args.np), args.chimera,
           "train", "--config", args.config, "--steps", str(args.steps), "--metrics", metrics,
           "--set", "checkpoint.dir=", "--set", "train.eval_every=0", "--set", "log.trace=",
           "--set", f"data.prefetch={prefetch}"]
    for s in args.sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CHIMERA_TEST_READ_LATENCY_MS": str(latency_ms)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"the run with data.prefetch={prefetch}, {latency_ms} ms per read failed:\n"
                 f"{r.stdout}\n{r.stderr}")
    mean_ms = float(re.search(r"mean iteration ([0-9.]+) ms", r.stdout).group(1))
    read_ms = float(re.search(r"sample reads: the training waited ([0-9.]+) ms per step",
                              r.stdout).group(1))
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if l.strip()]
    return mean_ms, read_ms, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--config", default="inputs/demo.toml")
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds of the four variants, alternating (medians are printed; "
                        "default 3)")
    p.add_argument("--set", action="append", default=[], dest="sets")
    args = p.parse_args()
    variants = [(prefetch, latency) for prefetch in ("true", "false")
                for latency in (0, args.latency_ms)]
    times = {v: [] for v in variants}
    reads = {v: [] for v in variants}
    losses = {}
    with tempfile.TemporaryDirectory(prefix="chimera-latency-") as tmp:
        for _ in range(args.repeat):
            for v in variants:
                ms, read_ms, losses[v] = run(args, *v, tmp)
                times[v].append(ms)
                reads[v].append(read_ms)
    print(f"{args.config} on {args.np} ranks, {args.steps} steps, median of {args.repeat} "
          f"alternating runs of each variant")
    median = {v: statistics.median(t) for v, t in times.items()}
    read = {v: statistics.median(t) for v, t in reads.items()}
    for v in variants:
        print(f"data.prefetch={v[0]:<5}, {v[1]:4g} ms per sample read: mean iteration "
              f"{median[v]:8.1f} ms (all: {', '.join(f'{t:.0f}' for t in times[v])}); "
              f"rank 0 waited {read[v]:.1f} ms per step for its reads "
              f"({100 * read[v] / median[v]:.1f}% of the step)")
    for prefetch in ("true", "false"):
        fast, slow = median[(prefetch, 0)], median[(prefetch, args.latency_ms)]
        added = read[(prefetch, args.latency_ms)] - read[(prefetch, 0)]
        print(f"data.prefetch={prefetch:<5}: {args.latency_ms:g} ms per read costs "
              f"{100 * (slow - fast) / fast:+.1f}% of the step (step-time ratio {slow / fast:.3f});"
              f" rank 0's wait for reads grows by {added:.1f} ms per step "
              f"({100 * added / fast:.1f}% of the step without latency)")
    same = all(l == losses[variants[0]] for l in losses.values())
    print(f"losses identical in all runs: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
