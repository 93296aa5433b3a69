#!/usr/bin/env python3
"""`chimera train` under mpiexec, as a user runs it: bad input ends every rank with status 2 and
one line; a rank killed with SIGKILL ends the job within 60 s; SIGUSR1 (Slurm's warning before a
time limit) stops every rank after the current step with a checkpoint and status 0.

Usage: test_train_cli.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

CHIMERA = MPIEXEC = None
FLAGS = []

# A small model every case shares; cases change it with --set.
TINY = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=8"]


def mpirun(np_, args, timeout=120, env=None, **kwargs):
    cmd = [MPIEXEC, "-np", str(np_), *FLAGS, CHIMERA, "train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, **kwargs)


def write_tokens(path, n=4096):
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=rng.integers(0, 96, n).astype(np.uint16),
                             chunks=(1024,))
        f.attrs["vocab_size"] = np.int64(96)
        f.attrs["eos_token"] = np.int64(95)
        f.attrs["tokenizer"] = np.bytes_("test")


def run_serial(args):
    """`chimera ARGS` as one process (no launcher), one OpenMP thread."""
    return subprocess.run([CHIMERA, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def assert_one_error_line(test, r, needle):
    """Exit status 2 after exactly one `error:` line, which contains `needle`; returns the line."""
    ours = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith("error:")]
    test.assertEqual(r.returncode, 2, r.stdout + r.stderr)
    test.assertEqual(len(ours), 1, r.stdout + r.stderr)
    test.assertIn(needle, ours[0])
    return ours[0]


class BadInput(unittest.TestCase):
    def expect_one_error(self, np_, args, needle):
        start = time.monotonic()
        r = mpirun(np_, args)
        elapsed = time.monotonic() - start
        # Every rank exited with status 2 on its own (no abort): Open MPI then reports status 2.
        assert_one_error_line(self, r, needle)
        self.assertLess(elapsed, 60)
        return r

    def test_unwritable_outputs_are_refused_before_the_first_step(self):
        # Found at setup on every rank: not after the last step (the run's work lost), and not on
        # rank 0 alone (the others were left waiting for it).
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "tokens.h5")
            write_tokens(data)
            plain = os.path.join(tmp, "plain")
            open(plain, "w").close()
            for flag, needle in (("--metrics", "--metrics"), ("--trace", "--trace"),
                                 ("--save-dir", "cannot create the checkpoint directory")):
                with self.subTest(flag=flag):
                    r = self.expect_one_error(
                        2, [*TINY, "--set", f"data.train={data}", "--set", "parallel.stages=2",
                            "--steps", "2", flag, os.path.join(plain, "out")], needle)
                    self.assertNotIn("step ", r.stdout)

    def test_model_larger_than_the_machine_is_refused_at_setup(self):
        # From the configuration alone: not a bad_alloc or the OOM killer minutes later.
        self.expect_one_error(2, TINY + ["--set", "parallel.stages=2", "--set", "model.n_layer=4000",
                                         "--set", "model.n_embd=4096", "--set", "model.n_head=32"],
                              "more than this machine's")

    def test_directories_given_as_files_are_named_as_such(self):
        # A directory read as a stream reads nothing: --config DIR used to run on the defaults.
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "tokens.h5")
            write_tokens(data)
            two = [*TINY, "--set", "parallel.stages=2", "--set", f"data.train={data}"]
            self.expect_one_error(2, ["--config", tmp, *two],
                                  f"{tmp}: is a directory (expected a TOML config file)")
            self.expect_one_error(2, [*two, "--init", tmp], f"{tmp}: is a directory")

    def test_values_no_run_can_use_are_refused_naming_the_key(self):
        # Two cases under mpiexec, every rank alike; the rest as one process (MPI's singleton
        # start), as each mpiexec costs seconds.
        two = [*TINY, "--set", "parallel.stages=2"]
        self.expect_one_error(2, [*two, "--set", "train.lr=inf"], "'inf' is not a finite number")
        self.expect_one_error(2, [*two, "--save-every", "-1"], "(--save-every) = -1: must be >= 0")
        one = [*TINY, "--set", "parallel.scheme=gpipe", "--set", "parallel.stages=1"]
        with tempfile.TemporaryDirectory() as tmp:
            toml = os.path.join(tmp, "run.toml")
            with open(toml, "w") as f:
                f.write("[checkpoint]\nsave_timeout_s = inf\n")
            for args, needle in (
                    (["--set", "train.lr=nan"], "--set train.lr=nan: 'nan' is not a finite number"),
                    (["--config", toml], "config key 'checkpoint.save_timeout_s' = inf: expected a finite"),
                    (["--eval-every", "1", "--set", "train.eval_batches=0"],
                     "train.eval_batches = 0: must be at least 1"),
                    (["--save-every", "-2"], "checkpoint.every (--save-every) = -2: must be >= 0"),
                    (["--eval-every", "-3"], "train.eval_every (--eval-every) = -3: must be >= 0"),
                    (["--set", "train.grad_clip=-1"], "train.grad_clip = -1: must be >= 0"),
                    (["--stop-after", "2"], "--stop-after 2 stops the run to be resumed"),
                    (["--cost", "10:20"], "--cost 10:20 sets the op costs of --compute emulate"),
                    (["--network", "8us,1GB/s"],
                     "runtime.network = '8us,1GB/s' prices the messages of the simulator's figure "
                     "for --compute emulate")):
                with self.subTest(args=args):
                    assert_one_error_line(self, run_serial(["train", *one, *args]), needle)

    def test_an_emulated_runs_network_must_parse_and_fit_its_hosts(self):
        emulated = [*TINY, "--set", "parallel.stages=2", "--compute", "emulate", "--cost", "10:20"]
        self.expect_one_error(2, [*emulated, "--network", "8us"],
                              "--network '8us': expected ALPHA,BETA such as 5us,10GB/s")
        # 4 ranks on this one host cannot sit in one pipeline group of 2 as the planner places
        # a host's ranks.
        self.expect_one_error(4, [*emulated, "--network", "8us,1GB/s"],
                              "runtime.network: the 4 ranks on this node must divide "
                              "parallel.stages (2)")

    def test_world_not_multiple_of_group(self):
        self.expect_one_error(3, TINY, "world size 3 is not a multiple of the pipeline group size D=4")

    def test_chimera_odd_stages(self):
        self.expect_one_error(3, TINY + ["--set", "parallel.stages=3"], "chimera needs an even D (got D=3)")

    def test_chimera_odd_micro_batches(self):
        self.expect_one_error(4, TINY + ["--set", "parallel.micro_batches=5"], "chimera needs an even N (got N=5)")

    def test_more_stages_than_blocks(self):
        self.expect_one_error(4, TINY + ["--set", "model.n_layer=2"], "n_layer")

    def test_missing_dataset(self):
        self.expect_one_error(4, TINY + ["--set", "data.train=/nonexistent/tokens.h5"],
                              "/nonexistent/tokens.h5")

    def test_unknown_config_key(self):
        self.expect_one_error(4, TINY + ["--set", "train.warmup_step=1"], "did you mean 'train.warmup_steps'")

    def test_bad_flag(self):
        self.expect_one_error(4, ["--stepz", "3"], "--stepz")

    def test_configuration_differs_across_ranks(self):
        cmd = [MPIEXEC, "-np", "2", *FLAGS, CHIMERA, "train", *TINY, "--set", "train.lr=1e-3", ":",
               "-np", "2", CHIMERA, "train", *TINY, "--set", "train.lr=2e-3"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert_one_error_line(self, r, "configuration differs across ranks")


class OtherCommands(unittest.TestCase):
    """Negative sizes and offsets of the serial commands: status 2 and one line naming the flag."""

    def expect_error(self, args, needle):
        assert_one_error_line(self, run_serial(args), needle)

    def test_negative_values_and_directories(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "tokens.h5")
            write_tokens(data)
            for flag in ("-T", "--offset", "--tokens"):
                with self.subTest(flag=flag):
                    needle = "(-T) -1" if flag == "-T" else f"{flag} -1"
                    self.expect_error(["inspect", data, flag, "-1"], f"{needle}: must be >= 0")
            # A directory is read as a prep output directory: this one holds only a file of
            # another name.
            self.expect_error(["inspect", tmp], f"{tmp}: holds no token datasets")
            self.expect_error(["bench", "model", "--sgemm-size", "-1"],
                              "--sgemm-size -1: must be >= 0")
            self.expect_error(["bench", "sums"], "give at least one --sum BYTES:RANKS")
            self.expect_error(["bench", "sums", "--sum", "8:0,3"],
                              "--sum 8:0,3: rank 3 is not one of the 1 ranks")
            self.expect_error(["bench", "sums", "--sum", "6:0"],
                              "BYTES must be a positive multiple of 4")
            self.expect_error(["bench", "sums", "--sum", "8"], "give BYTES:RANKS")


class Faults(unittest.TestCase):
    def test_sigkill_of_one_rank_ends_the_job(self):
        with tempfile.TemporaryDirectory() as tmp:
            metrics = os.path.join(tmp, "m.jsonl")
            cmd = [MPIEXEC, "-np", "4", *FLAGS, CHIMERA, "train", *TINY, "--compute", "emulate",
                   "--cost", "20:40", "--steps", "100000", "--metrics", metrics]
            job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 60
                while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
                    self.assertLess(time.monotonic(), deadline, "the job never ran a step")
                    time.sleep(0.2)
                ranks = subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True,
                                       text=True).stdout.split()
                self.assertGreaterEqual(len(ranks), 4)
                os.kill(int(ranks[-1]), signal.SIGKILL)
                killed = time.monotonic()
                job.wait(timeout=60)
                self.assertLess(time.monotonic() - killed, 60)
                self.assertNotEqual(job.returncode, 0)
            finally:
                if job.poll() is None:
                    job.kill()

    def test_sigusr1_stops_after_the_step_with_a_checkpoint(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "tokens.h5")
            write_tokens(data)
            metrics = os.path.join(tmp, "m.jsonl")
            save = os.path.join(tmp, "ckpt")
            cmd = [MPIEXEC, "-np", "4", *FLAGS, CHIMERA, "train", *TINY, "--set",
                   f"data.train={data}", "--steps", "100000", "--metrics", metrics,
                   "--save-dir", save]
            job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 60
                while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
                    self.assertLess(time.monotonic(), deadline, "the job never ran a step")
                    time.sleep(0.2)
                job.send_signal(signal.SIGUSR1)  # mpirun forwards SIGUSR1 to every rank
                out, err = job.communicate(timeout=60)
                self.assertEqual(job.returncode, 0, err)
                self.assertIn("stopping after step", out)
                self.assertIn("on SIGUSR1", out)
                with open(os.path.join(save, "latest")) as f:
                    latest = f.read().strip()
                self.assertTrue(os.path.exists(os.path.join(save, os.path.basename(latest))))
                # Resumed with fewer steps than it has done: it says so instead of nothing.
                r = mpirun(4, [*TINY, "--set", f"data.train={data}", "--steps", "1",
                               "--save-dir", save, "--resume"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("nothing to train: the run starts at step", r.stdout)
            finally:
                if job.poll() is None:
                    job.kill()


class FileSchedule(unittest.TestCase):
    """parallel.scheme = file:PATH runs a schedule read from a file (here PyTorch's CSV)."""

    def test_trains_two_steps_on_a_torch_csv(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "tokens.h5")
            write_tokens(data)
            sched = os.path.join(tmp, "1f1b.csv")
            with open(sched, "w", newline="") as f:
                f.write("0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n")
            metrics = os.path.join(tmp, "m.jsonl")
            run = ["--set", f"parallel.scheme=file:{sched}", "--set", "parallel.stages=2",
                   "--set", "parallel.micro_batches=2", "--set", f"data.train={data}"]
            r = mpirun(2, TINY + run + ["--steps", "2", "--metrics", metrics])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(metrics) as f:
                steps = [l for l in f if '"step"' in l]
            self.assertEqual(len(steps), 2, steps)
            # The file's D must be the run's.
            r = mpirun(4, TINY + run[:2] + ["--set", "parallel.stages=4"] + run[4:] + ["--steps", "2"])
            assert_one_error_line(self, r, "has D = 2 workers, the run has D = 4")


class Precision(unittest.TestCase):
    """runtime.precision: bf16 runs where the CPU has bf16 units and is refused, on every rank in
    one line, where it has not; auto then runs fp32 and the backend line says why."""

    def run_precision(self, tmp, precision, env=None):
        data = os.path.join(tmp, "tokens.h5")
        write_tokens(data)
        return mpirun(2, TINY + ["--set", "parallel.stages=2", "--set", "parallel.micro_batches=2",
                                 "--set", f"data.train={data}", "--set",
                                 f"runtime.precision={precision}", "--steps", "1"], env=env)

    def test_bf16_refused_or_run_and_auto_says_which(self):
        # As this CPU is, and as a CPU without bf16 units (oneDNN told to use AVX2 at most), so
        # that the refusal is tested on every machine.
        for env in ({}, {"ONEDNN_MAX_CPU_ISA": "AVX2"}):
            with self.subTest(env=env):
                self.check_bf16_refused_or_run(env)

    def check_bf16_refused_or_run(self, env):
        with tempfile.TemporaryDirectory() as tmp:
            auto = self.run_precision(tmp, "auto", env)
            self.assertEqual(auto.returncode, 0, auto.stdout + auto.stderr)
            backend = [l for l in auto.stdout.splitlines() if l.startswith("backend cpu:")]
            self.assertEqual(len(backend), 1, auto.stdout)
            bf16 = self.run_precision(tmp, "bf16", env)
            # bf16 runs on the faster of its two engines here (oneDNN or the fp32 units).
            if "bf16 GEMMs on oneDNN" in backend[0] or "bf16 GEMMs on the fp32 units" in backend[0]:
                self.assertFalse(env, "oneDNN ran bf16 with AVX2 at most")
                self.assertEqual(bf16.returncode, 0, bf16.stdout + bf16.stderr)
                return
            self.assertIn("fp32 GEMMs on ", backend[0])
            self.assertIn("; auto chose fp32: ", backend[0])
            line = assert_one_error_line(self, bf16, "runtime.precision = 'bf16'")
            self.assertIn("bf16-emulated", line)

    def test_ranks_run_rank_0s_bf16_engine(self):
        # Each rank's engine comes from its own probe or variable: a job runs rank 0's on all.
        with tempfile.TemporaryDirectory() as tmp:
            probe = self.run_precision(tmp, "auto")
            if "bf16 GEMMs on" not in probe.stdout:
                self.skipTest("this CPU runs no bf16 GEMMs: " + probe.stdout[-300:])
            args = [CHIMERA, "train", *TINY, "--set", "parallel.stages=2", "--set",
                    "parallel.micro_batches=2", "--set",
                    f"data.train={os.path.join(tmp, 'tokens.h5')}", "--set",
                    "runtime.precision=bf16", "--steps", "1"]
            cmd = [MPIEXEC, *FLAGS, "-np", "1", "env", "CHIMERA_CPU_BF16_GEMM=fp32", *args, ":",
                   "-np", "1", "env", "CHIMERA_CPU_BF16_GEMM=onednn", *args]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("bf16 GEMMs: rank 0 chose fp32 units but rank 1 chose oneDNN: every "
                          "rank runs rank 0's", r.stdout)
            backend = [l for l in r.stdout.splitlines() if l.startswith("backend cpu:")]
            self.assertEqual(len(backend), 1, r.stdout)
            self.assertIn("bf16 GEMMs on the fp32 units", backend[0])

    def test_unknown_precision(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_precision(tmp, "fp16")
            assert_one_error_line(self, r, "expected fp32, bf16, bf16-emulated or auto")


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
