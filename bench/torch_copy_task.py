#!/usr/bin/python3
"""The copy task in PyTorch, for side-by-side speed and convergence with ./examples/copy_task.

The model is this project's Transformer written in PyTorch (tests/reference/torch_transformer.py:
the same architecture, parameter names, masks and initialization as models/transformer.cpp), and
the training loop is the one of examples/copy_task.cpp: random sequences whose first symbol is
1, cross-entropy with padding ignored, Adam(0.9, 0.98, 1e-9) with lr = factor * Noam(D, warmup).
The defaults are The Annotated Transformer's configuration (the C++ example's --paper): N=2,
D=512, F=2048, h=8, dropout 0.1, 20 epochs of 20 batches of 80, factor 0.5, warmup 400.

It prints the loss per epoch, then one RESULT line: steps, the median step time, the final loss,
and greedy exact match on 200 fresh sequences. bench/compare_pytorch.sh runs it in turn with
./build/bench/bench_training.

Setup on Debian: apt-get install -y python3-torch libopenblas0-openmp. OpenBLAS 0.3.21 does not
recognise recent CPUs and then picks a slow generic kernel: set OPENBLAS_CORETYPE=SkylakeX (AVX-512)
or Haswell (AVX2) to choose one.
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_copy_task.py --steps 30
    /usr/bin/python3 bench/torch_copy_task.py --d_model 128 --d_ff 512 --steps 60 --bf16
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from torch_transformer import Transformer, noam_lr, padding_mask, subsequent_mask, target_mask  # noqa: E402

PAD, START = 0, 1

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--epochs", type=int, default=20, help="epochs of 20 batches")
ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--d_model", type=int, default=512)
ap.add_argument("--d_ff", type=int, default=2048)
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--dropout", type=float, default=0.1)
ap.add_argument("--batch", type=int, default=80)
ap.add_argument("--seq", type=int, default=10, help="sequence length, start symbol included")
ap.add_argument("--vocab", type=int, default=11)
ap.add_argument("--warmup", type=int, default=400)
ap.add_argument("--lr_factor", type=float, default=0.5)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--bf16", action="store_true", help='mixed precision: torch.autocast("cpu", bfloat16) over forward and loss')
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)

config = dict(src_vocab=a.vocab, tgt_vocab=a.vocab, layers=a.layers, d_model=a.d_model, d_ff=a.d_ff,
              heads=a.heads, dropout=a.dropout, pre_norm=True, max_len=5000)
model = Transformer(config)
for p in model.parameters():   # models::Transformer: Xavier-uniform for every matrix
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: noam_lr(max(s, 1), a.d_model, a.warmup, a.lr_factor))


def random_sequences(n):   # examples/data/copy_task_data.cpp: symbols 1..V-1, first symbol 1
    d = torch.randint(1, a.vocab, (n, a.seq))
    d[:, 0] = START
    return d


step, step_times, done = 0, [], False
t0 = time.perf_counter()
for epoch in range(a.epochs):
    model.train()
    for _ in range(20):
        if a.steps and step >= a.steps:
            done = True
            break
        ts = time.perf_counter()
        src = random_sequences(a.batch)
        tgt_in, tgt_out = src[:, :-1], src[:, 1:]
        opt.zero_grad(set_to_none=True)   # first, as bench_training does: no old gradients beside the activations
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            out = model.decode(model.encode(src, padding_mask(src, PAD)), padding_mask(src, PAD),
                               tgt_in, target_mask(tgt_in, PAD))                      # (B, T, D)
            logits = model.generator.proj(out)                                          # (B, T, V)
            loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), tgt_out.reshape(-1), ignore_index=PAD)
        loss.backward()
        sched.step()
        opt.step()
        step += 1
        step_times.append(time.perf_counter() - ts)
    print(f"epoch {epoch} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}", flush=True)
    if done:
        break
train_s = time.perf_counter() - t0

model.eval()
with torch.no_grad():
    torch.manual_seed(123)
    src = random_sequences(200)
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    ys = src[:, :1]
    for t in range(1, a.seq):
        out = model.decode(memory, src_mask, ys, subsequent_mask(t))
        ys = torch.cat([ys, model.generator(out[:, -1]).argmax(-1, keepdim=True)], dim=1)
    seq_acc = (ys == src).all(1).float().mean().item()
st = sorted(step_times[5:] if len(step_times) > 10 else step_times)
median = st[len(st) // 2]
print(f"RESULT steps={step} train_s={train_s:.2f} median_step_ms={1000 * median:.1f} final_loss={loss.item():.4f} "
      f"seq_acc={seq_acc:.3f} tokens_per_s={a.batch * (a.seq - 1) / median:.0f}")
