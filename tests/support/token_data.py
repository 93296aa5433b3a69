"""Token datasets for the Python driver tests: the HDF5 layout `chimera prep` writes (DESIGN
§5), of random tokens of a 96-token vocabulary, the tests' tiny model's."""
import h5py
import numpy as np


def write_tokens(path, n, seed, chunk=512):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=rng.integers(0, 96, n).astype(np.uint16), chunks=(chunk,))
        f.attrs["vocab_size"] = np.int64(96)
        f.attrs["eos_token"] = np.int64(95)
        f.attrs["tokenizer"] = np.bytes_("test")
