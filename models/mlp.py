#!/usr/bin/python3
"""MLP classifier (Linear/activation stack) + cross-entropy loss -> ONNX (training mode).

Inputs:  x float32 [batch, in_features], targets int64 [batch]
Output:  loss float32 scalar (mean cross-entropy)

--act picks the activation (ReLU by default) among torch.nn's, with
non-default parameters where they have some, so that the export carries
them: ELU(alpha 1.2), SELU, CELU(alpha 1.5), Softplus, Mish (Softplus and
Tanh in opset 17), LeakyReLU(0.1), PReLU (one slope per hidden unit),
Hardsigmoid, Hardswish, Softsign, SiLU, GELU, Tanh, Sigmoid.
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
ACTS = ["relu", "elu", "selu", "celu", "softplus", "mish", "leaky_relu", "prelu",
        "hardsigmoid", "hardswish", "softsign", "silu", "gelu", "tanh", "sigmoid"]


def activation(name, width):
    import torch.nn as nn
    return {
        "relu": lambda: nn.ReLU(),
        "elu": lambda: nn.ELU(alpha=1.2),
        "selu": lambda: nn.SELU(),
        "celu": lambda: nn.CELU(alpha=1.5),
        "softplus": lambda: nn.Softplus(),
        "mish": lambda: nn.Mish(),
        "leaky_relu": lambda: nn.LeakyReLU(0.1),
        "prelu": lambda: nn.PReLU(num_parameters=width, init=0.2),
        "hardsigmoid": lambda: nn.Hardsigmoid(),
        "hardswish": lambda: nn.Hardswish(),
        "softsign": lambda: nn.Softsign(),
        "silu": lambda: nn.SiLU(),
        "gelu": lambda: nn.GELU(),
        "tanh": lambda: nn.Tanh(),
        "sigmoid": lambda: nn.Sigmoid(),
    }[name]()


def build_model(a):
    import torch.nn as nn
    import torch.nn.functional as F

    import torch

    class EinsumLinear(nn.Linear):
        """nn.Linear written with einsum, as einsum-style code writes it."""

        def forward(self, x):
            return torch.einsum("bi,oi->bo", x, self.weight) + self.bias

    Linear = EinsumLinear if a.einsum else nn.Linear

    class MLP(nn.Module):
        def __init__(self, in_features, hidden, layers, classes, act):
            super().__init__()
            mods = []
            d = in_features
            for _ in range(layers):
                mods += [Linear(d, hidden), activation(act, hidden)]
                d = hidden
            mods.append(Linear(d, classes))
            self.net = nn.Sequential(*mods)

        def forward(self, x, targets):
            return F.cross_entropy(self.net(x), targets)

    return MLP(a.in_features, a.hidden, a.layers, a.classes, a.act)


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
    p.add_argument("--act", choices=ACTS, default="relu",
                   help="the hidden layers' activation (default relu)")
    p.add_argument("--einsum", action="store_true",
                   help="each Linear as torch.einsum('bi,oi->bo', x, W) + b")
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)

    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
