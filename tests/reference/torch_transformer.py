"""This project's Transformer in PyTorch: the model, the masks, the Noam schedule and safetensors.

Written to mirror models/transformer.cpp and nn/*.cpp line for line, with the same parameter names
as the C++ named_parameters() ("encoder.layers.0.self_attn.w_q.weight"), so a checkpoint moves
between the two by name. Used by tests/reference/make_reference.py (the fixtures of
tests/test_reference.cpp) and bench/torch_copy_task.py (the PyTorch side of the speed
comparison). Needs Debian's python3 with torch (1.13): /usr/bin/python3.
"""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

# ------------------------------------------------------------------------------------------------
# The model, mirroring models/transformer.cpp and nn/*.cpp. Attribute names are the C++ member
# names given to register_module / register_parameter, so named_parameters() agree.


class LayerNorm(nn.Module):
    """nn/layer_norm.h: biased variance, eps 1e-5 inside the sqrt; parameters 'gain' and 'bias'."""

    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gain, self.bias, self.eps)


class Embeddings(nn.Module):
    """models::Embeddings: the lookup table times sqrt(D)."""

    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, ids):
        return self.lut(ids) * math.sqrt(self.d_model)   # (B, T, D)


class PositionalEncoding(nn.Module):
    """nn/positional_encoding.cpp: PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...)."""

    def __init__(self, d_model, dropout):
        super().__init__()
        self.d_model, self.dropout = d_model, nn.Dropout(dropout)

    def forward(self, x):
        T, D = x.shape[1], self.d_model
        pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)                     # (T, 1)
        inv_wavelength = torch.exp(-math.log(10000.0) * torch.arange(0, D, 2, dtype=torch.float64) / D)
        pe = torch.zeros(T, D, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(pos * inv_wavelength)
        pe[:, 1::2] = torch.cos(pos * inv_wavelength)
        return self.dropout(x + pe.to(x.dtype))                                     # (B, T, D)


class MultiHeadAttention(nn.Module):
    """nn/attention.cpp: project, attend in H heads of Dk = D / H, concatenate, project."""

    def __init__(self, d_model, h, dropout):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask):
        B, T, D = query.shape
        S = key.shape[1]
        # 1) project and split the heads: (B, ., D) -> (B, H, ., Dk)
        q = self.w_q(query).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.w_k(key).view(B, S, self.h, self.d_k).transpose(1, 2)
        v = self.w_v(value).view(B, S, self.h, self.d_k).transpose(1, 2)
        # 2) attend; mask (B, 1, S) or (B, T, T), True = may attend, the same for every head
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)                    # (B, H, T, S)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        p = self.dropout(scores.softmax(dim=-1))
        x = (p @ v).transpose(1, 2).reshape(B, T, D)                               # (B, T, D)
        # 3) mix the heads
        return self.w_o(x)


class PositionwiseFeedForward(nn.Module):
    """nn/feed_forward.cpp: w_2(dropout(relu(w_1(x))))."""

    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(F.relu(self.w_1(x))))


class SublayerConnection(nn.Module):
    """models::SublayerConnection: pre-norm x + dropout(sublayer(norm(x))),
    post-norm norm(x + dropout(sublayer(x)))."""

    def __init__(self, d_model, dropout, pre_norm):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = LayerNorm(d_model), nn.Dropout(dropout), pre_norm

    def forward(self, x, sublayer):
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = MultiHeadAttention(c["d_model"], c["heads"], c["dropout"])
        self.feed_forward = PositionwiseFeedForward(c["d_model"], c["d_ff"], c["dropout"])
        self.sublayer0 = SublayerConnection(c["d_model"], c["dropout"], c["pre_norm"])
        self.sublayer1 = SublayerConnection(c["d_model"], c["dropout"], c["pre_norm"])

    def forward(self, x, src_mask):
        h = self.sublayer0(x, lambda y: self.self_attn(y, y, y, src_mask))
        return self.sublayer1(h, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = MultiHeadAttention(c["d_model"], c["heads"], c["dropout"])
        self.src_attn = MultiHeadAttention(c["d_model"], c["heads"], c["dropout"])
        self.feed_forward = PositionwiseFeedForward(c["d_model"], c["d_ff"], c["dropout"])
        self.sublayer0 = SublayerConnection(c["d_model"], c["dropout"], c["pre_norm"])
        self.sublayer1 = SublayerConnection(c["d_model"], c["dropout"], c["pre_norm"])
        self.sublayer2 = SublayerConnection(c["d_model"], c["dropout"], c["pre_norm"])

    def forward(self, x, memory, src_mask, tgt_mask):
        h = self.sublayer0(x, lambda y: self.self_attn(y, y, y, tgt_mask))
        h = self.sublayer1(h, lambda y: self.src_attn(y, memory, memory, src_mask))
        return self.sublayer2(h, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(c) for _ in range(c["layers"])])
        self.norm = LayerNorm(c["d_model"])   # final LayerNorm, in pre-norm and post-norm alike

    def forward(self, x, src_mask):
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c["layers"])])
        self.norm = LayerNorm(c["d_model"])

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


class Transformer(nn.Module):
    """models::Transformer; modules registered in the C++ order."""

    def __init__(self, c):
        super().__init__()
        self.encoder, self.decoder = Encoder(c), Decoder(c)
        self.src_embed = Embeddings(c["d_model"], c["src_vocab"])
        self.tgt_embed = Embeddings(c["d_model"], c["tgt_vocab"])
        self.src_pos = PositionalEncoding(c["d_model"], c["dropout"])
        self.tgt_pos = PositionalEncoding(c["d_model"], c["dropout"])
        self.generator = Generator(c["d_model"], c["tgt_vocab"])

    def encode(self, src, src_mask):
        return self.encoder(self.src_pos(self.src_embed(src)), src_mask)                      # (B, S, D)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_pos(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)   # (B, T, D)


# models/transformer.cpp masks, True = may attend
def padding_mask(ids, pad):                 # (B, S) -> (B, 1, S)
    return (ids != pad).unsqueeze(1)


def subsequent_mask(T):                     # (1, T, T), lower triangular
    return torch.tril(torch.ones(1, T, T, dtype=torch.bool))


def target_mask(tgt, pad):                  # (B, T, T): key not padding and not in the future
    return padding_mask(tgt, pad) & subsequent_mask(tgt.shape[1])


def noam_lr(step, d_model, warmup, factor):  # optim/lr_schedule.cpp, eq. 3 of the paper
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


CONFIG_KEYS = ("src_vocab", "tgt_vocab", "layers", "d_model", "d_ff", "heads", "dropout", "pre_norm", "max_len")


def parse_config(text):
    """The config as models/checkpoint.cpp writes it in a checkpoint's metadata: a JSON object,
    '{"src_vocab":11,"tgt_vocab":11,"layers":2,...,"pre_norm":true,"max_len":5000}'."""
    c = json.loads(text)
    if sorted(c) != sorted(CONFIG_KEYS):
        raise ValueError(f"config keys {sorted(c)}, expected {sorted(CONFIG_KEYS)}")
    return c


def config_json(c):
    """The inverse of parse_config, keys in the C++ order."""
    return json.dumps({k: c[k] for k in CONFIG_KEYS}, separators=(",", ":"))


# ------------------------------------------------------------------------------------------------
# safetensors, as autograd/io/safetensors.h reads and writes it: an 8-byte little-endian header length, a
# JSON header (padded with spaces to a multiple of 8), then each tensor's raw little-endian bytes.

DTYPES = {"F32": (torch.float32, 4), "I32": (torch.int32, 4), "I64": (torch.int64, 8)}


def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype name, torch tensor), written in this order."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, dtype, t in tensors:
        data = t.detach().to(DTYPES[dtype][0]).contiguous().numpy().tobytes()   # little-endian on x86-64
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_safetensors(path):
    """-> (metadata dict, {name: tensor}) for F32 / I32 / I64 tensors."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]][0]
        tensors[name] = torch.frombuffer(bytearray(raw[8 + n + begin:8 + n + end]), dtype=dtype).reshape(e["shape"])
    return metadata, tensors
