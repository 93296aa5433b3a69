#!/usr/bin/env python3
"""The `chimera` binary's CUDA backend is a plugin (lib/libchimera_cuda.so) opened only for
runtime.backend = 'cuda': the binary itself needs none of the CUDA libraries; asked for the CUDA
backend it opens the plugin (which resolves Chimera's symbols from the binary) and either trains
(a GPU) or ends with the backend's one line (none); a plugin that cannot be opened is one line too.

Usage: test_cuda_plugin_cli.py CHIMERA
"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from token_data import write_tokens  # noqa: E402

CHIMERA = None
TINY = ["--set", "model.n_layer=2", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=16",
        "--set", "parallel.scheme=gpipe", "--set", "parallel.stages=1",
        "--set", "parallel.micro_batches=1", "--set", "parallel.micro_batch_size=2"]


class CudaPlugin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data = os.path.join(cls.tmp.name, "tokens.h5")
        write_tokens(cls.data, 1 << 12, seed=3)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def train_cuda(self, **env):
        return subprocess.run([CHIMERA, "train", *TINY, "--set", f"data.train={self.data}",
                               "--set", "runtime.backend=cuda", "--steps", "1"],
                              capture_output=True, text=True, timeout=120, cwd=self.tmp.name,
                              env=dict(os.environ, **env))

    def test_the_binary_loads_no_cuda_library(self):
        needed = subprocess.run(["ldd", CHIMERA], capture_output=True, text=True, check=True).stdout
        for library in ("libcudart", "libcublas", "libnccl", "libcuda."):
            self.assertNotIn(library, needed)
        plugin = os.path.join(os.path.dirname(CHIMERA), "..", "lib", "libchimera_cuda.so")
        self.assertTrue(os.path.exists(plugin), plugin)
        self.assertIn("libcublas", subprocess.run(["ldd", plugin], capture_output=True, text=True,
                                                  check=True).stdout)

    def test_the_cuda_backend_opens_and_trains_or_names_the_missing_gpu(self):
        r = self.train_cuda()
        if r.returncode == 0:  # a GPU: one step trained on it
            self.assertRegex(r.stdout + r.stderr, r"step\s+1")
            return
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertRegex(lines[-1], r"^error: runtime\.backend = 'cuda': no CUDA device is visible")

    def test_a_plugin_that_cannot_be_opened_is_one_line(self):
        r = self.train_cuda(CHIMERA_CUDA_PLUGIN=os.path.join(self.tmp.name, "missing.so"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr.strip().splitlines()[-1],
                         r"^error: runtime\.backend = 'cuda': cannot load the CUDA backend: .*"
                         r"missing\.so: cannot open shared object file")
        # A shared library without the entry point: one the binary loads anyway.
        needed = subprocess.run(["ldd", CHIMERA], capture_output=True, text=True, check=True).stdout
        libz = next(line.split()[2] for line in needed.splitlines() if "libz.so" in line)
        r = self.train_cuda(CHIMERA_CUDA_PLUGIN=libz)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("is not a Chimera CUDA plugin", r.stderr)


if __name__ == "__main__":
    CHIMERA = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
