#!/usr/bin/env python3
"""Files made by plain h5py, as users bring them from other tools, given to `chimera train` (on 1
or 2 ranks, a tiny model) and to `chimera inspect`:

- token datasets with variable-length and fixed-length string attributes, integer attributes of
  several widths, no attributes at all, every integer dtype of /tokens: they train, and inspect
  describes them; a token beyond the model's vocabulary, a 2-D /tokens, a missing /tokens, a
  float /tokens, an lzf-compressed /tokens (h5py's own filter) and a /tokens created but never
  (or only partly) written: train refuses them with status 2 and a message naming the problem,
  and inspect names the same problem; a gzip /tokens trains.
- GPT-2 weights for `--init` written without Chimera's attributes, with Hugging Face names (with
  and without the `transformer.` prefix, with the attention-mask buffers, a tied lm_head, as
  float64): training from them gives exactly the losses of training from the Chimera checkpoint
  they were made from; an untied lm_head is refused. inspect says "usable with --init" exactly
  for the files --init takes; a tensor compressed with lzf or never written is refused by both.

Usage: test_h5py_inputs.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

CHIMERA = MPIEXEC = None
FLAGS = []
VOCAB = 96
T = 8

# A tiny model on 2 ranks (D = 2, N = 2, B = 1): one global batch is 2 samples of 8 tokens.
TINY = ["--set", "model.n_layer=2", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", f"model.vocab_size={VOCAB}", "--set",
        f"data.seq_len={T}", "--set", "parallel.stages=2", "--set", "parallel.micro_batches=2",
        "--set", "parallel.micro_batch_size=1"]
# The same on one rank: GPipe over one stage.
ONE_RANK = TINY + ["--set", "parallel.scheme=gpipe", "--set", "parallel.stages=1"]


def run(args, ranks=None, timeout=120):
    cmd = [MPIEXEC, "-np", str(ranks), *FLAGS, CHIMERA, *args] if ranks else [CHIMERA, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def tokens(n=64, seed=3):
    return np.random.default_rng(seed).integers(0, VOCAB, n)


def error_lines(r):
    # "error: ..." from setup checks (rank 0 speaks for all), "[rank N] error: ..." from a rank
    # that meets bad input mid-run.
    return [l for l in (r.stdout + r.stderr).splitlines()
            if l.startswith("error:") or (l.startswith("[rank ") and "] error: " in l)]


class Datasets(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def trains(self, path, ranks=2):
        args = ONE_RANK if ranks == 1 else TINY
        r = run(["train", *args, "--set", f"data.train={path}", "--steps", "1"], ranks)
        self.assertEqual(r.returncode, 0, f"{path}:\n{r.stdout}\n{r.stderr}")
        self.assertIn("step     1/1", r.stdout)

    def refused(self, path, needle):
        r = run(["train", *TINY, "--set", f"data.train={path}", "--steps", "1"], 2)
        self.assertEqual(r.returncode, 2, f"{path}:\n{r.stdout}\n{r.stderr}")
        errors = error_lines(r)
        self.assertTrue(errors, r.stderr)
        self.assertIn(needle, errors[0])
        self.assertIn(path, errors[0])

    def inspect(self, path, status=0):
        r = run(["inspect", path])
        self.assertEqual(r.returncode, status, f"{path}:\n{r.stdout}\n{r.stderr}")
        return r.stdout + r.stderr

    def test_variable_length_string_attributes(self):
        # What h5py writes for Python values: str -> variable-length UTF-8, int -> int64.
        path = self.path("vlen.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.uint16))
            f.attrs["tokenizer"] = "mine"
            f.attrs["vocab_size"] = VOCAB
            f.attrs["eos_token"] = "95"  # a number as text, as some tools write it
        self.assertTrue(h5py.File(path).attrs.get_id("tokenizer").get_type().is_variable_str())
        self.trains(path)
        text = self.inspect(path)
        self.assertIn("vocab_size 96, eos_token 95, tokenizer mine", text)

    def test_fixed_length_strings_and_narrow_integers(self):
        path = self.path("fixed.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.int32), chunks=(16,))
            f.attrs["tokenizer"] = np.bytes_("gpt2")
            f.attrs["vocab_size"] = np.uint16(VOCAB)
            f.attrs["eos_token"] = np.int8(7)
        self.trains(path, ranks=1)
        self.assertIn("vocab_size 96, eos_token 7, tokenizer gpt2", self.inspect(path))

    def test_tokens_only(self):
        path = self.path("bare.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.int64))
        self.trains(path)
        text = self.inspect(path)
        self.assertIn("vocab_size absent, eos_token absent, tokenizer absent", text)
        self.assertIn("trains with model.vocab_size >=", text)

    def test_every_integer_dtype(self):
        for dtype in [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                      np.int64]:
            with self.subTest(dtype=dtype.__name__):
                path = self.path(f"{dtype.__name__}.h5")
                ids = tokens() % 100 if dtype == np.int8 else tokens()
                with h5py.File(path, "w") as f:
                    f.create_dataset("tokens", data=ids.astype(dtype))
                    f.attrs["vocab_size"] = VOCAB
                self.trains(path, ranks=1)
                self.assertIn(f"({dtype.__name__}, not chunked)", self.inspect(path))

    def test_declared_vocabulary_larger_than_the_model(self):
        # GPT-2's vocab_size on a file whose tokens all fit the tiny model: not an error.
        path = self.path("gpt2_vocab.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.uint16))
            f.attrs["vocab_size"] = 50257
        self.trains(path)

    def test_token_beyond_the_vocabulary(self):
        # Exactly one global batch (2 samples of 8 + 1 tokens): step 1 reads every token.
        path = self.path("beyond.h5")
        ids = tokens(2 * T + 1)
        ids[9] = VOCAB
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=ids.astype(np.uint16))
            f.attrs["vocab_size"] = VOCAB
        self.refused(path, f"token {VOCAB} at offset 9 of /tokens is outside "
                           f"[0, model.vocab_size = {VOCAB})")
        text = self.inspect(path)
        self.assertIn(f"max {VOCAB} (first at offset 9), at or above the file's vocab_size "
                      f"{VOCAB}: trains with model.vocab_size >= {VOCAB + 1}", text)

    def test_two_dimensional_tokens(self):
        path = self.path("grid.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.uint16).reshape(8, 8))
        self.refused(path, "/tokens has shape [8, 8], expected a 1-D array of tokens")
        self.assertIn("expected a 1-D array", self.inspect(path, status=2))

    def test_missing_tokens(self):
        path = self.path("ids.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("ids", data=tokens().astype(np.uint16))
            f.attrs["vocab_size"] = VOCAB
        self.refused(path, "has no /tokens dataset")
        self.assertIn("has no /tokens dataset", self.inspect(path, status=2))

    def test_float_tokens(self):
        path = self.path("float.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens().astype(np.float32))
        self.refused(path, "/tokens has dtype float32, expected integer token ids")
        self.assertIn("has dtype float32", self.inspect(path, status=2))

    # Values that cannot be read as written are refused when the file is opened (on every rank,
    # at setup), with one line naming the file, the dataset and what to do; never read as zeros
    # or reported as a damaged file.
    def test_gzip_tokens_train(self):
        path = self.path("gzip.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens(5000).astype(np.uint16), compression="gzip")
        self.trains(path)
        self.assertIn("tokens      5000 (uint16, chunks of", self.inspect(path))

    def test_lzf_tokens(self):
        # lzf is h5py's own filter (id 32000): h5py decodes it, libhdf5 alone cannot.
        path = self.path("lzf.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens(5000).astype(np.uint16), compression="lzf")
        needle = ("dataset 'tokens' is compressed with filter 'lzf' (id 32000), which this HDF5 "
                  "cannot decode: rewrite it uncompressed or with compression='gzip'")
        self.refused(path, needle)
        text = self.inspect(path, status=2)
        self.assertIn(f"{path}: {needle}", text)
        self.assertNotIn("damaged", text)

    def test_never_written_tokens(self):
        for chunks in [(1000,), None]:
            with self.subTest(chunks=chunks):
                path = self.path(f"never_{chunks is not None}.h5")
                with h5py.File(path, "w") as f:
                    f.create_dataset("tokens", shape=(5000,), dtype="u2", chunks=chunks)
                needle = "dataset 'tokens' was created but never written (no data stored)"
                self.refused(path, needle)
                self.assertIn(needle, self.inspect(path, status=2))

    def test_partly_written_tokens(self):
        path = self.path("partly.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", shape=(5000,), dtype="u2", chunks=(1000,))
            f["tokens"][:2000] = tokens(2000)
        needle = "dataset 'tokens' was only partly written: 2 of its 5 chunks hold data"
        self.refused(path, needle)
        self.assertIn(needle, self.inspect(path, status=2))


def losses(metrics):
    with open(metrics) as f:
        return [json.loads(line)["loss"] for line in f]


class InitFromGpt2Tensors(unittest.TestCase):
    """Files of the same weights in the forms other tools write train exactly like the Chimera
    checkpoint they come from."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data = os.path.join(cls.tmp.name, "train.h5")
        with h5py.File(cls.data, "w") as f:
            f.create_dataset("tokens", data=tokens(2048).astype(np.uint16))
        save = os.path.join(cls.tmp.name, "ckpt")
        r = run(["train", *TINY, "--set", f"data.train={cls.data}", "--steps", "2", "--save-dir",
                 save], 2)
        assert r.returncode == 0, r.stderr
        cls.checkpoint = os.path.join(save, "ckpt-00000002.h5")
        with h5py.File(cls.checkpoint) as f:
            cls.weights = {name: f[name][()] for name in f if isinstance(f[name], h5py.Dataset)}
        cls.reference = cls.train_from(cls.checkpoint)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def train_from(cls, path, expect_status=0):
        metrics = path + ".metrics"
        r = run(["train", *TINY, "--set", f"data.train={cls.data}", "--steps", "3", "--init", path,
                 "--metrics", metrics], 2)
        assert r.returncode == expect_status, f"{r.stdout}\n{r.stderr}"
        return losses(metrics) if expect_status == 0 else r

    def write(self, name, prefix="", buffers=False, lm_head=None, dtype=np.float32, config=True):
        path = os.path.join(self.tmp.name, name)
        n_ctx = self.weights["wpe.weight"].shape[0]
        with h5py.File(path, "w") as f:
            for key, value in self.weights.items():
                f.create_dataset(prefix + key, data=value.astype(dtype))
            if buffers:
                for i in range(2):
                    mask = np.tril(np.ones((n_ctx, n_ctx), dtype=np.uint8))[None, None]
                    f.create_dataset(f"{prefix}h.{i}.attn.bias", data=mask.astype(bool))
                    f.create_dataset(f"{prefix}h.{i}.attn.masked_bias", data=np.float32(-1e4))
            if lm_head is not None:
                f.create_dataset("lm_head.weight", data=lm_head)
            if config:
                f.attrs["config"] = json.dumps({"model_type": "gpt2", "n_layer": 2})
        return path

    def assert_usable(self, path, usable):
        r = run(["inspect", path])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("HDF5 tensors without Chimera's checkpoint attributes", r.stdout)
        if usable:
            self.assertIn(f"usable with --init for a model with n_layer=2 n_embd=32 n_ctx=16 "
                          f"vocab_size={VOCAB}", r.stdout)
        else:
            self.assertIn("not usable with --init", r.stdout)
        return r.stdout

    def test_hugging_face_state_dict(self):
        # GPT2LMHeadModel.state_dict(): transformer. prefix, mask buffers, tied lm_head.
        path = self.write("hf_lm_head.h5", prefix="transformer.", buffers=True,
                          lm_head=self.weights["wte.weight"])
        self.assert_usable(path, True)
        self.assertEqual(self.train_from(path), self.reference)

    def test_plain_names_as_float64(self):
        # GPT2Model.state_dict() through numpy's default float64: float32 -> float64 -> float32
        # is exact, so the losses are the same.
        path = self.write("gpt2_model_f64.h5", buffers=True, dtype=np.float64, config=False)
        self.assertIn("float64 tensors converted to float32", self.assert_usable(path, True))
        self.assertEqual(self.train_from(path), self.reference)

    def test_untied_lm_head_is_refused(self):
        head = self.weights["wte.weight"].copy()
        head[3, 5] += 1e-3
        path = self.write("untied.h5", prefix="transformer.", lm_head=head)
        self.assertIn("ties the LM head", self.assert_usable(path, False))
        r = self.train_from(path, expect_status=2)
        self.assertIn("ties the LM head to the token embedding", error_lines(r)[0])

    def test_missing_and_foreign_tensors_are_refused(self):
        path = self.write("missing.h5")
        with h5py.File(path, "a") as f:
            del f["h.1.mlp.c_fc.bias"]
            f.create_dataset("h.1.mlp.extra", data=np.zeros(3, np.float32))
        self.assertIn("has no tensor 'h.1.mlp.c_fc.bias'", self.assert_usable(path, False))
        r = self.train_from(path, expect_status=2)
        self.assertIn("has no tensor 'h.1.mlp.c_fc.bias'", error_lines(r)[0])

    def assert_refused(self, path, needle):
        self.assertIn(f"not usable with --init: {path}: {needle}", self.assert_usable(path, False))
        r = self.train_from(path, expect_status=2)
        self.assertIn(f"{path}: {needle}", error_lines(r)[0])

    def test_lzf_tensor_is_refused(self):
        path = self.write("lzf.h5")
        with h5py.File(path, "a") as f:
            value = f["h.1.mlp.c_fc.weight"][()]
            del f["h.1.mlp.c_fc.weight"]
            f.create_dataset("h.1.mlp.c_fc.weight", data=value, compression="lzf")
        self.assert_refused(path, "tensor 'h.1.mlp.c_fc.weight' is compressed with filter 'lzf' "
                                  "(id 32000), which this HDF5 cannot decode")

    def test_never_written_tensor_is_refused(self):
        path = self.write("never.h5")
        with h5py.File(path, "a") as f:
            shape = f["wpe.weight"].shape
            del f["wpe.weight"]
            f.create_dataset("wpe.weight", shape=shape, dtype="f4")
        self.assert_refused(path, "tensor 'wpe.weight' was created but never written")

    def test_checkpoint_with_an_lzf_tensor_is_refused(self):
        # A Chimera checkpoint rewritten by a tool that compressed one tensor with lzf.
        path = os.path.join(self.tmp.name, "ckpt_lzf.h5")
        with h5py.File(self.checkpoint) as src, h5py.File(path, "w") as f:
            for key, value in src.attrs.items():
                f.attrs[key] = value
            for name, value in self.weights.items():
                f.create_dataset(name, data=value,
                                 compression="lzf" if name == "wte.weight" else None)
        r = run(["inspect", path])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Chimera checkpoint", r.stdout)
        needle = "tensor 'wte.weight' is compressed with filter 'lzf' (id 32000)"
        self.assertIn(f"not usable with --init: {path}: {needle}", r.stdout)
        r = self.train_from(path, expect_status=2)
        self.assertIn(f"{path}: {needle}", error_lines(r)[0])


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
