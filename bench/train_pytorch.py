#!/usr/bin/python3
"""PyTorch eager baseline: trains models/gpt.py's GPT in float32 with AdamW.

    /usr/bin/python3 bench/train_pytorch.py --data train.bin --threads 2 \\
        --steps 10 --warmup-steps 2 -- --size gpt2-small --seq 256 --batch 1 --vocab 256

Flags after ``--`` (and any flag this script does not know) go to
models/gpt.py's parser, so the model is exactly the one that script exports
with the same flags (presets, --layers --d-model --heads --vocab --attn
--gelu --tied/--untied --dropout ...). ``--batch`` and ``--seq`` here are
shorthands that are passed on to it. Example shapes: ``--size gpt2-small``
(12 x 768, 124M params with vocab 50257) and ``--layers 6 --d-model 384
--heads 6``.

Data: a flat uint16 token file (models/make_tokens.py); row r of the run
starts at p = (r mod R) * seq with R = (len - 1) // seq, input_ids =
tok[p:p+seq], targets = tok[p+1:p+seq+1] -- the order dsrt uses. Without
--data, uniform random tokens are used.

Each step: zero grads, forward (the model returns the loss), backward,
optional clip_grad_norm_, AdamW step. --warmup-steps steps run first and
are not timed. Prints one JSON object on stdout:

    {"tokens_per_s", "step_time_s" (mean of the timed steps),
     "step_time_median_s", "peak_rss_mib" (getrusage ru_maxrss of this
     process, including torch itself), "params", "threads", "batch", "seq",
     "steps", "loss_first", "loss_last", "model": {resolved gpt.py flags}}
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "models"))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--data", metavar="TOKENS.bin", help="uint16 token file")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--batch", type=int, help="passed to gpt.py --batch")
    ap.add_argument("--seq", type=int, help="passed to gpt.py --seq")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True), as dsrt does")
    ap.add_argument("--warmup-steps", type=int, default=2, help="untimed steps first")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=0.0,
                    help="clip_grad_norm_ max norm (0 = off)")
    ap.add_argument("--ddp", type=int, default=1, metavar="N",
                    help="N processes with DistributedDataParallel (gloo), each on its own "
                         "slice of a global batch of N x batch; rank 0 reports")
    a, model_flags = ap.parse_known_args(argv)
    if a.ddp > 1 and "RANK" not in os.environ:
        return launch_ddp(a.ddp, argv if argv is not None else sys.argv[1:])
    model_flags = [f for f in model_flags if f != "--"]
    if a.batch is not None:
        model_flags += ["--batch", str(a.batch)]
    if a.seq is not None:
        model_flags += ["--seq", str(a.seq)]

    import numpy as np
    import torch
    import export_common as ec
    import gpt

    margs = ec.model_args(gpt.main, model_flags)
    B, T, V = margs.batch, margs.seq, margs.vocab
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(margs.seed)
    model = gpt.build_model(margs)
    model.train()
    params = list(model.parameters())
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
        # gloo cannot broadcast bool buffers (the causal mask); every rank
        # builds the same ones.
        DDP = torch.nn.parallel.DistributedDataParallel
        DDP._set_params_and_buffers_to_ignore_for_model(
            model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
        model = DDP(model, broadcast_buffers=False)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.weight_decay)

    if a.data:
        tokens = np.fromfile(a.data, dtype="<u2")
        windows = (len(tokens) - 1) // T
        if windows < 1:
            sys.exit("train_pytorch: %s has %d tokens, need at least seq+1 = %d"
                     % (a.data, len(tokens), T + 1))
        if int(tokens.max()) >= V:
            sys.exit("train_pytorch: token id %d >= vocab %d (byte-level token files "
                     "need --vocab 256 or more)" % (int(tokens.max()), V))
    else:
        g = np.random.default_rng(0)
        windows = 64
        tokens = g.integers(0, V, windows * T + 1).astype(np.uint16)

    def batch(step):
        first = (step * world + rank) * B  # this rank's slice of the global batch
        rows = np.arange(first, first + B)
        starts = (rows % windows) * T
        w = np.stack([tokens[p:p + T + 1] for p in starts]).astype(np.int64)
        return (torch.from_numpy(np.ascontiguousarray(w[:, :-1])),
                torch.from_numpy(np.ascontiguousarray(w[:, 1:])))

    def train_step(step):
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        return float(loss.detach())

    losses, times = [], []
    for s in range(a.warmup_steps):
        losses.append(train_step(s))
    for s in range(a.warmup_steps, a.warmup_steps + a.steps):
        t0 = time.perf_counter()
        losses.append(train_step(s))
        times.append(time.perf_counter() - t0)

    total = sum(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if world > 1:
        import torch.distributed as dist
        t = torch.tensor([rss])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rss = float(t[0])
        if rank != 0:
            return 0
    out = {
        "tokens_per_s": (world * B * T * a.steps / total) if total > 0 else None,
        "step_time_s": (total / len(times)) if times else None,
        "step_time_median_s": statistics.median(times) if times else None,
        "peak_rss_mib": rss,  # the largest over the ranks
        "ranks": world,
        "params": sum(p.numel() for p in params),
        "threads": a.threads,
        "batch": B,
        "seq": T,
        "steps": a.steps,
        "warmup_steps": a.warmup_steps,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "model": {k: v for k, v in sorted(vars(margs).items())
                  if k in ("size", "layers", "d_model", "heads", "vocab", "seq",
                           "batch", "attn", "gelu", "tied", "dropout", "seed")},
    }
    print(json.dumps(out))
    return 0


def launch_ddp(n, argv):
    """Starts n copies of this script as the ranks of one gloo group on this
    machine; returns rank 0's exit status after every rank finished."""
    import socket
    import subprocess
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv,
                                      env=env))
    codes = [p.wait() for p in procs]
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
