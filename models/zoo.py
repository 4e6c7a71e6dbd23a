#!/usr/bin/python3
"""Model zoo: classifiers written the way their communities write them -> ONNX (training mode).

Inputs:  x float32 [batch, ...] (images [batch, 3, H, W], audio features
         [batch, mels, frames]), targets int64 [batch]
Output:  loss float32 scalar (mean cross-entropy over --classes)

--arch picks the model:
  indexnet     torch.tril of an activation, torch.gather (GatherElements),
               torch.scatter / scatter_add (ScatterElements), x[idx] = v
               (ScatterND), torch.topk,
               torch.cumsum, ReLU6 and clamp (Clip) in a classifier
  cnn          Conv2d / ReLU / MaxPool2d / strided and grouped Conv2d /
               AvgPool2d(ceil_mode, count_include_pad=False) /
               AdaptiveAvgPool2d(1) / Linear (a torchvision-tutorial CNN)
  normcnn      Conv2d-BatchNorm2d-ReLU (training mode: batch statistics, the
               running mean and variance updated), GroupNorm, InstanceNorm2d,
               BatchNorm1d (momentum 0.2) before the head
  resnet18     torchvision's ResNet-18 (BatchNorm throughout) for --image 32
  mobilenetv2  torchvision's MobileNetV2 (inverted residuals, depthwise convs,
               ReLU6 as Clip, BatchNorm), dropout 0
  shufflenetv2 torchvision's ShuffleNetV2 x0.5 (channel shuffle as reshape and
               transpose, chunk, depthwise convs)
  lenet5       LeNet-5 (tanh, average pooling) for --image 32
  convmixer    ConvMixer as its paper writes it (patch conv, depthwise convs in
               residuals, GELU, BatchNorm)
  unet         a two-level U-Net (Conv-BN-ReLU, max-pool, ConvTranspose up,
               skip concatenation), its per-pixel logits averaged
  convnext     a ConvNeXt-style block: reflect padding, depthwise 7x7 conv,
               dilated conv, LayerNorm over channels, GELU
  convtranspose  an encoder-decoder front end: Conv2d down, ConvTranspose2d
               up (output_padding), zero and constant padding (F.pad)
  vit          a ViT: Conv2d patch embedding (kernel = stride = patch), class
               token, learned positions, pre-norm attention blocks
  whisper      a Whisper-style audio encoder: two Conv1d + GELU (the second
               strided), sinusoidal positions, pre-norm attention blocks
  gpt2         transformers' GPT-2 (Conv1D as addmm, gelu_new, the causal
               mask buffer and torch.where, tied head, learned positions)
  t5           a T5-style encoder-decoder LM: RMS layer norm, no biases,
               relative position bias buckets (log-spaced, bidirectional in
               the encoder, causal in the decoder), cross-attention
  moe          a Mixtral-style LM: attention, then 4 SwiGLU experts routed
               top-2 in DeepSpeed-MoE's fixed capacity (argmax, one_hot,
               cumsum, einsum dispatch and combine), plus 0.01 x the gate's
               load-balancing loss
  lstm, gru    a language model (PyTorch's word_language_model example): inputs
               input_ids and targets int64 [batch, seq], embedding, a 2-layer
               LSTM / GRU (batch_first), a Linear decoder
  birnn        a text classifier: a bidirectional GRU from a learned initial
               state, a ReLU RNN (time-major), mean over time
  embbag       the text-classification tutorial's EmbeddingBag model: inputs
               input_ids [batch, seq] (flattened: the batch's tokens),
               offsets [batch] (bag b's first token; test/e2e/make_data.py
               writes them per micro-batch), targets [batch]; sum, mean and
               max bags (exported as Loops)
Every architecture's last module is its Linear head, so the last 1-D
initializer is the head's bias (test/e2e/make_data.py reads the class count
from it).
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common as ec  # noqa: E402

ARCHS = ["gpt2", "t5", "moe", "indexnet", "mobilenetv2", "shufflenetv2", "unet", "convmixer", "lenet5", "lstm", "gru", "birnn", "embbag", "cnn", "normcnn", "resnet18", "convnext", "convtranspose", "vit", "whisper"]
PRESETS = {
    "tiny": dict(image=16, width=16, classes=10, batch=4, layers=2, heads=2, mels=8, frames=32,
                 vocab=64, seq=12),
}
KEYS = ["image", "width", "classes", "batch", "layers", "heads", "mels", "frames", "vocab",
        "seq"]


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        """Multi-head self-attention as nanoGPT / Whisper write it."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = self.qkv(x).split(D, dim=2)
            q = q.view(B, T, self.heads, D // self.heads).transpose(1, 2)
            k = k.view(B, T, self.heads, D // self.heads).transpose(1, 2)
            v = v.view(B, T, self.heads, D // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            y = att.softmax(dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(B, T, D))

    class WhisperAttention(nn.Module):
        """Whisper's MultiHeadAttention: separate projections, the key's without bias."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.query = nn.Linear(d, d)
            self.key = nn.Linear(d, d, bias=False)
            self.value = nn.Linear(d, d)
            self.out = nn.Linear(d, d)

        def forward(self, x):
            B, T, D = x.shape
            h = self.heads
            scale = (D // h) ** -0.25
            q = self.query(x).view(B, T, h, -1).permute(0, 2, 1, 3) * scale
            k = self.key(x).view(B, T, h, -1).permute(0, 2, 3, 1) * scale
            v = self.value(x).view(B, T, h, -1).permute(0, 2, 1, 3)
            w = (q @ k).float().softmax(dim=-1)
            return self.out((w @ v).permute(0, 2, 1, 3).flatten(start_dim=2))

    class Block(nn.Module):
        def __init__(self, d, heads, attention=None):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = (attention or Attention)(d, heads)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class CNN(nn.Module):
        def __init__(self, w, classes):
            super().__init__()
            self.conv1 = nn.Conv2d(3, w, 3, padding=1)
            self.pool1 = nn.MaxPool2d(2)
            self.conv2 = nn.Conv2d(w, 2 * w, 3, stride=2, padding=1, groups=2)
            self.pool2 = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)
            self.conv3 = nn.Conv2d(2 * w, 2 * w, 1, bias=False)
            self.pool3 = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Linear(2 * w, classes)

        def forward(self, x):
            x = self.pool1(F.relu(self.conv1(x)))
            x = self.pool2(F.relu(self.conv2(x)))
            x = self.pool3(F.relu(self.conv3(x)))
            return self.head(torch.flatten(self.gap(x), 1))

    class ConvNeXtBlock(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.dw = nn.Conv2d(w, w, 7, groups=w)  # padded by reflection below
            self.norm = nn.LayerNorm(w, eps=1e-6)
            self.pw1 = nn.Linear(w, 4 * w)
            self.pw2 = nn.Linear(4 * w, w)
            self.dil = nn.Conv2d(w, w, 3, padding=2, dilation=2)

        def forward(self, x):
            y = self.dw(F.pad(x, (3, 3, 3, 3), mode="reflect"))
            y = self.norm(y.permute(0, 2, 3, 1))
            y = self.pw2(F.gelu(self.pw1(y))).permute(0, 3, 1, 2)
            return x + self.dil(y)

    class ConvNeXt(nn.Module):
        def __init__(self, w, layers, classes):
            super().__init__()
            self.stem = nn.Conv2d(3, w, 2, stride=2)
            self.blocks = nn.Sequential(*[ConvNeXtBlock(w) for _ in range(layers)])
            self.head = nn.Linear(w, classes)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.head(x.mean(dim=(2, 3)))

    class ConvTransposeNet(nn.Module):
        def __init__(self, w, classes):
            super().__init__()
            self.down = nn.Conv2d(3, w, 3, stride=2, padding=1)
            self.up = nn.ConvTranspose2d(w, w // 2, 3, stride=2, padding=1, output_padding=1)
            self.up2 = nn.ConvTranspose2d(w // 2, w // 2, 4, stride=2, padding=1, groups=2)
            self.out = nn.Conv1d(w // 2, w, 3, padding=1)
            self.head = nn.Linear(w, classes)

        def forward(self, x):
            y = F.relu(self.down(F.pad(x, (1, 0, 0, 1))))
            y = F.relu(self.up(y))
            y = self.up2(F.pad(y, (1, 1, 0, 2), value=0.5))
            y = F.relu(self.out(y.flatten(2)))
            return self.head(F.max_pool1d(y, 4).mean(dim=2))

    class ViT(nn.Module):
        def __init__(self, image, w, layers, heads, classes, patch=4):
            super().__init__()
            n = (image // patch) ** 2
            self.patch = nn.Conv2d(3, w, patch, stride=patch)
            self.cls = nn.Parameter(torch.randn(1, 1, w) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, n + 1, w) * 0.02)
            self.blocks = nn.Sequential(*[Block(w, heads) for _ in range(layers)])
            self.ln = nn.LayerNorm(w)
            self.head = nn.Linear(w, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.ln(self.blocks(x))[:, 0])

    class Whisper(nn.Module):
        def __init__(self, mels, frames, w, layers, heads, classes):
            super().__init__()
            self.conv1 = nn.Conv1d(mels, w, 3, padding=1)
            self.conv2 = nn.Conv1d(w, w, 3, stride=2, padding=1)
            # Whisper's sinusoids(length, channels), a buffer.
            t = frames // 2
            inc = math.log(10000) / (w // 2 - 1)
            inv = torch.exp(-inc * torch.arange(w // 2))
            st = torch.arange(t)[:, None] * inv[None, :]
            self.register_buffer("positional_embedding", torch.cat([st.sin(), st.cos()], dim=1))
            self.blocks = nn.Sequential(*[Block(w, heads, WhisperAttention)
                                          for _ in range(layers)])
            self.ln_post = nn.LayerNorm(w)
            self.head = nn.Linear(w, classes)

        def forward(self, x):
            x = F.gelu(self.conv1(x))
            x = F.gelu(self.conv2(x)).permute(0, 2, 1)
            x = self.blocks(x + self.positional_embedding)
            return self.head(self.ln_post(x).mean(dim=1))

    class NormCNN(nn.Module):
        """Conv-BN-ReLU as torchvision writes it, GroupNorm and InstanceNorm,
        and a BatchNorm1d in the head."""

        def __init__(self, w, classes):
            super().__init__()
            self.conv1 = nn.Conv2d(3, w, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.conv2 = nn.Conv2d(w, 2 * w, 3, stride=2, padding=1, bias=False)
            self.gn = nn.GroupNorm(4, 2 * w)
            self.conv3 = nn.Conv2d(2 * w, 2 * w, 3, padding=1)
            self.inorm = nn.InstanceNorm2d(2 * w, affine=True)
            self.fc = nn.Linear(2 * w, w)
            self.bn2 = nn.BatchNorm1d(w, momentum=0.2)
            self.head = nn.Linear(w, classes)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.gn(self.conv2(x)))
            x = F.relu(self.inorm(self.conv3(x)))
            x = F.relu(self.bn2(self.fc(x.mean(dim=(2, 3)))))
            return self.head(x)

    class RecurrentLM(nn.Module):
        """An LSTM or GRU language model as the PyTorch word_language_model
        example writes it (embedding, a 2-layer recurrent stack, a decoder)."""

        def __init__(self, kind, vocab, w, layers):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, w)
            rnn = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = rnn(w, w, num_layers=layers, batch_first=True)
            self.decoder = nn.Linear(w, vocab)

        def forward(self, input_ids, targets):
            h, _ = self.rnn(self.embed_tokens(input_ids))
            logits = self.decoder(h)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    class BiRNNClassifier(nn.Module):
        """A text classifier: a bidirectional GRU with initial states from
        a learned vector, then a ReLU RNN over time-major input, mean-pooled."""

        def __init__(self, vocab, w, classes):
            super().__init__()
            self.embed = nn.Embedding(vocab, w)
            self.h0 = nn.Parameter(torch.zeros(2, 1, w))
            self.gru = nn.GRU(w, w, bidirectional=True, batch_first=True)
            self.rnn = nn.RNN(2 * w, w, nonlinearity="relu")
            self.head = nn.Linear(w, classes)

        def forward(self, input_ids, targets):
            x = self.embed(input_ids)
            h, _ = self.gru(x, self.h0.expand(-1, x.shape[0], -1).contiguous())
            y, _ = self.rnn(h.transpose(0, 1))
            return F.cross_entropy(self.head(y.mean(dim=0)), targets)

    class BagClassifier(nn.Module):
        """The PyTorch text-classification tutorial's model: nn.EmbeddingBag
        over the batch's tokens with offsets (here a max and a mean bag
        too), a Linear head."""

        def __init__(self, vocab, w, classes):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab, w, mode="sum")
            self.mean_bag = nn.EmbeddingBag(vocab, w, mode="mean")
            self.max_bag = nn.EmbeddingBag(vocab, w, mode="max")
            self.head = nn.Linear(3 * w, classes)

        def forward(self, input_ids, offsets, targets):
            flat = input_ids.flatten()
            x = torch.cat([self.embedding(flat, offsets), self.mean_bag(flat, offsets),
                           self.max_bag(flat, offsets)], dim=1)
            return F.cross_entropy(self.head(x), targets)

    class Conv1D(nn.Module):
        """transformers' GPT-2 Conv1D: a Linear with the weight transposed, as addmm."""

        def __init__(self, nf, nx):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
            self.bias = nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            size_out = x.size()[:-1] + (self.weight.size(-1),)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                           (x + 0.044715 * torch.pow(x, 3.0))))

    class GPT2Block(nn.Module):
        """transformers' GPT2Block (modeling_gpt2.py, eager attention)."""

        def __init__(self, d, heads, seq):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = Conv1D(3 * d, d)
            self.c_proj = Conv1D(d, d)
            self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool))
                                 .view(1, 1, seq, seq), persistent=False)
            self.ln_2 = nn.LayerNorm(d)
            self.c_fc = Conv1D(4 * d, d)
            self.mlp_proj = Conv1D(d, 4 * d)

        def split(self, t):
            B, T, D = t.shape
            return t.view(B, T, self.heads, D // self.heads).permute(0, 2, 1, 3)

        def forward(self, x):
            h = self.ln_1(x)
            q, k, v = self.c_attn(h).split(x.size(-1), dim=2)
            q, k, v = self.split(q), self.split(k), self.split(v)
            w = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
            T = q.size(-2)
            mask = self.bias[:, :, :T, :T]
            w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
            a = torch.matmul(w.softmax(dim=-1), v)
            a = a.permute(0, 2, 1, 3).contiguous().view(x.shape)
            x = x + self.c_proj(a)
            return x + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x))))

    class GPT2LM(nn.Module):
        def __init__(self, vocab, d, layers, heads, seq):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(seq, d)
            self.h = nn.ModuleList([GPT2Block(d, heads, seq) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as GPT-2

        def forward(self, input_ids, targets):
            pos = torch.arange(input_ids.size(1)).unsqueeze(0)
            x = self.wte(input_ids) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    class T5LayerNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.variance_epsilon = eps

        def forward(self, x):
            variance = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    class T5Attention(nn.Module):
        """transformers' T5Attention: no biases, no score scaling, a learned
        relative position bias (log-spaced buckets) in the first layer."""

        def __init__(self, d, heads, bidirectional, has_bias, buckets=8, max_distance=16):
            super().__init__()
            self.heads, self.bidirectional = heads, bidirectional
            self.buckets, self.max_distance = buckets, max_distance
            self.q = nn.Linear(d, d, bias=False)
            self.k = nn.Linear(d, d, bias=False)
            self.v = nn.Linear(d, d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            if has_bias:
                self.relative_attention_bias = nn.Embedding(buckets, heads)

        @staticmethod
        def bucket(rel, bidirectional, num_buckets, max_distance):
            ret = 0
            if bidirectional:
                num_buckets //= 2
                ret += (rel > 0).to(torch.long) * num_buckets
                rel = torch.abs(rel)
            else:
                rel = -torch.min(rel, torch.zeros_like(rel))
            max_exact = num_buckets // 2
            is_small = rel < max_exact
            large = max_exact + (torch.log(rel.float() / max_exact) /
                                 math.log(max_distance / max_exact) *
                                 (num_buckets - max_exact)).to(torch.long)
            large = torch.min(large, torch.full_like(large, num_buckets - 1))
            return ret + torch.where(is_small, rel, large)

        def position_bias(self, q_len, k_len):
            ctx = torch.arange(q_len, dtype=torch.long)[:, None]
            mem = torch.arange(k_len, dtype=torch.long)[None, :]
            b = self.bucket(mem - ctx, self.bidirectional, self.buckets, self.max_distance)
            return self.relative_attention_bias(b).permute(2, 0, 1).unsqueeze(0)

        def forward(self, x, kv=None, bias=None, mask=None):
            B, T, D = x.shape
            kv = x if kv is None else kv
            sh = lambda t: t.view(B, -1, self.heads, D // self.heads).transpose(1, 2)
            q, k, v = sh(self.q(x)), sh(self.k(kv)), sh(self.v(kv))
            scores = torch.matmul(q, k.transpose(3, 2))
            if bias is None:
                if hasattr(self, "relative_attention_bias"):
                    bias = self.position_bias(T, k.shape[2])
                else:  # cross-attention: no position bias, as T5
                    bias = torch.zeros(1, self.heads, T, k.shape[2])
                if mask is not None:
                    bias = bias + mask
            a = torch.matmul((scores + bias).softmax(dim=-1), v)
            return self.o(a.transpose(1, 2).reshape(B, T, D)), bias

    class T5Block(nn.Module):
        def __init__(self, d, heads, decoder, first):
            super().__init__()
            self.ln1 = T5LayerNorm(d)
            self.attn = T5Attention(d, heads, not decoder, first)
            self.decoder = decoder
            if decoder:
                self.ln_x = T5LayerNorm(d)
                self.cross = T5Attention(d, heads, True, False)
            self.ln2 = T5LayerNorm(d)
            self.wi = nn.Linear(d, 4 * d, bias=False)
            self.wo = nn.Linear(4 * d, d, bias=False)

        def forward(self, x, bias, mask=None, enc=None, cross_bias=None):
            h, bias = self.attn(self.ln1(x), bias=bias, mask=mask)
            x = x + h
            if self.decoder:
                h, cross_bias = self.cross(self.ln_x(x), kv=enc, bias=cross_bias)
                x = x + h
            return x + self.wo(F.relu(self.wi(self.ln2(x)))), bias, cross_bias

    class T5(nn.Module):
        """A T5-style encoder-decoder LM: the decoder reads the input shifted
        right and predicts the targets."""

        def __init__(self, vocab, d, layers, heads, seq):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, d)  # T5's "shared"
            self.encoder = nn.ModuleList([T5Block(d, heads, False, i == 0) for i in range(layers)])
            self.enc_norm = T5LayerNorm(d)
            self.decoder = nn.ModuleList([T5Block(d, heads, True, i == 0) for i in range(layers)])
            self.dec_norm = T5LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            causal = torch.triu(torch.full((seq, seq), torch.finfo(torch.float32).min), 1)
            self.register_buffer("causal", causal[None, None], persistent=False)

        def forward(self, input_ids, targets):
            x, bias = self.embed_tokens(input_ids), None
            for blk in self.encoder:
                x, bias, _ = blk(x, bias)
            enc = self.enc_norm(x)
            start = torch.zeros_like(input_ids[:, :1])
            y, bias, cross = self.embed_tokens(torch.cat([start, input_ids[:, :-1]], 1)), None, None
            for blk in self.decoder:
                y, bias, cross = blk(y, bias, mask=self.causal, enc=enc, cross_bias=cross)
            logits = self.lm_head(self.dec_norm(y) * (y.shape[-1] ** -0.5))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    class Top2MoE(nn.Module):
        """A Mixtral-style mixture of SwiGLU experts routed in GShard /
        DeepSpeed-MoE's fixed-capacity form (deepspeed/moe/sharded_moe.py
        top2gating, without the gate noise): top-2 by two argmaxes, each
        expert's slots by a cumsum of its one-hot mask, tokens past the
        capacity dropped, dispatch and combine as einsums; masks in float,
        where DeepSpeed keeps int64."""

        def __init__(self, d, experts, ffn, capacity_factor=1.0, min_capacity=4):
            super().__init__()
            self.experts, self.cf, self.min_capacity = experts, capacity_factor, min_capacity
            self.gate = nn.Linear(d, experts, bias=False)
            self.w1 = nn.Parameter(torch.randn(experts, d, ffn) * 0.02)
            self.w3 = nn.Parameter(torch.randn(experts, d, ffn) * 0.02)
            self.w2 = nn.Parameter(torch.randn(experts, ffn, d) * 0.02)

        def forward(self, x):
            B, T, D = x.shape
            S, E = B * T, self.experts
            tokens = x.reshape(S, D)
            logits = self.gate(tokens)
            gates = F.softmax(logits, dim=1)
            cap = max(math.ceil(S / E * self.cf * 2), self.min_capacity)
            mask1 = F.one_hot(torch.argmax(gates, dim=1), E).float()
            logits2 = logits.masked_fill(mask1 > 0, float("-inf"))
            mask2 = F.one_hot(torch.argmax(logits2, dim=1), E).float()
            loc1 = torch.cumsum(mask1, dim=0) - 1
            loc2 = torch.cumsum(mask2, dim=0) - 1 + torch.sum(mask1, dim=0, keepdim=True)
            l_aux = torch.mean(gates.mean(dim=0) * mask1.mean(dim=0)) * E * E
            mask1 = mask1 * (loc1 < cap).float()
            mask2 = mask2 * (loc2 < cap).float()
            loc1_s = torch.sum(loc1 * mask1, dim=1)
            loc2_s = torch.sum(loc2 * mask2, dim=1)
            g1 = torch.einsum("se,se->s", gates, mask1)
            g2 = torch.einsum("se,se->s", gates, mask2)
            denom = torch.clamp(g1 + g2, min=torch.finfo(gates.dtype).eps)
            g1, g2 = g1 / denom, g2 / denom
            slots = torch.arange(cap, dtype=gates.dtype)
            loc1_sc = (loc1_s[:, None] == slots[None, :]).float()
            loc2_sc = (loc2_s[:, None] == slots[None, :]).float()
            combine = (torch.einsum("s,se,sc->sec", g1, mask1, loc1_sc) +
                       torch.einsum("s,se,sc->sec", g2, mask2, loc2_sc))
            dispatch = (combine > 0).float()
            xe = torch.einsum("sec,sm->ecm", dispatch, tokens)
            h = F.silu(torch.einsum("ecm,emf->ecf", xe, self.w1)) * \
                torch.einsum("ecm,emf->ecf", xe, self.w3)
            ye = torch.einsum("ecf,efm->ecm", h, self.w2)
            return torch.einsum("sec,ecm->sm", combine, ye).reshape(B, T, D), l_aux

    class MoELM(nn.Module):
        def __init__(self, vocab, d, layers, heads, experts):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, d)
            self.ln1 = nn.ModuleList([nn.LayerNorm(d) for _ in range(layers)])
            self.attn = nn.ModuleList([Attention(d, heads) for _ in range(layers)])
            self.ln2 = nn.ModuleList([nn.LayerNorm(d) for _ in range(layers)])
            self.moe = nn.ModuleList([Top2MoE(d, experts, 2 * d) for _ in range(layers)])
            self.norm = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, input_ids, targets):
            x = self.embed_tokens(input_ids)
            aux = 0.0
            for ln1, attn, ln2, moe in zip(self.ln1, self.attn, self.ln2, self.moe):
                x = x + attn(ln1(x))
                y, l_aux = moe(ln2(x))
                x, aux = x + y, aux + l_aux
            logits = self.lm_head(self.norm(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)) + 0.01 * aux

    class IndexNet(nn.Module):
        """A classifier over the ops of masking and routing: torch.tril of
        an activation, torch.gather, torch.scatter and scatter_add, row
        assignment, torch.topk
        (a top-2 logit margin), torch.cumsum, ReLU6 and clamp."""

        def __init__(self, d, classes):
            super().__init__()
            self.inp = nn.Linear(3 * d * d // d, d)  # the flattened 3 x d image row
            self.mix = nn.Linear(d, d * d)
            self.head = nn.Linear(d, classes)
            self.d = d

        def forward(self, x):
            B = x.shape[0]
            h = F.relu6(self.inp(x.mean(dim=2).reshape(B, -1)))
            m = torch.tril(self.mix(h).view(B, self.d, self.d))
            order = torch.argsort(h.detach(), dim=1)  # a permutation per row
            picked = torch.gather(m, 2, order[:, None, :].expand(B, self.d, self.d))
            feat = torch.cumsum(picked.mean(dim=1), dim=1) / self.d
            # The 4 smallest features written back at their rank's place,
            # and every feature added at its rank (torch.scatter, scatter_add).
            feat = feat + torch.zeros_like(feat).scatter(1, order[:, :4], feat[:, :4]) + \
                torch.zeros_like(feat).scatter_add(1, order, feat) * 0.5
            # Two rows overwritten at data-chosen samples (x[idx] = v).
            rows = torch.argsort(h.detach()[:, 0])[:2]  # two distinct samples
            feat = feat.clone()
            feat[rows] = feat[:2] * 0.5
            top, _ = torch.topk(feat, 2, dim=1)
            return self.head(torch.clamp(feat, -2.0, 2.0)) + (top[:, :1] - top[:, 1:])

    class UNet(nn.Module):
        """A two-level U-Net (Conv-BN-ReLU pairs, max-pool down, ConvTranspose
        up, skip concatenation) with a per-pixel head averaged to classes."""

        def __init__(self, w, classes):
            super().__init__()

            def pair(i, o):
                return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),
                                     nn.ReLU(inplace=True), nn.Conv2d(o, o, 3, padding=1,
                                                                      bias=False),
                                     nn.BatchNorm2d(o), nn.ReLU(inplace=True))
            self.down1, self.down2 = pair(3, w), pair(w, 2 * w)
            self.pool = nn.MaxPool2d(2)
            self.up = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
            self.dec = pair(2 * w, w)
            self.head = nn.Conv2d(w, classes, 1)

        def forward(self, x):
            a = self.down1(x)
            b = self.down2(self.pool(a))
            y = self.dec(torch.cat([a, self.up(b)], dim=1))
            return self.head(y).mean(dim=(2, 3))

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    def ConvMixer(dim, depth, classes, kernel_size=5, patch_size=2):
        """ConvMixer as its paper writes it ("Patches Are All You Need?")."""
        return nn.Sequential(
            nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size), nn.GELU(),
            nn.BatchNorm2d(dim),
            *[nn.Sequential(
                # padding="same" as the paper writes it does not export
                # (torch 1.13); for the odd kernel it is kernel // 2.
                Residual(nn.Sequential(nn.Conv2d(dim, dim, kernel_size, groups=dim,
                                                 padding=kernel_size // 2),
                                       nn.GELU(), nn.BatchNorm2d(dim))),
                nn.Conv2d(dim, dim, kernel_size=1), nn.GELU(), nn.BatchNorm2d(dim))
              for _ in range(depth)],
            nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(dim, classes))

    class LeNet5(nn.Module):
        """LeCun et al.'s LeNet-5 as the classic tutorials write it (tanh,
        average pooling) for 3 x 32 x 32 images."""

        def __init__(self, classes):
            super().__init__()
            self.c1 = nn.Conv2d(3, 6, 5)
            self.c3 = nn.Conv2d(6, 16, 5)
            self.f5 = nn.Linear(16 * 5 * 5, 120)
            self.f6 = nn.Linear(120, 84)
            self.head = nn.Linear(84, classes)

        def forward(self, x):
            x = F.avg_pool2d(torch.tanh(self.c1(x)), 2)
            x = F.avg_pool2d(torch.tanh(self.c3(x)), 2)
            x = torch.tanh(self.f5(x.flatten(1)))
            return self.head(torch.tanh(self.f6(x)))

    class Classifier(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, targets):
            return F.cross_entropy(self.net(x), targets)

    w, c = a.width, a.classes
    if a.arch in ("lstm", "gru"):
        return RecurrentLM(a.arch, a.vocab, w, a.layers)
    if a.arch == "birnn":
        return BiRNNClassifier(a.vocab, w, c)
    if a.arch == "embbag":
        return BagClassifier(a.vocab, w, c)
    if a.arch == "moe":
        return MoELM(a.vocab, w, a.layers, a.heads, experts=4)
    if a.arch == "gpt2":
        return GPT2LM(a.vocab, w, a.layers, a.heads, a.seq)
    if a.arch == "t5":
        return T5(a.vocab, w, a.layers, a.heads, a.seq)
    net = {
        "cnn": lambda: CNN(w, c),
        "indexnet": lambda: IndexNet(w, c),
        "normcnn": lambda: NormCNN(w, c),
        "resnet18": lambda: __import__("torchvision").models.resnet18(num_classes=c),
        "mobilenetv2": lambda: __import__("torchvision").models.mobilenet_v2(
            num_classes=c, dropout=0.0),
        "shufflenetv2": lambda: __import__("torchvision").models.shufflenet_v2_x0_5(
            num_classes=c),
        "unet": lambda: UNet(w, c),
        "convmixer": lambda: ConvMixer(w, a.layers, c),
        "lenet5": lambda: LeNet5(c),
        "convnext": lambda: ConvNeXt(w, a.layers, c),
        "convtranspose": lambda: ConvTransposeNet(w, c),
        "vit": lambda: ViT(a.image, w, a.layers, a.heads, c),
        "whisper": lambda: Whisper(a.mels, a.frames, w, a.layers, a.heads, c),
    }[a.arch]()
    return Classifier(net)


TEXT = ("lstm", "gru", "birnn", "embbag", "gpt2", "t5", "moe")


def input_shape(a):
    if a.arch == "whisper":
        return [a.mels, a.frames]
    return [3, a.image, a.image]


def make_batch(a):
    import torch
    g = torch.Generator().manual_seed(a.seed + 1)
    if a.arch in TEXT:
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        if a.arch == "birnn":
            return (ids, torch.randint(0, a.classes, (a.batch,), generator=g)), \
                ("input_ids", "targets")
        if a.arch == "embbag":
            # Bag b starts at b * seq + a random shift (bag 0 at 0), so bags
            # have different lengths and cross the rows.
            shift = torch.randint(0, a.seq, (a.batch,), generator=g)
            shift[0] = 0
            offsets = torch.arange(a.batch) * a.seq + shift
            return (ids, offsets, torch.randint(0, a.classes, (a.batch,), generator=g)), \
                ("input_ids", "offsets", "targets")
        return (ids, torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)), \
            ("input_ids", "targets")
    x = torch.randn([a.batch] + input_shape(a), generator=g)
    targets = torch.randint(0, a.classes, (a.batch,), generator=g)
    return (x, targets), ("x", "targets")


def main(argv=None):
    p = ec.make_parser(__doc__.splitlines()[0], PRESETS)
    p.add_argument("--arch", choices=ARCHS, default="cnn")
    p.add_argument("--image", type=int, help="image side (images are 3 x image x image)")
    p.add_argument("--width", type=int, help="channels / model width")
    p.add_argument("--classes", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--layers", type=int, help="blocks (convnext, vit, whisper)")
    p.add_argument("--heads", type=int, help="attention heads (vit, whisper)")
    p.add_argument("--mels", type=int, help="audio feature channels (whisper)")
    p.add_argument("--frames", type=int, help="audio frames (whisper)")
    p.add_argument("--vocab", type=int, help="vocabulary (lstm, gru, birnn)")
    p.add_argument("--seq", type=int, help="tokens per sample (lstm, gru, birnn)")
    a = ec.resolve(p.parse_args(argv), PRESETS, KEYS)
    ec.build_and_export(a, build_model, make_batch)


if __name__ == "__main__":
    main()
