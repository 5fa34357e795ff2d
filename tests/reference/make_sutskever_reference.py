#!/usr/bin/python3
"""Sutskever et al.'s encoder-decoder in PyTorch, to check models::RNNSeq2Seq (context sutskever) against it.

The GRU and LSTM fixtures (make_rnn_reference.py) pin the layers. They cannot show that the model
hands the decoder what Sutskever, Vinyals & Le (2014) hand it: the encoder's final state of every
layer, the LSTM's memory c as well as h, with no map between, from a source read backwards. So this
script builds the model's twin out of torch.nn's own pieces:

    src ids -> each row's real tokens reversed -> nn.Embedding -> nn.LSTM encoder (2 layers, one
    way, packed padding) -> its final (h_n, c_n), passed as they are as the initial state of the
    nn.LSTM decoder (2 layers) reading the target embeddings (teacher forcing) -> nn.Linear ->
    cross-entropy, the mean over the target tokens that are not padding (ignore_index 0)

and writes what it computes. tests/test_rnn_seq2seq.cpp (part of `make test`, no Python needed)
loads the weights into an RNNSeq2Seq by name (nn::load_parameters) and holds its first decoder
states, its loss and every gradient to these.

Run from the repository root with Debian's python3, which has torch (1.13):

    /usr/bin/python3 tests/reference/make_sutskever_reference.py

It rewrites tests/reference/sutskever_reference.safetensors (deterministic: rerunning gives the
same bytes), which holds, with B = 3 rows, S = 5 source and T = 4 target positions, V_src = 9,
V_tgt = 7, E = 5, Hd = 6, L = 2:
  <parameter name>    F32   RNNSeq2Seq's names: src_embed.weight (V_src, E), tgt_embed.weight
                            (V_tgt, E), encoder.weight_ih_l0 ... (torch.nn.LSTM's own names),
                            cells.0.weight_ih ... (the decoder nn.LSTM's weight_ih_l0 ...: layer l is
                            cell l), out.weight (V_tgt, Hd), out.bias; torch's seeded initialization
  src (B, S)          I32   source ids, 0 at padding; rows of 4, 5 and 2 real tokens (unsorted)
  tgt_in, tgt_out (B, T)   I32   the decoder's inputs and the targets, 0 at padding
  h_n, c_n (L, B, Hd) F32   the encoder's final states: the decoder's first states, layer by layer
  loss ()             F32
  grad.<parameter name>    F32   d loss / d that parameter
  metadata: config (JSON: the RNNSeq2SeqConfig fields), generated_by.

Everything is computed in float64 from float32 values (the weights are drawn in float32, and those
float32 values are what the file stores), so the reference carries no float32 rounding of its
own: the C++ test measures its own rounding alone.
"""
import json
import os

import torch
from torch.nn.utils.rnn import pack_padded_sequence

from torch_transformer import save_safetensors

B, S, T = 3, 5, 4
V_SRC, V_TGT, E, HD, LAYERS = 9, 7, 5, 6, 2
PAD = 0
SRC = [[3, 1, 4, 7, 0], [5, 2, 6, 8, 2], [8, 4, 0, 0, 0]]   # 4, 5 and 2 real tokens
LENGTHS = [4, 5, 2]
TGT_IN = [[1, 2, 3, 4], [1, 5, 6, 0], [1, 6, 2, 5]]
TGT_OUT = [[2, 3, 4, 6], [5, 6, 0, 0], [6, 2, 5, 3]]   # row 1: two padded targets, which count nothing


class Sutskever(torch.nn.Module):
    """The twin: torch.nn pieces only, the encoder's (h_n, c_n) handed to the decoder as they are."""

    def __init__(self):
        super().__init__()
        self.src_embed = torch.nn.Embedding(V_SRC, E)
        self.tgt_embed = torch.nn.Embedding(V_TGT, E)
        self.encoder = torch.nn.LSTM(E, HD, num_layers=LAYERS, batch_first=True)
        self.decoder = torch.nn.LSTM(E, HD, num_layers=LAYERS, batch_first=True)
        self.out = torch.nn.Linear(HD, V_TGT)

    def forward(self, src, tgt_in, tgt_out):
        reversed_src = src.clone()
        for b, n in enumerate(LENGTHS):   # Sutskever et al.'s trick: each row's real tokens backwards
            reversed_src[b, :n] = src[b, :n].flip(0)
        packed = pack_padded_sequence(self.src_embed(reversed_src), torch.tensor(LENGTHS), batch_first=True,
                                      enforce_sorted=False)
        _, (h_n, c_n) = self.encoder(packed)                                # (L, B, Hd) each, at each row's last token
        states, _ = self.decoder(self.tgt_embed(tgt_in), (h_n, c_n))       # (B, T, Hd)
        logits = self.out(states)                                           # (B, T, V_tgt)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V_TGT), tgt_out.reshape(-1), ignore_index=PAD)
        return h_n, c_n, loss


def our_name(torch_name):
    """decoder.weight_ih_l1 -> cells.1.weight_ih; every other name is RNNSeq2Seq's already"""
    if not torch_name.startswith("decoder."):
        return torch_name
    kind, layer = torch_name[len("decoder."):].rsplit("_l", 1)
    return f"cells.{layer}.{kind}"


def run(model):
    src, tgt_in, tgt_out = (torch.tensor(x) for x in (SRC, TGT_IN, TGT_OUT))
    h_n, c_n, loss = model(src, tgt_in, tgt_out)
    loss.backward()
    grads = {"grad." + our_name(n): p.grad for n, p in model.named_parameters()}
    return dict(h_n=h_n, c_n=c_n, loss=loss), grads


def worst_error(got, want, floor=1e-2):
    """the largest |got - want| / max(|want|, floor) over tensors of the same names, as the C++ test measures"""
    return max(((got[n].double() - want[n]).abs() / want[n].abs().clamp(min=floor)).max().item() for n in want)


def main():
    torch.manual_seed(2014)
    model = Sutskever()   # float32, torch's init
    weights = {our_name(n): p.detach().clone() for n, p in model.named_parameters()}
    values, grads = run(model.double())
    # for the record: how far PyTorch's own float32 run is from this float64 one (the C++ test's tolerance)
    model32 = Sutskever()
    model32.load_state_dict({n: p.float() for n, p in model.state_dict().items()})
    values32, grads32 = run(model32)
    print(f"torch float32 vs float64, worst relative error (floor 1e-2): values {worst_error(values32, values):.2g}, "
          f"gradients {worst_error(grads32, grads):.2g}")

    tensors = [(n, "F32", w) for n, w in weights.items()]
    tensors += [(n, "I32", torch.tensor(x)) for n, x in (("src", SRC), ("tgt_in", TGT_IN), ("tgt_out", TGT_OUT))]
    tensors += [(n, "F32", values[n]) for n in ("h_n", "c_n", "loss")]
    tensors += [(n, "F32", g) for n, g in grads.items()]
    config = dict(src_vocab=V_SRC, tgt_vocab=V_TGT, embed=E, hidden=HD, layers=LAYERS, cell="lstm", context="sutskever",
                  bidirectional=False, score="none", reverse_source=True, dropout=0)
    metadata = {
        "config": json.dumps(config),
        "generated_by": json.dumps("tests/reference/make_sutskever_reference.py, torch " + torch.__version__ + ", float64"),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sutskever_reference.safetensors")
    save_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {values['loss'].item():.6f}, {len(weights)} parameters, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
