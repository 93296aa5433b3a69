#!/usr/bin/python3
"""parallel.shard_optimizer against the unsharded run, printing a table per section:

  memory  peak RSS per rank (the kernel's high-water mark of each rank's process) of a W 2 x D 2
          Chimera run of GPT-2 L4 C512 V50257 with real compute, sharded and unsharded, and the
          saving against what the AdamW moments account for: every D = 2 worker holds both
          stages, so its moments are 8 bytes x the whole model; sharded over a stage's 2W = 4
          holders a rank keeps a quarter (target: saving >= 70% of moments x 3/4).
  time    median step time (steps after the first) sharded and unsharded: real compute at 4
          ranks (the run above), and emulated compute (--compute emulate, 20:40 ms ops) at 16
          ranks, Chimera W 4 x D 4 (target: within 5% of unsharded).

Usage: bench/sharded_optimizer.py [memory|time ...] [--chimera BIN] [--steps N]
Run from the repository root after a release build; the demo's Austen data (scripts/prepare-data)
is the training set. Timings on a shared machine are noisy: the two runs of a pair run back to
back, and the table shows their ratio.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = os.path.join(ROOT, "scripts", "mpirun-local")

# The model: GPT-2 L4 C512 V50257 (T 128, B 1, N 4 micro-batches per group).
REAL_MODEL = ["--set", "model.n_layer=4", "--set", "model.n_embd=512", "--set", "model.n_head=8",
              "--set", "model.n_ctx=128", "--set", "model.vocab_size=50257",
              "--set", "data.seq_len=128", "--set", "parallel.micro_batch_size=1",
              "--set", "parallel.micro_batches=4"]
# Emulation: the pipeline_emulation.py model (small tensors), 16 blocks for D = 4.
EMULATED_MODEL = ["--set", "model.n_layer=16", "--set", "model.n_embd=64", "--set",
                  "model.n_head=4", "--set", "model.n_ctx=64", "--set", "model.vocab_size=2048",
                  "--set", "data.seq_len=64", "--set", "parallel.micro_batch_size=1",
                  "--set", "parallel.micro_batches=8"]


def train(chimera, ranks, stages, shard, steps, extra):
    """Runs `chimera train`; returns (peak RSS per rank in MB, median step ms after the first)."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        # Each rank under /usr/bin/time: its process's maximum resident set size (kB), in a
        # file named by its rank.
        wrap = ["sh", "-c", f'exec /usr/bin/time -f %M -o {tmp}/rss.$OMPI_COMM_WORLD_RANK "$@"',
                "sh"]
        cmd = [MPIRUN, "-np", str(ranks)] + wrap + [
               chimera, "train", "--config", os.path.join(ROOT, "inputs", "demo.toml"),
               "--set", f"parallel.stages={stages}", "--set", "parallel.scheme=chimera",
               "--set", f"parallel.shard_optimizer={'true' if shard else 'false'}",
               "--set", f"train.steps={steps}", "--set", "train.eval_every=0",
               "--set", "checkpoint.dir=", "--set", "log.trace=", "--set", "log.every=1",
               "--set", "runtime.precision=fp32", "--metrics", metrics] + extra
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        if r.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
        rss = []
        for name in sorted(os.listdir(tmp), key=lambda n: int(n[4:]) if n[4:].isdigit() else -1):
            if name.startswith("rss."):
                with open(os.path.join(tmp, name)) as f:
                    rss.append(int(f.read().split()[-1]) * 1024 / 1e6)  # kB -> MB
        with open(metrics) as f:
            steps_ms = [json.loads(line)["iter_ms"] for line in f if line.strip()]
        return rss, statistics.median(steps_ms[1:])


def moments_mb():
    """AdamW's two fp32 moments of the whole model, in MB (1e6 bytes; the wte table once)."""
    c, v, layers, t = 512, 50257, 4, 128
    block = 12 * c * c + 13 * c  # attention, MLP, two LayerNorms
    params = v * c + t * c + layers * block + 2 * c
    return params * 8 / 1e6


def memory(args):
    print("peak RSS per rank, Chimera W 2 x D 2, GPT-2 L4 C512 V50257 (MB)")
    base, _ = train(args.chimera, 4, 2, False, args.steps, REAL_MODEL)
    shard, _ = train(args.chimera, 4, 2, True, args.steps, REAL_MODEL)
    moments = moments_mb()
    target = 0.7 * moments * 3 / 4
    print(f"{'rank':>4} {'unsharded':>10} {'sharded':>10} {'saving':>8}")
    for i, (a, b) in enumerate(zip(base, shard)):
        print(f"{i:>4} {a:>10.0f} {b:>10.0f} {a - b:>8.0f}")
    saving = statistics.mean(a - b for a, b in zip(base, shard))
    print(f"mean saving {saving:.0f} MB; the moments are {moments:.0f} MB, x 3/4 = "
          f"{moments * 3 / 4:.0f} MB; target >= 70% of that = {target:.0f} MB: "
          f"{'met' if saving >= target else 'NOT met'} ({saving / (moments * 3 / 4):.0%})")


def time_section(args):
    print("median step time after the first (ms), sharded against unsharded")
    print(f"{'run':<40} {'unsharded':>10} {'sharded':>10} {'ratio':>7}")
    for label, ranks, stages, extra in [
        ("real, Chimera W 2 x D 2, L4 C512", 4, 2, REAL_MODEL),
        ("emulated 20:40 ms, Chimera W 4 x D 4", 16, 4,
         EMULATED_MODEL + ["--compute", "emulate", "--cost", "20:40"]),
    ]:
        _, a = train(args.chimera, ranks, stages, False, args.steps, extra)
        _, b = train(args.chimera, ranks, stages, True, args.steps, extra)
        print(f"{label:<40} {a:>10.1f} {b:>10.1f} {b / a:>7.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sections", nargs="*", default=["memory", "time"])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    for s in args.sections:
        {"memory": memory, "time": time_section}[s](args)


if __name__ == "__main__":
    main()
