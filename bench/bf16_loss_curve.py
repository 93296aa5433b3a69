#!/usr/bin/python3
"""Trains the demo twice, in fp32 and in bf16, and compares the two loss curves step by step.

Both runs are the demo (inputs/demo.toml: 4 local ranks, Chimera schedule, 150 steps, the same
seed and data), each in its own directory (runs/bf16-loss-curve/<precision>/: metrics.jsonl,
trace.json, checkpoints, train.log). bf16 is runtime.precision = bf16 where this CPU can run it
(AMX or AVX-512-BF16, asked of `chimera bench model --precision bf16`), else bf16-emulated: the
same bf16 rounding of GEMM operands on the fp32 units, which gives bf16's numerics but not its
speed; the script says which it ran.

Prints, for every logged step (log.every of the config, or --every), the fp32 loss, the bf16
loss and their relative difference |bf16 - fp32| / |fp32|, and the same for the validation loss
on evaluation steps; then the largest relative difference over every step of the runs.
Exit status: 0 when every difference is within --tolerance (2%), 1 when one exceeds it (or a
loss is missing or not finite), 2 when a run could not be made.

  /usr/bin/python3 bench/bf16_loss_curve.py [--steps 150] [--precision bf16-emulated] [--every 1]

Run from anywhere after scripts/build release; it tokenizes the demo's data if needed
(scripts/prepare-data). Takes about twice the demo's time.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, **kwargs):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kwargs)


def bf16_precision(chimera: str) -> str:
    """bf16 where this CPU runs bf16 GEMMs, else bf16-emulated (saying why)."""
    # A one-step benchmark of a tiny model: the CPU backend refuses bf16 at construction, with
    # exit status 2 and one line saying why, on a CPU without AMX or AVX-512-BF16.
    probe = run([chimera, "bench", "model", "--precision", "bf16", "--steps", "1", "--warmup",
                 "0", "--sgemm-size", "0", "--set", "model.n_layer=1", "--set", "model.n_embd=64",
                 "--set", "model.n_head=2", "--set", "model.vocab_size=512", "--set",
                 "data.seq_len=32", "--set", "parallel.micro_batch_size=1"])
    if probe.returncode == 0:
        print("bf16: runtime.precision = bf16 (oneDNN bf16 GEMMs on this CPU)")
        return "bf16"
    why = (probe.stderr or probe.stdout).strip().splitlines()
    print("bf16: runtime.precision = bf16-emulated, bf16 numerics on the fp32 units (not bf16's "
          "speed), because real bf16 is refused here:")
    print(f"  {why[-1] if why else f'exit status {probe.returncode}'}")
    return "bf16-emulated"


def train(args, precision: str, ranks: int) -> Path:
    """Runs the config at `precision` in its own directory; returns its metrics file."""
    out = args.out / precision
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    metrics = out / "metrics.jsonl"
    cmd = [str(ROOT / "scripts/mpirun-local"), "-np", str(ranks), args.bin, "train",
           "--config", str(args.config), "--set", f"runtime.precision={precision}",
           "--set", f"checkpoint.dir={out / 'checkpoints'}",
           "--metrics", str(metrics), "--trace", str(out / "trace.json")]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    env = dict(os.environ)
    # Four ranks share this machine's cores: one OpenMP thread each, as scripts/demo runs them.
    env.setdefault("OMP_NUM_THREADS", "1")
    print(f"{precision}: training ({' '.join(cmd[3:])}) ...", flush=True)
    start = time.monotonic()
    with open(out / "train.log", "w") as log:
        status = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    lines = (out / "train.log").read_text(errors="replace").strip().splitlines()
    if status.returncode != 0:
        print("\n".join(lines[-20:]), file=sys.stderr)
        raise SystemExit(f"error: the {precision} run failed (exit status {status.returncode}); "
                         f"log: {out / 'train.log'}")
    done = [line for line in lines if "done:" in line]
    print(f"{precision}: {time.monotonic() - start:.0f} s; {done[-1].split('done:', 1)[1].strip()}"
          if done else f"{precision}: {time.monotonic() - start:.0f} s")
    return metrics


def read_metrics(path: Path) -> dict[int, dict]:
    """step (1-based, as the log prints it) -> that step's metrics."""
    with open(path) as f:
        return {record["step"] + 1: record for record in map(json.loads, filter(str.strip, f))}


def relative(reference, value) -> float:
    """|value - reference| / |reference|; infinite when either is missing or not finite."""
    if reference is None or value is None or not math.isfinite(reference) or \
            not math.isfinite(value) or reference == 0:
        return math.inf
    return abs(value - reference) / abs(reference)


def fmt(x) -> str:
    return f"{x:.4f}" if x is not None else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--config", type=Path, default=ROOT / "inputs/demo.toml")
    p.add_argument("--steps", type=int, default=0, help="train.steps (default: the config's)")
    p.add_argument("--precision", choices=["bf16", "bf16-emulated"],
                   help="the bf16 run's runtime.precision (default: bf16 where this CPU runs it, "
                   "else bf16-emulated)")
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="largest relative loss difference allowed (default 0.02)")
    p.add_argument("--every", type=int, default=0,
                   help="print every K-th step (default: the config's log.every)")
    p.add_argument("--np", type=int, default=0,
                   help="ranks (default: parallel.stages of the config, one pipeline)")
    p.add_argument("--bin", default=str(ROOT / "build/release/bin/chimera"))
    p.add_argument("--out", type=Path, default=ROOT / "runs/bf16-loss-curve",
                   help="directory of the two runs")
    args = p.parse_args()
    args.config = args.config.resolve()
    args.out = args.out.resolve()
    args.bin = str(Path(args.bin).resolve())
    if not Path(args.bin).is_file():
        print(f"error: no {args.bin}: build first (scripts/build release)", file=sys.stderr)
        return 2
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    ranks = args.np or config.get("parallel", {}).get("stages", 4)
    every = args.every or config.get("log", {}).get("every", 10)

    if args.config == (ROOT / "inputs/demo.toml").resolve():
        prepared = run([str(ROOT / "scripts/prepare-data"), str(Path(args.bin).parent.parent)])
        if prepared.returncode != 0:
            print(prepared.stderr or prepared.stdout, file=sys.stderr)
            return 2
    bf16 = args.precision or bf16_precision(args.bin)
    fp32 = read_metrics(train(args, "fp32", ranks))
    low = read_metrics(train(args, bf16, ranks))

    steps = sorted(set(fp32) | set(low))
    print()
    print(f"{'step':>5}  {'fp32 loss':>9}  {bf16 + ' loss':>18}  {'rel diff':>8}  "
          f"{'fp32 val':>9}  {bf16 + ' val':>17}  {'rel diff':>8}")
    worst = {"loss": (0.0, None), "val_loss": (0.0, None)}  # (difference, step)
    for step in steps:
        a, b = fp32.get(step, {}), low.get(step, {})
        # Every step has a training loss (a step one run lacks counts as a failure); validation
        # losses only the evaluation steps.
        diffs = {"loss": relative(a.get("loss"), b.get("loss"))}
        if "val_loss" in a or "val_loss" in b:
            diffs["val_loss"] = relative(a.get("val_loss"), b.get("val_loss"))
        for key, diff in diffs.items():
            if worst[key][1] is None or diff > worst[key][0]:
                worst[key] = (diff, step)
        if step % every == 0 or step == steps[-1] or "val_loss" in diffs or \
                any(d > args.tolerance for d in diffs.values()):
            line = (f"{step:5d}  {fmt(a.get('loss')):>9}  {fmt(b.get('loss')):>18}  "
                    f"{100 * diffs['loss']:7.3f}%")
            if "val_loss" in diffs:
                line += (f"  {fmt(a.get('val_loss')):>9}  {fmt(b.get('val_loss')):>17}  "
                         f"{100 * diffs['val_loss']:7.3f}%")
            print(line)

    print()
    failed = False
    for key, name in (("loss", "training loss"), ("val_loss", "validation loss")):
        diff, step = worst[key]
        if step is None:
            print(f"max relative difference, {name}: none logged")
            continue
        verdict = "within" if diff <= args.tolerance else "EXCEEDS"
        failed |= diff > args.tolerance
        print(f"max relative difference, {name} ({bf16} vs fp32, {len(steps)} steps): "
              f"{100 * diff:.3f}% at step {step}, {verdict} {100 * args.tolerance:g}%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
