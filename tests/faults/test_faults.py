#!/usr/bin/env python3
"""The fault battery: `chimera train` under mpiexec meets the faults a long run meets, and no good
state is lost. Each case asserts the exit status, a message naming the cause, the time taken,
and that the newest checkpoint left loads and holds finite tensors (the reliability table in
docs/runtime.md names the case behind each row).

Usage: test_faults.py CHIMERA MPIEXEC [MPIEXEC FLAGS...] [-- UNITTEST ARGS, e.g. -k NanStop]
"""
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from token_data import write_tokens  # noqa: E402

CHIMERA = MPIEXEC = None
FLAGS = []

# A 2-rank Chimera run of a tiny model: a few milliseconds per step, 0.7 MB per checkpoint.
TINY = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=8",
        "--set", "parallel.stages=2", "--set", "parallel.micro_batches=2"]
# lr 1e4 without clipping: the loss overflows to NaN within a few steps.
DIVERGING = ["--set", "train.lr=1e4", "--set", "train.grad_clip=0"]
# Every case must end well within this (a hang would otherwise hold CI until its timeout).
BOUND_S = 60


def env(extra=None):
    return {**os.environ, "OMP_NUM_THREADS": "1", **(extra or {})}


def command(np_, args):
    return [MPIEXEC, "-np", str(np_), *FLAGS, CHIMERA, "train", *TINY, *args]


def train(args, np_=2, extra_env=None):
    """Runs a job to its end; returns (CompletedProcess, seconds taken)."""
    start = time.monotonic()
    r = subprocess.run(command(np_, args), capture_output=True, text=True, timeout=BOUND_S * 2,
                       env=env(extra_env))
    return r, time.monotonic() - start


def start(args, np_=2, extra_env=None, **kwargs):
    # A session of its own, so that the whole job (launcher and ranks) can be killed at once.
    return subprocess.Popen(command(np_, args), env=env(extra_env), start_new_session=True,
                            **kwargs)


def kill_job(job):
    """SIGKILL to every process of the job at once, as a scheduler ends a preempted job."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getsid(int(pid)) == job.pid:
                os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    job.wait(timeout=BOUND_S)


def rank_pids(job):
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True,
                                           text=True).stdout.split()]


def wait_for(predicate, what, timeout=BOUND_S):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def error_lines(r):
    return [l for l in (r.stdout + r.stderr).splitlines() if "error:" in l]


def metrics(path):
    """step -> record; a resumed run appends, and the last record of a step wins."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                out[rec["step"]] = rec
    return out


class FaultCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="chimera-faults-")
        self.addCleanup(tmp.cleanup)  # cleanups run last in, first out: after any unmount
        self.tmp = tmp.name
        self.data = os.path.join(self.tmp, "tokens.h5")
        write_tokens(self.data, 4096, 5)
        self.ckpt = os.path.join(self.tmp, "ckpt")
        self.metrics = os.path.join(self.tmp, "m.jsonl")
        self.base = ["--set", f"data.train={self.data}", "--save-dir", self.ckpt,
                     "--metrics", self.metrics]

    def end_with(self, job, fault):
        """Applies `fault` to the running `job`, which must then end on its own within BOUND_S.
        Returns its (stdout, stderr), as far as they were captured."""
        try:
            fault()
            began = time.monotonic()
            try:
                out, err = job.communicate(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                # What the job said before it hung names where: kill it, read the rest, fail.
                kill_job(job)
                out, err = job.communicate()
                self.fail(f"the job did not end within {BOUND_S} s of the fault; its last "
                          f"output:\n{(out or '')[-2000:]}\n{(err or '')[-4000:]}")
            self.assertLess(time.monotonic() - began, BOUND_S)
            return out, err
        finally:
            if job.poll() is None:
                kill_job(job)

    def start_saving_every_step(self, extra=(), **pipes):
        """A long run that saves after every step; returns once its first checkpoint exists."""
        job = start(self.base + ["--steps", "100000", "--save-every", "1", *extra], text=True,
                    **pipes)
        wait_for(lambda: os.path.exists(os.path.join(self.ckpt, "latest")), "a checkpoint")
        return job

    def latest(self, directory=None):
        directory = directory or self.ckpt
        with open(os.path.join(directory, "latest")) as f:
            return os.path.join(directory, f.read().strip())

    def assert_newest_checkpoint_sound(self, directory=None, temporaries_left=False):
        """`latest` names a complete checkpoint that loads and holds only finite tensors, and
        no temporary file is left (unless a killed save left it, for the next save to remove).
        Returns its step."""
        directory = directory or self.ckpt
        path = self.latest(directory)
        if not temporaries_left:
            self.assertFalse(glob.glob(os.path.join(directory, "*.tmp")),
                             f"temporary files left in {directory}")
        tensors = 0
        with h5py.File(path, "r") as f:
            self.assertIn(f.attrs["format"], ("chimera-checkpoint", b"chimera-checkpoint"))

            def check(name, obj):
                nonlocal tensors
                if isinstance(obj, h5py.Dataset):
                    tensors += 1
                    self.assertTrue(np.isfinite(obj[()]).all(), f"{path}: {name} is not finite")

            f.visititems(check)
            step = int(f.attrs["step"])
        self.assertGreater(tensors, 0, path)
        return step


class NanStop(FaultCase):
    def test_diverged_run_stops_with_status_3_and_keeps_the_last_good_checkpoint(self):
        r, took = train(self.base + DIVERGING + ["--steps", "30", "--save-every", "1"])
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertLess(took, BOUND_S)
        errors = error_lines(r)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("training diverged at step", errors[0])
        self.assertRegex(errors[0], r"the loss is -?nan|the gradient norm is -?(nan|inf)")
        records = metrics(self.metrics)
        bad = max(records)
        self.assertTrue(records[bad]["loss"] is None or records[bad]["grad_norm"] is None)
        self.assertIn(f"at step {bad + 1}:", errors[0])
        # Nothing of the diverged step was saved: the newest checkpoint is the step before.
        self.assertEqual(self.assert_newest_checkpoint_sound(), bad)
        self.assertFalse(os.path.exists(os.path.join(self.ckpt, f"ckpt-{bad + 1:08d}.h5")))


class NanSkip(FaultCase):
    def test_skipped_steps_are_counted_and_too_many_stop_with_status_3(self):
        r, took = train(self.base + DIVERGING + [
            "--steps", "30", "--save-every", "1", "--set", "train.on_nonfinite=skip",
            "--set", "train.max_skipped_steps=3"])
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertLess(took, BOUND_S)
        errors = error_lines(r)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("3 consecutive steps skipped (train.max_skipped_steps)", errors[0])
        self.assertEqual(r.stderr.count("update skipped"), 2, r.stderr)
        records = metrics(self.metrics)
        skipped = [s for s, rec in sorted(records.items()) if rec["skipped"]]
        self.assertEqual(len(skipped), 3)
        self.assertEqual(skipped, list(range(skipped[0], skipped[0] + 3)))
        self.assertEqual([records[s]["skipped_steps"] for s in skipped], [1, 2, 3])
        self.assertFalse(any(records[s]["skipped"] for s in records if s < skipped[0]))
        # Skipped steps changed nothing and are not saved: the newest checkpoint is the last
        # update's.
        self.assertEqual(self.assert_newest_checkpoint_sound(), skipped[0])


    def test_skipped_steps_leave_weights_and_moments_as_they_were(self):
        r, _ = train(self.base + DIVERGING + [
            "--steps", "14", "--save-every", "1", "--set", "checkpoint.keep=50",
            "--set", "train.on_nonfinite=skip", "--set", "train.max_skipped_steps=100"])
        self.assertEqual(r.returncode, 0, r.stderr)
        records = metrics(self.metrics)
        skipped = [s for s, rec in sorted(records.items()) if rec["skipped"]]
        if not skipped or skipped != list(range(skipped[0], 14)):
            self.skipTest(f"this build's run did not diverge for good (skipped {skipped})")
        # The final checkpoint (the end of the run is always saved) holds the state of the last
        # update, moments included; periodic saves of skipped steps were left out.
        before = os.path.join(self.ckpt, f"ckpt-{skipped[0]:08d}.h5")
        final = self.latest()
        self.assertEqual(self.assert_newest_checkpoint_sound(), 14)
        self.assertEqual(sorted(os.listdir(self.ckpt))[-3:],
                         [os.path.basename(before), os.path.basename(final), "latest"])
        with h5py.File(before, "r") as a, h5py.File(final, "r") as b:
            self.assertEqual(int(b.attrs["skipped_steps"]), len(skipped))
            names = []
            a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            self.assertTrue(any(n.startswith("optim/exp_avg_sq/") for n in names))
            for n in names:
                np.testing.assert_array_equal(a[n][()], b[n][()], err_msg=n)


class ShapeAndSettings(FaultCase):
    def setUp(self):
        super().setUp()
        r, _ = train(self.base + ["--steps", "4", "--save-every", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_other_model_shape_is_one_line_naming_both_shapes(self):
        r, took = train(self.base + ["--steps", "6", "--resume", "--set", "model.n_embd=48"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertLess(took, BOUND_S)
        errors = error_lines(r)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("the checkpoint's model is L 4 C 32", errors[0])
        self.assertIn("this run's is L 4 C 48", errors[0])
        self.assertEqual(self.assert_newest_checkpoint_sound(), 4)

    def test_other_hyperparameters_continue_with_the_runs_values_and_say_so(self):
        r, took = train(self.base + ["--steps", "6", "--resume", "--set", "train.lr=0.002",
                                     "--set", "train.beta2=0.99"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, BOUND_S)
        self.assertIn("train.lr = 0.002 (checkpoint: 0.0006)", r.stdout)
        self.assertIn("train.beta2 = 0.99 (checkpoint: 0.95)", r.stdout)
        self.assertEqual(self.assert_newest_checkpoint_sound(), 6)


class CorruptLatest(FaultCase):
    def test_damaged_or_missing_newest_falls_back_to_the_newest_that_loads(self):
        r, _ = train(self.base + ["--steps", "6", "--save-every", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        newest = self.latest()
        self.assertTrue(newest.endswith("ckpt-00000006.h5"))
        with open(newest, "r+b") as f:  # a file cut short, as a full disk or a crash leaves it
            f.truncate(os.path.getsize(newest) // 2)
        os.remove(os.path.join(self.ckpt, "ckpt-00000004.h5"))
        # `latest` names the damaged file; the one before it is gone: ckpt 2 is the one to use.
        r, took = train(self.base + ["--steps", "8", "--resume"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, BOUND_S)
        self.assertIn(f"cannot resume from {newest}", r.stderr)
        self.assertIn("resumed from", r.stdout)
        self.assertIn("ckpt-00000002.h5 at step 2, the newest checkpoint that loads", r.stdout)
        self.assertEqual(self.assert_newest_checkpoint_sound(), 8)

    def test_no_loadable_checkpoint_is_an_error_not_a_fresh_start(self):
        r, _ = train(self.base + ["--steps", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.latest(), "r+b") as f:
            f.truncate(1000)
        r, took = train(self.base + ["--steps", "4", "--resume"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertLess(took, BOUND_S)
        self.assertIn("no checkpoint in", error_lines(r)[0])
        self.assertTrue(os.path.exists(os.path.join(self.ckpt, "ckpt-00000002.h5")))


class SigkillResume(FaultCase):
    def test_killed_job_resumes_to_bitwise_the_same_losses(self):
        steps, every = 200, 20
        ref_metrics = os.path.join(self.tmp, "ref.jsonl")
        r, _ = train(["--set", f"data.train={self.data}", "--steps", str(steps),
                      "--metrics", ref_metrics])
        self.assertEqual(r.returncode, 0, r.stderr)
        reference = metrics(ref_metrics)

        run = self.base + ["--steps", str(steps), "--save-every", str(every)]
        job = start(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_at = random.randint(every + 1, steps // 2)

        def steps_done():
            with open(self.metrics) as f:
                return sum(1 for _ in f)

        # Saves are written in the background and named once written, so the first checkpoint
        # (step `every`) may still be unnamed a step or more later: the kill waits for it too.
        try:
            wait_for(lambda: os.path.exists(self.metrics) and steps_done() >= kill_at and
                     os.path.exists(os.path.join(self.ckpt, "latest")),
                     f"step {kill_at} and a named checkpoint")
        finally:
            kill_job(job)
        self.assertNotEqual(job.returncode, 0)
        ran = len(metrics(self.metrics))
        self.assertLess(ran, steps, "the job finished before it was killed")
        # The kill may land in a save: its temporary file stays until the next save removes it.
        resumed_from = self.assert_newest_checkpoint_sound(temporaries_left=True)
        print(f"killed after {ran} steps; resuming from step {resumed_from}", file=sys.stderr)

        r, took = train(run + ["--resume"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, BOUND_S)
        resumed = metrics(self.metrics)
        for s in range(resumed_from, steps):
            self.assertEqual(resumed[s]["loss"], reference[s]["loss"], f"step {s}")
            self.assertEqual(resumed[s]["grad_norm"], reference[s]["grad_norm"], f"step {s}")
        self.assertEqual(self.assert_newest_checkpoint_sound(), steps)


class RankKilledDuringSave(FaultCase):
    def test_job_ends_through_mpi_abort_and_checkpoints_stay_intact(self):
        job = self.start_saving_every_step(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def kill_a_rank_in_a_save():
            ranks = rank_pids(job)
            self.assertEqual(len(ranks), 2)
            # While a save is under way (its temporary file exists), or at worst between two.
            deadline = time.monotonic() + 5
            while not glob.glob(os.path.join(self.ckpt, "*.tmp")) and time.monotonic() < deadline:
                pass
            os.kill(ranks[-1], signal.SIGKILL)

        _, err = self.end_with(job, kill_a_rank_in_a_save)
        self.assertNotEqual(job.returncode, 0)
        self.assertRegex(err, "(?i)abort|killed|signal 9|exited on signal")
        self.assert_newest_checkpoint_sound(temporaries_left=True)


class KilledDuringBackgroundSave(FaultCase):
    # A checkpoint of ~19 MB: its background write (checkpoint.async, the default) takes long
    # enough to be caught.
    WIDE = ["--set", "model.n_embd=256", "--set", "model.vocab_size=4096"]

    def test_sigkill_during_a_background_write_leaves_the_previous_checkpoint(self):
        job = self.start_saving_every_step(self.WIDE, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
        try:
            # While a background write is under way: its temporary file exists.
            wait_for(lambda: glob.glob(os.path.join(self.ckpt, "*.h5.tmp")), "a save under way")
            before = self.latest()
        finally:
            kill_job(job)
        self.assertNotEqual(job.returncode, 0)
        step = self.assert_newest_checkpoint_sound(temporaries_left=True)
        self.assertGreaterEqual(step, int(os.path.basename(before)[5:13]))
        # The next job takes the lock over (the killed one's flock went with it) and resumes.
        r, took = train(self.base + self.WIDE + ["--steps", str(step + 2), "--resume"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("taking over the lock", r.stderr)
        self.assertEqual(self.assert_newest_checkpoint_sound(), step + 2)


class DirectoryInUse(FaultCase):
    def test_a_second_job_on_the_directory_exits_2_naming_the_first(self):
        job = self.start_saving_every_step(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r, took = train(self.base + ["--steps", "5", "--set", "train.seed=99"])
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertLess(took, 10)
            errors = error_lines(r)
            self.assertEqual(len(errors), 1, r.stdout + r.stderr)
            self.assertIn("is in use by another run", errors[0])
            holder = re.search(r"pid (\d+)", errors[0])
            self.assertIsNotNone(holder, errors[0])
            self.assertIn(int(holder.group(1)), rank_pids(job))  # rank 0 holds the lock
            self.assertIsNone(job.poll(), "the first job must go on")
        finally:
            kill_job(job)
        # A lock left by the killed job does not block its successor.
        r, _ = train(self.base + ["--steps", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("taking over the lock of a run that has ended", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.ckpt, "chimera.lock")))


class HangingRank(FaultCase):
    def test_watchdog_ends_the_job_naming_the_wait(self):
        r, took = train(self.base + ["--steps", "10", "--save-every", "1",
                                     "--set", "runtime.watchdog_s=2"],
                        extra_env={"CHIMERA_TEST_HANG_AT": "1:4"})
        self.assertNotEqual(r.returncode, 0)
        self.assertLess(took, 30)
        self.assertIn("test hook CHIMERA_TEST_HANG_AT: rank 1 hangs before step 4", r.stdout)
        self.assertRegex(r.stderr, r"watchdog: rank 0 waited 2\.\d s, more than runtime\.watchdog_s "
                                   r"\(2 s\), in recv of the \w+ of stage \d, micro-batch \d "
                                   r"from rank 1 \(step 4\)")
        # With checkpoint.async (the default) the save of step 3 may still be in flight when
        # rank 1 hangs: the job ends without naming it, and `latest` names the one before.
        self.assertIn(self.assert_newest_checkpoint_sound(temporaries_left=True), (2, 3))

    def test_a_stuck_collective_names_the_rank_that_does_not_answer(self):
        # Four replicas of one stage: rank 1 hangs before step 4 (outside any wait), the others
        # wait in a collective it does not move (a gradient allreduce, or with sharded state the
        # weight gather it started before hanging), probe its ranks and name the one that gave no
        # answer: the waiting ranks answer each other's probes.
        r, took = train(self.base + ["--steps", "10", "--set", "parallel.scheme=gpipe",
                                     "--set", "parallel.stages=1", "--set", "runtime.watchdog_s=2"],
                        np_=4, extra_env={"CHIMERA_TEST_HANG_AT": "1:4"})
        self.assertNotEqual(r.returncode, 0)
        self.assertLess(took, BOUND_S)
        lines = [l for l in r.stderr.splitlines() if "error: watchdog:" in l]
        self.assertTrue(lines, r.stderr[-3000:])
        for line in lines:
            self.assertRegex(line, r"in (allreduce of gradient|all-gather of weights) '[^']+' "
                                   r"\(step 4\); rank 1 answered no probe within 10 s; ")

    def test_a_save_stuck_on_one_rank_ends_the_job_after_the_save_timeout(self):
        r, took = train(self.base + ["--steps", "10", "--save-every", "1",
                                     "--set", "checkpoint.save_timeout_s=2"],
                        extra_env={"CHIMERA_TEST_HANG_AT": "1:3:save"})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(took, 30)
        self.assertIn("test hook CHIMERA_TEST_HANG_AT: rank 1 hangs in the save of step 3",
                      r.stdout)
        errors = error_lines(r)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("[rank 0] error: saving " + os.path.join(self.ckpt, "ckpt-00000003.h5") +
                      " has not finished after 2 s (checkpoint.save_timeout_s)", errors[0])
        self.assertIn("a rank's file system may have failed", errors[0])
        self.assertEqual(self.assert_newest_checkpoint_sound(), 2)

    def test_a_save_stuck_on_one_rank_ends_the_job_within_the_watchdog_limit(self):
        # The collective part of an asynchronous save (creating the file) is bounded as a step
        # is: a peer lost there ends the job after 1.25 x runtime.watchdog_s (a watched wait in
        # it, which names the peer, first where its probes finish in time), not after the save
        # timeout (600 s by default).
        r, took = train(self.base + ["--steps", "10", "--save-every", "1",
                                     "--set", "runtime.watchdog_s=2"],
                        extra_env={"CHIMERA_TEST_HANG_AT": "1:3:save"})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(took, 30)
        errors = error_lines(r)
        self.assertTrue(errors, r.stderr[-3000:])
        for line in errors:
            self.assertIn("error: watchdog: creating the checkpoint file " +
                          os.path.join(self.ckpt, "ckpt-00000003.h5") +
                          " has not finished after 2.5 s (1.25 x runtime.watchdog_s)", line)
        self.assertEqual(self.assert_newest_checkpoint_sound(), 2)

    def test_watchdog_does_not_trip_on_compute(self):
        # Emulated ops of 300 ms: every wait for a peer's compute is shorter than the watchdog,
        # though the run lasts longer than it.
        r, _ = train(["--compute", "emulate", "--cost", "300:300", "--steps", "2",
                      "--set", "runtime.watchdog_s=1.5"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("watchdog", r.stderr)


class SignalDuringValidation(FaultCase):
    def test_sigusr1_in_validation_checkpoints_and_exits_0(self):
        val = os.path.join(self.tmp, "val.h5")
        write_tokens(val, n=65536, seed=6)
        job = start(self.base + ["--steps", "100000", "--set", f"data.val={val}",
                                 "--eval-every", "1", "--set", "train.eval_batches=400"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def signal_in_validation():
            # The first line after the initial validation: step 1 trains in milliseconds, then
            # its validation takes about a second, which the signal lands in.
            for line in job.stdout:
                if "validation loss before step 1" in line:
                    break
            time.sleep(0.2)
            job.send_signal(signal.SIGUSR1)  # the launcher forwards it to every rank

        out, err = self.end_with(job, signal_in_validation)
        self.assertEqual(job.returncode, 0, err)
        self.assertIn("stopping after step", out)
        self.assertIn("on SIGUSR1", out)
        self.assertGreaterEqual(self.assert_newest_checkpoint_sound(), 1)


class FullDisk(FaultCase):
    """Saves onto a small tmpfs mounted for the test: HDF5's MPI-IO driver reports a full disk
    as "file write failed"; the message must still name the path and the system's reason."""

    def mount_disk(self, size):
        self.disk = os.path.join(self.tmp, "disk")
        os.mkdir(self.disk)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", self.disk],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs here ({r.stderr.strip()}): needs root and "
                          "CAP_SYS_ADMIN")
        self.addCleanup(subprocess.run, ["umount", "-l", self.disk])
        self.ckpt = os.path.join(self.disk, "ckpt")
        self.base = ["--set", f"data.train={self.data}", "--save-dir", self.ckpt,
                     "--metrics", self.metrics, "--set", "checkpoint.keep=1"]

    def test_full_disk_stops_with_status_1_naming_path_and_cause(self):
        # 1.5 checkpoints (0.72 MB each): the first fits, a second beside it (before the first
        # is pruned) does not.
        self.mount_disk("1100k")
        r, took = train(self.base + ["--steps", "6", "--save-every", "1"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(took, BOUND_S)
        errors = error_lines(r)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn(os.path.join(self.ckpt, "ckpt-00000002.h5"), errors[0])
        self.assertIn("No space left on device", errors[0])
        self.assertEqual(self.assert_newest_checkpoint_sound(), 1)
        self.assertEqual(sorted(os.listdir(self.ckpt)), ["ckpt-00000001.h5", "latest"])

    def test_warn_keeps_training_and_the_next_save_retries(self):
        self.mount_disk("2200k")  # room for two checkpoints, once the filler is gone
        filler = os.path.join(self.disk, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * 1600 * 1024)
        # Steps of at least 50 ms (a test-only read delay): a failed save costs no time with
        # background saves, and without it all 40 steps could end before the filler is gone.
        job = start(self.base + ["--steps", "40", "--save-every", "1",
                                 "--set", "checkpoint.on_save_error=warn"],
                    extra_env={"CHIMERA_TEST_READ_LATENCY_MS": "50"},
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = ""

        def free_space_after_a_failed_save():
            nonlocal first
            first = job.stderr.readline()
            while first and "not saved" not in first:
                first = job.stderr.readline()
            os.remove(filler)  # space comes back: a later save succeeds

        _, err = self.end_with(job, free_space_after_a_failed_save)
        self.assertEqual(job.returncode, 0, err)
        self.assertIn("checkpoint of step 1 not saved", first)
        self.assertIn("No space left on device", first)
        self.assertIn("training goes on", first)
        self.assertEqual(len(metrics(self.metrics)), 40)
        self.assertEqual(self.assert_newest_checkpoint_sound(), 40)


class VanishedDirectory(FaultCase):
    def test_vanished_directory_stops_with_status_1_and_is_not_recreated(self):
        # A directory that vanishes between two ranks' opens of the file can leave parallel
        # HDF5's collective open waiting forever (Open MPI's OMPIO): the save timeout ends that.
        job = self.start_saving_every_step(["--set", "checkpoint.save_timeout_s=5"],
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # One atomic step, as when a file system goes away: `rm -rf` races the files that
        # training keeps writing into the directory and can fail with "Directory not empty".
        _, err = self.end_with(job, lambda: os.rename(self.ckpt, self.ckpt + "-elsewhere"))
        self.assertEqual(job.returncode, 1, err)
        errors = [l for l in err.splitlines() if "error:" in l]
        self.assertEqual(len(errors), 1, err)
        self.assertIn(self.ckpt, errors[0])
        self.assertIn("No such file or directory", errors[0])
        self.assertFalse(os.path.exists(self.ckpt), "the vanished directory was recreated")


if __name__ == "__main__":
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        rest = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    CHIMERA, MPIEXEC, *FLAGS = argv
    unittest.main(argv=[sys.argv[0], "-v", *rest])
