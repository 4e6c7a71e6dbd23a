#!/usr/bin/python3
"""Compares two training runs (dsrt vs the PyTorch reference).

    /usr/bin/python3 test/e2e/compare.py RUN_A RUN_B [--loss-rtol 1e-5] [--weight-atol 1e-5]

Each RUN has metrics.csv (step,loss,lr,grad_norm,step_time_s) and
weights.safetensors. Passes when both have the same steps, every step's loss
satisfies |a - b| <= rtol * max(|a|, |b|), and both weight files hold the same
tensor names and shapes with max |a - b| <= atol for each. The lr of every
step must also agree (--lr-rtol, default 1e-6: a different lr means a
different schedule convention); grad_norm is shown and only checked with
--grad-rtol. --loss-mean-rtol also bounds the mean over the steps of the
per-step relative loss difference (off by default): rare large steps pass it,
a difference in every step does not (parity-gpt-bf16.test). A negative
tolerance disables that check. Exits 1 and prints one FAIL line per kind of
mismatch; otherwise the last line states what was compared, the measured
maxima and the bounds as given (tests FileCheck the counts and the bounds;
the maxima's digits vary with the CPU's kernels):

    compare: OK: 20 steps, loss rel diff max 1.1e-07 <= rtol 1e-5; 21 tensors,
    weight abs diff max 1.2e-07 <= atol 1e-5

(one line; "; mean loss rel diff M <= B" and "; grad_norm rel diff max G <= rtol
R" follow when those are checked).
"""

import argparse
import csv
import json
import os
import struct
import sys

ST_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4",
             "U8": "u1", "BOOL": "?"}


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: truncated" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d exceeds the file" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dt == "BF16":
            b, e = info["data_offsets"]
            u = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            out[name] = u.view(np.float32).reshape(info["shape"])
            continue
        if dt not in ST_DTYPES:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        b, e = info["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=ST_DTYPES[dt])
        out[name] = a.reshape(info["shape"])
    return out


def read_metrics(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        need = ["step", "loss", "lr", "grad_norm", "step_time_s"]
        # Data-parallel runs add comm_elements,comm_calls,comm_bytes after these.
        if r.fieldnames is None or [c.strip() for c in r.fieldnames][:len(need)] != need:
            raise ValueError("%s: header %s, expected %s[,...]"
                             % (path, r.fieldnames, ",".join(need)))
        rows = []
        for row in r:
            rows.append({k.strip(): float(v) for k, v in row.items()})
    return rows


class Bound(float):
    """A tolerance that prints as it was written (5e-6, not 5e-06), so that
    the OK line quotes the command line."""

    def __new__(cls, text):
        b = float.__new__(cls, text)
        b.text = str(text).strip()
        return b

    def __str__(self):
        return self.text


def rel(a, b):
    d = abs(a - b)
    m = max(abs(a), abs(b))
    if d == 0:
        return 0.0
    return d / m if m > 0 else float("inf")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--loss-rtol", type=Bound, default=Bound("1e-5"))
    ap.add_argument("--weight-atol", type=Bound, default=Bound("1e-5"))
    ap.add_argument("--lr-rtol", type=float, default=1e-6)
    ap.add_argument("--grad-rtol", type=Bound, default=Bound("-1"))
    ap.add_argument("--loss-mean-rtol", type=Bound, default=Bound("-1"),
                    help="bound on the mean over steps of the relative loss "
                         "difference (default: not checked)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-step table")
    a = ap.parse_args(argv)

    import math
    import numpy as np

    name_a, name_b = os.path.basename(os.path.normpath(a.run_a)), \
        os.path.basename(os.path.normpath(a.run_b))
    failures = []
    try:
        ma = read_metrics(os.path.join(a.run_a, "metrics.csv"))
        mb = read_metrics(os.path.join(a.run_b, "metrics.csv"))
        wa = read_safetensors(os.path.join(a.run_a, "weights.safetensors"))
        wb = read_safetensors(os.path.join(a.run_b, "weights.safetensors"))
    except (OSError, ValueError, KeyError) as e:
        print("compare: FAIL: cannot read the runs: %s" % e)
        return 1

    # --- per-step metrics -------------------------------------------------
    steps_a = [int(r["step"]) for r in ma]
    steps_b = [int(r["step"]) for r in mb]
    if steps_a != steps_b:
        failures.append("steps differ: %s has %s, %s has %s"
                        % (name_a, steps_a[:3] + ["..."] + steps_a[-1:] if len(steps_a) > 4
                           else steps_a, name_b,
                           steps_b[:3] + ["..."] + steps_b[-1:] if len(steps_b) > 4
                           else steps_b))
    if not a.quiet:
        print("%5s %14s %14s %9s %11s %11s %9s" % (
            "step", "loss_" + name_a[:9], "loss_" + name_b[:9], "rel", "lr_a",
            "grad_a", "grad_rel"))
    worst_loss = (0.0, None)
    worst_grad = 0.0
    loss_rels = []
    bad_loss, bad_lr, bad_grad = [], [], []
    for ra, rb in zip(ma, mb):
        s = int(ra["step"])
        lr_ = rel(ra["loss"], rb["loss"])
        if not (math.isfinite(ra["loss"]) and math.isfinite(rb["loss"])):
            lr_ = float("inf")
        loss_rels.append(lr_)
        if lr_ > worst_loss[0] or worst_loss[1] is None:
            worst_loss = (lr_, s)
        flag = ""
        if lr_ > a.loss_rtol:
            bad_loss.append(s)
            flag = " <-- loss"
        if a.lr_rtol >= 0 and rel(ra["lr"], rb["lr"]) > a.lr_rtol:
            bad_lr.append(s)
            flag += " <-- lr %.6g vs %.6g" % (ra["lr"], rb["lr"])
        g = rel(ra["grad_norm"], rb["grad_norm"])
        worst_grad = max(worst_grad, g)
        if a.grad_rtol >= 0 and g > a.grad_rtol:
            bad_grad.append(s)
            flag += " <-- grad_norm"
        if not a.quiet:
            print("%5d %14.8g %14.8g %9.2e %11.4g %11.4g %9.2e%s" % (
                s, ra["loss"], rb["loss"], lr_, ra["lr"], ra["grad_norm"], g, flag))
    if bad_loss:
        failures.append("loss differs by more than rtol %g at step(s) %s"
                        % (a.loss_rtol, bad_loss))
    mean_loss = sum(loss_rels) / len(loss_rels) if loss_rels else 0.0
    if a.loss_mean_rtol >= 0 and mean_loss > a.loss_mean_rtol:
        failures.append("mean loss rel diff %.3g over %d steps exceeds %g"
                        % (mean_loss, len(loss_rels), a.loss_mean_rtol))
    if bad_lr:
        failures.append("lr differs at step(s) %s (schedule convention?)" % bad_lr)
    if bad_grad:
        failures.append("grad_norm differs by more than rtol %g at step(s) %s"
                        % (a.grad_rtol, bad_grad))

    # --- final weights ----------------------------------------------------
    only_a = sorted(set(wa) - set(wb))
    only_b = sorted(set(wb) - set(wa))
    if only_a:
        failures.append("tensors only in %s: %s" % (name_a, only_a))
    if only_b:
        failures.append("tensors only in %s: %s" % (name_b, only_b))
    worst = (-1.0, None)
    bad_w = []
    for n in sorted(set(wa) & set(wb)):
        x = np.asarray(wa[n], dtype=np.float64)
        y = np.asarray(wb[n], dtype=np.float64)
        if x.shape != y.shape:
            failures.append("tensor %s: shape %s in %s, %s in %s"
                            % (n, list(x.shape), name_a, list(y.shape), name_b))
            continue
        d = float(np.max(np.abs(x - y))) if x.size else 0.0
        if not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
            d = float("inf")
        if d > worst[0]:
            worst = (d, n)
        if d > a.weight_atol:
            bad_w.append("%s (%.3g)" % (n, d))
    if bad_w:
        failures.append("%d tensor(s) differ by more than atol %g: %s"
                        % (len(bad_w), a.weight_atol, ", ".join(bad_w[:8])
                           + (" ..." if len(bad_w) > 8 else "")))

    print("compare: %d steps, worst loss rel diff %.3g (step %s); %d tensors, "
          "worst max|diff| %.3g (%s)" % (
              len(ma), worst_loss[0], worst_loss[1], len(set(wa) & set(wb)),
              max(worst[0], 0.0), worst[1]))
    if failures:
        for f in failures:
            print("compare: FAIL: " + f)
        return 1
    line = ("compare: OK: %d steps, loss rel diff max %.2g <= rtol %s; %d tensors, "
            "weight abs diff max %.2g <= atol %s" % (
                len(ma), worst_loss[0], a.loss_rtol, len(set(wa) & set(wb)),
                max(worst[0], 0.0), a.weight_atol))
    if a.loss_mean_rtol >= 0:
        line += "; mean loss rel diff %.2g <= %s" % (mean_loss, a.loss_mean_rtol)
    if a.grad_rtol >= 0:
        line += "; grad_norm rel diff max %.2g <= rtol %s" % (worst_grad, a.grad_rtol)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
