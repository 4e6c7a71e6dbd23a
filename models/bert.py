#!/usr/bin/python3
"""BERT-style encoder + masked-LM loss -> ONNX (training mode).

Inputs:  input_ids int64 [batch, seq], token_type_ids int64 [batch, seq],
         attention_mask int64 [batch, seq] (1 = token, 0 = pad),
         labels int64 [batch, seq] (-100 = not a masked position)
Output:  loss float32 scalar (mean cross-entropy over labels != -100)

Architecture (HF BertForMaskedLM, no pooler/NSP): word + position +
token-type embeddings -> LayerNorm -> dropout; post-LN encoder layers with
hand-written attention (separate q/k/v Linears, additive extended mask
(1 - mask) * -10000), GELU FFN; MLM head dense -> GELU -> LayerNorm ->
decoder tied to the word embedding (+ separate bias).

All reshapes use the static config sizes (batch as -1). The sizes are module
constants (``__constants__``) rather than Python closures, so the module also
compiles with torch.jit.script (``--format torchscript --jit script``).
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

PRESETS = {
    "tiny": dict(layers=2, d_model=32, heads=2, vocab=96, seq=16, batch=2,
                 max_pos=16),
    "base": dict(layers=12, d_model=768, heads=12, vocab=30522, seq=128,
                 batch=2, max_pos=512),
}
KEYS = ["layers", "d_model", "heads", "vocab", "seq", "batch", "max_pos",
        "intermediate"]


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, H, T = a.d_model, a.heads, a.seq
    assert d % H == 0, "--d-model must be divisible by --heads"
    assert T <= a.max_pos, "--seq must be <= --max-pos"
    hd = d // H
    eps = 1e-12
    mask_value = a.mask_value

    def gelu():
        return nn.GELU(approximate="tanh") if a.gelu == "tanh" else nn.GELU()

    class Embeddings(nn.Module):
        __constants__ = ["T", "max_pos"]

        def __init__(self):
            super().__init__()
            self.T, self.max_pos = T, a.max_pos
            self.word_embeddings = nn.Embedding(a.vocab, d)
            self.position_embeddings = nn.Embedding(a.max_pos, d)
            self.token_type_embeddings = nn.Embedding(a.type_vocab, d)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)
            self.dropout = nn.Dropout(a.dropout)
            # HF-style persistent buffer -> exported as an int64 initializer.
            self.register_buffer(
                "position_ids", torch.arange(a.max_pos, dtype=torch.long).unsqueeze(0))

        def forward(self, input_ids, token_type_ids):
            pos = self.position_ids
            if self.T != self.max_pos:
                pos = pos[:, :self.T]
            x = (self.word_embeddings(input_ids)
                 + self.position_embeddings(pos)
                 + self.token_type_embeddings(token_type_ids))
            return self.dropout(self.LayerNorm(x))

    class SelfAttention(nn.Module):
        __constants__ = ["d", "H", "T", "hd"]

        def __init__(self):
            super().__init__()
            self.d, self.H, self.T, self.hd = d, H, T, hd
            self.query = nn.Linear(d, d)
            self.key = nn.Linear(d, d)
            self.value = nn.Linear(d, d)
            self.dropout = nn.Dropout(a.dropout)
            # attention output
            self.dense = nn.Linear(d, d)
            self.out_dropout = nn.Dropout(a.dropout)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)

        def forward(self, x, ext_mask):
            T, H, hd = self.T, self.H, self.hd
            q = self.query(x).view(-1, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
            k = self.key(x).view(-1, T, H, hd).transpose(1, 2)
            v = self.value(x).view(-1, T, H, hd).transpose(1, 2)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            scores = scores + ext_mask  # [B, 1, 1, T] broadcast
            probs = self.dropout(F.softmax(scores, dim=-1))
            ctx = (probs @ v).transpose(1, 2).contiguous().view(-1, T, self.d)
            return self.LayerNorm(self.out_dropout(self.dense(ctx)) + x)  # post-LN

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.intermediate = nn.Linear(d, a.intermediate)
            self.act = gelu()
            self.output = nn.Linear(a.intermediate, d)
            self.dropout = nn.Dropout(a.dropout)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)

        def forward(self, x, ext_mask):
            x = self.attention(x, ext_mask)
            h = self.output(self.act(self.intermediate(x)))
            return self.LayerNorm(self.dropout(h) + x)  # post-LN

    class MLMHead(nn.Module):
        def __init__(self, word_embeddings):
            super().__init__()
            self.dense = nn.Linear(d, d)
            self.act = gelu()
            self.LayerNorm = nn.LayerNorm(d, eps=eps)
            self.decoder = nn.Linear(d, a.vocab, bias=False)
            self.decoder.weight = word_embeddings.weight  # tied
            self.bias = nn.Parameter(torch.zeros(a.vocab))

        def forward(self, x):
            x = self.LayerNorm(self.act(self.dense(x)))
            return self.decoder(x) + self.bias

    class BertForMLM(nn.Module):
        __constants__ = ["vocab", "mask_value"]

        def __init__(self):
            super().__init__()
            self.vocab, self.mask_value = a.vocab, mask_value
            self.embeddings = Embeddings()
            self.layers = nn.ModuleList([Layer() for _ in range(a.layers)])
            self.cls = MLMHead(self.embeddings.word_embeddings)
            self.apply(self._init_weights)

        @staticmethod
        def _init_weights(m):
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

        def forward(self, input_ids, token_type_ids, attention_mask, labels):
            # [B, T] int64 -> [B, 1, 1, T] float: 0 for tokens, mask_value for
            # pads, on the weights' device (a --no-weights export traces on
            # the meta device).
            device = self.embeddings.word_embeddings.weight.device
            ext = attention_mask[:, None, None, :].to(device, torch.float32)
            ext = (1.0 - ext) * self.mask_value
            x = self.embeddings(input_ids, token_type_ids)
            for layer in self.layers:
                x = layer(x, ext)
            logits = self.cls(x)  # [B, T, V]
            return F.cross_entropy(logits.view(-1, self.vocab), labels.view(-1),
                                   ignore_index=-100)

    return BertForMLM()


def make_batch(a):
    """Deterministic batch: sample 0 unpadded, later samples padded at the end;
    token types 0 for the first half, 1 for the second; ~15% (at least one) of
    the real tokens per sample carry an MLM label, the rest are -100."""
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    B, T = a.batch, a.seq
    input_ids = torch.randint(0, a.vocab, (B, T), generator=g)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, T // 2:] = 1
    attention_mask = torch.ones(B, T, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for b in range(B):
        n = T if b == 0 else max(1, T - (b * T) // (2 * B) - 1)  # real tokens
        attention_mask[b, n:] = 0
        input_ids[b, n:] = 0  # [PAD]
        k = max(1, round(0.15 * n))
        pos = torch.randperm(n, generator=g)[:k]
        labels[b, pos] = input_ids[b, pos]
    return ((input_ids, token_type_ids, attention_mask, labels),
            ("input_ids", "token_type_ids", "attention_mask", "labels"))


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--intermediate", type=int, help="FFN width (default 4*d-model)")
    p.add_argument("--vocab", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--max-pos", type=int,
                   help="position-embedding rows (position_ids is sliced if seq < max-pos)")
    p.add_argument("--type-vocab", type=int, default=2)
    p.add_argument("--batch", type=int)
    p.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--mask-value", default="-10000",
                   help="additive value for pad positions: a number or 'finfo-min'")
    a = p.parse_args(argv)
    if a.max_pos is None and a.seq is not None and a.size == "tiny":
        a.max_pos = a.seq
    a = ec.resolve(a, PRESETS, KEYS)
    if a.intermediate is None:
        a.intermediate = 4 * a.d_model
    if a.max_pos < a.seq:
        p.error("--max-pos must be >= --seq")

    import torch
    a.mask_value = (torch.finfo(torch.float32).min if a.mask_value == "finfo-min"
                    else float(a.mask_value))
    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
