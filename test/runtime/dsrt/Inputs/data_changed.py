"""Changes a token file while dsrt trains on it, and checks what was kept.

  data_changed.py MODE FILE OUT -- DSRT ARGS...

Runs `DSRT ARGS... --out OUT` (with a --steps far beyond the change), waits
for OUT/metrics.csv to hold 3 steps, then changes FILE (a uint16 token
file with 4-token windows, 2 per micro-batch):
  truncate  cut to 5 tokens;
  rewrite   every id set to 300;
  rank1     on a dp 2 plan, the ids only rank 1 reads set to 300 (global
            micro-batch g reads windows 2g and 2g + 1, rank r the g = r
            mod 2; the file holds a multiple of 4 windows, plus one token).
Prints dsrt's exit status and stderr. When dsrt kept the weights of a step
K, runs the same command for K steps on the unchanged file and prints
whether the weights are bitwise the same, and how many rows metrics.csv
kept.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

mode, path, out = sys.argv[1:4]
assert sys.argv[4] == "--"
cmd = sys.argv[5:]
pristine = path + ".pristine"
shutil.copyfile(path, pristine)


def rows(folder):
    try:
        with open(os.path.join(folder, "metrics.csv")) as f:
            return max(0, len(f.read().splitlines()) - 1)
    except FileNotFoundError:
        return 0


run = subprocess.Popen(cmd + ["--steps", "100000000", "--out", out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
while rows(out) < 3 and run.poll() is None and time.time() < deadline:
    time.sleep(0.005)
tokens = os.path.getsize(path) // 2
if mode == "truncate":
    os.truncate(path, 10)
elif mode == "rewrite":
    with open(path, "r+b") as f:
        f.write(struct.pack("<%dH" % tokens, *([300] * tokens)))
elif mode == "rank1":
    # Window w is tokens 4w .. 4w + 4; rank 1 reads the windows w % 4 in
    # {2, 3}. Their tokens but the one window 4m + 1 of rank 0 ends on.
    with open(path, "r+b") as f:
        for t in range(tokens):
            w, j = divmod(t, 4)
            if (w % 4 == 2 and j > 0) or w % 4 == 3:
                f.seek(2 * t)
                f.write(struct.pack("<H", 300))
else:
    sys.exit("unknown mode " + mode)
try:
    _, err = run.communicate(timeout=60)
except subprocess.TimeoutExpired:
    run.kill()
    sys.exit("dsrt went on for 60 s after the data changed")
sys.stdout.write(err)
print("exit status", run.returncode)

kept = re.search(r"the weights after step (\d+)", err)
if not kept:
    sys.exit(0)
steps = int(kept.group(1))
print("metrics.csv rows:", rows(out), "of", steps)


def tensors(file):
    with open(file, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    return meta, {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}


shutil.copyfile(pristine, path)
subprocess.run(cmd + ["--steps", str(steps), "--out", out + "-ref"], check=True,
               stdout=subprocess.DEVNULL)
meta, got = tensors(os.path.join(out, "weights.safetensors"))
_, want = tensors(os.path.join(out + "-ref", "weights.safetensors"))
same = got.keys() == want.keys() and all(got[k] == want[k] for k in got)
print("weights: step", meta.get("step"), "and bitwise",
      "the same as" if same else "DIFFERENT from", "a run of", steps, "steps")
