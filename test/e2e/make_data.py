#!/usr/bin/python3
"""Writes a folder of random .npy inputs for an exported model (parity tests).

    /usr/bin/python3 test/e2e/make_data.py --onnx m.onnx --samples 64 -o DATA

One DATA/<input>.npy per graph input, named, typed and shaped from the ONNX
graph (dim 0 = --samples). The model kind follows from the input names:

* MLP  (x, targets): x float32 N(0, 1); targets int64 in [0, classes), with
  classes = the length of the last Linear's bias.
* GPT, LLaMA (input_ids, targets): a random token row of seq+1 ids in
  [0, vocab), input_ids = row[:-1] and targets = row[1:] (vocab = rows of
  wte or embed_tokens). With a bool key_padding_mask (gpt.py
  --key-padding-mask), about half the rows end in padding (True), after at
  least one real token.
* classifier (input_ids [N, seq], targets [N]): ids uniform in [0, vocab)
  (rows of embed), targets in [0, classes) (the length of head.bias).
* BERT (input_ids, token_type_ids, attention_mask, labels): about half the
  rows end in padding (attention_mask 0, input_ids 0, token type 0);
  token_type_ids 0 then 1 from a random split of the real tokens; ~15% of
  the real tokens (at least one per row) carry their id as the label and
  are replaced by the [MASK] id (vocab - 1) in input_ids; other labels -100.
* otherwise: floats N(0, 1), integers 0/1.

Same flags give identical files (numpy Generator seeded with --seed).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, metavar="MODEL.onnx")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("-o", "--output", required=True, metavar="DIR")
    a = ap.parse_args(argv)

    import numpy as np
    from reference_train import onnx_graph_info

    inputs, inits = onnx_graph_info(a.onnx)
    N = a.samples
    rng = np.random.default_rng(a.seed)
    names = sorted(n for n, _, _ in inputs)
    spec = {n: (dt, [N] + [d if d is not None else 1 for d in dims[1:]])
            for n, dt, dims in inputs}
    for n, (dt, shape) in spec.items():
        if any(d is None for d in shape):
            sys.exit("make_data: input %s has a symbolic non-batch dimension" % n)
    out = {}

    def init_shape(*suffixes):
        hits = [v.shape for k, v in inits.items() if k.endswith(suffixes)]
        if not hits:
            sys.exit("make_data: no initializer *%s in %s" % (" or *".join(suffixes), a.onnx))
        return hits[0]

    if names == ["targets", "x"]:
        biases = [k for k, v in inits.items() if v.ndim == 1]
        classes = inits[biases[-1]].shape[0]
        out["x"] = rng.standard_normal(spec["x"][1], dtype=np.float32)
        out["targets"] = rng.integers(0, classes, spec["targets"][1], dtype=np.int64)
        kind = "mlp (%d classes)" % classes
    elif names == ["input_ids", "offsets", "targets"]:
        # nn.EmbeddingBag's offsets into the micro-batch's flattened tokens:
        # the row k = s % B of a micro-batch of B starts its bag at k * L +
        # a shift (0 for k = 0), so offsets increase within a micro-batch.
        vocab = init_shape("embedding.weight")[0]
        classes = init_shape("head.bias")[0]
        B, L = [d for d in spec["input_ids"][1]][0], spec["input_ids"][1][1]
        mb = [d for _, _, dims in inputs for d in dims[:1] if d is not None][0]
        out["input_ids"] = rng.integers(0, vocab, spec["input_ids"][1], dtype=np.int64)
        k = np.arange(B) % mb
        shift = rng.integers(0, L, B)
        shift[k == 0] = 0
        out["offsets"] = (k * L + shift).astype(np.int64)
        out["targets"] = rng.integers(0, classes, spec["targets"][1], dtype=np.int64)
        kind = "EmbeddingBag classifier (vocab %d, %d classes, micro-batch %d)" % (vocab, classes, mb)
    elif names == ["input_ids", "targets"] and len(spec["targets"][1]) == 1:
        vocab = init_shape("embed.weight")[0]
        classes = init_shape("head.bias")[0]
        out["input_ids"] = rng.integers(0, vocab, spec["input_ids"][1], dtype=np.int64)
        out["targets"] = rng.integers(0, classes, spec["targets"][1], dtype=np.int64)
        kind = "classifier (vocab %d, %d classes)" % (vocab, classes)
    elif names in (["input_ids", "targets"], ["input_ids", "key_padding_mask", "targets"]):
        vocab = init_shape("wte.weight", "embed_tokens.weight")[0]
        B, T = spec["input_ids"][1]
        rows = rng.integers(0, vocab, (B, T + 1), dtype=np.int64)
        out["input_ids"] = np.ascontiguousarray(rows[:, :-1])
        out["targets"] = np.ascontiguousarray(rows[:, 1:])
        kind = "gpt (vocab %d)" % vocab
        if "key_padding_mask" in names:
            mask = np.zeros((B, T), bool)
            for b in range(B):
                if rng.random() < 0.5 and T > 1:
                    mask[b, int(rng.integers(1, T)):] = True
            out["key_padding_mask"] = mask
            kind += " with a key padding mask"
    elif names == ["attention_mask", "input_ids", "labels", "token_type_ids"]:
        vocab = init_shape("word_embeddings.weight")[0]
        types = init_shape("token_type_embeddings.weight")[0]
        B, T = spec["input_ids"][1]
        mask_id = vocab - 1
        ids = rng.integers(2, max(3, vocab - 1), (B, T), dtype=np.int64)
        tt = np.zeros((B, T), np.int64)
        am = np.ones((B, T), np.int64)
        labels = np.full((B, T), -100, np.int64)
        for b in range(B):
            n = T
            if rng.random() < 0.5 and T > 2:
                n = int(rng.integers(T // 2, T))  # real tokens, >= 1 pad
            am[b, n:] = 0
            ids[b, n:] = 0
            if types > 1 and n > 1:
                tt[b, int(rng.integers(1, n)):n] = 1
            k = max(1, int(round(0.15 * n)))
            pos = rng.permutation(n)[:k]
            labels[b, pos] = ids[b, pos]
            ids[b, pos] = mask_id
        out.update(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=labels)
        kind = "bert (vocab %d)" % vocab
    else:
        for n, (dt, shape) in spec.items():
            if np.dtype(dt).kind == "f":
                out[n] = rng.standard_normal(shape).astype(dt)
            else:
                out[n] = rng.integers(0, 2, shape).astype(dt)
        kind = "generic"

    os.makedirs(a.output, exist_ok=True)
    for n, (dt, shape) in spec.items():
        arr = out[n].astype(dt)
        assert list(arr.shape) == shape, (n, arr.shape, shape)
        np.save(os.path.join(a.output, n + ".npy"), arr)
    print("make_data: %s: %d samples of %s -> %s" % (
        kind, N, ", ".join("%s %s%s" % (n, spec[n][0], spec[n][1][1:])
                           for n, _, _ in inputs), a.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
