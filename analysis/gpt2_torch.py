"""Plain PyTorch GPT-2 with Hugging Face parameter names: the Python reference for Chimera.

Parameter names and shapes are exactly those of Chimera's checkpoints (and of Hugging Face's
GPT2Model): wte.weight [V, C], wpe.weight [n_ctx, C], h.{i}.ln_1.{weight,bias},
h.{i}.attn.c_attn.{weight [C, 3C], bias}, h.{i}.attn.c_proj.{weight [C, C], bias},
h.{i}.ln_2.*, h.{i}.mlp.c_fc.{weight [C, 4C], bias}, h.{i}.mlp.c_proj.{weight [4C, C], bias},
ln_f.{weight,bias}. Conv1D weights are [in, out] (y = x W + b). The LM head is tied to wte.

    from gpt2_torch import GPT2, GPT2Config
    model = GPT2(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_ctx=32, vocab_size=509))
    model.load_state_dict({name: torch.from_numpy(array) for name, array in tensors.items()})
    logits, loss = model(idx, targets)

The file also holds Chimera's learning-rate schedule (lr_at) and clipping factor (clip_scale), so
that fixtures and scripts use the same formulas as src/optim.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPS = 1e-5  # GPT-2's layer_norm_epsilon
INIT_STD = 0.02


@dataclass
class GPT2Config:
    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4
    n_ctx: int = 256
    vocab_size: int = 50257


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: a linear layer with its weight stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(
            *x.shape[:-1], self.weight.size(1))


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)
        mask = torch.tril(torch.ones(config.n_ctx, config.n_ctx, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, 4 * config.n_embd)
        self.c_proj = Conv1D(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=LAYER_NORM_EPS)
        self.attn = Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=LAYER_NORM_EPS)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_ctx, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=LAYER_NORM_EPS)
        self.init_weights()

    def init_weights(self, generator=None):
        """GPT-2's init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, LN 1/0.
        (Chimera's C++ init draws from its own counter-based generator; same distributions.)"""
        residual_std = INIT_STD / math.sqrt(2 * self.config.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, residual_std, generator=generator)
                elif name.startswith(("wte", "wpe")) or name.endswith(("c_attn.weight",
                                                                       "c_fc.weight")):
                    p.normal_(0.0, INIT_STD, generator=generator)
                elif name.startswith("ln") or ".ln_" in name:
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    p.zero_()

    def forward(self, idx, targets=None):
        """idx, targets: [B, T] int64. Returns (logits [B, T, V], mean cross-entropy or None)."""
        T = idx.size(1)
        if T > self.config.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx = {self.config.n_ctx}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def decay_groups(self, weight_decay):
        """nanoGPT's rule, as Chimera's: 2-D tensors (weights, embeddings) decay; others not."""
        params = list(self.parameters())
        return [{"params": [p for p in params if p.dim() == 2], "weight_decay": weight_decay},
                {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def lr_at(step, lr, min_lr, warmup_steps, total_steps):
    """Chimera's schedule (include/chimera/optim/lr_schedule.hpp): linear warmup, then cosine to
    min_lr, reached at step total_steps - 1."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    span = max(1, total_steps - 1 - warmup_steps)
    r = min(1.0, (step - warmup_steps) / span)
    return min_lr + (lr - min_lr) * (1.0 + math.cos(math.pi * r)) / 2.0


def clip_scale(global_norm, max_norm):
    """Chimera's clipping factor = torch.nn.utils.clip_grad_norm_'s: min(1, max/(norm + 1e-6))."""
    if max_norm <= 0:
        return 1.0
    return min(1.0, max_norm / (global_norm + 1e-6))
