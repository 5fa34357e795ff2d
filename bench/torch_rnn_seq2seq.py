#!/usr/bin/python3
"""The GRU encoder-decoder with attention in PyTorch: the twin of models/rnn_seq2seq.cpp, for
bench/compare_pytorch.sh's "rnn-attention" configuration (bench_training rnn-attention).

The same model, sizes and loop as ours: an embedding, a bidirectional nn.GRU encoder (batch
first), s_0 = tanh(W_s h_1<-) (the backward direction's final state) as the decoder's first, additive attention
(k_j = W_k h_j once per batch, e_ij = v . tanh(W_q s_{i-1} + k_j), softmax, C_i = sum alpha h_j),
an nn.GRUCell decoder reading [embed(y_{i-1}); C_i] (its embedding part for all steps in one
product before the loop, as ours does), and the output layer over every step's [s_i; C_i] at
once; cross-entropy, Adam. The copy task's data: random sequences of symbols 1..V-1 whose first
symbol is 1.

It prints one RESULT line with the median step time (median_step_ms=...), which
bench/compare_pytorch.sh reads.
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_rnn_seq2seq.py --steps 30
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--seq", type=int, default=20, help="sequence length, start symbol included")
ap.add_argument("--vocab", type=int, default=11)
ap.add_argument("--embed", type=int, default=64)
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
E, Hd, V = a.embed, a.hidden, a.vocab


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(V, E), nn.Embedding(V, E)
        self.encoder = nn.GRU(E, Hd, batch_first=True, bidirectional=True)
        self.to_start = nn.Linear(Hd, Hd)
        self.w_key = nn.Linear(2 * Hd, Hd)
        self.w_query = nn.Linear(Hd, Hd, bias=False)
        self.v = nn.Parameter(torch.empty(Hd).uniform_(-Hd ** -0.5, Hd ** -0.5))
        self.cell = nn.GRUCell(E + 2 * Hd, Hd)
        self.out = nn.Linear(Hd + 2 * Hd, V)

    def forward(self, src, tgt_in):
        states, h_n = self.encoder(self.src_embed(src))                     # (B, S, 2Hd), (2, B, Hd)
        s = torch.tanh(self.to_start(h_n[1]))                               # (B, Hd): s_0 = tanh(W_s h_1<-)
        keys = self.w_key(states)                                           # (B, S, Hd)
        w_prev, w_extra = self.cell.weight_ih[:, :E], self.cell.weight_ih[:, E:]
        gi_prev = F.linear(self.tgt_embed(tgt_in), w_prev, self.cell.bias_ih)   # (B, T, 3Hd)
        outs = []
        for t in range(tgt_in.size(1)):
            e = torch.tanh(keys + self.w_query(s).unsqueeze(1)) @ self.v    # (B, S)
            alpha = torch.softmax(e, -1)
            c = (alpha.unsqueeze(1) @ states).squeeze(1)                    # (B, 2Hd)
            gi = gi_prev[:, t] + F.linear(c, w_extra)                       # (B, 3Hd)
            gh = F.linear(s, self.cell.weight_hh, self.cell.bias_hh)        # (B, 3Hd)
            i_r, i_z, i_n = gi.chunk(3, 1)
            h_r, h_z, h_n = gh.chunk(3, 1)
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            n = torch.tanh(i_n + r * h_n)
            s = (1 - z) * n + z * s                                         # (B, Hd)
            outs.append(torch.cat([s, c], -1))
        return self.out(torch.stack(outs, 1))                               # (B, T, V)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
times = []
for step in range(a.steps + 3):
    ts = time.perf_counter()
    src = torch.randint(1, V, (a.batch, a.seq))
    src[:, 0] = 1
    opt.zero_grad(set_to_none=True)
    logits = model(src, src[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, V), src[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    if step >= 3:
        times.append(time.perf_counter() - ts)
times.sort()
print(f"RESULT steps={a.steps} median_step_ms={1000 * times[len(times) // 2]:.2f} final_loss={loss.item():.4f} "
      f"parameters={sum(p.numel() for p in model.parameters())}")
