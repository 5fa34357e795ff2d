#!/usr/bin/python3
"""./examples/gpt in PyTorch: the same model, data, schedule and evaluation, for side-by-side
validation loss, time and memory.

The model is tests/reference/make_gpt_reference.py's GPT (the mirror of models/gpt.cpp that pins
it in tests/test_reference.cpp: token and learned position embeddings, pre-norm blocks of causal
self-attention with separate w_q, w_k, w_v, w_o and a GELU feed-forward of 4D, a final
LayerNorm, the output layer tied to the token embedding), initialized as models/gpt.cpp does
(every matrix N(0, 0.02), the two projections into the residual stream N(0, 0.02 / sqrt(2N)),
biases 0, LayerNorm 1 and 0). The loop is examples/gpt.cpp's: the text's characters sorted as the
vocabulary, the first 90% of them to train on and the last 10% to validate; batches of windows at
random starts; AdamW(0.9, beta2) with weight decay on the matrices only; lr rising linearly to
--lr over --warmup steps (lr * step / warmup at step 1..warmup), then half a cosine down to
--min-lr at the last step; gradients clipped to a global norm of --clip; train and validation
loss every --eval-every steps, each the mean over the same --eval-batches batches every time.
The defaults are the example's, nanoGPT's CPU "baby GPT".

It prints "step N: train loss X, val loss Y" per evaluation and one RESULT line:
    RESULT val_loss=1.9102 seconds=123.4 ms_per_step=61.7 peak_rss_mb=300
(seconds: the whole run, evaluations included; peak_rss_mb: the process's peak resident memory).

    /usr/bin/python3 bench/torch_gpt.py --threads 2
    /usr/bin/python3 bench/torch_gpt.py --data my.txt --steps 500
"""
import argparse
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from make_gpt_reference import GPT  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
here = os.path.dirname(os.path.abspath(__file__))
p.add_argument("--data", default=os.path.join(here, "..", "examples", "text", "tinyshakespeare.txt"))
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--d-model", type=int, default=128)
p.add_argument("--block-size", type=int, default=64)
p.add_argument("--batch", type=int, default=12)
p.add_argument("--steps", type=int, default=2000)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--min-lr", type=float, default=1e-4)
p.add_argument("--warmup", type=int, default=100)
p.add_argument("--weight-decay", type=float, default=0.1)
p.add_argument("--beta2", type=float, default=0.99)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--eval-every", type=int, default=250)
p.add_argument("--eval-batches", type=int, default=20)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1337)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
t_start = time.perf_counter()

# the text: its characters (code points) sorted are the vocabulary
text = open(a.data, encoding="utf-8").read()
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n = len(ids) * 9 // 10
train, valid = ids[:n], ids[n:]
V, T = len(chars), a.block_size


def windows(d, starts):
    x = torch.stack([d[s:s + T] for s in starts.tolist()])
    y = torch.stack([d[s + 1:s + 1 + T] for s in starts.tolist()])
    return x, y


def random_batch(d, g=None):
    return windows(d, torch.randint(len(d) - T, (a.batch,), generator=g))


# the same batches at every evaluation
g_eval = torch.Generator().manual_seed(a.seed + 1000003)
eval_set = {"train": [random_batch(train, g_eval) for _ in range(a.eval_batches)],
            "val": [random_batch(valid, g_eval) for _ in range(a.eval_batches)]}

cfg = dict(vocab=V, block_size=T, layers=a.layers, heads=a.heads, d_model=a.d_model, dropout=0.0)
model = GPT(cfg)
for name, prm in model.named_parameters():
    if prm.dim() >= 2:
        into_residual = name.endswith("attn.w_o.weight") or name.endswith("mlp.w_2.weight")
        torch.nn.init.normal_(prm, 0.0, 0.02 / (math.sqrt(2 * a.layers) if into_residual else 1.0))
    elif name.endswith(".bias"):
        torch.nn.init.zeros_(prm)
decay = [q for q in model.parameters() if q.dim() >= 2]
no_decay = [q for q in model.parameters() if q.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)


def lr_at(step):   # step 1, 2, ...: optim::WarmupCosineSchedule
    if step <= a.warmup:
        return a.lr * step / a.warmup
    r = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + (a.lr - a.min_lr) * (1 + math.cos(math.pi * min(r, 1.0))) / 2


def loss_of(x, y):
    return F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))


@torch.no_grad()
def evaluate(step):
    losses = {k: sum(loss_of(x, y).item() for x, y in batches) / len(batches) for k, batches in eval_set.items()}
    print(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
    return losses["val"]


print(f"{sum(q.numel() for q in model.parameters())} parameters, vocab {V}, {len(train)} train / {len(valid)} val characters")
val = evaluate(0)
t_train = time.perf_counter()
for step in range(1, a.steps + 1):
    for group in opt.param_groups:
        group["lr"] = lr_at(step)
    x, y = random_batch(train)
    opt.zero_grad(set_to_none=True)
    loss = loss_of(x, y)
    loss.backward()
    if a.clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
    opt.step()
    if step % a.eval_every == 0 or step == a.steps:
        val = evaluate(step)
seconds = time.perf_counter() - t_start
ms_per_step = 1000 * (time.perf_counter() - t_train) / max(1, a.steps)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"RESULT val_loss={val:.4f} seconds={seconds:.1f} ms_per_step={ms_per_step:.1f} peak_rss_mb={rss:.0f}")
