#!/usr/bin/python3
"""Bahdanau et al.'s attention model of two layers in PyTorch, to check models::RNNSeq2Seq (context
bahdanau) against it.

The GRU fixture (make_rnn_reference.py) pins the encoder layer, and the Sutskever fixture the
hand-over of two layers' final states. Neither has attention, so neither can show what the
attention model does once it has more than one decoder layer: the query of step i is the TOP
layer's state s_{i-1}, the context C_i enters layer 0 only (beside the previous word), layer l > 0
reads layer l - 1's new state, every layer starts from the same s_0 = tanh(W_s h_1<-) (the top
encoder layer's backward state at the first word), and the output layer reads [s_i of the top
layer; C_i]. So this script builds the model's twin out of torch.nn's own pieces:

    src ids -> nn.Embedding -> nn.GRU encoder (2 layers, bidirectional, packed padding) -> states
    h_1..h_S (0 at padding) and h_n; s_0 = tanh(W_s h_n[-1]) in both decoder layers;
    at each step i (teacher forcing): e_j = v . tanh(W_q s_{i-1} + U h_j + b) over the real
    positions, alpha = softmax(e), C_i = sum_j alpha_j h_j; layer 0: nn.GRUCell([embed(y_{i-1}); C_i]),
    layer 1: nn.GRUCell(layer 0's new state); logits = nn.Linear([s_i; C_i]) -> cross-entropy, the
    mean over the target tokens that are not padding (ignore_index 0)

and writes what it computes. tests/test_rnn_seq2seq.cpp (part of `make test`, no Python needed)
loads the weights into an RNNSeq2Seq by name (nn::load_parameters) and holds its logits, its loss
and every gradient to these. (Dropout between the decoder's layers cannot be compared with PyTorch,
whose random draws are not ours; the C++ test checks it against a hand-built decoder instead.)

Run from the repository root with Debian's python3, which has torch (1.13):

    /usr/bin/python3 tests/reference/make_bahdanau_reference.py

It rewrites tests/reference/bahdanau_reference.safetensors (deterministic: rerunning gives the
same bytes), which holds, with B = 3 rows, S = 5 source and T = 4 target positions, V_src = 9,
V_tgt = 7, E = 4, Hd = 3 (the attention's A too), L = 2:
  <parameter name>    F32   RNNSeq2Seq's names: src_embed.weight, tgt_embed.weight, encoder.weight_ih_l0
                            ... (torch.nn.GRU's own names, _reverse for the backward direction),
                            to_start.weight and .bias (W_s), attention.w_key.weight and .bias (U, b),
                            attention.w_query.weight (W_q), attention.v, cells.0.weight_ih ...
                            (torch.nn.GRUCell's names), out.weight (V_tgt, Hd + 2Hd), out.bias;
                            torch's seeded initialization (v: U(-1/sqrt(A), 1/sqrt(A)), as ours)
  src (B, S)          I32   source ids, 0 at padding; rows of 4, 5 and 2 real tokens (unsorted)
  tgt_in, tgt_out (B, T)   I32   the decoder's inputs and the targets, 0 at padding
  logits (B, T, V_tgt)     F32
  loss ()             F32
  grad.<parameter name>    F32   d loss / d that parameter
  metadata: config (JSON: the RNNSeq2SeqConfig fields), generated_by.

Everything is computed in float64 from float32 values (the weights are drawn in float32, and those
float32 values are what the file stores), so the reference carries no float32 rounding of its
own: the C++ test measures its own rounding alone.
"""
import json
import math
import os

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from torch_transformer import save_safetensors

B, S, T = 3, 5, 4
V_SRC, V_TGT, E, HD, LAYERS = 9, 7, 4, 3, 2
PAD = 0
SRC = [[3, 1, 4, 7, 0], [5, 2, 6, 8, 2], [8, 4, 0, 0, 0]]   # 4, 5 and 2 real tokens
LENGTHS = [4, 5, 2]
TGT_IN = [[1, 2, 3, 4], [1, 5, 6, 0], [1, 6, 2, 5]]
TGT_OUT = [[2, 3, 4, 6], [5, 6, 0, 0], [6, 2, 5, 3]]   # row 1: two padded targets, which count nothing


class Additive(torch.nn.Module):
    """nn::SoftAttention's additive score: e_j = v . tanh(W_q s + U h_j + b)"""

    def __init__(self):
        super().__init__()
        self.w_key = torch.nn.Linear(2 * HD, HD)                # U and b: the keys, once per sentence
        self.w_query = torch.nn.Linear(HD, HD, bias=False)      # W_q
        self.v = torch.nn.Parameter(torch.empty(HD).uniform_(-1 / math.sqrt(HD), 1 / math.sqrt(HD)))

    def forward(self, s, keys, states, real):
        e = torch.tanh(keys + self.w_query(s)[:, None, :]) @ self.v              # (B, S)
        alpha = torch.softmax(e.masked_fill(~real, float("-inf")), dim=-1)      # (B, S): 0 at padding
        return (alpha[:, :, None] * states).sum(1)                             # (B, 2Hd): C_i


class Bahdanau(torch.nn.Module):
    """The twin: torch.nn pieces only, two decoder layers, the top one querying the attention."""

    def __init__(self):
        super().__init__()
        self.src_embed = torch.nn.Embedding(V_SRC, E)
        self.tgt_embed = torch.nn.Embedding(V_TGT, E)
        self.encoder = torch.nn.GRU(E, HD, num_layers=LAYERS, bidirectional=True, batch_first=True)
        self.to_start = torch.nn.Linear(HD, HD)
        self.attention = Additive()
        self.cells = torch.nn.ModuleList([torch.nn.GRUCell(E + 2 * HD, HD), torch.nn.GRUCell(HD, HD)])
        self.out = torch.nn.Linear(HD + 2 * HD, V_TGT)

    def forward(self, src, tgt_in, tgt_out):
        packed = pack_padded_sequence(self.src_embed(src), torch.tensor(LENGTHS), batch_first=True, enforce_sorted=False)
        out_packed, h_n = self.encoder(packed)
        states, _ = pad_packed_sequence(out_packed, batch_first=True, total_length=S)   # (B, S, 2Hd), 0 at padding
        s0 = torch.tanh(self.to_start(h_n[-1]))      # the top layer's backward state, at the first word
        keys = self.attention.w_key(states)           # (B, S, Hd)
        real = src != PAD                             # (B, S)
        s = [s0] * LAYERS                             # every decoder layer starts from s_0
        prev = self.tgt_embed(tgt_in)                 # (B, T, E)
        outputs = []
        for i in range(T):
            c = self.attention(s[-1], keys, states, real)               # queried with the top layer's s_{i-1}
            s[0] = self.cells[0](torch.cat([prev[:, i], c], -1), s[0])   # layer 0 reads [embed(y_{i-1}); C_i]
            for l in range(1, LAYERS):
                s[l] = self.cells[l](s[l - 1], s[l])                     # layer l reads layer l - 1's new state
            outputs.append(torch.cat([s[-1], c], -1))                    # (B, Hd + 2Hd)
        logits = self.out(torch.stack(outputs, 1))                       # (B, T, V_tgt)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V_TGT), tgt_out.reshape(-1), ignore_index=PAD)
        return logits, loss


def run(model):
    src, tgt_in, tgt_out = (torch.tensor(x) for x in (SRC, TGT_IN, TGT_OUT))
    logits, loss = model(src, tgt_in, tgt_out)
    loss.backward()
    grads = {"grad." + n: p.grad for n, p in model.named_parameters()}
    return dict(logits=logits, loss=loss), grads


def worst_error(got, want, floor=1e-2):
    """the largest |got - want| / max(|want|, floor) over tensors of the same names, as the C++ test measures"""
    return max(((got[n].double() - want[n]).abs() / want[n].abs().clamp(min=floor)).max().item() for n in want)


def main():
    torch.manual_seed(2015)
    model = Bahdanau()   # float32, torch's init
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    values, grads = run(model.double())
    # for the record: how far PyTorch's own float32 run is from this float64 one (the C++ test's tolerance)
    model32 = Bahdanau()
    model32.load_state_dict({n: p.float() for n, p in model.state_dict().items()})
    values32, grads32 = run(model32)
    print(f"torch float32 vs float64, worst relative error (floor 1e-2): values {worst_error(values32, values):.2g}, "
          f"gradients {worst_error(grads32, grads):.2g}")

    tensors = [(n, "F32", w) for n, w in weights.items()]
    tensors += [(n, "I32", torch.tensor(x)) for n, x in (("src", SRC), ("tgt_in", TGT_IN), ("tgt_out", TGT_OUT))]
    tensors += [(n, "F32", values[n]) for n in ("logits", "loss")]
    tensors += [(n, "F32", g) for n, g in grads.items()]
    config = dict(src_vocab=V_SRC, tgt_vocab=V_TGT, embed=E, hidden=HD, layers=LAYERS, cell="gru", context="bahdanau",
                  bidirectional=True, score="additive", reverse_source=False, dropout=0)
    metadata = {
        "config": json.dumps(config),
        "generated_by": json.dumps("tests/reference/make_bahdanau_reference.py, torch " + torch.__version__ + ", float64"),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bahdanau_reference.safetensors")
    save_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {values['loss'].item():.6f}, {len(weights)} parameters, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
