#!/usr/bin/python3
"""A small GPT in PyTorch, to check models/gpt.cpp against it (tests/test_reference.cpp).

The same model from plain torch pieces, written to mirror models/gpt.cpp line for line, with the
C++ parameter names ("h.0.attn.w_q.weight"; the output layer is wte's matrix, so it has no name of
its own), in float64 from float32 weights. Run from the repository root with Debian's python3:

    /usr/bin/python3 tests/reference/make_gpt_reference.py

which writes tests/reference/gpt_reference.safetensors (deterministic: the same bytes each run):
  <parameter name>        F32  the weights (seeded, none at a default value)
  idx (B, T), targets     I32  token ids; targets are what each position must predict
  logits (B, T, V)        F32  the model's scores
  loss ()                 F32  cross_entropy(logits, targets), the mean over B x T
  grad.<parameter name>   F32  d loss / d parameter (wte's: the embedding's and the output layer's, summed)
  adamw.<parameter name>  F32  the parameter after one AdamW step, weight decay on matrices only
  metadata (JSON texts): config (models::GPTConfig), lr, beta1, beta2, eps, weight_decay, generated_by.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_transformer import save_safetensors  # noqa: E402

CONFIG = dict(vocab=11, block_size=9, layers=2, heads=3, d_model=12, dropout=0.0)
LR, BETAS, EPS, WEIGHT_DECAY = 0.01, (0.9, 0.99), 1e-8, 0.1


class Block(torch.nn.Module):
    """x + attn(ln_1(x)), then x + mlp(ln_2(x)): models/gpt.cpp's Block::forward."""

    def __init__(s, c):
        super().__init__()
        D = c["d_model"]
        s.heads = c["heads"]
        s.ln_1, s.ln_2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        s.attn = torch.nn.ModuleDict({n: torch.nn.Linear(D, D) for n in ("w_q", "w_k", "w_v", "w_o")})
        s.mlp = torch.nn.ModuleDict({"w_1": torch.nn.Linear(D, 4 * D), "w_2": torch.nn.Linear(4 * D, D)})

    def attention(s, x):
        B, T, D = x.shape
        H, Dk = s.heads, D // s.heads
        q, k, v = (s.attn[n](x).view(B, T, H, Dk).transpose(1, 2) for n in ("w_q", "w_k", "w_v"))
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dk)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        w = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        return s.attn["w_o"]((w @ v).transpose(1, 2).reshape(B, T, D))

    def forward(s, x):
        x = x + s.attention(s.ln_1(x))
        return x + s.mlp["w_2"](F.gelu(s.mlp["w_1"](s.ln_2(x))))


class GPT(torch.nn.Module):
    def __init__(s, c):
        super().__init__()
        s.wte = torch.nn.Embedding(c["vocab"], c["d_model"])
        s.wpe = torch.nn.Embedding(c["block_size"], c["d_model"])
        s.h = torch.nn.ModuleList(Block(c) for _ in range(c["layers"]))
        s.ln_f = torch.nn.LayerNorm(c["d_model"])

    def forward(s, idx):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for block in s.h:
            x = block(x)
        return s.ln_f(x) @ s.wte.weight.T   # the output layer is the token embedding


def cpp_name(name):
    """torch's names -> the C++ named_parameters(): LayerNorm's weight is our gain, ModuleDicts are plain."""
    return name.replace("ln_1.weight", "ln_1.gain").replace("ln_2.weight", "ln_2.gain").replace("ln_f.weight", "ln_f.gain")


def main():
    torch.manual_seed(0)
    model = GPT(CONFIG).double()
    g = torch.Generator().manual_seed(4321)
    weights = {}
    for name, p in model.named_parameters():
        if p.dim() > 1:
            w = (torch.rand(p.shape, generator=g) * 2 - 1) * math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
        elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
            w = 1 + 0.2 * torch.randn(p.shape, generator=g)
        else:
            w = 0.1 * torch.randn(p.shape, generator=g)
        weights[name] = w.float()
        with torch.no_grad():
            p.copy_(weights[name].double())
    B, T = 3, 7
    idx = torch.randint(0, CONFIG["vocab"], (B, T), generator=g)
    targets = torch.randint(0, CONFIG["vocab"], (B, T), generator=g)

    logits = model(idx)
    loss = F.cross_entropy(logits.reshape(-1, CONFIG["vocab"]), targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
                      lr=LR, betas=BETAS, eps=EPS).step()

    names = [n for n, _ in model.named_parameters()]
    tensors = [(cpp_name(n), "F32", weights[n]) for n in names]
    tensors += [("idx", "I32", idx), ("targets", "I32", targets), ("logits", "F32", logits), ("loss", "F32", loss)]
    tensors += [("grad." + cpp_name(n), "F32", grads[n]) for n in names]
    tensors += [("adamw." + cpp_name(n), "F32", p) for n, p in model.named_parameters()]
    metadata = {"config": json.dumps(CONFIG, separators=(",", ":"))}
    metadata.update({k: json.dumps(v) for k, v in dict(
        lr=LR, beta1=BETAS[0], beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY,
        generated_by="tests/reference/make_gpt_reference.py, torch " + torch.__version__ + ", float64").items()})
    path = "tests/reference/gpt_reference.safetensors"
    save_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {loss.item():.6f}, {len(names)} parameters")


if __name__ == "__main__":
    main()
