#!/usr/bin/python3
"""Pipeline benchmarks of the MPI runtime, each printing a table:

  emulation  `chimera train --compute emulate` for Chimera, 1F1B and GPipe at D in {4, 8, 16},
             N in {D, 2D}, W in {1, 2} with F:B = 1:2 (20:40 ms); measured iteration time
             against the simulator's prediction (target: within 5%), and Chimera/1F1B against
             16/21 at D=N=4. Ops of 20:40 ms keep what the free-network simulator leaves out (wake-ups
             of ranks sharing 2 cores: 0.1-0.2 ms late on average, at times 10 ms; messages;
             exposed allreduces) small next to the ops; at 10:20 ms some layouts with W = 2 come
             out up to 9% slower than predicted.
  overlap    Chimera D=4, W=2 with a trace: per stage, the share of its gradient allreduce hidden
             behind the worker's remaining compute (target >= 90% where the schedule leaves room).
  overhead   one process, real compute: `chimera train` (D=1) against `chimera bench model` for
             the same step (target: within 3%).
  schemes    the split-backward schedules against the anchors: chimera-zb, chimera (direct,
             halving), zb-h1, 1f1b, bitpipe, bitpipe-zb, zb-v and the controllable-memory V's,
             v-half and v-min, at D in {8, 16}, N = 2D, W = 1, F:B:W = 20:40:20 ms (I = W = B/2);
             measured iteration time next to the simulator's, and each scheme against chimera-zb
             (always run). --only NAME,... runs a subset.

Usage: bench/pipeline_emulation.py [emulation|overlap|overhead|schemes ...] [--chimera BIN] [--cost F:B]
                                   [--wait doorbell|poll] [--only SCHEME,...] [--stages D ...]
Run from the repository root after scripts/build release; the Austen data (scripts/prepare-data)
is needed for `overhead`.
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

# Emulation model: 16 blocks so that D = 16 has a block per stage; small tensors so that messages
# and allreduces cost little next to the emulated ops.
EMULATION_MODEL = ["--set", "model.n_layer=16", "--set", "model.n_embd=64", "--set",
                   "model.n_head=4", "--set", "model.n_ctx=64", "--set", "model.vocab_size=2048",
                   "--set", "data.seq_len=64", "--set", "parallel.micro_batch_size=1"]


def run(cmd, **kw):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def train(chimera, ranks, args, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = run([MPIRUN, "-np", str(ranks), chimera, "train", *args, "--steps", str(steps),
                   "--metrics", metrics], timeout=1200)
        with open(metrics) as f:
            rows = [json.loads(line) for line in f]
    return out, rows


def emulation(a):
    cost = a.cost or "20:40"
    print(f"emulated compute, F:B = {cost} ms, runtime.wait = {a.wait}; median of "
          f"{a.steps - 1} steps after a warm-up")
    print(f"{'scheme':<8} {'D':>3} {'N':>3} {'W':>2} {'ranks':>5} {'measured ms':>12} "
          f"{'simulator ms':>13} {'ratio':>7}")
    worst, measured = 0.0, {}
    for scheme in ("chimera", "1f1b", "gpipe"):
        for d in (4, 8, 16):
            for n in (d, 2 * d):
                for w in (1, 2):
                    out, rows = train(a.chimera, w * d, [
                        *EMULATION_MODEL, "--compute", "emulate", "--cost", cost,
                        "--set", f"parallel.scheme={scheme}", "--set", f"parallel.stages={d}",
                        "--set", f"parallel.micro_batches={n}", "--set", f"runtime.wait={a.wait}"],
                                     a.steps)
                    sim = float(re.search(r"simulator: ([0-9.]+) ms", out).group(1))
                    ms = statistics.median(r["iter_ms"] for r in rows[1:])
                    measured[(scheme, d, n, w)] = ms
                    worst = max(worst, abs(ms / sim - 1))
                    print(f"{scheme:<8} {d:>3} {n:>3} {w:>2} {w * d:>5} {ms:>12.1f} {sim:>13.1f} "
                          f"{ms / sim:>7.3f}", flush=True)
    print(f"largest deviation from the simulator: {100 * worst:.1f}%")
    ratio = measured[("chimera", 4, 4, 1)] / measured[("1f1b", 4, 4, 1)]
    print(f"Chimera / 1F1B at D = N = 4, W = 1: measured {ratio:.3f}, theory 16/21 = "
          f"{16 / 21:.3f}")


def schemes(a):
    cost = a.cost or "20:40:20"
    print(f"emulated compute, F:B:W = {cost} ms, W = 1, N = 2D; median of {a.steps - 1} steps "
          f"after a warm-up")
    print(f"{'scheme':<18} {'D':>3} {'N':>3} {'measured ms':>12} {'simulator ms':>13} "
          f"{'ratio':>7} {'vs chimera-zb':>14}")
    for d in a.stages:
        n = 2 * d
        rows_out = []
        for scheme, variant in (("chimera-zb", ""), ("chimera", "direct"),
                                ("chimera", "halving"), ("zb-h1", ""), ("1f1b", ""),
                                ("bitpipe", ""), ("bitpipe-zb", ""), ("zb-v", ""),
                                ("v-half", ""), ("v-min", "")):
            label = f"{scheme} {variant}".strip()
            if a.only and scheme != "chimera-zb" and label not in a.only.split(","):
                continue
            extra = ["--set", f"parallel.variant={variant}"] if variant else []
            if scheme in ("bitpipe", "bitpipe-zb", "zb-v", "v-half", "v-min"):  # 2D stages
                extra += ["--set", f"model.n_layer={max(16, 2 * d)}"]
            if variant == "halving":  # half micro-batches: the configured one holds two samples
                extra += ["--set", "parallel.micro_batch_size=2"]
            out, rows = train(a.chimera, d, [
                *EMULATION_MODEL, "--compute", "emulate", "--cost", cost,
                "--set", f"parallel.scheme={scheme}", *extra, "--set", f"parallel.stages={d}",
                "--set", f"parallel.micro_batches={n}", "--set", f"runtime.wait={a.wait}"],
                              a.steps)
            sim = float(re.search(r"simulator: ([0-9.]+) ms", out).group(1))
            ms = statistics.median(r["iter_ms"] for r in rows[1:])
            rows_out.append((label, ms, sim))
        zb_ms = rows_out[0][1]
        for label, ms, sim in rows_out:
            print(f"{label:<18} {d:>3} {n:>3} {ms:>12.1f} {sim:>13.1f} {ms / sim:>7.3f} "
                  f"{ms / zb_ms:>14.3f}", flush=True)


def overlap(a):
    cost = a.cost or "10:20"
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = os.path.join(tmp, "trace.json")
        # Stage gradients of 1.6 MB (2 blocks of C = 128 per stage) summed over 2W = 4 ranks.
        out, _ = train(a.chimera, 8, [
            "--set", "model.n_layer=8", "--set", "model.n_embd=128", "--set", "model.n_head=4",
            "--set", "model.vocab_size=2048", "--set", "data.seq_len=64", "--compute", "emulate",
            "--cost", cost, "--set", "parallel.stages=4", "--set", "parallel.micro_batches=4",
            "--trace", trace_path], a.steps)
        with open(trace_path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    last_end = {}
    for e in events:
        if e["tid"] == 0:
            key = (e["pid"], e["args"]["step"])
            last_end[key] = max(last_end.get(key, 0), e["ts"] + e["dur"])
    hidden, total = {}, {}
    for e in events:
        if e["tid"] != 2 or e["args"]["step"] == 0:
            continue
        end = last_end[(e["pid"], e["args"]["step"])]
        h = max(0.0, min(e["ts"] + e["dur"], end) - e["ts"])
        hidden[e["name"]] = hidden.get(e["name"], 0) + h
        total[e["name"]] = total.get(e["name"], 0) + e["dur"]
    print("Chimera D=4, W=2 (8 ranks), emulated F:B =", cost, "ms; allreduce of each gradient")
    print(f"{'gradient':<22} {'mean ms':>8} {'hidden':>8}")
    steps = a.steps - 1
    for name in sorted(total):
        share = hidden[name] / total[name] if total[name] > 0 else 1.0
        print(f"{name:<22} {total[name] / 1e3 / steps / 4:>8.2f} {100 * share:>7.1f}%")
    print("(a gradient whose last backward is the worker's final op has no room to hide)")


def overhead(a):
    model = ["--set", "model.n_layer=4", "--set", "model.n_embd=256", "--set", "model.n_head=4",
             "--set", "model.n_ctx=256", "--set", "data.seq_len=256"]
    env_threads = os.environ.get("OMP_NUM_THREADS", "2")
    bench = subprocess.run([a.chimera, "bench", "model", *model, "--set",
                            "parallel.micro_batch_size=4", "--steps", str(a.steps)],
                           capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": env_threads})
    if bench.returncode != 0:
        sys.exit(bench.stderr)
    step_ms = float(re.search(r"time/step\s+([0-9.]+) ms", bench.stdout).group(1))
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        r = subprocess.run([a.chimera, "train", *model, "--set", "parallel.scheme=gpipe",
                            "--set", "parallel.stages=1", "--set", "parallel.micro_batches=1",
                            "--set", "parallel.micro_batch_size=4", "--set",
                            "data.train=data/austen/train.h5", "--steps", str(a.steps + 1),
                            "--metrics", metrics], capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": env_threads})
        if r.returncode != 0:
            sys.exit(r.stderr)
        with open(metrics) as f:
            train_ms = statistics.mean(json.loads(l)["iter_ms"] for l in list(f)[1:])
    print(f"one process, L=4 C=256 H=4 T=256 B=4 V=50257, {env_threads} threads")
    print(f"  chimera bench model: {step_ms:.1f} ms/step")
    print(f"  chimera train D=1:   {train_ms:.1f} ms/step  ({100 * (train_ms / step_ms - 1):+.1f}%)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("which", nargs="*", default=["emulation", "overlap", "overhead"])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--cost", help="emulated F:B[:W] in ms (default 20:40 for emulation, 10:20 "
                   "for overlap, 20:40:20 for schemes)")
    p.add_argument("--steps", type=int, default=4, help="steps per run (the first warms up)")
    p.add_argument("--wait", default="doorbell", choices=["doorbell", "poll"],
                   help="emulation: how waiting ranks sleep (runtime.wait)")
    p.add_argument("--stages", type=int, nargs="+", default=[8, 16],
                   help="schemes: the pipeline depths D (default 8 16)")
    p.add_argument("--only", help="schemes: run only these labels (comma-separated, e.g. "
                   "bitpipe,bitpipe-zb), chimera-zb always")
    a = p.parse_args()
    os.chdir(ROOT)
    for which in a.which:
        {"emulation": emulation, "overlap": overlap, "overhead": overhead,
         "schemes": schemes}[which](a)
        print()


if __name__ == "__main__":
    main()
