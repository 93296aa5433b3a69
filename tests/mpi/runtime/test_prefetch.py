#!/usr/bin/env python3
"""The next step's samples are read while this step computes: with a read latency injected
(CHIMERA_TEST_READ_LATENCY_MS, test only) a run trains on exactly the same samples, so its
losses equal those of a run without it, bit for bit, at W = 1 and 2, across a resume, and the
injected wait shows up as read time, not as a changed result. With data.prefetch = false (each
step reads its own samples first) the losses are the same too.

Usage: test_prefetch.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from token_data import write_tokens  # noqa: E402

CHIMERA = MPIEXEC = None
FLAGS = []

TINY = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=8",
        "--set", "parallel.stages=2", "--set", "parallel.micro_batches=2"]


class Prefetch(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.data = os.path.join(self.tmp, "tokens.h5")
        write_tokens(self.data, 4096, 9)

    def losses(self, np_, latency_ms, name, extra=()):
        metrics = os.path.join(self.tmp, name + ".jsonl")
        cmd = [MPIEXEC, "-np", str(np_), *FLAGS, CHIMERA, "train", *TINY,
               "--set", f"data.train={self.data}", "--metrics", metrics, *extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1",
               "CHIMERA_TEST_READ_LATENCY_MS": str(latency_ms)}
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = {}
        with open(metrics) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    out[rec["step"]] = rec["loss"]
        return [out[s] for s in sorted(out)]

    def test_slow_reads_train_on_the_same_samples(self):
        for np_ in (2, 4):
            with self.subTest(ranks=np_):
                fast = self.losses(np_, 0, f"fast{np_}", ["--steps", "8"])
                slow = self.losses(np_, 10, f"slow{np_}", ["--steps", "8"])
                self.assertEqual(len(fast), 8)
                self.assertEqual(fast, slow)

    def test_reads_without_prefetch_train_on_the_same_samples(self):
        # data.prefetch = false: each step reads its own samples before it computes.
        on = self.losses(2, 5, "on", ["--steps", "6"])
        off = self.losses(2, 5, "off", ["--steps", "6", "--set", "data.prefetch=false"])
        self.assertEqual(len(on), 6)
        self.assertEqual(on, off)

    def test_a_resumed_run_reads_the_samples_an_uninterrupted_one_reads(self):
        whole = self.losses(2, 5, "whole", ["--steps", "8"])
        ckpt = os.path.join(self.tmp, "ckpt")
        self.losses(2, 5, "split", ["--steps", "8", "--save-dir", ckpt, "--stop-after", "3"])
        split = self.losses(2, 5, "split", ["--steps", "8", "--save-dir", ckpt, "--resume"])
        self.assertEqual(whole, split)


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
