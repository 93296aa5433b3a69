#!/usr/bin/env python3
"""`chimera export-hf` loaded by transformers, checked against chimera (scripts/gpu-check).

From a Chimera checkpoint: export it, load the export with transformers'
GPT2LMHeadModel.from_pretrained, and compare
  1. its logits with those of the checkpoint's weights in plain PyTorch (analysis/gpt2_torch.py,
     the model the C++ one is tested against): max |difference| <= 1e-4 (fp32, different kernels);
  2. its greedy continuation with `chimera sample --temperature 0` (chimera's own forward): the
     same token ids.
Prints one line per check and exits 1 on a mismatch, 0 when both agree.

Usage: export_hf_check.py CHIMERA CHECKPOINT WORK_DIR [ANALYSIS_DIR]
"""
import os
import subprocess
import sys

import torch


def main():
    chimera, checkpoint, work = sys.argv[1:4]
    analysis = sys.argv[4] if len(sys.argv) > 4 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "analysis")
    sys.path.insert(0, analysis)
    import load_checkpoint  # noqa: E402
    from transformers import GPT2LMHeadModel  # noqa: E402

    export = os.path.join(work, "hf-export")
    run = subprocess.run([chimera, "export-hf", checkpoint, "--out", export],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL: chimera export-hf: exit {run.returncode}: {run.stderr.strip()}")
        return 1
    hf = GPT2LMHeadModel.from_pretrained(export).eval()
    weights, _, config = load_checkpoint.read_checkpoint(checkpoint)
    reference = load_checkpoint.build_model(weights, config).eval()
    n_ctx, vocab = hf.config.n_positions, hf.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    idx = torch.randint(0, vocab, (2, min(n_ctx, 64)), generator=generator)
    with torch.no_grad():
        hf_logits = hf(idx).logits
        ref_logits = reference(idx)[0][..., :vocab]
    diff = (hf_logits - ref_logits).abs().max().item()
    ok_logits = diff <= 1e-4
    print(f"{'ok' if ok_logits else 'FAIL'}: transformers {hf_logits.shape[-1]}-way logits vs the "
          f"checkpoint's in PyTorch: max |diff| {diff:.3g} (limit 1e-4)")

    prompt = [int(t) for t in idx[0, :8]]
    count = 16
    run = subprocess.run([chimera, "sample", checkpoint, "--prompt-ids",
                          " ".join(map(str, prompt)), "--tokens", str(count),
                          "--temperature", "0", "--ids"], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL: chimera sample: exit {run.returncode}: {run.stderr.strip()}")
        return 1
    chimera_ids = [int(t) for t in run.stdout.split()][-count:]
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            logits = hf(torch.tensor([sequence[-n_ctx:]])).logits
            sequence.append(int(logits[0, -1].argmax()))
    hf_ids = sequence[len(prompt):]
    ok_greedy = hf_ids == chimera_ids
    print(f"{'ok' if ok_greedy else 'FAIL'}: greedy continuation of {count} tokens: transformers "
          f"{hf_ids}{' = ' if ok_greedy else ' != '}chimera sample {chimera_ids}")
    return 0 if ok_logits and ok_greedy else 1


if __name__ == "__main__":
    sys.exit(main())
