#!/usr/bin/env bash
# Two builds of dsc + dsrt (before and after a refactoring that must not
# change behaviour) on the same tiny GPT, token data, seed and layout: the
# losses, lr and grad norms of every step and the final weights must be
# bitwise equal, on 1 rank, dp 2 ZeRO 3, pp 2, tp 2 and bf16 dp 2 ZeRO 1.
#
#   scripts/bitwise-compare.sh OLD_BUILD/bin NEW_BUILD/bin WORKDIR
#
# (an old build: git worktree add /tmp/old REV && cmake -S /tmp/old -B
# /tmp/old-build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build
# /tmp/old-build --target dsc dsrt). WORKDIR must not exist. Exits 1 on the
# first layout that differs.
set -euo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 OLD_BIN_DIR NEW_BIN_DIR WORKDIR" >&2; exit 2; fi
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd) W=$3
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -e "$W" ]; then echo "$0: $W exists: give a new folder" >&2; exit 2; fi
mkdir -p "$W" && cd "$W"
/usr/bin/python3 "$REPO/models/gpt.py" --layers 2 --d-model 32 --heads 2 --vocab 64 --seq 16 --batch 4 -o gpt.onnx > /dev/null 2>&1
/usr/bin/python3 -c "
import numpy as np; np.random.seed(0); np.random.randint(0,64,size=20000).astype(np.uint16).tofile('tokens.bin')"
for layout in "one:" "dp2z3:--dp 2 --zero 3" "pp2:--pp 2" "tp2:--tp 2" "bf16dp2:--dp 2 --zero 1 --precision bf16"; do
  name=${layout%%:*}; flags=${layout#*:}
  for v in old new; do
    bin=$OLD; [ $v = new ] && bin=$NEW
    $bin/dsc gpt.onnx $flags -o $v-$name-plan > /dev/null
    $bin/dsrt $v-$name-plan --data tokens.bin --token-dtype u16 --steps 12 --seed 7 --out $v-$name-run > $v-$name.log 2>&1 || { echo "$v $name failed"; tail -5 $v-$name.log; exit 1; }
  done
  /usr/bin/python3 - "$W"/old-$name-run "$W"/new-$name-run $name <<'PY'
import sys, csv, json, struct
a, b, name = sys.argv[1:]
def rows(d):
    return [(r['step'], r['loss'], r['lr'], r['grad_norm']) for r in csv.DictReader(open(d + '/metrics.csv'))]
def tensors(d):
    raw = open(d + '/weights.safetensors', 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop('__metadata__', None)
    return {k: raw[8 + n + v['data_offsets'][0]: 8 + n + v['data_offsets'][1]] for k, v in h.items()}
ra, rb = rows(a), rows(b)
ta, tb = tensors(a), tensors(b)
same_rows = ra == rb
same_w = ta.keys() == tb.keys() and all(ta[k] == tb[k] for k in ta)
print("%-8s %d steps: losses/lr/grad_norm %s; %d tensors: weights %s" % (
    name, len(ra), "bitwise equal" if same_rows else "DIFFER", len(ta), "bitwise equal" if same_w else "DIFFER"))
sys.exit(0 if same_rows and same_w else 1)
PY
done
