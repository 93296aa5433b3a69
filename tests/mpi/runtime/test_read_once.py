#!/usr/bin/env python3
"""`--resume` and `--init` read each tensor from the checkpoint once per job: the bytes read from
the file, counted from outside the program by an LD_PRELOAD library (tests/support/read_counter.c)
and summed over every rank, stay within 1.05x the file's size at W = 1, 2, 4 and D = 2, 4, for
Chimera and 1F1B; the resume log line prints the same figure for the tensors it read.

Usage: test_read_once.py READ_COUNTER_SO CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from token_data import write_tokens  # noqa: E402

COUNTER = CHIMERA = MPIEXEC = None
FLAGS = []

# V 8192 makes the file ~24 MB, so HDF5's metadata (a few KB per reading rank) is small beside it,
# as it is beside a real model's tensors.
MODEL = ["--set", "model.n_layer=4", "--set", "model.n_embd=128", "--set", "model.n_head=2",
         "--set", "model.n_ctx=16", "--set", "model.vocab_size=8192", "--set", "data.seq_len=8"]
LIMIT = 1.05


def layout(scheme, w, d):
    return ["--set", f"parallel.scheme={scheme}", "--set", f"parallel.stages={d}",
            "--set", f"parallel.micro_batches={d}"], w * d


class ReadOnce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data = os.path.join(cls.tmp.name, "tokens.h5")
        write_tokens(cls.data, 4096, 3)
        cls.ckpt_dir = os.path.join(cls.tmp.name, "ckpt")
        args, np_ = layout("1f1b", 1, 2)
        r = cls.train(np_, [*args, "--steps", "1", "--save-dir", cls.ckpt_dir])
        assert r.returncode == 0, r.stdout + r.stderr
        (cls.ckpt,) = glob.glob(os.path.join(cls.ckpt_dir, "ckpt-*.h5"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def train(cls, np_, args, count_into=None):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if count_into:
            env.update(LD_PRELOAD=COUNTER, CHIMERA_READ_COUNT_MATCH=os.path.basename(cls.ckpt),
                       CHIMERA_READ_COUNT_OUT=count_into)
        cmd = [MPIEXEC, "-np", str(np_), *FLAGS, CHIMERA, "train", *MODEL, "--set", f"data.train={cls.data}",
               *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)

    def counted(self, np_, args):
        """(bytes read from the checkpoint summed over the processes, the run's output)."""
        out = os.path.join(self.tmp.name, "reads.txt")
        if os.path.exists(out):
            os.remove(out)
        r = self.train(np_, args, count_into=out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            lines = f.read().split("\n")
        per_process = [int(l.split()[1]) for l in lines if l.strip()]
        # Every rank reports (and mpiexec, which reads no checkpoint): a missing one would undercount.
        self.assertGreaterEqual(len(per_process), np_, lines)
        return sum(per_process), r.stdout + r.stderr

    def check(self, mode):
        size = os.path.getsize(self.ckpt)
        # --init reads the weights only: its bound is their bytes, not the file's.
        with h5py.File(self.ckpt, "r") as f:
            weights = sum(f[k].nbytes for k in f.keys() if isinstance(f[k], h5py.Dataset))
        wanted = size if mode == "resume" else weights
        for scheme in ("chimera", "1f1b"):
            for d in (2, 4):
                for w in (1, 2, 4):
                    with self.subTest(mode=mode, scheme=scheme, W=w, D=d):
                        args, np_ = layout(scheme, w, d)
                        if mode == "resume":
                            args += ["--resume", "--save-dir", self.ckpt_dir, "--steps", "1"]
                        else:
                            args += ["--init", self.ckpt, "--steps", "1"]
                        total, log = self.counted(np_, args)
                        ratio = total / wanted
                        print(f"{mode} {scheme} W {w} D {d} ({np_} ranks): {total} bytes read "
                              f"from a {size}-byte file, {total / size:.3f}x its size, "
                              f"{ratio:.3f}x the bytes {mode} needs", flush=True)
                        self.assertLessEqual(ratio, LIMIT)
                        self.assertGreaterEqual(ratio, 1.0)  # the counter saw every tensor
                        m = re.search(r"read ([0-9.]+) MB of tensors from the ([0-9.]+) MB file "
                                      r"\(([0-9.]+)x its size", log)
                        self.assertIsNotNone(m, log)
                        self.assertAlmostEqual(float(m.group(1)) * 1e6, wanted, delta=1e5)

    def test_resume_reads_the_file_once(self):
        self.check("resume")

    def test_init_reads_the_weights_once(self):
        self.check("init")


if __name__ == "__main__":
    COUNTER, CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
