"""A 6-line router whose one-hot expert ids are transposed as int64
(F.one_hot(ids, E).transpose(0, 1), as Mixtral-style routers write it),
exported with its cross-entropy loss.

    int_transpose_model.py -o model.onnx
"""
import argparse

import torch
import torch.nn.functional as F


class Router(torch.nn.Module):
    def __init__(self, d=8, experts=4, classes=5):
        super().__init__()
        self.gate = torch.nn.Linear(d, experts)
        self.head = torch.nn.Linear(d, classes)
        self.experts = experts

    def forward(self, x, y):
        logits = self.gate(x)                                   # [T, E]
        ids = torch.argmax(logits, dim=1, keepdim=True)         # [T, 1] int64
        routed = F.one_hot(ids, self.experts).transpose(0, 1)   # [1, T, E] int64
        weight = (torch.softmax(logits, dim=1) * routed[0].float()).sum(1, keepdim=True)
        return F.cross_entropy(self.head(x) * weight, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    m = Router().train()
    x, y = torch.randn(6, 8), torch.randint(0, 5, (6,))
    torch.onnx.export(m, (x, y), a.output, input_names=["x", "y"], output_names=["loss"],
                      opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


if __name__ == "__main__":
    main()
