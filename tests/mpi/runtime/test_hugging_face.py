#!/usr/bin/env python3
"""Hugging Face GPT-2 weights in and out, as a user of transformers would bring and take them:

- a GPT2LMHeadModel save (model.safetensors with F32, F16 or BF16 tensors, with and without
  lm_head and the old attn.bias buffers, names with and without `transformer.`) imported with
  `chimera import-hf`, trained 3 steps on 4 ranks, matches plain PyTorch (analysis/gpt2_torch.py)
  trained from the same weights on the same batches, to 1e-5;
- the imported checkpoint is taken by --resume as well as --init;
- `chimera export-hf` writes the layout save_pretrained writes, loads into PyTorch with the
  checkpoint's logits, and export -> import gives the same tensors bit for bit;
- `chimera sample --temperature 0` equals PyTorch's greedy decode of a trained model, also past
  n_ctx; seeded sampling repeats; text prompts are encoded and decoded with GPT-2's tokenizer;
- `chimera train` with log.sample_tokens prints, with each validation loss, the sample that
  `chimera sample` draws from the same weights with the same seed;
- configs Chimera does not compute and damaged files are refused with status 2 and one line;
  an output that is one of the inputs is refused and a failed write leaves no temporary file;
- --init refuses a checkpoint of another [model] (n_head changes no shape) and non-finite
  weights, naming the file and tensor.

Usage: test_hugging_face.py CHIMERA MPIEXEC [MPIEXEC FLAGS...]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "analysis"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import load_checkpoint  # noqa: E402
from gpt2_torch import GPT2, GPT2Config, lr_at  # noqa: E402
from hf_safetensors import gpt2_config_json, read_safetensors, write_safetensors  # noqa: E402

CHIMERA = MPIEXEC = None
FLAGS = []
SHAPE = dict(n_layer=4, n_embd=32, n_head=2, n_ctx=16, vocab_size=96)
T = 8
OPTIM = dict(lr=1e-3, min_lr=1e-4, warmup_steps=1, steps=3, weight_decay=0.1, beta1=0.9,
             beta2=0.95, eps=1e-8, grad_clip=1.0)
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def chimera(*args, timeout=120):
    return subprocess.run([CHIMERA, *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def train(np_, args, timeout=300):
    model = [f"--set=model.{k}={v}" for k, v in SHAPE.items()]
    return subprocess.run([MPIEXEC, "-np", str(np_), *FLAGS, CHIMERA, "train", *model,
                           f"--set=data.seq_len={T}", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def write_tokens(path, tokens):
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=np.asarray(tokens, dtype=np.uint16))
        f.attrs["vocab_size"] = np.int64(SHAPE["vocab_size"])
        f.attrs["eos_token"] = np.int64(SHAPE["vocab_size"] - 1)
        f.attrs["tokenizer"] = np.bytes_("test")


def hf_weights(seed, shape=SHAPE):
    """A GPT-2's state dict with every tensor random (no LayerNorm weight trivially 1)."""
    torch.manual_seed(seed)
    model = GPT2(GPT2Config(**shape))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "ln" in name and
                                                     name.endswith("weight") else 0.0))
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


def save_hf(directory, weights, dtype, prefix="transformer.", lm_head=True, buffers=False,
            shape=SHAPE, **config):
    """A GPT2LMHeadModel save; returns the float32 values stored (by Chimera name)."""
    os.makedirs(directory, exist_ok=True)
    tensors = {prefix + name: value for name, value in weights.items()}
    if lm_head:
        tensors["lm_head.weight"] = weights["wte.weight"]
    if buffers:
        n = shape["n_ctx"]
        for i in range(shape["n_layer"]):
            tensors[f"{prefix}h.{i}.attn.bias"] = np.tril(np.ones((1, 1, n, n), np.float32))
            tensors[f"{prefix}h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    stored = write_safetensors(os.path.join(directory, "model.safetensors"), tensors, dtype,
                               {"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w") as f:
        f.write(gpt2_config_json(**{**shape, **config}))
    return {name: stored[prefix + name] for name in weights}


def checkpoint_tensors(path):
    with h5py.File(path, "r") as f:
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset)
                     else None)
        return out, dict(f.attrs)


def pytorch_training(weights, samples):
    """(losses, final parameters) of Chimera's optimizer in float64 on the whole batch each
    step (the dataset holds exactly one global batch, so every step sees every sample)."""
    model = GPT2(GPT2Config(**SHAPE)).double()
    model.load_state_dict({n: torch.from_numpy(v.astype(np.float64)) for n, v in
                           weights.items()})
    optimizer = torch.optim.AdamW(model.decay_groups(OPTIM["weight_decay"]), lr=OPTIM["lr"],
                                  betas=(OPTIM["beta1"], OPTIM["beta2"]), eps=OPTIM["eps"])
    inputs, targets = samples[:, :-1], samples[:, 1:]
    losses = []
    for step in range(OPTIM["steps"]):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), OPTIM["grad_clip"])
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, OPTIM["lr"], OPTIM["min_lr"], OPTIM["warmup_steps"],
                                OPTIM["steps"])
        optimizer.step()
        losses.append(loss.item())
    return losses, {n: p.detach().numpy() for n, p in model.named_parameters()}


def greedy_pytorch(model, prompt, count, n_ctx):
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            logits, _ = model(torch.tensor([sequence[-n_ctx:]]))
            sequence.append(int(logits[0, -1].argmax()))
    return sequence[len(prompt):]


class HuggingFace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="chimera-hf-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def test_import_train_on_4_ranks_matches_pytorch(self):
        rng = np.random.default_rng(3)
        tokens = rng.integers(0, SHAPE["vocab_size"], 4 * T + 1)  # one global batch: W*N*B = 4
        write_tokens(self.path("train.h5"), tokens)
        samples = torch.from_numpy(np.stack([tokens[i * T:i * T + T + 1] for i in range(4)])
                                   .astype(np.int64))
        variants = [dict(dtype="F32", lm_head=True, buffers=True),
                    dict(dtype="F16", lm_head=False),
                    dict(dtype="BF16", lm_head=False, prefix="")]
        for i, variant in enumerate(variants):
            with self.subTest(**variant):
                stored = save_hf(self.path(f"hf{i}"), hf_weights(i), **variant)
                ckpt = self.path(f"imported{i}.h5")
                r = chimera("import-hf", self.path(f"hf{i}", "model.safetensors"), "--out", ckpt)
                self.assertEqual(r.returncode, 0, r.stderr)
                imported, attrs = checkpoint_tensors(ckpt)
                self.assertEqual(attrs["step"], 0)
                for name, value in stored.items():
                    self.assertTrue(np.array_equal(imported[name], value), name)
                    self.assertFalse(np.any(imported["optim/exp_avg/" + name]), name)
                optim = [f"--set=train.{k}={v}" for k, v in OPTIM.items()]
                save = self.path(f"run{i}")
                r = train(4, ["--init", ckpt, "--set", f"data.train={self.path('train.h5')}",
                              "--set=parallel.stages=4", "--set=parallel.micro_batches=4",
                              *optim, "--save-dir", save, "--metrics", self.path(f"m{i}.jsonl")])
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(self.path(f"m{i}.jsonl")) as f:
                    chimera_losses = [json.loads(line)["loss"] for line in f]
                losses, final = pytorch_training(stored, samples)
                np.testing.assert_allclose(chimera_losses, losses, rtol=1e-5)
                trained, _ = checkpoint_tensors(os.path.join(save, "ckpt-00000003.h5"))
                for name, value in final.items():
                    np.testing.assert_allclose(trained[name], value, rtol=0, atol=1e-5,
                                               err_msg=name)

        # --resume takes the imported checkpoint too (step 0, zero moments = a fresh optimizer)
        # and trains the same first step as --init.
        resume = self.path("resume")
        os.makedirs(resume)
        shutil.copy(self.path("imported0.h5"), os.path.join(resume, "ckpt-00000000.h5"))
        r = train(4, ["--resume", "--save-dir", resume, "--steps", "1",
                      "--set", f"data.train={self.path('train.h5')}",
                      *[f"--set=train.{k}={v}" for k, v in OPTIM.items() if k != "steps"],
                      "--set=parallel.stages=4", "--set=parallel.micro_batches=4",
                      "--metrics", self.path("resume.jsonl")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("at step 0", r.stdout)
        with open(self.path("resume.jsonl")) as f, open(self.path("m0.jsonl")) as g:
            self.assertEqual(json.loads(f.readline())["loss"], json.loads(g.readline())["loss"])

    def test_export_loads_into_pytorch_and_imports_bit_for_bit(self):
        save_hf(self.path("hf"), hf_weights(7), "F32")
        ckpt = self.path("ckpt.h5")
        self.assertEqual(chimera("import-hf", self.path("hf", "model.safetensors"), "--out",
                                 ckpt).returncode, 0)
        r = chimera("export-hf", ckpt, "--out", self.path("export"))
        self.assertEqual(r.returncode, 0, r.stderr)

        tensors, metadata, header, length = read_safetensors(self.path("export",
                                                                       "model.safetensors"))
        self.assertEqual(metadata, {"format": "pt"})
        self.assertEqual(length % 8, 0)
        names = [n for n in header if n != "__metadata__"]
        self.assertEqual(names, sorted(names))
        self.assertTrue(all(n.startswith("transformer.") for n in names))
        self.assertTrue(all(header[n]["dtype"] == "F32" for n in names))
        with open(self.path("export", "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["architectures"], ["GPT2LMHeadModel"])
        self.assertEqual((config["model_type"], config["activation_function"],
                          config["layer_norm_epsilon"], config["tie_word_embeddings"]),
                         ("gpt2", "gelu_new", 1e-5, True))
        for key in SHAPE:
            self.assertEqual(config[key if key != "n_ctx" else "n_positions"], SHAPE[key])

        # PyTorch from the export (as from_pretrained reads it) and from the checkpoint.
        exported = GPT2(GPT2Config(n_layer=config["n_layer"], n_embd=config["n_embd"],
                                   n_head=config["n_head"], n_ctx=config["n_positions"],
                                   vocab_size=config["vocab_size"]))
        exported.load_state_dict({n[len("transformer."):]: torch.from_numpy(v)
                                  for n, v in tensors.items()})
        weights, _, run_config = load_checkpoint.read_checkpoint(ckpt)
        original = load_checkpoint.build_model(weights, run_config)
        idx = torch.randint(0, SHAPE["vocab_size"], (2, SHAPE["n_ctx"]))
        with torch.no_grad():
            self.assertTrue(torch.equal(exported.eval()(idx)[0], original(idx)[0]))

        again = self.path("again.h5")
        r = chimera("import-hf", self.path("export", "model.safetensors"), "--out", again)
        self.assertEqual(r.returncode, 0, r.stderr)
        first, _ = checkpoint_tensors(ckpt)
        second, _ = checkpoint_tensors(again)
        self.assertEqual(sorted(first), sorted(second))
        for name in first:
            self.assertEqual(first[name].tobytes(), second[name].tobytes(), name)

    def test_samples_match_pytorch_and_training(self):
        # A learnable text: 48 distinct tokens repeated (each determines the next), so that a
        # short training run continues it with varied tokens rather than one repeated token.
        cycle = np.random.default_rng(4).permutation(SHAPE["vocab_size"])[:48]
        tokens = np.tile(cycle, 4096 // len(cycle))
        write_tokens(self.path("train.h5"), tokens)
        write_tokens(self.path("val.h5"), tokens[:1024])
        save = self.path("run")
        data = ["--set", f"data.train={self.path('train.h5')}", "--set",
                f"data.val={self.path('val.h5')}", "--set=data.seq_len=16"]
        # Trained on 4 ranks (D = 4), with a sample printed at each validation loss: the
        # pipeline's sampling (each stage with its own key/value cache, one position per token
        # between stages) must give what `chimera sample` draws with the same seed from the
        # saved checkpoint.
        r = train(4, [*data, "--set=parallel.micro_batch_size=2", "--set=train.lr=1e-2",
                      "--steps", "60", "--save-dir", save, "--eval-every", "30",
                      "--set=log.sample_tokens=12", "--set=log.sample_prompt=" +
                      " ".join(map(str, cycle[:3]))])
        self.assertEqual(r.returncode, 0, r.stderr)
        printed = re.findall(r"sample (?:before|after) step (\d+): ([0-9 ]+)", r.stdout)
        self.assertEqual([step for step, _ in printed], ["1", "30", "60"], r.stdout)
        r = chimera("sample", os.path.join(save, "ckpt-00000060.h5"), "--prompt-ids",
                    " ".join(map(str, cycle[:3])), "--tokens", "12", "--seed", "1337", "--ids")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(printed[-1][1].split(), r.stdout.split())
        # D = 2, with the window sliding (a 10-token prompt and 12 more: 22 > T = 16, so the
        # stages' caches are rebuilt from the last 16 tokens) and with recompute on (the caches
        # need no kept activations): again the tokens `chimera sample` draws with the same seed.
        two = self.path("two")
        long_prompt = " ".join(map(str, cycle[:10]))
        r = train(2, [*data, "--set=parallel.stages=2", "--set=parallel.micro_batch_size=2",
                      "--set=parallel.recompute=true", "--set=train.lr=1e-2", "--steps", "30",
                      "--save-dir", two, "--eval-every", "30", "--set=log.sample_tokens=12",
                      "--set=log.sample_prompt=" + long_prompt])
        self.assertEqual(r.returncode, 0, r.stderr)
        printed_two = re.findall(r"sample after step 30: ([0-9 ]+)", r.stdout)
        self.assertEqual(len(printed_two), 1, r.stdout)
        r = chimera("sample", os.path.join(two, "ckpt-00000030.h5"), "--prompt-ids", long_prompt,
                    "--tokens", "12", "--seed", "1337", "--ids")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(printed_two[0].split(), r.stdout.split())
        # One worker holding the whole model samples with its key/value cache instead: the same
        # tokens as `chimera sample` from its checkpoint.
        single = self.path("single")
        r = train(1, [*data, "--set=parallel.stages=1", "--set=parallel.scheme=1f1b",
                      "--set=parallel.micro_batch_size=2",
                      "--set=train.lr=1e-2", "--steps", "30", "--save-dir", single,
                      "--eval-every", "30", "--set=log.sample_tokens=12",
                      "--set=log.sample_prompt=" + " ".join(map(str, cycle[:3]))])
        self.assertEqual(r.returncode, 0, r.stderr)
        printed_single = re.findall(r"sample after step 30: ([0-9 ]+)", r.stdout)
        self.assertEqual(len(printed_single), 1, r.stdout)
        r = chimera("sample", os.path.join(single, "ckpt-00000030.h5"), "--prompt-ids",
                    " ".join(map(str, cycle[:3])), "--tokens", "12", "--seed", "1337", "--ids")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(printed_single[0].split(), r.stdout.split())
        r = train(4, [*data, "--steps", "1", "--set=log.sample_tokens=4"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("set train.eval_every", r.stdout + r.stderr)

        ckpt = os.path.join(save, "ckpt-00000060.h5")
        prompt = [int(t) for t in cycle[:10]]
        count = 12  # prompt + continuation = 22 > n_ctx = 16: the window slides
        r = chimera("sample", ckpt, "--prompt-ids", " ".join(map(str, prompt)), "--tokens",
                    str(count), "--temperature", "0", "--ids")
        self.assertEqual(r.returncode, 0, r.stderr)
        ours = [int(x) for x in r.stdout.split()]
        weights, _, run_config = load_checkpoint.read_checkpoint(ckpt)
        model = load_checkpoint.build_model(weights, run_config).double()
        self.assertEqual(ours, greedy_pytorch(model, prompt, count, SHAPE["n_ctx"]))
        self.assertGreater(len(set(ours)), 3, ours)
        long_prompt = [int(t) for t in cycle[:20]]  # longer than n_ctx: its last 16 tokens count
        r = chimera("sample", ckpt, "--prompt-ids", " ".join(map(str, long_prompt)),
                    "--tokens", "4", "--temperature", "0", "--ids")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([int(x) for x in r.stdout.split()],
                         greedy_pytorch(model, long_prompt, 4, SHAPE["n_ctx"]))

        sampled = ["sample", ckpt, "--prompt-ids", "5 9", "--tokens", "20", "--seed", "11",
                   "--top-k", "10"]
        first, second = chimera(*sampled), chimera(*sampled)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertEqual(len(first.stdout.split()), 20)  # V = 96 is not GPT-2's: ids

        for args, needle in [([], "needs a prompt"),
                             (["--prompt-ids", "5 96"], "token 96 is outside"),
                             (["--prompt-ids", "5 x"], "expected token ids"),
                             (["--prompt-ids", "5", "--temperature", "-1"], "--temperature -1"),
                             (["--prompt-ids", "5", "--top-k", "-3"], "--top-k -3"),
                             (["--prompt", "hi"], "pass token ids with --prompt-ids")]:
            r = chimera("sample", ckpt, *args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(needle, r.stderr)

    def test_sample_takes_hugging_face_saves_and_init_files_directly(self):
        stored = save_hf(self.path("hf"), hf_weights(3), "BF16", buffers=True)
        model = GPT2(GPT2Config(**SHAPE)).double()
        model.load_state_dict({n: torch.from_numpy(v).double() for n, v in stored.items()})
        prompt = [5, 9, 17, 3, 40, 2, 11, 60, 7, 1, 33, 12, 80, 4, 6, 90, 21, 8]  # > n_ctx
        want = greedy_pytorch(model.eval(), prompt, 6, SHAPE["n_ctx"])
        ids = ["--prompt-ids", " ".join(map(str, prompt)), "--tokens", "6", "--temperature",
               "0", "--ids"]
        # Plain HDF5 of GPT-2 tensors with Hugging Face names, as `--init` takes it: the shape
        # (n_head) comes from a run config.
        plain = self.path("plain.h5")
        with h5py.File(plain, "w") as f:
            for name, value in stored.items():
                f["transformer." + name] = value
        run_config = self.path("model.toml")
        with open(run_config, "w") as f:
            f.write("[model]\n" + "".join(f"{k} = {v}\n" for k, v in SHAPE.items()))
        self.assertEqual(chimera("import-hf", self.path("hf", "model.safetensors"), "--out",
                                 self.path("imported.h5")).returncode, 0)
        for source in ([self.path("hf")], [self.path("hf", "model.safetensors")],
                       [self.path("imported.h5")], [plain, "--config", run_config]):
            r = chimera("sample", *source, *ids)
            self.assertEqual(r.returncode, 0, (source, r.stderr))
            self.assertEqual([int(x) for x in r.stdout.split()], want, source)

        os.makedirs(self.path("empty"))
        with open(self.path("notes.txt"), "w") as f:
            f.write("not weights\n")
        for source, needle in [([plain], "pass --config RUN.toml"),
                               ([self.path("empty")], "is a directory without model.safetensors"),
                               ([self.path("notes.txt")], "notes.txt"),
                               ([self.path("nothing.h5")], "no such file or directory")]:
            r = chimera("sample", *source, *ids)
            self.assertEqual(r.returncode, 2, (source, r.stdout, r.stderr))
            self.assertIn(needle, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_text_prompt_with_gpt2_vocabulary(self):
        shape = dict(n_layer=1, n_embd=16, n_head=2, n_ctx=16, vocab_size=50257)
        save_hf(self.path("hf"), hf_weights(1, shape), "BF16", shape=shape)
        ckpt = self.path("gpt2.h5")
        r = chimera("import-hf", self.path("hf", "model.safetensors"), "--out", ckpt)
        self.assertEqual(r.returncode, 0, r.stderr)
        tokenizer = os.path.join(ROOT, "inputs", "gpt2-tokenizer")
        r = chimera("sample", ckpt, "--prompt", "It is a truth", "--tokens", "3",
                    "--temperature", "0", "--tokenizer", tokenizer)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("It is a truth"), r.stdout)
        r = chimera("sample", ckpt, "--prompt", "It is a truth", "--tokens", "3", "--ids",
                    "--tokenizer", tokenizer)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.split()), 3)
        with open(self.path("hf", "config.json")) as f:
            self.assertEqual(json.load(f)["vocab_size"], 50257)

    def test_refusals(self):
        weights = hf_weights(2)
        cases = [
            (dict(activation_function="relu"), "\"activation_function\" = \"relu\""),
            (dict(layer_norm_epsilon=1e-6), "\"layer_norm_epsilon\" = 1e-06"),
            (dict(tie_word_embeddings=False), "\"tie_word_embeddings\" = false"),
            (dict(n_head=3), "not divisible by model.n_head = 3"),
            (dict(n_embd=64), "has shape [96] but the config (n_embd = 64"),
        ]
        for i, (config, needle) in enumerate(cases):
            save_hf(self.path(f"c{i}"), weights, "F32", **config)
            r = chimera("import-hf", self.path(f"c{i}", "model.safetensors"), "--out",
                        self.path("x.h5"))
            self.assertEqual(r.returncode, 2, (config, r.stderr))
            self.assertIn(needle, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

        untied = dict(weights)
        save_hf(self.path("untied"), untied, "F32", lm_head=False)
        path = self.path("untied", "model.safetensors")
        head = dict(untied, **{"lm_head.weight": untied["wte.weight"] + 1})
        write_safetensors(path, {("transformer." + n if n != "lm_head.weight" else n): v
                                 for n, v in head.items()})
        r = chimera("import-hf", path, "--out", self.path("x.h5"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("lm_head.weight differs from transformer.wte.weight", r.stderr)

        missing = {n: v for n, v in weights.items() if n != "h.2.mlp.c_fc.bias"}
        save_hf(self.path("missing"), missing, "F32")
        r = chimera("import-hf", self.path("missing", "model.safetensors"), "--out",
                    self.path("x.h5"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("has no tensor 'transformer.h.2.mlp.c_fc.bias'", r.stderr)

        save_hf(self.path("cut"), weights, "F32")
        path = self.path("cut", "model.safetensors")
        os.truncate(path, os.path.getsize(path) - 4)
        r = chimera("import-hf", path, "--out", self.path("x.h5"))
        self.assertEqual(r.returncode, 2)
        self.assertIn(path, r.stderr)
        self.assertIn("past the end of the data section", r.stderr)

        save_hf(self.path("ok"), weights, "F32")
        r = chimera("import-hf", self.path("ok", "model.safetensors"), "--out", self.path("x.h5"),
                    "--config", self.path("nowhere.json"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("nowhere.json: cannot read", r.stderr)
        self.assertFalse(os.path.exists(self.path("x.h5")))

        # The output never replaces an input, and a failed write leaves nothing behind.
        source = self.path("ok", "model.safetensors")
        with open(source, "rb") as f:
            before = f.read()
        for out in (source, self.path("ok", "config.json")):
            r = chimera("import-hf", source, "--out", out)
            self.assertEqual(r.returncode, 2, (out, r.stderr))
            self.assertIn(f"{out}: is also an input", r.stderr)
        with open(source, "rb") as f:
            self.assertEqual(f.read(), before)
        os.makedirs(self.path("folder"))
        r = chimera("import-hf", source, "--out", self.path("folder"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("is a directory", r.stderr)
        self.assertEqual(os.listdir(self.tmp).count("folder.tmp"), 0)

    def test_init_refuses_another_model_and_nonfinite_weights(self):
        save_hf(self.path("hf"), hf_weights(5), "F32")
        ckpt = self.path("x.h5")
        r = chimera("import-hf", self.path("hf", "model.safetensors"), "--out", ckpt)
        self.assertEqual(r.returncode, 0, r.stderr)
        write_tokens(self.path("train.h5"), np.arange(4 * T + 1) % SHAPE["vocab_size"])
        run = ["--set", f"data.train={self.path('train.h5')}", "--set=parallel.scheme=gpipe",
               "--set=parallel.stages=1", "--set=parallel.micro_batches=1", "--steps", "1"]
        # n_head splits C without changing any shape: only the checkpoint's config tells.
        r = train(1, ["--init", ckpt, *run, "--set=model.n_head=4"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("the checkpoint's model is L 4 C 32 H 2 T 16 V 96 but this run's is "
                      "L 4 C 32 H 4 T 16 V 96", r.stderr)
        # A NaN, or a float64 beyond float32's range, is the file's fault, not the run's.
        for bad, shown in ((np.nan, "nan"), (1e300, "inf")):
            with self.subTest(value=bad):
                damaged = self.path("damaged.h5")
                shutil.copy(ckpt, damaged)
                with h5py.File(damaged, "r+") as f:
                    values = f["h.1.ln_1.weight"][...].astype(np.float64)
                    values[3] = bad
                    del f["h.1.ln_1.weight"]
                    f.create_dataset("h.1.ln_1.weight", data=values)
                r = train(1, ["--init", damaged, *run])
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f"tensor 'h.1.ln_1.weight' holds {shown} at element 3", r.stderr)
                r = chimera("inspect", damaged)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("not usable with --init", r.stdout)


if __name__ == "__main__":
    CHIMERA, MPIEXEC, *FLAGS = sys.argv[1:]
    unittest.main(argv=[sys.argv[0], "-v"])
