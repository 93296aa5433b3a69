#!/usr/bin/python3
"""Load a Chimera checkpoint with h5py into a plain PyTorch GPT-2 and compute the loss on a batch.

    /usr/bin/python3 analysis/load_checkpoint.py CKPT.h5 --data data/austen/val.h5 \
        --samples 0,1,2,3 [--seq-len T]

prints the mean cross-entropy of the model on those samples (sample i of length T is
tokens[i*T : i*T + T + 1], as in Chimera). The checkpoint format is docs/checkpoints.md: float32
datasets named like Hugging Face GPT-2 (Conv1D weights [in, out]), optimizer moments under
optim/, and root attributes step, seed, data_cursor, config (TOML).

The model is analysis/gpt2_torch.py: GPT2Config(n_layer, n_embd, n_head, n_ctx, vocab_size),
GPT2(config) with HF parameter names, forward(idx, targets) -> (logits, loss).
"""
import argparse
import os
import sys
import tomllib

import h5py
import numpy as np


def read_checkpoint(path):
    """(tensors, attributes, config): weights by HF name (optimizer state excluded) as float32
    numpy arrays, the root attributes, and the parsed TOML config."""
    tensors = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith("optim/"):
                tensors[name] = np.asarray(obj[...], dtype=np.float32)
        f.visititems(visit)
        attributes = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    if attributes.get("format") != "chimera-checkpoint":
        raise SystemExit(f"{path}: not a Chimera checkpoint (attribute format is missing)")
    config = tomllib.loads(attributes["config"])
    return tensors, attributes, config


def build_model(tensors, config):
    """analysis/gpt2_torch.py's GPT2 with the checkpoint's weights."""
    import torch  # imported here: reading a checkpoint needs no PyTorch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt2_torch import GPT2, GPT2Config  # the model engineer's reference definition

    m = config["model"]
    model = GPT2(GPT2Config(n_layer=m["n_layer"], n_embd=m["n_embd"], n_head=m["n_head"],
                            n_ctx=m["n_ctx"], vocab_size=m["vocab_size"]))
    state = model.state_dict()
    used = set()
    for key, param in state.items():
        name = key[len("transformer."):] if key.startswith("transformer.") else key
        if name == "lm_head.weight" and name not in tensors:
            name = "wte.weight"  # tied to the token embedding
        if name not in tensors:
            raise SystemExit(f"checkpoint has no tensor for the model's parameter '{key}'")
        value = torch.from_numpy(tensors[name])
        if tuple(value.shape) != tuple(param.shape):
            if value.dim() == 2 and tuple(value.t().shape) == tuple(param.shape):
                value = value.t()  # HF Conv1D [in, out] into an nn.Linear [out, in]
            else:
                raise SystemExit(f"tensor '{name}' has shape {tuple(value.shape)}, the model's "
                                 f"'{key}' has {tuple(param.shape)}")
        with torch.no_grad():
            param.copy_(value)
        used.add(name)
    unused = sorted(set(tensors) - used)
    if unused:
        raise SystemExit(f"checkpoint tensors the model does not have: {unused[:5]}")
    model.load_state_dict(state)
    return model.eval()


def read_batch(data_path, samples, seq_len):
    """(inputs, targets) int64 tensors [B, T] from a Chimera token dataset, read by hyperslab."""
    import torch

    with h5py.File(data_path, "r") as f:
        tokens = f["tokens"]
        rows = [np.asarray(tokens[i * seq_len:i * seq_len + seq_len + 1], dtype=np.int64)
                for i in samples]
    for i, row in zip(samples, rows):
        if len(row) != seq_len + 1:
            raise SystemExit(f"{data_path}: sample {i} of length {seq_len} is beyond the data")
    batch = torch.from_numpy(np.stack(rows))
    return batch[:, :-1], batch[:, 1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--data", required=True, help="token dataset (HDF5 with /tokens)")
    parser.add_argument("--samples", default="0", help="comma-separated sample indices")
    parser.add_argument("--seq-len", type=int, help="T (default: data.seq_len of the config)")
    args = parser.parse_args()
    tensors, attributes, config = read_checkpoint(args.checkpoint)
    seq_len = args.seq_len or config["data"]["seq_len"]
    inputs, targets = read_batch(args.data, [int(s) for s in args.samples.split(",")], seq_len)
    model = build_model(tensors, config)
    import torch

    with torch.no_grad():
        _, loss = model(inputs, targets)
    print(f"step {attributes['step']}: loss {loss.item():.9g}")


if __name__ == "__main__":
    main()
