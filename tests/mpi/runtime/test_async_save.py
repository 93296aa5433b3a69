#!/usr/bin/env python3
"""Asynchronous saves (checkpoint.async, the default) write the state of the step they were taken
at, even when training changes it while the file is written: with a slow write injected
(CHIMERA_TEST_SAVE_WRITE_DELAY_MS, test only) every checkpoint equals the synchronous run's bit
for bit, the losses are the same, and a save that comes due while the one before is still being
written waits for it and says so.

Usage: test_async_save.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from token_data import write_tokens  # noqa: E402

CHIMERA = MPIEXEC = None
FLAGS = []

# ~19 MB per checkpoint, ~150 tensors: a 20 ms delay per tensor makes each write last seconds.
MODEL = ["--set", "model.n_layer=4", "--set", "model.n_embd=256", "--set", "model.n_head=2",
         "--set", "model.n_ctx=16", "--set", "model.vocab_size=4096", "--set", "data.seq_len=8",
         "--set", "parallel.stages=2", "--set", "parallel.micro_batches=2"]


class AsyncSave(unittest.TestCase):
    def run_job(self, tmp, name, extra, env=None):
        metrics = os.path.join(tmp, name + ".jsonl")
        ckpt = os.path.join(tmp, name)
        cmd = [MPIEXEC, "-np", "2", *FLAGS, CHIMERA, "train", *MODEL,
               "--set", f"data.train={self.data}", "--steps", "6", "--save-every", "1",
               "--set", "checkpoint.keep=10", "--save-dir", ckpt, "--metrics", metrics, *extra]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(metrics) as f:
            losses = [json.loads(l)["loss"] for l in f if l.strip()]
        return ckpt, losses, r.stdout

    def test_a_slow_background_write_saves_the_state_of_its_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.data = os.path.join(tmp, "tokens.h5")
            write_tokens(self.data, 4096, 3)
            sync_dir, sync_losses, _ = self.run_job(tmp, "sync", ["--set", "checkpoint.async=false"])
            async_dir, async_losses, log = self.run_job(
                tmp, "async", [], {"CHIMERA_TEST_SAVE_WRITE_DELAY_MS": "20"})
            self.assertEqual(async_losses, sync_losses)
            self.assertRegex(log, r"the save of step \d+ waited [0-9.]+ s for the save of step "
                                  r"\d+ to be written")
            files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(sync_dir, "*.h5")))
            self.assertEqual(len(files), 6)
            self.assertEqual(files, sorted(os.path.basename(p)
                                           for p in glob.glob(os.path.join(async_dir, "*.h5"))))
            for name in files:
                with h5py.File(os.path.join(sync_dir, name)) as a, \
                        h5py.File(os.path.join(async_dir, name)) as b:
                    tensors = []
                    a.visititems(lambda n, o: tensors.append(n)
                                 if isinstance(o, h5py.Dataset) else None)
                    self.assertGreater(len(tensors), 100)
                    for t in tensors:
                        self.assertTrue(np.array_equal(a[t][()], b[t][()]), f"{name}: {t}")


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
