#!/usr/bin/python3
"""MLP classifier (Linear/ReLU stack) + cross-entropy loss -> ONNX (training mode).

Inputs:  x float32 [batch, in_features], targets int64 [batch]
Output:  loss float32 scalar (mean cross-entropy)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

PRESETS = {
    "tiny": dict(in_features=16, hidden=32, layers=2, classes=4, batch=8),
    "mnist": dict(in_features=784, hidden=256, layers=2, classes=10, batch=64),
}
KEYS = ["in_features", "hidden", "layers", "classes", "batch"]


def build_model(a):
    import torch.nn as nn
    import torch.nn.functional as F

    class MLP(nn.Module):
        def __init__(self, in_features, hidden, layers, classes):
            super().__init__()
            mods = []
            d = in_features
            for _ in range(layers):
                mods += [nn.Linear(d, hidden), nn.ReLU()]
                d = hidden
            mods.append(nn.Linear(d, classes))
            self.net = nn.Sequential(*mods)

        def forward(self, x, targets):
            return F.cross_entropy(self.net(x), targets)

    return MLP(a.in_features, a.hidden, a.layers, a.classes)


def make_batch(a):
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    x = torch.randn(a.batch, a.in_features, generator=g)
    targets = torch.randint(0, a.classes, (a.batch,), generator=g)
    return (x, targets), ("x", "targets")


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    p.add_argument("--in-features", type=int)
    p.add_argument("--hidden", type=int, help="width of each hidden layer")
    p.add_argument("--layers", type=int,
                   help="number of hidden Linear+ReLU layers (plus one output Linear)")
    p.add_argument("--classes", type=int)
    p.add_argument("--batch", type=int)
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)

    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
