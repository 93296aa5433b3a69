#!/usr/bin/env python3
"""`chimera export-hf` loaded by transformers, checked against chimera (scripts/gpu-check).

From a Chimera checkpoint: export it, load the export with transformers'
GPT2LMHeadModel.from_pretrained, and compare
  1. its logits with those of the checkpoint's weights in plain PyTorch (analysis/gpt2_torch.py,
     the model the C++ one is tested against): max |difference| <= 1e-4 (fp32, different kernels);
  2. its greedy continuation with `chimera sample --temperature 0` (chimera's own forward): the
     same token ids.
A briefly trained model continues with the same token over and over, which says little, so
  3. a transformers GPT2LMHeadModel with random weights (wider than GPT-2's init, so that every
     step's most likely token differs), saved with save_pretrained, goes through `chimera
     import-hf` and `export-hf` back into from_pretrained: logits within 1e-4 of the original,
     and `chimera sample --temperature 0` from the import equals transformers' greedy decode.
Prints one line per check and exits 1 on a mismatch, 0 when all agree.

Usage: export_hf_check.py CHIMERA CHECKPOINT WORK_DIR [ANALYSIS_DIR]
"""
import os
import subprocess
import sys

import torch


def chimera_greedy(chimera, checkpoint, prompt, count):
    """`chimera sample --temperature 0`'s new token ids, or a string saying why there are none."""
    run = subprocess.run([chimera, "sample", checkpoint, "--prompt-ids",
                          " ".join(map(str, prompt)), "--tokens", str(count),
                          "--temperature", "0", "--ids"], capture_output=True, text=True)
    if run.returncode != 0:
        return f"chimera sample: exit {run.returncode}: {run.stderr.strip()}"
    return [int(t) for t in run.stdout.split()][-count:]


def greedy(model, prompt, count, n_ctx):
    """transformers' greedy continuation of `prompt` by `count` tokens."""
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            logits = model(torch.tensor([sequence[-n_ctx:]])).logits
            sequence.append(int(logits[0, -1].argmax()))
    return sequence[len(prompt):]


def report(ok, text):
    print(f"{'ok' if ok else 'FAIL'}: {text}")
    return ok


def random_model_round_trip(chimera, work):
    """Check 3: transformers -> import-hf -> sample / export-hf -> transformers."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(1)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=509)
    original = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in original.parameters():
            p.normal_(0.0, 0.3)
    source = os.path.join(work, "hf-random")
    original.save_pretrained(source)
    checkpoint = os.path.join(work, "hf-random.h5")
    run = subprocess.run([chimera, "import-hf", os.path.join(source, "model.safetensors"),
                          "--out", checkpoint], capture_output=True, text=True)
    if run.returncode != 0:
        return report(False, f"chimera import-hf of save_pretrained's files: exit "
                             f"{run.returncode}: {run.stderr.strip()}")
    export = os.path.join(work, "hf-random-export")
    run = subprocess.run([chimera, "export-hf", checkpoint, "--out", export],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return report(False, f"chimera export-hf: exit {run.returncode}: {run.stderr.strip()}")
    back = GPT2LMHeadModel.from_pretrained(export).eval()
    idx = torch.randint(0, config.vocab_size, (2, config.n_positions),
                        generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        diff = (back(idx).logits - original(idx).logits).abs().max().item()
    ok = report(diff <= 1e-4, f"random GPT-2 through import-hf and export-hf: logits max |diff| "
                              f"{diff:.3g} (limit 1e-4)")
    prompt, count = [int(t) for t in idx[0, :5]], 20
    theirs = greedy(original, prompt, count, config.n_positions)
    ours = chimera_greedy(chimera, checkpoint, prompt, count)
    return report(theirs == ours, f"random GPT-2, greedy {count} tokens: transformers {theirs} "
                                  f"{'=' if theirs == ours else '!='} chimera sample {ours}") and ok


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
    ok_logits = report(diff <= 1e-4, f"transformers {hf_logits.shape[-1]}-way logits vs the "
                                     f"checkpoint's in PyTorch: max |diff| {diff:.3g} (limit 1e-4)")

    prompt, count = [int(t) for t in idx[0, :8]], 16
    hf_ids = greedy(hf, prompt, count, n_ctx)
    chimera_ids = chimera_greedy(chimera, checkpoint, prompt, count)
    ok_greedy = report(hf_ids == chimera_ids,
                       f"greedy continuation of {count} tokens: transformers {hf_ids}"
                       f"{' = ' if hf_ids == chimera_ids else ' != '}chimera sample {chimera_ids}")
    ok_round_trip = random_model_round_trip(chimera, work)
    return 0 if ok_logits and ok_greedy and ok_round_trip else 1


if __name__ == "__main__":
    sys.exit(main())
