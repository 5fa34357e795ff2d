#!/usr/bin/python3
"""torch.nn.GRU and torch.nn.LSTM on a padded batch, to check nn/recurrent.h against them.

Gradient checks show that each C++ cell agrees with its own forward pass. They cannot show that
the forward pass is the GRU and the LSTM everyone means: the gate order, where the GRU's reset gate
goes, which way the reverse direction reads a padded row, what h_n holds. So this script runs
PyTorch's own layers, 2 layers, bidirectional, batch first, on a padded batch packed with
pack_padded_sequence (enforce_sorted=False: the rows are not sorted by length), and writes what
they compute. tests/test_recurrent.cpp (part of `make test`, no Python needed) copies the weights
into nn::GRU and nn::LSTM by name and holds the C++ outputs and gradients to these.

Run from the repository root with Debian's python3, which has torch (1.13):

    /usr/bin/python3 tests/reference/make_rnn_reference.py

It rewrites tests/reference/gru_reference.safetensors and tests/reference/lstm_reference.safetensors
(deterministic: rerunning gives the same bytes). Each holds (safetensors, the format
autograd/io/safetensors.h reads), with B = 4 rows, T = 5 steps, I = 7 inputs, Hd = 3 hidden:
  <parameter name>          F32   torch's names: weight_ih_l0 (G*Hd, I), weight_hh_l0 (G*Hd, Hd),
                                  bias_ih_l0, bias_hh_l0 (G*Hd,), the same with _reverse, then _l1
                                  (weight_ih_l1: (G*Hd, 2Hd)); torch's own seeded initialization
  input (B, T, I)           F32   random, also at the padded positions (which must not matter)
  lengths (B,)              I32   each row's real length, unsorted
  h0 (4, B, Hd)             F32   initial states (layers*directions, B, Hd); c0 too for the LSTM
  output (B, T, 2Hd)        F32   pad_packed_sequence of the packed output: 0 at padded positions
  h_n (4, B, Hd)            F32   final states; c_n too for the LSTM
  cotangent.output, cotangent.h_n (, cotangent.c_n)   F32   fixed random tensors w of the loss
                                  loss = sum(output * w_output) + sum(h_n * w_h_n) (+ sum(c_n * w_c_n))
  loss ()                   F32
  grad.<parameter name>, grad.input, grad.h0 (, grad.c0)   F32   d loss / d that tensor
  metadata: config (JSON: input_size, hidden_size, num_layers, bidirectional), generated_by.

Everything is computed in float64 from float32 values (weights, inputs, initial states and
cotangents are drawn in float32, and those float32 values are what the file stores), so the
reference carries no float32 rounding of its own: the C++ test measures its own rounding alone.
"""
import json
import os

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from torch_transformer import save_safetensors

B, T, I, HD, LAYERS = 4, 5, 7, 3, 2
LENGTHS = [3, 5, 1, 4]   # unsorted; one row full, one a single token


def run(layer, kind, x, h0, c0, cotangents):
    """forward on the packed batch, the loss, backward: -> {name: tensor} of values and gradients"""
    packed = pack_padded_sequence(x, torch.tensor(LENGTHS), batch_first=True, enforce_sorted=False)
    if kind == "lstm":
        out_packed, (h_n, c_n) = layer(packed, (h0, c0))
    else:
        out_packed, h_n = layer(packed, h0)
    output, _ = pad_packed_sequence(out_packed, batch_first=True, total_length=T)   # (B, T, 2Hd), 0 at padding
    w_out, w_h, w_c = (w.to(x.dtype) for w in cotangents)
    loss = (output * w_out).sum() + (h_n * w_h).sum()
    if kind == "lstm":
        loss = loss + (c_n * w_c).sum()
    loss.backward()
    values = dict(output=output, h_n=h_n, loss=loss)
    grads = {"grad." + n: p.grad for n, p in layer.named_parameters()}
    grads.update({"grad.input": x.grad, "grad.h0": h0.grad})
    if kind == "lstm":
        values["c_n"] = c_n
        grads["grad.c0"] = c0.grad
    return values, grads


def worst_error(got, want, floor=1e-2):
    """the largest |got - want| / max(|want|, floor) over tensors of the same names, as tests/test_recurrent.cpp measures"""
    return max(((got[n].double() - want[n]).abs() / want[n].abs().clamp(min=floor)).max().item() for n in want)


def make_fixture(kind, seed, path):
    torch.manual_seed(seed)
    cls = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[kind]
    layer = cls(I, HD, num_layers=LAYERS, bidirectional=True, batch_first=True)   # float32, torch's init
    weights = {n: p.detach().clone() for n, p in layer.named_parameters()}
    layer = layer.double()
    x32 = torch.randn(B, T, I)
    h0_32 = 0.5 * torch.randn(2 * LAYERS, B, HD)
    c0_32 = 0.5 * torch.randn(2 * LAYERS, B, HD)
    w_out = torch.randn(B, T, 2 * HD)
    w_h = torch.randn(2 * LAYERS, B, HD)
    w_c = torch.randn(2 * LAYERS, B, HD)

    def leaves(dtype):
        return [t.to(dtype).clone().requires_grad_() for t in (x32, h0_32, c0_32)]

    cotangents = (w_out, w_h, w_c)
    x, h0, c0 = leaves(torch.float64)
    values, grads = run(layer, kind, x, h0, c0, cotangents)
    output, h_n, loss = values["output"], values["h_n"], values["loss"]
    c_n = values.get("c_n")
    for b, n in enumerate(LENGTHS):   # the padded steps' outputs are exactly 0
        assert output[b, n:].abs().sum().item() == 0
    # for the record: how far PyTorch's own float32 run is from this float64 one (the C++ test's tolerance)
    layer32 = cls(I, HD, num_layers=LAYERS, bidirectional=True, batch_first=True)
    layer32.load_state_dict(weights)
    values32, grads32 = run(layer32, kind, *leaves(torch.float32), cotangents)
    print(f"{kind}: torch float32 vs float64, worst relative error (floor 1e-2): values {worst_error(values32, values):.2g}, "
          f"gradients {worst_error(grads32, grads):.2g}")

    tensors = [(n, "F32", w) for n, w in weights.items()]
    tensors += [("input", "F32", x32), ("lengths", "I32", torch.tensor(LENGTHS)), ("h0", "F32", h0_32)]
    if kind == "lstm":
        tensors += [("c0", "F32", c0_32)]
    tensors += [("output", "F32", output), ("h_n", "F32", h_n)]
    if kind == "lstm":
        tensors += [("c_n", "F32", c_n)]
    tensors += [("cotangent.output", "F32", w_out), ("cotangent.h_n", "F32", w_h)]
    if kind == "lstm":
        tensors += [("cotangent.c_n", "F32", w_c)]
    tensors += [("loss", "F32", loss)]
    tensors += [(n, "F32", g) for n, g in grads.items()]
    metadata = {
        "config": json.dumps(dict(input_size=I, hidden_size=HD, num_layers=LAYERS, bidirectional=True)),
        "generated_by": json.dumps("tests/reference/make_rnn_reference.py, torch " + torch.__version__ + ", float64"),
    }
    save_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {loss.item():.6f}, {len(weights)} parameters, {os.path.getsize(path)} bytes")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    make_fixture("gru", 1234, os.path.join(here, "gru_reference.safetensors"))
    make_fixture("lstm", 5678, os.path.join(here, "lstm_reference.safetensors"))


if __name__ == "__main__":
    main()
