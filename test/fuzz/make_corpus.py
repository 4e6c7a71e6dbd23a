#!/usr/bin/python3
"""Writes the seed corpora of the fuzz harnesses (test/fuzz/corpus/<name>/).

Every seed is a small real input: the configs, hostfiles and ONNX models the
tests use, arrays and weights as numpy and dsc write them, plans dsc compiles
from the tests' models. Run it again after changing a format; seeds are named
for what they hold, so a diff shows what changed.

  test/fuzz/make_corpus.py --dsc build/bin/dsc [--only NAME...]

--dsc (a built dsc) is needed for the plan_loader seeds only; the
onnx_import seeds export a tiny MLP with Debian's torch (/usr/bin/python3).
"""

import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "test", "fuzz")


def reset(name):
    d = os.path.join(FUZZ, "corpus", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def put(d, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def raw_strings(path):
    """The R"(...)" literals of a C++ test file."""
    text = open(path, encoding="utf-8").read()
    return re.findall(r'R"\((.*?)\)"', text, re.S)


# --- ds_config ----------------------------------------------------------------

def ds_config():
    d = reset("ds_config")
    files = (glob.glob(os.path.join(ROOT, "models/configs/*.json")) +
             glob.glob(os.path.join(ROOT, "test/e2e/configs/*.json")) +
             glob.glob(os.path.join(ROOT, "test/runtime/dsrt/Inputs/*.json")))
    for f in sorted(files):
        put(d, os.path.relpath(f, ROOT).replace("/", "_"), open(f, "rb").read())
    # The unit tests' snippets: every key and error path the parser knows.
    seen = set()
    for i, s in enumerate(raw_strings(os.path.join(ROOT, "test/config/DsConfigTest.cpp"))):
        s = s.strip()
        if s.startswith("{") and s not in seen and len(s) < 2048:
            seen.add(s)
            put(d, "DsConfigTest-%03d.json" % i, s)


# --- hostfile_launch ---------------------------------------------------------

def hostfile_launch():
    d = reset("hostfile_launch")
    hostfiles = {
        "two": "worker-1 slots=2\nworker-0 slots=8\n",
        "comments": ("# the cluster\n\n   \t\n  node.example.com\tslots=4   # trailing comment\n"
                     "#node2 slots=4\nnode_2 slots=1#no space before it\n"
                     "10.0.0.7 slots=007\r\nlast slots=3"),
        "local": "# this machine\nlocalhost slots=1\n",
        "dup": "a slots=1\nb slots=1 # b\na slots=2\n",
        "junk": "node1 slots=4 foo\n",
        "dash": "-oProxyCommand=x slots=1\n",
        "max": "a slots=65536\n",
    }
    argvs = {
        "none": [],
        "hostfile": ["plan", "--hostfile", "hosts", "--data", "d", "--out", "run"],
        "include": ["plan", "--include=worker-1:0,1@worker-0", "--steps", "3"],
        "exclude": ["plan", "--exclude", "worker-0:1"],
        "num": ["plan", "--num_nodes", "1", "--num_ranks=2", "--threads", "2"],
        "conflict": ["plan", "--num_ranks", "2", "--include", "a"],
    }
    failures = {
        "none": "",
        "signal": ("--------------------------------------------------------------------------\n"
                   "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 "
                   "(Killed).\n"),
        "exit": ("mpirun detected that one or more processes exited with non-zero status, thus "
                 "causing\nthe job to be terminated. The first process to do so was:\n\n"
                 "  Process name: [[12438,1],1]\n  Exit code:    3\n"),
        "abort": ("MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
                  "with errorcode 7.\n"),
        "finalize": ("mpirun has exited due to process rank 0 with PID 4242 on\n"
                     "node vm exiting improperly. There are three reasons this could occur:\n"),
    }
    combos = [("two", "hostfile", "signal", 4), ("comments", "include", "exit", 0),
              ("local", "none", "none", 1), ("dup", "exclude", "abort", 7),
              ("two", "num", "finalize", 0x83), ("junk", "conflict", "none", 2),
              ("dash", "hostfile", "signal", 0), ("max", "num", "exit", 0xff),
              ("two", "exclude", "none", 3), ("comments", "num", "abort", 0x40)]
    for h, a, f, misc in combos:
        data = (hostfiles[h].encode() + b"\0" + "\n".join(argvs[a]).encode() + b"\0" +
                failures[f].encode() + b"\0" + bytes([misc]))
        put(d, "%s-%s-%s" % (h, a, f), data)


# --- safetensors --------------------------------------------------------------

def safetensors_bytes(tensors, metadata=None, pad=True):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, arr in tensors:
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs)


def safetensors():
    d = reset("safetensors")
    r = np.arange(24, dtype=np.float32)
    put(d, "f32-two", safetensors_bytes([("w", "F32", r.reshape(2, 3, 4)),
                                         ("b", "F32", r[:5])], {"format": "pt"}))
    put(d, "scalar", safetensors_bytes([("s", "F32", np.array(3.5, np.float32))]))
    put(d, "empty-tensor", safetensors_bytes([("e", "F32", np.zeros((0, 3), np.float32)),
                                              ("x", "F32", r[:1])]))
    put(d, "dtypes", safetensors_bytes([
        ("f64", "F64", np.arange(3, dtype=np.float64)),
        ("f16", "F16", np.arange(3, dtype=np.float16)),
        ("bf16", "BF16", np.arange(3, dtype=np.uint16)),
        ("i64", "I64", np.arange(3, dtype=np.int64)),
        ("i32", "I32", np.arange(3, dtype=np.int32)),
        ("u8", "U8", np.arange(3, dtype=np.uint8)),
        ("bool", "BOOL", np.array([1, 0, 1], np.uint8))]))
    put(d, "unpadded", safetensors_bytes([("w", "F32", r[:2])], pad=False))
    put(d, "no-tensors", safetensors_bytes([], {"k": "v"}))


# --- npy ------------------------------------------------------------------------

def npy_bytes(arr, version=None, fortran=False):
    import io
    from numpy.lib import format as npf
    buf = io.BytesIO()
    if version is None:
        np.save(buf, np.asfortranarray(arr) if fortran else arr)
    else:
        npf.write_array(buf, arr, version=version)
    return buf.getvalue()


def npy():
    d = reset("npy")
    a = np.arange(6)
    for dt in ["<f4", "<f8", "<f2", "<i8", "<i4", "<u2", "<u4", "|b1", "|u1"]:
        put(d, "2x3" + dt.replace("<", "-le-").replace("|", "-"), npy_bytes(
            (a.reshape(2, 3) % 2).astype(dt) if dt == "|b1" else a.reshape(2, 3).astype(dt)))
    put(d, "scalar-f4", npy_bytes(np.array(1.5, np.float32)))
    put(d, "empty-f4", npy_bytes(np.zeros((0, 4), np.float32)))
    put(d, "v2-i8", npy_bytes(a.astype(np.int64), version=(2, 0)))
    put(d, "v3-f4", npy_bytes(a.astype(np.float32), version=(3, 0)))
    put(d, "fortran-f4", npy_bytes(a.reshape(2, 3).astype(np.float32), fortran=True))
    put(d, "big-endian-f4", npy_bytes(a.astype(">f4")))


# --- token_file ---------------------------------------------------------------

def token_file():
    d = reset("token_file")
    ids16 = np.array([1, 2, 3, 255, 256, 50256, 7, 0], np.uint16).tobytes()
    ids32 = np.array([1, 2, 128000, 128255, 5], np.uint32).tobytes()

    def llmc(magic, version, count, ids):
        header = np.zeros(256, np.int32)
        header[:3] = [magic, version, count]
        return header.tobytes() + ids

    # The first byte is the harness's mode: width (none, u16, u32) and name.
    for mode, label in [(0, "bin-auto"), (1, "bin-u16"), (3, "tok-auto"), (5, "tok-u32")]:
        put(d, "raw-" + label, bytes([mode]) + ids16)
    put(d, "llmc-gpt2", bytes([0]) + llmc(20240520, 1, 8, ids16))
    put(d, "llmc-llama3", bytes([2]) + llmc(20240801, 7, 5, ids32))
    put(d, "llmc-count-mismatch", bytes([0]) + llmc(20240520, 1, 9, ids16))
    put(d, "window", bytes([1]) + struct.pack("<qq", 3, 4) + ids16)


# --- onnx_import ----------------------------------------------------------------

def onnx_import():
    d = reset("onnx_import")
    # The importer's lit tests in ONNX's textual syntax, without their
    # RUN/CHECK comment lines (the loader takes '<' as text).
    for f in sorted(glob.glob(os.path.join(ROOT, "test/frontends/onnx/**/*.onnxtxt"),
                              recursive=True) +
                    glob.glob(os.path.join(ROOT, "test/runtime/dsrt/Inputs/*.onnxtxt"))):
        lines = [l for l in open(f, encoding="utf-8").read().splitlines()
                 if not l.lstrip().startswith("#")]
        text = "\n".join(lines).strip() + "\n"
        if text.startswith("<"):
            put(d, os.path.relpath(f, ROOT).replace("/", "_").replace(".onnxtxt", ".txt"), text)
    # A tiny MLP exported by the project's own helper, binary protobuf.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "mlp.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "models/mlp.py"),
                        "--size", "tiny", "--in-features", "4", "--hidden", "4",
                        "--layers", "1", "--classes", "3", "--batch", "2", "-o", out],
                       check=True, stdout=subprocess.DEVNULL)
        put(d, "mlp-tiny.bin", open(out, "rb").read())


# --- torchscript_import --------------------------------------------------------

def torchscript_import():
    d = reset("torchscript_import")
    # The frontend test's archives (PyTorch 1.13: a traced and a scripted
    # MLP, tied weights, a frozen parameter and a buffer), whole; the
    # harness's template (mlp-trace.pt) is one of them. And the traced
    # MLP's code text, which the harness packs into the template.
    make = os.path.join(ROOT, "test/frontends/torchscript/make_ts.py")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("mlp-trace", "mlp-script", "frozen", "inplace", "unsupported"):
            out = os.path.join(tmp, kind + ".pt")
            subprocess.run(["/usr/bin/python3", make, kind, out], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            put(d, kind + ".pt", open(out, "rb").read())
            if kind in ("mlp-trace", "mlp-script"):
                with zipfile.ZipFile(out) as z:
                    code = [n for n in z.namelist() if n.endswith("code/__torch__.py")][0]
                    put(d, kind + "-code.txt", z.read(code))


# --- plan_loader ----------------------------------------------------------------

def export(tmp, script, name, args):
    out = os.path.join(tmp, name + ".onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "models", script), "-o", out] + args,
                   check=True, stdout=subprocess.DEVNULL)
    return out


def plan_loader(dsc):
    d = reset("plan_loader")
    # Small configs for batch 2 (the models below): every optimizer, a
    # scheduler, clipping and gradient accumulation.
    configs = {
        "default": None,
        "sgd": {"train_micro_batch_size_per_gpu": 2, "optimizer": {
            "type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "nesterov": True}}},
        "adamw-ga2": {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                      "gradient_clipping": 1.0,
                      "optimizer": {"type": "AdamW", "params": {"lr": 0.001,
                                                                "weight_decay": 0.01}},
                      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 2}}},
    }
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "mlp": export(tmp, "mlp.py", "mlp", [
                "--size", "tiny", "--in-features", "4", "--hidden", "4", "--layers", "1",
                "--classes", "3", "--batch", "2"]),
            "gpt": export(tmp, "gpt.py", "gpt", [
                "--size", "tiny", "--layers", "1", "--d-model", "8", "--heads", "2",
                "--vocab", "11", "--seq", "4", "--batch", "2", "--dropout", "0.1"]),
            "gpt-mha-mask": export(tmp, "gpt.py", "gpt-mha", [
                "--size", "tiny", "--layers", "1", "--d-model", "8", "--heads", "2",
                "--vocab", "11", "--seq", "4", "--batch", "2", "--attn", "mha",
                "--untied", "--key-padding-mask", "--pos", "sinusoidal"]),
            "lm": os.path.join(ROOT, "test/runtime/dsrt/Inputs/lm.onnxtxt"),
            "gather": os.path.join(ROOT, "test/frontends/onnx/ops/gather.onnxtxt"),
        }
        for cname, config in configs.items():
            path = None
            if config:
                path = os.path.join(tmp, cname + ".json")
                json.dump(config, open(path, "w"))
            for name, model in models.items():
                if cname != "default" and name not in ("mlp", "gpt"):
                    continue
                out = os.path.join(tmp, "plan-%s-%s" % (name, cname))
                cmd = [dsc, model, "-o", out] + (["--config", path] if path else [])
                run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
                if run.returncode != 0:
                    print("make_corpus: %s: %s, skipped" % (" ".join(cmd), run.stderr.strip()))
                    continue
                plan = open(os.path.join(out, "plan.pb"), "rb").read()
                weights = open(os.path.join(out, "weights.safetensors"), "rb").read()
                head = struct.pack("<I", len(plan))
                # With the weights dsc wrote, and with "matching weights" (none).
                put(d, "%s-%s" % (name, cname), head + plan + weights)
                put(d, "%s-%s-synth" % (name, cname), head + plan)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsc", help="a built dsc, for the plan_loader seeds")
    p.add_argument("--only", nargs="*", help="harnesses to regenerate (default: all)")
    a = p.parse_args()
    makers = {"ds_config": ds_config, "hostfile_launch": hostfile_launch,
              "safetensors": safetensors, "npy": npy, "token_file": token_file,
              "onnx_import": onnx_import, "torchscript_import": torchscript_import}
    if a.dsc:
        makers["plan_loader"] = lambda: plan_loader(a.dsc)
    elif not a.only or "plan_loader" in a.only:
        print("make_corpus: no --dsc, plan_loader seeds left as they are", file=sys.stderr)
    for name, make in makers.items():
        if not a.only or name in a.only:
            make()
            n = len(os.listdir(os.path.join(FUZZ, "corpus", name)))
            print("make_corpus: %s: %d seeds" % (name, n))


if __name__ == "__main__":
    main()
