#!/usr/bin/python3
"""Times the training step `chimera bench model` times, in PyTorch (the reference point).

Same model (analysis/gpt2_torch.py), config, batch and threads (OMP_NUM_THREADS, else 2): a full
step of forward, backward, global-norm clipping and AdamW with nanoGPT's decay groups. Prints
tokens/s and GFLOP/s with the same FLOP count as `chimera bench model`, and which BLAS PyTorch
runs (threadpoolctl, where installed). --bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed-precision mode: GEMMs in bf16
(oneDNN), fp32 weights, gradients and AdamW.

On a GPU (--device cuda; scripts/gpu-check runs it there): the same step in PyTorch eager, or
compiled with torch.compile (--compile), autocast on the GPU for --bf16; --gemm-size N also times
an N^3 bf16 matmul and prints MFU against that measured rate.

  OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_train_step.py [--bf16] [--steps 5] [-L 4 ...]
  python3 bench/torch_train_step.py --device cuda --bf16 --compile -L 12 -C 768 -H 12 -T 1024 -B 8
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
                   help='forward and loss under torch.autocast(device, dtype=torch.bfloat16)')
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--compile", action="store_true", help="the model through torch.compile")
    p.add_argument("--gemm-size", type=int, default=0,
                   help="also time an N^3 bf16 matmul on the device; MFU against it (0: no)")
    args = p.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = GPT2Config(args.n_layer, args.n_embd, args.n_head, args.seq_len, args.vocab_size)
    model = GPT2(config).to(device)
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.decay_groups(0.1), lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, args.vocab_size, (args.batch_size, args.seq_len), device=device)
    targets = torch.randint(0, args.vocab_size, (args.batch_size, args.seq_len), device=device)

    times = []
    for step in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            _, loss = step_model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        sync()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)

    step_s = sum(times) / len(times)
    tokens = args.batch_size * args.seq_len
    L, C, T, V = args.n_layer, args.n_embd, args.seq_len, args.vocab_size
    flops = tokens * (72 * L * C * C + 12 * L * T * C + 6 * C * V)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{threads} threads")
    print(f"torch {torch.__version__} GPT-2 L={L} C={C} H={args.n_head} V={V}, T={T} "
          f"B={args.batch_size}, {where}, {'bf16 autocast' if args.bf16 else 'fp32'}, "
          f"{'torch.compile' if args.compile else 'eager'}")
    if device.type == "cpu":
        print(f"  BLAS           {blas_description()}")
    print(f"  loss           {loss.item():9.4f}  (last step)")
    print(f"  time/step      {step_s * 1e3:9.1f} ms  (mean of {args.steps} after {args.warmup})")
    print(f"  tokens/s       {tokens / step_s:9.1f}")
    print(f"  model GFLOP/s  {flops / step_s / 1e9:9.1f}")
    if args.gemm_size > 0:
        rate = bf16_gemm_rate(args.gemm_size, device, sync)
        print(f"  bf16 GEMM      {rate / 1e12:9.1f} TFLOP/s  ({args.gemm_size}^3 torch.matmul, "
              f"measured now)")
        print(f"  MFU            {100 * flops / step_s / rate:9.1f} %  (of that measured rate)")


def bf16_gemm_rate(n, device, sync, repeats=20):
    """FLOP/s of an n^3 bf16 matmul on `device`, best of `repeats` after one warm-up."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        torch.matmul(a, b)
        sync()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


if __name__ == "__main__":
    main()
