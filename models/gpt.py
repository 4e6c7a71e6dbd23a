#!/usr/bin/python3
"""GPT-2-style decoder LM + next-token cross-entropy -> ONNX (training mode).

Inputs:  input_ids int64 [batch, seq], targets int64 [batch, seq]
         (+ key_padding_mask bool [batch, seq], True = padding, with
         ``--key-padding-mask``)
Output:  loss float32 scalar (mean cross-entropy over all batch*seq tokens)

Architecture (nanoGPT): token + learned position embeddings (or, with
``--pos sinusoidal``, the fixed sinusoidal table of "Attention is all you
need" as a persistent float buffer ``pos_enc``, which must not train), dropout,
pre-LayerNorm blocks (x + attn(ln_1(x)); x + mlp(ln_2(x))), causal
self-attention, MLP d -> 4d -> d with GELU, final LayerNorm, LM head
(bias-free, optionally tied to the token embedding).

All reshapes use the static config sizes (batch as -1), so a static export
contains no Shape/Gather/Concat shape arithmetic. The sizes are module
constants (``__constants__``) rather than Python closures, so the module also
compiles with torch.jit.script (``--format torchscript --jit script``; the
manual attention only).
"""

import math
import os
import sys
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

PRESETS = {
    "tiny": dict(layers=2, d_model=32, heads=2, vocab=96, seq=16, batch=2),
    "gpt2-small": dict(layers=12, d_model=768, heads=12, vocab=50257,
                       seq=1024, batch=1),
    # GPT-3 175B (Brown et al. 2020) with Megatron-LM's padded vocabulary:
    # export it with --no-weights (its float32 weights are 698 GB).
    "gpt3-175b": dict(layers=96, d_model=12288, heads=96, vocab=50304,
                      seq=2048, batch=1),
}
KEYS = ["layers", "d_model", "heads", "vocab", "seq", "batch"]


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, H, T = a.d_model, a.heads, a.seq
    assert d % H == 0, "--d-model must be divisible by --heads"
    hd = d // H

    def gelu():
        return nn.GELU(approximate="tanh") if a.gelu == "tanh" else nn.GELU()

    class ManualAttention(nn.Module):
        """nanoGPT CausalSelfAttention: fused qkv Linear, bool tril mask buffer,
        masked_fill(-inf), softmax, attention dropout, output projection."""
        __constants__ = ["d", "H", "T", "hd"]

        def __init__(self):
            super().__init__()
            self.d, self.H, self.T, self.hd = d, H, T, hd
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.attn_dropout = nn.Dropout(a.dropout)
            self.resid_dropout = nn.Dropout(a.dropout)
            # True = may attend. Persistent buffer -> exported as a bool initializer.
            self.register_buffer(
                "mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

        def forward(self, x, key_padding_mask: Optional[torch.Tensor] = None):
            T, H, hd = self.T, self.H, self.hd
            q, k, v = self.c_attn(x).split(self.d, dim=2)
            q = q.view(-1, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
            k = k.view(-1, T, H, hd).transpose(1, 2)
            v = v.view(-1, T, H, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~self.mask, float("-inf"))
            if key_padding_mask is not None:
                att = att.masked_fill(key_padding_mask.view(-1, 1, 1, T), float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # [B, H, T, hd]
            y = y.transpose(1, 2).contiguous().view(-1, T, self.d)
            return self.resid_dropout(self.c_proj(y))

    class MHAAttention(nn.Module):
        """torch.nn.MultiheadAttention(batch_first=True) with a causal attn_mask."""

        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, H, dropout=a.dropout, batch_first=True)
            self.resid_dropout = nn.Dropout(a.dropout)
            # MHA convention: True = NOT allowed to attend (strict upper triangle).
            self.register_buffer(
                "attn_mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

        def forward(self, x, key_padding_mask: Optional[torch.Tensor] = None):
            # With both masks bool, MHA ors them (a run-time Or of bools).
            y, _ = self.attn(x, x, x, attn_mask=self.attn_mask,
                             key_padding_mask=key_padding_mask, need_weights=False)
            return self.resid_dropout(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.gelu = gelu()
            self.c_proj = nn.Linear(4 * d, d)
            self.dropout = nn.Dropout(a.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = ManualAttention() if a.attn == "manual" else MHAAttention()
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = MLP()

        def forward(self, x, key_padding_mask: Optional[torch.Tensor] = None):
            x = x + self.attn(self.ln_1(x), key_padding_mask)
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        __constants__ = ["T", "vocab", "learned_pos"]

        def __init__(self):
            super().__init__()
            self.T, self.vocab, self.learned_pos = T, a.vocab, a.pos == "learned"
            modules = dict(wte=nn.Embedding(a.vocab, d))
            if a.pos == "learned":
                modules["wpe"] = nn.Embedding(T, d)
            else:
                # A persistent float buffer: exported as an initializer like
                # the weights, but PyTorch never trains it.
                pos = torch.arange(T, dtype=torch.float32).unsqueeze(1)
                freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32)
                                 * (-math.log(10000.0) / d))
                table = torch.zeros(T, d)
                table[:, 0::2] = torch.sin(pos * freq)
                table[:, 1::2] = torch.cos(pos * freq)
                self.register_buffer("pos_enc", table)
            self.transformer = nn.ModuleDict(dict(
                **modules,
                drop=nn.Dropout(a.dropout),
                h=nn.ModuleList([Block() for _ in range(a.layers)]),
                ln_f=nn.LayerNorm(d),
            ))
            self.lm_head = nn.Linear(d, a.vocab, bias=False)
            if a.tied:
                self.lm_head.weight = self.transformer.wte.weight
            self.apply(self._init_weights)
            # GPT-2: scaled init of the residual projections.
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight") or name.endswith("out_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * a.layers))

        @staticmethod
        def _init_weights(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, input_ids, targets, key_padding_mask: Optional[torch.Tensor] = None):
            tr = self.transformer
            if self.learned_pos:  # a constant: TorchScript compiles one branch
                pos = torch.arange(0, self.T, dtype=torch.long, device=input_ids.device)  # [T]
                x = tr.drop(tr.wte(input_ids) + tr.wpe(pos))
            else:
                x = tr.drop(tr.wte(input_ids) + self.pos_enc)
            for block in tr.h:
                x = block(x, key_padding_mask)
            logits = self.lm_head(tr.ln_f(x))  # [B, T, V]
            return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))

    return GPT()


def make_batch(a):
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
    input_ids = tokens[:, :-1].contiguous()
    targets = tokens[:, 1:].contiguous()
    if not a.key_padding_mask:
        return (input_ids, targets), ("input_ids", "targets")
    # Sample 0 unpadded, the others padded at the end (at least one real
    # token, so no query sees only masked keys).
    mask = torch.zeros(a.batch, a.seq, dtype=torch.bool)
    for b in range(1, a.batch):
        mask[b, int(torch.randint(1, a.seq, (1,), generator=g)):] = True
    return (input_ids, targets, mask), ("input_ids", "targets", "key_padding_mask")


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--seq", type=int, help="sequence length (= context size)")
    p.add_argument("--batch", type=int)
    p.add_argument("--attn", choices=["manual", "mha"], default="manual",
                   help="manual: nanoGPT attention; mha: nn.MultiheadAttention")
    p.add_argument("--gelu", choices=["erf", "tanh"], default="erf",
                   help="erf: nn.GELU(); tanh: nn.GELU(approximate='tanh')")
    t = p.add_mutually_exclusive_group()
    t.add_argument("--tied", dest="tied", action="store_true", default=True,
                   help="lm_head.weight = wte.weight")
    t.add_argument("--untied", dest="tied", action="store_false",
                   help="separate LM head weight")
    p.add_argument("--key-padding-mask", action="store_true",
                   help="a third input, bool key_padding_mask [batch, seq] (True = "
                        "padding), masks attention to those keys")
    p.add_argument("--pos", choices=["learned", "sinusoidal"], default="learned",
                   help="learned: the wpe embedding; sinusoidal: a fixed table in the "
                        "float buffer pos_enc")
    p.add_argument("--dropout", type=float, default=0.1,
                   help="dropout probability everywhere (0 keeps Dropout ops, ratio 0)")
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)

    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
