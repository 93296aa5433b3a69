#!/usr/bin/env python3
"""The job scripts against a real Slurm cluster on this machine (scripts/slurm-local): a weak
scaling sweep submitted with sbatch and collected; a 4-rank training job stopped with SIGUSR1,
requeued and resumed, and a chain of jobs with --dependency, both giving an uninterrupted run's
losses bit for bit; srun --mpi=pmix and mpirun inside an allocation, each with the node-local rank
from its launcher, as chimera train's log says it chose it.

Usage: test_slurm.py CHIMERA   (the cluster is brought up if it is not, and taken down again
only if this test brought it up; it skips, saying why, only where Slurm cannot start)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[2]
SLURM_LOCAL = REPO / "scripts" / "slurm-local"
RECORD_LOCAL_RANK = Path(__file__).resolve().parent / "record_local_rank"
CHIMERA = None
JOB_TIMEOUT_S = 120
ENV = {}
STARTED_HERE = False

# A tiny real model (losses must be real numbers to compare), 4 ranks: W=2 replicas of D=2.
TINY = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=16",
        "--set", "train.seed=7"]
LAYOUT = ["--scheme", "chimera", "-W", "2", "-D", "2", "-N", "2", "-B", "2",
          "--config", "jobscripts/configs/local.toml"]


def setUpModule():
    global STARTED_HERE
    if os.geteuid() != 0:
        raise unittest.SkipTest("slurm: the local cluster's daemons run as root "
                                "(scripts/slurm-local up); not root, so Slurm cannot start here")
    conf = subprocess.run([str(SLURM_LOCAL), "env"], capture_output=True, text=True, check=True)
    ENV.update(os.environ, SLURM_CONF=conf.stdout.strip().split("=", 1)[1],
               CHIMERA_MODULES="", CHIMERA_BACKEND="cpu", CHIMERA_SRUN_FLAGS="--mpi=pmix",
               OMP_NUM_THREADS="1", CHIMERA_BIN=str(CHIMERA))
    # A cluster of emulated hosts (label multihost) is not this one: `up` replaces it.
    emulated = subprocess.run([str(SLURM_LOCAL), "hosts"], capture_output=True).returncode == 0
    if emulated or subprocess.run([str(SLURM_LOCAL), "status"], capture_output=True).returncode != 0:
        started = time.monotonic()
        up = subprocess.run([str(SLURM_LOCAL), "up"], capture_output=True, text=True,
                            timeout=300)
        if up.returncode != 0:
            raise RuntimeError(f"scripts/slurm-local up failed:\n{up.stdout}{up.stderr}")
        STARTED_HERE = True
        print(f"slurm-local up in {time.monotonic() - started:.1f} s", file=sys.stderr)


def tearDownModule():
    if STARTED_HERE:
        subprocess.run([str(SLURM_LOCAL), "down"], capture_output=True, timeout=120)


# How a Slurm client fails when its link to slurmctld breaks mid-request (seen on a loaded
# machine: scontrol killed by SIGPIPE, the controller logging "Zero Bytes were transmitted").
TRANSIENT = re.compile(r"Socket timed out|Zero Bytes were transmitted|Unable to contact slurm "
                       r"controller|Connection refused")


def slurm(*args, check=True, env=None, attempts=1):
    """Runs a Slurm command; a query (attempts > 1) is repeated where the client lost its link
    to the controller, as users' tools do, and fails on anything else or after the last try."""
    for attempt in range(attempts):
        r = subprocess.run(list(args), cwd=REPO, env=env or ENV, capture_output=True, text=True,
                           timeout=60)
        transient = r.returncode < 0 or TRANSIENT.search(r.stderr) is not None
        if r.returncode == 0 or not transient or attempt + 1 == attempts:
            break
        print(f"{' '.join(args)} exited {r.returncode} ({r.stderr.strip()}); again",
              file=sys.stderr)
        time.sleep(1)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


def job_ids(text):
    return [int(m) for m in re.findall(r"Submitted batch job (\d+)", text)]


def job_info(job):
    """scontrol's fields of a job (accounting_storage/none: finished jobs stay MinJobAge s)."""
    line = slurm("scontrol", "show", "job", "-o", str(job), attempts=3)
    return dict(re.findall(r"(\w+)=(\S*)", line))


def wait_for(jobs, timeout=JOB_TIMEOUT_S):
    """Waits until every job has ended; returns their scontrol fields."""
    deadline = time.monotonic() + timeout
    while True:
        infos = {j: job_info(j) for j in jobs}
        if all(i["JobState"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                 "OUT_OF_MEMORY") for i in infos.values()):
            return infos
        if time.monotonic() > deadline:
            slurm("scancel", *map(str, jobs), check=False)
            raise AssertionError(f"jobs not done after {timeout} s: "
                                 f"{ {j: i['JobState'] for j, i in infos.items()} }")
        time.sleep(0.5)


def write_tokens(path, n):
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=rng.integers(0, 96, n).astype(np.uint16), chunks=(512,))
        f.attrs["vocab_size"] = np.int64(96)
        f.attrs["eos_token"] = np.int64(95)
        f.attrs["tokenizer"] = np.bytes_("test")


def losses(path):
    return [(r["step"], r["loss"], r["grad_norm"])
            for r in map(json.loads, Path(path).read_text().splitlines())]


class SlurmJobs(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="chimera-slurm-"))
        self.data = self.tmp / "tokens.h5"
        write_tokens(self.data, 1 << 15)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def submit(self, out, *point, sbatch=(), env=None):
        """The sbatch template on 4 ranks, 2 per node, as the drivers submit it."""
        name = "slurm-test"
        out.mkdir(parents=True, exist_ok=True)  # Slurm fails a job whose --output it cannot open
        args = ["sbatch", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--partition=debug",
                "--constraint=", "--cpus-per-task=1", "--time=00:05:00", f"--job-name={name}",
                f"--output={out}/{name}.%j.out", f"--chdir={REPO}", *sbatch,
                "jobscripts/daint/chimera.sbatch", "--study", "t", *LAYOUT, "--out", str(out),
                "--bin", str(CHIMERA), *TINY, "--set", f"data.train={self.data}", *point]
        return job_ids(slurm(*args, env=env))[0]

    def metrics(self, out):
        return out / "t-chimera-direct-P4-W2-D2-N2-B2.metrics.jsonl"

    def test_stopped_job_requeues_and_resumes_bit_for_bit(self):
        steps = 60  # ~60 ms each here: the signal after step 3 lands well before the end
        ref_out, out = self.tmp / "reference", self.tmp / "preempted"
        reference = self.submit(ref_out, "--steps", str(steps))
        job = self.submit(out, "--steps", str(steps), "--checkpoint-dir", str(self.tmp / "ckpt"))
        # The stop signal as Slurm sends it before a time limit: to the batch script only.
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not (self.metrics(out).exists() and len(losses(self.metrics(out))) >= 3):
            self.assertLess(time.monotonic(), deadline, "the job never reached step 3")
            time.sleep(0.2)
        slurm("scancel", "--signal=USR1", "--batch", str(job))
        infos = wait_for([reference, job])
        self.assertEqual(infos[reference]["JobState"], "COMPLETED")
        self.assertEqual(infos[job]["JobState"], "COMPLETED")
        self.assertEqual(infos[job]["Restarts"], "1", "the stopped job did not requeue itself")
        log = next(out.glob("*.out")).read_text()
        self.assertIn("requeueing job", log)
        self.assertRegex(log, r"resumed from .* at step [1-9]")
        got, want = losses(self.metrics(out)), losses(self.metrics(ref_out))
        self.assertLess(int(re.search(r"at step (\d+)", log).group(1)), steps, "not mid-run")
        self.assertEqual(len(want), steps)
        self.assertEqual(got, want)  # step, loss and gradient norm, bit for bit

    def test_dependency_chain_covers_a_longer_run(self):
        # Each job runs at most 5 steps (as if its time limit ended it) and the next continues.
        steps, per_job = 12, 5
        ref_out, out = self.tmp / "reference", self.tmp / "chain"
        reference = self.submit(ref_out, "--steps", str(steps))
        chain, previous = [], None
        for _ in range((steps + per_job - 1) // per_job):
            dependency = ([f"--dependency=afterok:{previous}", "--kill-on-invalid-dep=yes"]
                          if previous else [])
            previous = self.submit(out, "--steps", str(steps), "--stop-after", str(per_job),
                                   "--checkpoint-dir", str(self.tmp / "ckpt"), sbatch=dependency)
            chain.append(previous)
        infos = wait_for([reference, *chain])
        self.assertEqual({i["JobState"] for i in infos.values()}, {"COMPLETED"})
        self.assertEqual(losses(self.metrics(out)), losses(self.metrics(ref_out)))
        self.assertEqual(len(losses(self.metrics(ref_out))), steps)

    def test_launchers_give_the_node_local_rank(self):
        for launcher, variable, source in (("srun", 1, "SLURM_LOCALID"),
                                           ("mpirun", 2, "OMPI_COMM_WORLD_LOCAL_RANK")):
            with self.subTest(launcher=launcher):
                records = self.tmp / launcher
                records.mkdir()
                env = dict(ENV, CHIMERA_LAUNCHER=launcher, CHIMERA_RANK_RECORDS=str(records),
                           CHIMERA_REAL_BIN=str(CHIMERA))
                out = self.tmp / f"out-{launcher}"
                job = self.submit(out, "--steps", "2", "--bin", str(RECORD_LOCAL_RANK), env=env)
                info = wait_for([job])[job]
                log = next(out.glob("*.out")).read_text()
                self.assertEqual(info["JobState"], "COMPLETED", log)
                self.assertIn("chimera-job: exit status 0", log)
                ranks = [p.read_text().split() for p in records.iterdir()]
                self.assertEqual(len(ranks), 4)
                node_of = {int(r[3]): r[0] for r in ranks}
                self.assertEqual(sorted(node_of), [0, 1, 2, 3], ranks)
                # What chimera itself chose (and a GPU backend computes on), in world rank order.
                chosen = re.search(r"^node-local ranks \((\w+)\):((?: \d+)+)$", log, re.M)
                self.assertIsNotNone(chosen, log)
                self.assertEqual(chosen.group(1), source, log)
                local = [int(v) for v in chosen.group(2).split()]
                self.assertEqual(len(local), 4, log)
                self.assertEqual(local, [int(r[variable]) for r in
                                         sorted(ranks, key=lambda r: int(r[3]))], ranks)
                by_node = {}
                for world_rank, value in enumerate(local):
                    by_node.setdefault(node_of[world_rank], []).append(value)
                # 2 nodes x 2 ranks, as the allocation says: local ranks 0 and 1 on each.
                self.assertEqual(sorted(sorted(v) for v in by_node.values()), [[0, 1], [0, 1]],
                                 (ranks, local))
                self.assertEqual(len(losses(self.metrics(out))), 2)

    def test_weak_scaling_sweep_is_submitted_and_collected(self):
        out = self.tmp / "weak"
        submitted = slurm("jobscripts/weak_scaling", "--cluster", "local", "--nodes", "4,8",
                          "--schemes", "chimera", "--steps", "2", "--out", str(out))
        jobs = job_ids(submitted)
        self.assertEqual(len(jobs), 2)
        infos = wait_for(jobs)
        self.assertEqual([infos[j]["NumNodes"] for j in jobs], ["1", "2"])  # 4 ranks per node
        self.assertEqual({i["JobState"] for i in infos.values()}, {"COMPLETED"})
        result = subprocess.run(["/usr/bin/python3", "analysis/collect.py", str(out)], cwd=REPO,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("2 runs, 2 ok", result.stdout)
        plot = subprocess.run(["/usr/bin/python3", "analysis/plot.py", "scaling",
                               str(out / "weak.csv"), "-o", str(out / "weak.png")], cwd=REPO,
                              capture_output=True, text=True, timeout=120,
                              env=dict(ENV, MPLBACKEND="Agg"))
        self.assertEqual(plot.returncode, 0, plot.stderr)
        self.assertGreater((out / "weak.png").stat().st_size, 0)


if __name__ == "__main__":
    CHIMERA = Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
