#!/usr/bin/python3
"""Times the training step `chimera bench model` times, in PyTorch (the reference point).

Same model (analysis/gpt2_torch.py), config, batch and threads (OMP_NUM_THREADS, else 2): a full
step of forward, backward, global-norm clipping and AdamW with nanoGPT's decay groups. Prints
tokens/s and GFLOP/s with the same FLOP count as `chimera bench model`, and which BLAS PyTorch
runs (threadpoolctl, where installed). --bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed-precision mode: GEMMs in bf16
(oneDNN), fp32 weights, gradients and AdamW.

  OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_train_step.py [--bf16] [--steps 5] [-L 4 ...]
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
from gpt2_torch import GPT2, GPT2Config  # noqa: E402


def blas_description():
    """The BLAS libraries PyTorch loaded, with the kernel (core type) each picked."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (python3-threadpoolctl not installed)"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        return "none found by threadpoolctl"
    return "; ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')} kernels, "
                     f"{i['num_threads']} threads)" for i in blas)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-L", "--n-layer", type=int, default=4)
    p.add_argument("-C", "--n-embd", type=int, default=256)
    p.add_argument("-H", "--n-head", type=int, default=4)
    p.add_argument("-T", "--seq-len", type=int, default=256)
    p.add_argument("-B", "--batch-size", type=int, default=4)
    p.add_argument("-V", "--vocab-size", type=int, default=50257)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--bf16", action="store_true",
                   help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    args = p.parse_args()

    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = GPT2Config(args.n_layer, args.n_embd, args.n_head, args.seq_len, args.vocab_size)
    model = GPT2(config)
    optimizer = torch.optim.AdamW(model.decay_groups(0.1), lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, args.vocab_size, (args.batch_size, args.seq_len))
    targets = torch.randint(0, args.vocab_size, (args.batch_size, args.seq_len))

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            _, loss = model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)

    step_s = sum(times) / len(times)
    tokens = args.batch_size * args.seq_len
    L, C, T, V = args.n_layer, args.n_embd, args.seq_len, args.vocab_size
    flops = tokens * (72 * L * C * C + 12 * L * T * C + 6 * C * V)
    print(f"torch {torch.__version__} GPT-2 L={L} C={C} H={args.n_head} V={V}, T={T} "
          f"B={args.batch_size}, {threads} threads, {'bf16 autocast' if args.bf16 else 'fp32'}")
    print(f"  BLAS           {blas_description()}")
    print(f"  time/step      {step_s * 1e3:9.1f} ms  (mean of {args.steps} after {args.warmup})")
    print(f"  tokens/s       {tokens / step_s:9.1f}")
    print(f"  model GFLOP/s  {flops / step_s / 1e9:9.1f}")


if __name__ == "__main__":
    main()
