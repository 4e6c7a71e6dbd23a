#!/usr/bin/env python3
"""Writes the small TorchScript archives the TorchScript frontend's tests read.

    make_ts.py KIND OUT
    make_ts.py KIND=OUT [KIND=OUT...]   several in one run (one PyTorch start)

KIND is one of:
  mlp-trace / mlp-script   a 2-layer MLP with dropout whose forward(x, y) returns
                           the cross-entropy loss, traced / scripted, saved in
                           training mode (x [4, 8] float, y [4] int64 labels)
  eval                     the traced MLP saved after model.eval()
  unsupported              a forward calling torch.cumsum (no ATen table entry)
  inplace                  a forward writing into a slice of a tensor it reads
  no-loss                  a forward returning the logits, not a loss
  tied                     an embedding and a head sharing one weight
  frozen                   a parameter with requires_grad False and a buffer
  optional-script          scripted: forward(x, y, mask: Optional[Tensor] = None)
                           asking what a trace would record as constants
                           (x.shape[-1], x.device, a buffer's dtype) and calling a
                           submodule that returns a tuple
  corrupt                  the traced MLP with its data.pkl overwritten
  huge-string              the traced MLP whose data.pkl claims a 2 GB string
                           (libtorch's unpickler would allocate it first)
"""
import io
import sys
import zipfile
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 5)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, y):
        h = self.drop(F.gelu(self.fc1(x)))
        return F.cross_entropy(self.fc2(h), y)


class Cumsum(Mlp):
    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(torch.cumsum(x, 1)))), y)


class Inplace(Mlp):
    def forward(self, x, y):
        h = self.fc1(x)
        v = h[:, :4]
        v.mul_(2.0)
        return F.cross_entropy(self.fc2(h), y)


class NoLoss(Mlp):
    def forward(self, x, y):
        return self.fc2(F.relu(self.fc1(x)))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids, y):
        return F.cross_entropy(self.head(self.emb(ids)).reshape(-1, 16), y.reshape(-1))


class Frozen(Mlp):
    def __init__(self):
        super().__init__()
        self.fc1.weight.requires_grad_(False)
        self.register_buffer("shift", torch.full((8,), 0.5))

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x + self.shift))), y)


class Halves(nn.Module):
    def forward(self, h):
        return h[..., : h.shape[-1] // 2], h[..., h.shape[-1] // 2:]


class OptionalMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(8, 5)
        self.halves = Halves()
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x, y, mask: Optional[torch.Tensor] = None):
        a, b = self.halves(self.fc1(x))
        h = a * b + torch.arange(8, dtype=self.scale.dtype, device=x.device)
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return F.cross_entropy(self.fc2(h), y)


def main():
    if len(sys.argv) == 3 and "=" not in sys.argv[1]:
        write(sys.argv[1], sys.argv[2])
        return
    for pair in sys.argv[1:]:
        kind, _, out = pair.partition("=")
        if not out:
            sys.exit("make_ts.py: expected KIND=OUT, got %r" % pair)
        write(kind, out)


def write(kind, out):
    torch.manual_seed(0)
    x, y = torch.randn(4, 8), torch.tensor([0, 3, 1, 4])
    model = {"unsupported": Cumsum, "inplace": Inplace, "no-loss": NoLoss, "tied": Tied,
             "frozen": Frozen, "optional-script": OptionalMask}.get(kind, Mlp)()
    if kind == "tied":
        x, y = torch.randint(0, 16, (4, 6)), torch.randint(0, 16, (4, 6))
    model.train()
    if kind == "eval":
        model.eval()
    if kind.endswith("-script"):
        m = torch.jit.script(model)
    else:
        m = torch.jit.trace(model, (x, y), check_trace=False)
    if kind not in ("corrupt", "huge-string"):
        m.save(out)
        return
    buf = io.BytesIO()
    torch.jit.save(m, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl") and kind == "corrupt":
                data = b"\x80\x02garbage" + data[:8]
            elif info.filename.endswith("data.pkl"):
                at = data.index(b"X")  # the first BINUNICODE: its 4-byte length
                data = data[:at + 1] + b"\xff\xff\xff\x7f" + data[at + 5:]
            dst.writestr(info, data)


if __name__ == "__main__":
    main()
