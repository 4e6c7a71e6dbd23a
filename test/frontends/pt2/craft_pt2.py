#!/usr/bin/env python3
"""Writes a variant of a .pt2 archive, or another kind of file, for the
error tests of the .pt2 reader.

    craft_pt2.py SRC OUT VARIANT

SRC is a torch.export archive (the GPT of ../shared/pytorch-2.11); VARIANT
says what to change (see VARIANTS). Only the standard library: the tests
need no PyTorch.
"""
import json
import struct
import sys
import zipfile


def rewrite(src, out, edit_json=None, edit_entry=None, drop=()):
    """Copies SRC to OUT, passing models/model.json through edit_json and
    every entry through edit_entry(name, bytes) -> bytes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if any(info.filename.endswith(d) for d in drop):
                continue
            data = zin.read(info.filename)
            if edit_json and info.filename.endswith("models/model.json"):
                program = json.loads(data)
                edit_json(program)
                data = json.dumps(program).encode()
            if edit_entry:
                data = edit_entry(info.filename, data)
            zout.writestr(info.filename, data)


def nodes(p):
    return p["graph_module"]["graph"]["nodes"]


def unsupported_op(p):
    for n in nodes(p):
        if n["target"] == "torch.ops.aten.gelu.default":
            n["target"] = "torch.ops.aten.mish.default"
            return


def dynamic_batch(p):
    p["graph_module"]["graph"]["tensor_values"]["idx"]["sizes"][0] = {"as_expr": {"expr_str": "s0"}}


def buffer_mutation(p):
    p["graph_module"]["signature"]["output_specs"].append(
        {"buffer_mutation": {"arg": {"as_tensor": {"name": "b_mask"}}, "buffer_name": "mask"}})


def schema_major(p):
    p["schema_version"]["major"] = 99


def wrong_type(p):
    p["graph_module"]["graph"]["nodes"] = 5


def entry(suffix, replacement):
    return lambda name, data: replacement(data) if name.endswith(suffix) else data


VARIANTS = {
    "unsupported-op": dict(edit_json=unsupported_op),
    "dynamic-batch": dict(edit_json=dynamic_batch),
    "buffer-mutation": dict(edit_json=buffer_mutation),
    "schema-major": dict(edit_json=schema_major),
    "wrong-type": dict(edit_json=wrong_type),
    "not-json": dict(edit_entry=entry("models/model.json", lambda d: d[: len(d) // 2])),
    "archive-version": dict(edit_entry=entry("/archive_version", lambda d: b"7")),
    "short-weight": dict(edit_entry=entry("data/weights/weight_0", lambda d: d[:100])),
    "pickled-weight": dict(edit_entry=entry(
        "model_weights_config.json",
        lambda d: d.replace(b'"use_pickle": false', b'"use_pickle": true', 1))),
    "no-program": dict(drop=("models/model.json",)),
}


def main():
    src, out, variant = sys.argv[1:4]
    if variant in VARIANTS:
        rewrite(src, out, **VARIANTS[variant])
    elif variant == "truncated":
        data = open(src, "rb").read()
        open(out, "wb").write(data[: len(data) // 2])
    elif variant == "torch-save":
        # What torch.save writes: a zip of data.pkl and the storages.
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
            z.writestr("archive/data/0", b"\x00" * 16)
            z.writestr("archive/version", b"3\n")
    elif variant == "pickle":
        open(out, "wb").write(b"\x80\x02}q\x00.")
    elif variant == "safetensors":
        header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        open(out, "wb").write(struct.pack("<Q", len(header)) + header + b"\x00" * 8)
    elif variant == "other-zip":
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("readme.txt", b"hello")
    elif variant == "text":
        open(out, "wb").write(b"this is not a model\n")
    else:
        sys.exit("craft_pt2.py: unknown variant " + variant)


if __name__ == "__main__":
    main()
