#!/usr/bin/env python3
"""A checkpoint written by `chimera train` over MPI loads into plain PyTorch
(analysis/load_checkpoint.py + analysis/gpt2_torch.py) and gives the loss Chimera computes on the
same batch, to 1e-5.

Usage: test_checkpoint_pytorch.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "analysis"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "support"))
import load_checkpoint  # noqa: E402
from token_data import write_tokens  # noqa: E402

CHIMERA = MPIEXEC = None
FLAGS = []
T = 8


class CheckpointInPyTorch(unittest.TestCase):
    def test_loss_matches(self):
        with tempfile.TemporaryDirectory() as tmp:
            train, val = os.path.join(tmp, "train.h5"), os.path.join(tmp, "val.h5")
            write_tokens(train, 4096, 1)
            write_tokens(val, 1024, 2)
            common = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set",
                      "model.n_head=2", "--set", "model.n_ctx=16", "--set", "model.vocab_size=96",
                      "--set", f"data.seq_len={T}", "--set", f"data.train={train}", "--set",
                      f"data.val={val}", "--set", "parallel.stages=2", "--set",
                      "parallel.micro_batches=2", "--set", "parallel.micro_batch_size=2"]
            run = [MPIEXEC, "-np", "2", *FLAGS, CHIMERA, "train", *common]
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            save = os.path.join(tmp, "ckpt")
            r = subprocess.run(run + ["--steps", "3", "--save-dir", save], capture_output=True,
                               text=True, env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            ckpt = os.path.join(save, "ckpt-00000003.h5")
            # Evaluate the checkpoint's weights (the evaluation before the first step): the val
            # split in order, W*N*B = 1*2*2 samples.
            r = subprocess.run(run + ["--init", ckpt, "--steps", "1", "--eval-every", "1",
                                      "--set", "train.eval_batches=1"],
                               capture_output=True, text=True, env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            chimera_loss = float(re.search(r"validation loss before step 1: ([0-9.]+)",
                                           r.stdout).group(1))

            import torch
            tensors, attributes, config = load_checkpoint.read_checkpoint(ckpt)
            self.assertEqual(attributes["step"], 3)
            model = load_checkpoint.build_model(tensors, config)
            inputs, targets = load_checkpoint.read_batch(val, [0, 1, 2, 3], T)
            with torch.no_grad():
                _, loss = model(inputs, targets)
            self.assertLess(abs(loss.item() - chimera_loss), 1e-5 * chimera_loss,
                            f"PyTorch {loss.item()} vs Chimera {chimera_loss}")


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
