#!/usr/bin/python3
"""LLaMA-style decoder LM + next-token cross-entropy -> ONNX (training mode).

Inputs:  input_ids int64 [batch, seq], targets int64 [batch, seq]
Output:  loss float32 scalar (mean cross-entropy over all batch*seq tokens)

Architecture (HF LlamaForCausalLM, written out as transformers writes it):
token embedding, pre-RMSNorm blocks (x + attn(input_layernorm(x));
x + mlp(post_attention_layernorm(x))), causal self-attention with separate
q/k/v projections and rotary position embeddings (rotate_half: the two
halves of each head's dimensions, cos/sin tables broadcast over heads),
SwiGLU MLP down(silu(gate(x)) * up(x)), final RMSNorm, untied LM head. No
Linear has a bias. With ``--kv-heads`` below ``--heads``, grouped-query
attention (LLaMA-2 70B, LLaMA 3): k and v have fewer heads, each repeated
for its group of query heads (transformers' repeat_kv: expand + reshape). The rotary tables are persistent float buffers
``rotary_emb.cos_cached`` / ``sin_cached`` [seq, head_dim] (initializers
that never train); the causal mask is the bool buffer ``causal_mask``
[1, 1, seq, seq] (True = may attend), filled with finfo(float32).min.

All reshapes use the static config sizes (batch as -1), so a static export
contains no Shape/Gather/Concat shape arithmetic. The sizes are module
constants (``__constants__``) rather than Python closures, so the module also
compiles with torch.jit.script (``--format torchscript --jit script``).
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

PRESETS = {
    "tiny": dict(layers=2, d_model=32, heads=2, intermediate=64, vocab=96, seq=16,
                 batch=2),
    "llama2-7b": dict(layers=32, d_model=4096, heads=32, intermediate=11008,
                      vocab=32000, seq=4096, batch=1),
    # Grouped-query attention, 8 key/value heads; --no-weights (280 GB of
    # float32 weights).
    "llama2-70b": dict(layers=80, d_model=8192, heads=64, kv_heads=8, intermediate=28672,
                       vocab=32000, seq=4096, batch=1),
}
KEYS = ["layers", "d_model", "heads", "kv_heads", "intermediate", "vocab", "seq", "batch"]


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, H, T = a.d_model, a.heads, a.seq
    assert d % H == 0, "--d-model must be divisible by --heads"
    hd = d // H
    KV = a.kv_heads or H
    assert H % KV == 0, "--heads must be divisible by --kv-heads"
    assert hd % 2 == 0, "the head size (--d-model / --heads) must be even for rotary"

    class RMSNorm(nn.Module):
        """transformers' LlamaRMSNorm."""

        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.variance_epsilon = a.rms_eps

        def forward(self, x):
            variance = x.pow(2).mean(-1, keepdim=True)
            x = x * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * x

    class RotaryEmbedding(nn.Module):
        """cos/sin of position x inverse frequency, each frequency twice
        (transformers' layout: emb = cat(freqs, freqs))."""
        __constants__ = ["T", "rope_forward"]

        def __init__(self):
            super().__init__()
            self.T, self.rope_forward = T, a.rope_forward
            inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
            if a.rope_forward:
                # Older transformers (LlamaRotaryEmbedding before 4.38): the
                # inverse frequencies are the buffer, the tables are
                # computed in forward with einsum.
                self.register_buffer("inv_freq", inv_freq)
                return
            t = torch.arange(T, dtype=torch.float32)
            freqs = torch.outer(t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)  # [T, hd]
            self.register_buffer("cos_cached", emb.cos())
            self.register_buffer("sin_cached", emb.sin())

        def forward(self):
            if self.rope_forward:  # a constant: TorchScript compiles one branch
                t = torch.arange(self.T, dtype=self.inv_freq.dtype)
                freqs = torch.einsum("i,j->ij", [t, self.inv_freq])
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()
            return self.cos_cached, self.sin_cached

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def repeat_kv(x, KV: int, H: int, T: int, hd: int):
        """[B, KV, T, hd] -> [B, H, T, hd], each kv head for H / KV query heads."""
        if KV == H:
            return x
        x = x[:, :, None, :, :].expand(-1, KV, H // KV, T, hd)
        return x.reshape(-1, H, T, hd)

    class Attention(nn.Module):
        __constants__ = ["d", "H", "KV", "T", "hd", "mask_min"]

        def __init__(self):
            super().__init__()
            self.d, self.H, self.KV, self.T, self.hd = d, H, KV, T, hd
            self.mask_min = torch.finfo(torch.float32).min
            self.q_proj = nn.Linear(d, d, bias=False)
            self.k_proj = nn.Linear(d, KV * hd, bias=False)
            self.v_proj = nn.Linear(d, KV * hd, bias=False)
            self.o_proj = nn.Linear(d, d, bias=False)
            self.attention_dropout = a.dropout

        def forward(self, x, cos, sin, causal_mask):
            T, H, KV, hd = self.T, self.H, self.KV, self.hd
            q = self.q_proj(x).view(-1, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
            k = self.k_proj(x).view(-1, T, KV, hd).transpose(1, 2)
            v = self.v_proj(x).view(-1, T, KV, hd).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            k, v = repeat_kv(k, KV, H, T, hd), repeat_kv(v, KV, H, T, hd)
            att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
            att = att.masked_fill(~causal_mask, self.mask_min)
            att = F.softmax(att, dim=-1)
            att = F.dropout(att, p=self.attention_dropout, training=self.training)
            y = torch.matmul(att, v)  # [B, H, T, hd]
            y = y.transpose(1, 2).contiguous().reshape(-1, T, self.d)
            return self.o_proj(y)

    class MLP(nn.Module):
        """SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x))."""

        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(d, a.intermediate, bias=False)
            self.up_proj = nn.Linear(d, a.intermediate, bias=False)
            self.down_proj = nn.Linear(a.intermediate, d, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = Attention()
            self.mlp = MLP()
            self.input_layernorm = RMSNorm()
            self.post_attention_layernorm = RMSNorm()

        def forward(self, x, cos, sin, causal_mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, causal_mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(a.vocab, d)
            self.layers = nn.ModuleList([DecoderLayer() for _ in range(a.layers)])
            self.norm = RMSNorm()
            self.rotary_emb = RotaryEmbedding()
            # True = may attend. Persistent -> exported as a bool initializer.
            self.register_buffer(
                "causal_mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

        def forward(self, input_ids):
            x = self.embed_tokens(input_ids)
            cos, sin = self.rotary_emb()
            for layer in self.layers:
                x = layer(x, cos, sin, self.causal_mask)
            return self.norm(x)

    class LlamaForCausalLM(nn.Module):
        __constants__ = ["vocab"]

        def __init__(self):
            super().__init__()
            self.vocab = a.vocab
            self.model = LlamaModel()
            self.lm_head = nn.Linear(d, a.vocab, bias=False)  # untied
            self.apply(self._init_weights)

        @staticmethod
        def _init_weights(m):
            # transformers' LlamaPreTrainedModel: N(0, initializer_range = 0.02).
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, input_ids, targets):
            logits = self.lm_head(self.model(input_ids))  # [B, T, V]
            return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))

    return LlamaForCausalLM()


def make_batch(a):
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
    input_ids = tokens[:, :-1].contiguous()
    targets = tokens[:, 1:].contiguous()
    return (input_ids, targets), ("input_ids", "targets")


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int,
                   help="key/value heads (grouped-query attention; default: --heads)")
    p.add_argument("--intermediate", type=int, help="SwiGLU width (gate/up outputs)")
    p.add_argument("--vocab", type=int)
    p.add_argument("--seq", type=int, help="sequence length (= context size)")
    p.add_argument("--batch", type=int)
    p.add_argument("--rope-theta", type=float, default=10000.0,
                   help="rotary base (LLaMA 1/2: 10000)")
    p.add_argument("--rms-eps", type=float, default=1e-6, help="RMSNorm epsilon")
    p.add_argument("--rope-forward", action="store_true",
                   help="compute the rotary tables in forward from the inv_freq buffer with "
                        "einsum (transformers before 4.38) instead of storing them")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="attention dropout (transformers' attention_dropout; LLaMA "
                        "trains with 0)")
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)

    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
