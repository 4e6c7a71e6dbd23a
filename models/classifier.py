#!/usr/bin/python3
"""Sequence classifier: token embedding, nn.TransformerEncoder, mean pooling, Linear(d, classes) + cross-entropy -> ONNX (training mode).

The shape of a model a DeepSpeed user fine-tunes for classification: the
head has a handful of classes (5), which tensor parallelism cannot split
over the vocabulary as it splits a language model's head, and the table
has a vocabulary that tp need not divide (97).

Inputs:  input_ids int64 [batch, seq], targets int64 [batch]
Output:  loss float32 scalar (mean cross-entropy)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

PRESETS = {
    "tiny": dict(vocab=97, d=32, heads=2, layers=2, ffn=64, seq=8, classes=5, batch=4,
                 dropout=0.0),
}
KEYS = ["vocab", "d", "heads", "layers", "ffn", "seq", "classes", "batch", "dropout"]


def build_model(a):
    import torch.nn as nn
    import torch.nn.functional as F

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(a.vocab, a.d)
            layer = nn.TransformerEncoderLayer(a.d, a.heads, a.ffn, a.dropout, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, a.layers)
            self.head = nn.Linear(a.d, a.classes)

        def forward(self, input_ids, targets):
            h = self.encoder(self.embed(input_ids))
            return F.cross_entropy(self.head(h.mean(dim=1)), targets)

    return Classifier()


def make_batch(a):
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    targets = torch.randint(0, a.classes, (a.batch,), generator=g)
    return (ids, targets), ("input_ids", "targets")


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    for key in ("vocab", "d", "heads", "layers", "ffn", "seq", "classes", "batch"):
        p.add_argument("--" + key, type=int)
    p.add_argument("--dropout", type=float)
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)

    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
