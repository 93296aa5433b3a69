#!/usr/bin/env python3
"""What a checkpoint save costs the training loop, asynchronous vs synchronous.

Three variants of the same job (default: GPT-2 L4 C512 V50257 on 2 ranks, a ~460 MB checkpoint):
no saves, a save every K steps with checkpoint.async = true, and the same with false, run in
alternating rounds (--repeat). Prints each variant's wall times (the `done:` lines) and their
medians, the extra time per save of each mode over the run without saves, their ratio, how
long the asynchronous saves' background writes took (and how much of it the disk's flush) next
to the time between two saves, how many saves waited for the one before, and whether all runs'
losses are identical. A save that comes due while the one before is still being written waits
for it (at most one in flight), so the asynchronous save hides its write only where the file
system writes a checkpoint faster than the run reaches the next save.

Usage: bench/checkpoint_saves.py [--chimera build/release/bin/chimera] [--np 2] [--steps 12]
                                 [--every 2] [--repeat 1] [--set key=value ...]
"""
import argparse
import json
import os
import re
import statistics
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


def run(args, sets, extra, tmp, name):
    metrics = os.path.join(tmp, name + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(ROOT, "scripts", "mpirun-local"), "-np", str(args.np), args.chimera,
           "train", "--steps", str(args.steps), "--metrics", metrics]
    for s in sets + extra:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode != 0:
        sys.exit(f"{name} failed:\n{r.stdout}\n{r.stderr}")
    seconds = float(re.search(r"done: \d+ steps in ([0-9.]+) s", r.stdout).group(1))
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if l.strip()]
    return {"seconds": seconds, "losses": losses,
            "waited": len(re.findall(r"waited [0-9.]+ s for the save", r.stdout)),
            "saves": [tuple(map(float, m)) for m in re.findall(
                r"training waited ([0-9.]+) s for the snapshot and ([0-9.]+) s to name the file; "
                r"written in the background in ([0-9.]+) s, ([0-9.]+) s of it flushing",
                r.stdout)]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chimera", default=os.path.join(ROOT, "build", "release", "bin", "chimera"))
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of the three variants, alternating (medians are compared)")
    p.add_argument("--set", action="append", default=[], dest="sets")
    args = p.parse_args()
    saves = args.steps // args.every
    runs = {"none": [], "true": [], "false": []}
    with tempfile.TemporaryDirectory(prefix="chimera-saves-") as tmp:
        data = os.path.join(tmp, "tokens.h5")
        write_tokens(data, 1 << 16, 1)
        sets = MODEL + [f"data.train={data}"] + args.sets
        size = 0
        for _ in range(args.repeat):
            for mode in runs:
                extra = []
                if mode != "none":
                    ckpt = os.path.join(tmp, "ckpt-" + mode)
                    extra = [f"checkpoint.dir={ckpt}", f"checkpoint.every={args.every}",
                             f"checkpoint.async={mode}"]
                runs[mode].append(run(args, sets, extra, tmp, "async-" + mode))
                if mode != "none":
                    size = max(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt)
                               if f.endswith(".h5"))
                    subprocess.run(["rm", "-rf", ckpt], check=True)

    def all_of(mode):
        return ", ".join(f"{r['seconds']:.1f}" for r in runs[mode])

    median = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
    print(f"{args.np} ranks, {args.steps} steps, a save every {args.every} steps ({saves} saves "
          f"of {size / 1e6:.1f} MB), median of {args.repeat} alternating round(s)")
    step_s = median["none"] / args.steps
    print(f"no saves:               {median['none']:7.2f} s "
          f"(all: {all_of('none')}); "
          f"{args.every * step_s:.2f} s of training between two saves")
    extra = {}
    for mode in ("true", "false"):
        extra[mode] = (median[mode] - median["none"]) / saves
        line = (f"checkpoint.async={mode:<5}: {median[mode]:7.2f} s "
                f"(all: {all_of(mode)}): "
                f"{extra[mode]:+.3f} s per save")
        if mode == "true":
            waited = sum(r["waited"] for r in runs[mode])
            line += f"; {waited} of {saves * args.repeat} saves waited for the one before"
        print(line)
        each = [s for r in runs[mode] for s in r["saves"]]
        if each:
            def mean(i):
                return statistics.mean(s[i] for s in each)
            print(f"  per save, on average: training waited {mean(0):.2f} s for the snapshot "
                  f"and {mean(1):.2f} s to name the file; the background write took "
                  f"{mean(2):.2f} s ({mean(3):.2f} s of it the flush to disk)")
    same = all(r["losses"] == runs["none"][0]["losses"] for rs in runs.values() for r in rs)
    ratio = extra["true"] / extra["false"] if extra["false"] > 0 else float("nan")
    print(f"async / sync extra time per save: {100 * ratio:.0f}%")
    print(f"losses identical in all runs: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
