#!/usr/bin/python3
"""The same Transformer in PyTorch, to check the C++ one against it.

Gradient checks show that every C++ op is consistent with its own forward pass. They cannot show
that the forward pass is the model everyone means (which LayerNorm, which mask convention, the
embedding scale, where the residual goes). So this script builds the model again from plain
torch.nn pieces, written to mirror models/transformer.cpp and nn/*.cpp line for line, with the
same parameter names as the C++ named_parameters() ("encoder.layers.0.self_attn.w_q.weight"),
and writes what PyTorch computes for fixed weights and inputs. tests/test_reference.cpp (part of
`make test`, no Python needed) loads those files and holds the C++ model to them.

Run from the repository root with Debian's python3, which has torch (1.13):

  Regenerate the fixtures tests/reference/transformer_pre_norm.safetensors and
  tests/reference/transformer_post_norm.safetensors (deterministic: rerunning gives the same bytes):
      /usr/bin/python3 tests/reference/make_reference.py

  Check the other direction: a checkpoint written by the C++ copy task loads into the PyTorch
  model by name, and both greedy-decode the same random sequences to the same outputs:
      make examples/copy_task
      ./examples/copy_task --steps 300 --save /tmp/copy.safetensors
      /usr/bin/python3 tests/reference/make_reference.py --check-checkpoint /tmp/copy.safetensors

Each fixture holds (safetensors, the format autograd/io/safetensors.h reads):
  <parameter name>            F32   the weights (seeded, see make_weights)
  src (B, S), tgt_in (B, T),  I32   token ids, padded with `pad`; the masks are built from them:
  tgt_out (B, T)                    src_mask = padding_mask(src) (B, 1, S),
                                    tgt_mask = target_mask(tgt_in) (B, T, T)
  log_probs (B, T, V)         F32   generator(decode(encode(src), tgt_in)): log_softmax(proj(x))
  loss ()                     F32   cross_entropy(logits, tgt_out, label_smoothing, ignore_index=pad)
  grad.<parameter name>       F32   d loss / d parameter
  adam.<parameter name>       F32   the parameter after one Adam step with the Noam lr of step 1
  metadata (each value a JSON text, as models/checkpoint.h reads them): config (the C++
            TransformerConfig as a JSON object), pad, label_smoothing, adam_beta1, adam_beta2,
            adam_eps, noam_factor, noam_warmup, lr, generated_by.

Everything is computed in float64 from float32 weights and stored as float32, so the reference
carries no float32 rounding of its own: what the C++ test measures is the C++ rounding alone.
Dropout is 0: dropout draws random masks from each framework's own generator, so the two cannot
agree element by element; with p = 0 every dropout is the identity in both.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from torch_transformer import (Transformer, config_json, load_safetensors, noam_lr, padding_mask,
                               parse_config, save_safetensors, subsequent_mask, target_mask)

# ------------------------------------------------------------------------------------------------
# Fixtures for tests/test_reference.cpp

PAD, BOS, EOS = 0, 1, 2
CONFIG = dict(src_vocab=13, tgt_vocab=13, layers=2, d_model=32, d_ff=64, heads=4, dropout=0.0, max_len=5000)
LABEL_SMOOTHING = 0.1
ADAM_BETAS, ADAM_EPS = (0.9, 0.98), 1e-9
NOAM_FACTOR, NOAM_WARMUP = 1.0, 4   # step 1: lr = 32^-0.5 * 1 * 4^-1.5 = 0.0221, a clearly visible step


def make_weights(model, seed):
    """Seeded float32 weights, none of them at a default value: matrices Xavier-uniform (as the C++
    initializes them), biases and LayerNorm gains/biases random too, so a swapped or ignored gain
    or bias shows up."""
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for name, p in model.named_parameters():
        if p.dim() > 1:
            bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
            w = (torch.rand(p.shape, generator=g) * 2 - 1) * bound
        elif name.endswith(".gain"):
            w = 1 + 0.2 * torch.randn(p.shape, generator=g)
        else:
            w = 0.1 * torch.randn(p.shape, generator=g)
        weights[name] = w.float()
    return weights


def make_batch(seed):
    """3 pairs of different lengths (padded): src (3, 7), tgt_in = [BOS, y...], tgt_out = [y..., EOS]."""
    g = torch.Generator().manual_seed(seed)
    src_lens, tgt_lens = [7, 5, 3], [5, 2, 4]   # tgt_lens: symbols before EOS
    S, T = max(src_lens), max(tgt_lens) + 1
    V = CONFIG["src_vocab"]
    src = torch.full((3, S), PAD, dtype=torch.int64)
    tgt_in = torch.full((3, T), PAD, dtype=torch.int64)
    tgt_out = torch.full((3, T), PAD, dtype=torch.int64)
    for b in range(3):
        src[b, :src_lens[b]] = torch.randint(3, V, (src_lens[b],), generator=g)
        y = torch.randint(3, V, (tgt_lens[b],), generator=g)
        tgt_in[b, :tgt_lens[b] + 1] = torch.cat([torch.tensor([BOS]), y])
        tgt_out[b, :tgt_lens[b] + 1] = torch.cat([y, torch.tensor([EOS])])
    return src, tgt_in, tgt_out


def make_fixture(pre_norm, path):
    c = dict(CONFIG, pre_norm=pre_norm)
    model = Transformer(c).double()                        # its own random init is overwritten next
    weights = make_weights(model, seed=1234)
    model.load_state_dict({k: w.double() for k, w in weights.items()}, strict=True)
    src, tgt_in, tgt_out = make_batch(seed=5678)
    src_mask, tgt_mask = padding_mask(src, PAD), target_mask(tgt_in, PAD)

    # forward: log-probabilities through the generator, and the training loss from the logits
    out = model.decode(model.encode(src, src_mask), src_mask, tgt_in, tgt_mask)   # (B, T, D)
    logits = model.generator.proj(out)                                            # (B, T, V)
    log_probs = F.log_softmax(logits, dim=-1)
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD,
                           label_smoothing=LABEL_SMOOTHING)
    # torch's convention, which nn/loss.cpp follows: eps / V on every class (pad included), the
    # rest on the target, mean over the non-ignored targets. Spelled out, so a change is seen here.
    keep = tgt_out.reshape(-1) != PAD
    lp = log_probs.reshape(-1, V)[keep]
    by_hand = (-(1 - LABEL_SMOOTHING) * lp.gather(1, tgt_out.reshape(-1)[keep].unsqueeze(1)).squeeze(1)
               - LABEL_SMOOTHING / V * lp.sum(1)).mean()
    assert abs(by_hand.item() - loss.item()) < 1e-12, (by_hand.item(), loss.item())

    # backward and one Adam step with the Noam lr of step 1
    loss.backward()
    lr = noam_lr(1, c["d_model"], NOAM_WARMUP, NOAM_FACTOR)
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    torch.optim.Adam(model.parameters(), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS).step()

    tensors = [(n, "F32", weights[n]) for n, _ in model.named_parameters()]
    tensors += [("src", "I32", src), ("tgt_in", "I32", tgt_in), ("tgt_out", "I32", tgt_out),
                ("log_probs", "F32", log_probs), ("loss", "F32", loss)]
    tensors += [("grad." + n, "F32", grads[n]) for n, _ in model.named_parameters()]
    tensors += [("adam." + n, "F32", p) for n, p in model.named_parameters()]
    metadata = {"config": config_json(c)}
    metadata.update({k: json.dumps(v) for k, v in dict(
        pad=PAD, label_smoothing=LABEL_SMOOTHING, adam_beta1=ADAM_BETAS[0], adam_beta2=ADAM_BETAS[1], adam_eps=ADAM_EPS,
        noam_factor=NOAM_FACTOR, noam_warmup=NOAM_WARMUP, lr=lr,
        generated_by="tests/reference/make_reference.py, torch " + torch.__version__ + ", float64").items()})
    save_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {loss.item():.6f}, lr {lr:.6g}, {len(grads)} parameters")


# ------------------------------------------------------------------------------------------------
# --check-checkpoint: a C++ copy-task checkpoint in PyTorch, greedy outputs compared with the C++ ones


def greedy_decode(model, src, max_len, bos):
    """models::greedy_decode without eos: append the most likely next token, max_len - 1 times."""
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.int64)
    for t in range(1, max_len):
        out = model.decode(memory, src_mask, ys, subsequent_mask(t))      # (B, t, D)
        next_ids = model.generator(out[:, -1]).argmax(dim=-1)            # (B,)
        ys = torch.cat([ys, next_ids.unsqueeze(1)], dim=1)
    return ys


def check_checkpoint(path, binary, count, seed):
    if not os.access(binary, os.X_OK):
        sys.exit(f"make_reference: {binary} not found: build it first (make examples/copy_task)")
    metadata, tensors = load_safetensors(path)
    c = parse_config(metadata["config"])
    L = json.loads(metadata["seq_len"])
    model = Transformer(c)
    model.load_state_dict(tensors, strict=True)   # by name: every parameter, nothing else
    model.eval()
    # copy-task sources as examples/data/copy_task_data.cpp makes them: 1, then symbols 1..V-1
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, c["src_vocab"], (count, L), generator=g)
    src[:, 0] = 1
    with torch.no_grad():
        ours = greedy_decode(model, src, L, bos=1)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("".join(" ".join(map(str, row)) + "\n" for row in src.tolist()))
        f.flush()
        run = subprocess.run([binary, "--load", path, "--decode", f.name], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"make_reference: {binary} failed:\n{run.stderr}")
    theirs = [list(map(int, line.split())) for line in run.stdout.splitlines()]
    if len(theirs) != count:
        sys.exit(f"make_reference: {binary} printed {len(theirs)} lines for {count} sequences")
    same = sum(a == b for a, b in zip(ours.tolist(), theirs))
    copied = sum(a == b for a, b in zip(ours.tolist(), src.tolist()))
    print(f"{path}: {metadata['config']}, seq_len {L}")
    print(f"greedy outputs identical in PyTorch and C++: {same}/{count}; exact copies (PyTorch): {copied}/{count}")
    for a, b, s in zip(ours.tolist(), theirs, src.tolist()):
        if a != b:
            print(f"  src   {s}\n  torch {a}\n  C++   {b}")
    return same == count


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check-checkpoint", metavar="PATH", help="a checkpoint written by ./examples/copy_task --save")
    ap.add_argument("--binary", default=os.path.join(here, "..", "..", "examples", "copy_task"),
                    help="the C++ copy_task program (default: examples/copy_task)")
    ap.add_argument("--count", type=int, default=200, help="random sequences to decode (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of those sequences")
    args = ap.parse_args()
    if args.check_checkpoint:
        sys.exit(0 if check_checkpoint(args.check_checkpoint, args.binary, args.count, args.seed) else 1)
    make_fixture(True, os.path.join(here, "transformer_pre_norm.safetensors"))
    make_fixture(False, os.path.join(here, "transformer_post_norm.safetensors"))


if __name__ == "__main__":
    main()
