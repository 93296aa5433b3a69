#!/usr/bin/python3
"""analysis/load_checkpoint.py reads a checkpoint written by Chimera's C++ writer (made by
test_io's PythonInterop test) with plain h5py: names, shapes, values, attributes and config.
usage: test_load_checkpoint.py CHECKPOINT SOURCE_DIR"""
import math
import sys

sys.path.insert(0, sys.argv[2] + "/analysis")
import load_checkpoint  # noqa: E402

tensors, attributes, config = load_checkpoint.read_checkpoint(sys.argv[1])
assert attributes["step"] == 5 and attributes["seed"] == 1337 and attributes["data_cursor"] == 320, attributes
assert config["model"]["n_layer"] == 2, config
assert not any(name.startswith("optim/") for name in tensors)
assert tensors["h.1.attn.c_attn.weight"].shape == (8, 24)
# Values as tests/unit/io/checkpoint_fixture.hpp makes them: sin((i*131 + k) * 0.37) + version.
for i, name in enumerate(["wte.weight", "wpe.weight"]):
    flat = tensors[name].reshape(-1)
    for k in (0, 1, len(flat) - 1):
        expected = math.sin((i * 131 + k) * 0.37)
        assert abs(flat[k] - expected) < 1e-4, (name, k, flat[k], expected)
print(f"load_checkpoint.py read {len(tensors)} weights of step {attributes['step']}: ok")
