"""Shared helpers for the dsc model export scripts (models/*.py).

Every model script builds an ``nn.Module`` whose ``forward(*inputs)`` returns
the scalar training loss, then calls :func:`main` here, which

* parses the common flags (``-o``, ``--seed``, ``--opset``, ``--dynamic-batch``,
  ``--save-batch``, ``--external-data``, ``--size`` presets),
* seeds torch *before* the model is built so weights are reproducible,
* builds a deterministic example batch (separate generator, seeded from
  ``--seed``),
* exports with ``torch.onnx.export(..., training=TrainingMode.TRAINING,
  do_constant_folding=False, output_names=['loss'])``,
* records which initializers PyTorch trains (``requires_grad``) in the ONNX
  file's metadata, key ``dsc.trainable`` (see :func:`trainable_initializers`);
  ``--freeze PATTERN`` sets ``requires_grad=False`` on matching parameters
  first,
* records the model's state_dict keys, each with the initializer holding
  its value (a tied weight's other names included), key ``dsc.state_dict``
  (see :func:`state_dict_layout`; dsrt export and dsrt --init read it),
* writes a sidecar ``OUT.onnx.json`` next to the model: the model name, the
  graph input names and the resolved flags (the argparse namespace), so the
  parity reference (test/e2e/reference_train.py) can rebuild the same model.

:func:`model_args` runs a model script's ``main`` up to the export and
returns the resolved namespace instead of exporting (used by the parity
reference and the PyTorch benchmark to build the same model from flags).

Only the standard library is imported at module level; torch / numpy / onnx
are imported lazily so ``--help`` stays fast.
"""

import argparse
import os
import sys
import time

DEFAULT_OPSET = 17
SIDECAR_FORMAT = 1
# metadata_props key: JSON list of the initializers that train (dsc reads it;
# float initializers it does not name are frozen).
TRAINABLE_KEY = "dsc.trainable"

# metadata_props key: the model's state_dict as PyTorch names it, entry by
# entry in state_dict order, each mapped to the initializer that holds its
# value (dsrt export writes a file load_state_dict(strict=True) reads; dsrt
# --init accepts such a file). See state_dict_layout().
STATE_DICT_KEY = "dsc.state_dict"

# metadata_props key of a --no-weights export: JSON list of the graph inputs
# that are the model's parameters, whose values the file does not hold.
NO_WEIGHTS_KEY = "dsc.no_weights"

# Set by model_args(): build_and_export() stores its namespace here and
# returns without exporting.
_capture = None
# The model script's name ("gpt"), set by build_and_export() for the sidecar.
_model_name = None


def make_parser(description, presets, default_size="tiny"):
    """Parser with the common flags. Model flags must use default=None so
    that :func:`resolve` can tell explicit values from preset values."""
    p = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx",
                   help="output ONNX file (or TorchScript archive, --format torchscript)")
    p.add_argument("--format", choices=["onnx", "torchscript"], default="onnx",
                   help="onnx: torch.onnx.export; torchscript: torch.jit.trace (or script, --jit) of the "
                        "training-mode module, saved with torch.jit.save (dsc then needs "
                        "--input-shape for each input, which the export prints)")
    p.add_argument("--jit", choices=["trace", "script"], default="trace",
                   help="with --format torchscript: torch.jit.trace (records the ops "
                        "one example batch runs) or torch.jit.script (compiles forward's "
                        "Python, control flow included)")
    p.add_argument("--size", choices=sorted(presets), default=default_size,
                   help="preset; explicit model flags override it")
    p.add_argument("--seed", type=int, default=0,
                   help="torch.manual_seed() before building the model; the "
                        "example batch uses a generator seeded with seed+1")
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                   help="ONNX opset version")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="mark dim 0 of every input dynamic (named 'batch')")
    p.add_argument("--save-batch", metavar="DIR",
                   help="write the example inputs to DIR/<input_name>.npy")
    p.add_argument("--external-data", action="store_true",
                   help="re-save with all tensors >= 1 KiB in OUT.onnx.data")
    p.add_argument("--no-weights", action="store_true",
                   help="export without the parameters' values (onnx only): the model is "
                        "built on PyTorch's meta device, so any size exports in seconds; the "
                        "parameters become graph inputs named in the metadata key "
                        "'dsc.no_weights' (buffers keep their values). dsc plans and explains "
                        "such a file; dsrt runs its plan with --init or --resume")
    p.add_argument("--freeze", action="append", default=[], metavar="PATTERN",
                   help="requires_grad=False for the parameters whose names match "
                        "this fnmatch pattern (repeatable; one matching nothing is "
                        "an error)")
    return p


def apply_freeze(model, patterns):
    """Sets requires_grad=False on the parameters whose names (any alias of
    a tied parameter) match one of the fnmatch ``patterns``. A pattern that
    matches no parameter raises ValueError."""
    import fnmatch
    params = {id(p) for p in model.parameters()}
    names = {}
    for name, p in model.state_dict(keep_vars=True).items():
        if id(p) in params:
            names.setdefault(id(p), (p, []))[1].append(name)
    for pat in patterns or []:
        hit = False
        for p, aliases in names.values():
            if any(fnmatch.fnmatchcase(n, pat) for n in aliases):
                p.requires_grad_(False)
                hit = True
        if not hit:
            raise ValueError("--freeze %r matches no parameter (parameters: %s)"
                             % (pat, ", ".join(n for _, a in names.values() for n in a)))


def resolve(args, presets, keys):
    """Fill every key in ``keys`` that was not given explicitly from the
    preset selected by ``--size``."""
    preset = presets[args.size]
    for k in keys:
        if getattr(args, k, None) is None:
            setattr(args, k, preset.get(k))
    return args


def _save_batch(directory, names, tensors):
    import numpy as np
    os.makedirs(directory, exist_ok=True)
    for name, t in zip(names, tensors):
        a = t.detach().cpu().numpy()
        if a.dtype.kind == "f":
            a = a.astype(np.float32)
        elif a.dtype.kind in "iu":
            a = a.astype(np.int64)
        np.save(os.path.join(directory, name + ".npy"), a)


def _resave_external(out):
    import onnx
    location = os.path.basename(out) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(out)), location)
    # onnx appends to an existing data file, so start from scratch.
    if os.path.exists(data_path):
        os.remove(data_path)
    m = onnx.load_model(out)
    onnx.save_model(m, out, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=location,
                    size_threshold=1024)
    return data_path


def sidecar_path(onnx_path):
    return onnx_path + ".json"


def _write_sidecar(out, model_name, input_names, args):
    """OUT.onnx.json: {"format", "model", "inputs", "args"} (args = every
    resolved flag, JSON-serialisable values only)."""
    import json
    flags = {}
    for k, v in sorted(vars(args).items()):
        if isinstance(v, (bool, int, float, str)) or v is None:
            flags[k] = v
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            flags[k] = list(v)
    doc = {"format": SIDECAR_FORMAT, "model": model_name,
           "inputs": list(input_names), "args": flags}
    with open(sidecar_path(out), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def model_args(main, argv):
    """Runs a model script's ``main(argv)`` (flag parsing and preset
    resolution) and returns the namespace it would export with, without
    building or exporting anything. ``-o`` is supplied if missing."""
    global _capture
    argv = list(argv)
    if not any(a in ("-o", "--output") or a.startswith("--output=")
               for a in argv):
        argv += ["-o", os.devnull]
    _capture = []
    try:
        main(argv)
        if not _capture:
            raise RuntimeError("model script did not reach build_and_export")
        return _capture[0]
    finally:
        _capture = None


def trainable_initializers(model, onnx_model):
    """Names of the exported initializers that PyTorch trains.

    An initializer is matched to the model's tensor by its name in the
    state_dict (torch.onnx.export keeps those names; a tied parameter is
    exported once, under one of its names). An initializer the export
    renamed is matched by value against the tensors of its dtype and shape;
    it is classified when every match agrees. Every floating-point
    initializer must be classified: a guess here would silently train a
    buffer or freeze a weight, so anything else raises ValueError."""
    import numpy as np
    import torch
    from onnx import numpy_helper
    sd = model.state_dict(keep_vars=True)
    trains = {name: isinstance(t, torch.nn.Parameter) and t.requires_grad
              for name, t in sd.items()}
    out, unknown = [], []
    for init in onnx_model.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype.kind != "f":
            continue
        if init.name in sd:
            verdict = {trains[init.name]}
        else:
            verdict = {trains[n] for n, t in sd.items()
                       if t.is_floating_point() and tuple(t.shape) == a.shape
                       and np.array_equal(t.detach().cpu().numpy(), a)}
        if len(verdict) != 1:
            unknown.append("%s (%s)" % (init.name, "no tensor of the model has its value"
                                        if not verdict else
                                        "equal to both trained and frozen tensors"))
            continue
        if verdict.pop():
            out.append(init.name)
    if unknown:
        raise ValueError("cannot tell whether these exported initializers train: %s"
                         % ", ".join(unknown))
    return out


# safetensors dtype names of the tensors a state_dict entry may hold.
_ST_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
              "int64": "I64", "int32": "I32", "uint8": "U8", "bool": "BOOL"}


def state_dict_layout(model, onnx_model):
    """The model's state_dict in terms of the exported initializers: a list,
    in state_dict order, with one item per key:

    * ``[key, initializer]``: the key's value is that initializer's. That is
      the key itself (torch.onnx keeps state_dict names), the exported name
      of a tensor the key shares (a tied weight such as ``lm_head.weight =
      transformer.wte.weight`` is exported once, under one of its names), or
      an initializer the export renamed, matched by value when exactly one
      tensor of the model has it;
    * ``[key, None, dtype, shape, base64]``: no initializer holds it (a
      buffer or parameter the traced graph does not use): its safetensors
      dtype, shape and little-endian bytes.

    Raises ValueError when a renamed initializer's tensor is ambiguous (a
    guess could write one trained weight under another's name)."""
    import numpy as np
    import torch
    from onnx import numpy_helper
    sd = model.state_dict(keep_vars=True)
    inits = {i.name: i for i in onnx_model.graph.initializer}
    # One exported name per tensor: its own name, else any alias's.
    exported = {}
    for key, t in sd.items():
        if key in inits:
            exported.setdefault(id(t), key)
    renamed = [n for n in inits if n not in sd]
    values = {}

    def value(t):
        return t.detach().cpu().contiguous().numpy() if t.dtype != torch.bfloat16 else None

    out = []
    for key, t in sd.items():
        src = exported.get(id(t))
        if src is None and renamed:
            a = value(t)
            hits = []
            for n in renamed:
                if n not in values:
                    values[n] = numpy_helper.to_array(inits[n])
                b = values[n]
                if a is not None and b.dtype == a.dtype and b.shape == a.shape \
                        and np.array_equal(a, b):
                    hits.append(n)
            if hits:
                twins = {id(u) for u in sd.values()
                         if tuple(u.shape) == tuple(t.shape) and u.dtype == t.dtype
                         and np.array_equal(value(u), a)}
                if len(hits) > 1 or len(twins) > 1:
                    raise ValueError("state_dict entry %s: its value is in initializers %s "
                                     "and tensors of the model share it; cannot tell which "
                                     "initializer it is" % (key, ", ".join(hits)))
                src = hits[0]
        if src is not None:
            out.append([key, src])
            continue
        out.append(state_dict_entry(key, t))
    return out


def state_dict_entry(key, t):
    """The layout entry of a state_dict key no initializer holds: ``[key,
    None, dtype, shape, base64]``, its value inline."""
    import base64
    import numpy as np
    import torch
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in _ST_DTYPES:
        raise ValueError("state_dict entry %s is %s, which is not exported and has no "
                         "safetensors type here" % (key, dtype))
    a = t.detach().cpu().contiguous()
    raw = (a.view(torch.int16).numpy() if dtype == "bfloat16" else a.numpy())
    return [key, None, _ST_DTYPES[dtype], list(a.shape),
            base64.b64encode(np.ascontiguousarray(raw).astype(
                raw.dtype.newbyteorder("<")).tobytes()).decode("ascii")]


def _set_metadata(m, key, value):
    kept = [(e.key, e.value) for e in m.metadata_props if e.key != key]
    del m.metadata_props[:]
    for k, v in kept:
        e = m.metadata_props.add()
        e.key, e.value = k, v
    entry = m.metadata_props.add()
    entry.key = key
    entry.value = value


def _record_trainable(model, out):
    """Writes TRAINABLE_KEY and STATE_DICT_KEY into the exported file's
    metadata_props. A state dict it cannot map is left unrecorded, with a
    warning: dsrt export then names tensors as the initializers are named."""
    import json
    import onnx
    # Above 2 GB torch has written each tensor to a file of its own; the
    # metadata needs only the names and shapes, and the file stays a
    # protobuf under its 2 GB limit.
    m = onnx.load_model(out, load_external_data=False)
    full = onnx.load_model(out)  # the values, to match renamed initializers
    names = trainable_initializers(model, full)
    _set_metadata(m, TRAINABLE_KEY, json.dumps(names, separators=(",", ":")))
    try:
        layout = state_dict_layout(model, full)
        _set_metadata(m, STATE_DICT_KEY, json.dumps(layout, separators=(",", ":")))
    except ValueError as e:
        print("warning: %s not recorded: %s" % (STATE_DICT_KEY, e), file=sys.stderr)
    onnx.save_model(m, out)
    return names


def export(model, inputs, input_names, args):
    """Export ``model`` (forward(*inputs) -> scalar loss) to ``args.output``."""
    import torch

    model.train()
    inputs = tuple(inputs)
    if args.save_batch:
        _save_batch(args.save_batch, input_names, inputs)

    dynamic_axes = None
    if args.dynamic_batch:
        dynamic_axes = {n: {0: "batch"} for n in input_names}

    out = args.output
    d = os.path.dirname(os.path.abspath(out))
    os.makedirs(d, exist_ok=True)

    if getattr(args, "format", "onnx") == "torchscript":
        t0 = time.perf_counter()
        if args.jit == "script":
            jitted = torch.jit.script(model)
        else:
            jitted = torch.jit.trace(model, inputs, check_trace=False)
        torch.jit.save(jitted, out)
        # dsc needs each input's shape, and a dtype where use does not tell.
        flags = []
        for name, t in zip(input_names, inputs):
            spec = "%s=%s" % (name, "x".join(str(s) for s in t.shape))
            if t.dtype == torch.int64:
                spec += ":int64"
            elif t.dtype == torch.bool:
                spec += ":bool"
            flags.append("--input-shape " + spec)
        print("wrote %s (%d bytes): TorchScript (torch.jit.%s), %.2fs; dsc %s %s" % (
            out, os.path.getsize(out), args.jit, time.perf_counter() - t0, out, " ".join(flags)),
            file=sys.stderr)
        return

    t0 = time.perf_counter()
    torch.onnx.export(
        model,
        inputs,
        out,
        export_params=True,
        opset_version=args.opset,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=list(input_names),
        output_names=["loss"],
        dynamic_axes=dynamic_axes,
    )
    t1 = time.perf_counter()
    trained = _record_trainable(model, out)

    extra = ""
    if args.external_data:
        data_path = _resave_external(out)
        extra = ", data %s (%d bytes)" % (data_path, os.path.getsize(data_path))
    if _model_name:
        _write_sidecar(out, _model_name, input_names, args)
    nparams = sum(p.numel() for p in model.parameters())
    nfrozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print("wrote %s (%d bytes%s): %d params%s, %d trainable initializers, opset %d, "
          "export %.2fs" % (
              out, os.path.getsize(out), extra, nparams,
              " (%d frozen)" % nfrozen if nfrozen else "", len(trained), args.opset,
              t1 - t0),
        file=sys.stderr)


class _ParametersOnMeta:
    """While active, every parameter a module registers lives on PyTorch's
    meta device: shapes and dtypes without storage, and the initializers
    (nn.init.*) do nothing. Buffers stay real."""

    def __enter__(self):
        import torch.nn as nn
        self._register = nn.Module.register_parameter
        register = self._register

        def on_meta(module, name, param):
            if param is not None and param.device.type != "meta":
                param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
            return register(module, name, param)
        nn.Module.register_parameter = on_meta
        return self

    def __exit__(self, *exc):
        import torch.nn as nn
        nn.Module.register_parameter = self._register


def export_no_weights(model, inputs, input_names, args):
    """``--no-weights``: exports ``model``, whose parameters are on the meta
    device, with the parameters as graph inputs (no values) named in the
    metadata key NO_WEIGHTS_KEY, the buffers as initializers with their
    values (identical ones stored once), and the trainable list and
    state_dict layout as a full export records them."""
    import json
    import numpy as np
    import onnx
    import torch
    import torch.onnx.utils as onnx_utils
    from onnx import numpy_helper
    from torch.onnx._globals import GLOBALS

    if getattr(args, "format", "onnx") != "onnx":
        sys.exit("error: --no-weights exports ONNX only (--format onnx)")
    if args.external_data or args.dynamic_batch:
        sys.exit("error: --no-weights takes neither --external-data (the file holds no "
                 "weights) nor --dynamic-batch")
    model.train()
    inputs = tuple(inputs)
    if args.save_batch:
        _save_batch(args.save_batch, input_names, inputs)
    # The trace sees meta buffers too (a real buffer beside a meta tensor
    # is a device mismatch); their values go back in afterwards.
    buffers = {}
    for mod_name, mod in model.named_modules():
        for b_name, b in list(mod._buffers.items()):
            if b is not None:
                buffers[(mod_name + "." if mod_name else "") + b_name] = b
                mod._buffers[b_name] = b.to("meta")
    out = args.output
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    t0 = time.perf_counter()
    # torch 1.13's exporter infers shapes by running ops on the values and
    # deduplicates initializers by storage, which meta tensors lack (every
    # meta parameter would be the same one): both off. dsc infers the
    # shapes itself; tied parameters are one tensor in the trace anyway.
    import warnings
    dedup = torch._C._jit_pass_onnx_deduplicate_initializers
    inference = GLOBALS.onnx_shape_inference
    with warnings.catch_warnings():
        # Without shape inference torch warns that it cannot infer types.
        warnings.filterwarnings("ignore", message="Type cannot be inferred")
        try:
            torch._C._jit_pass_onnx_deduplicate_initializers = (
                lambda graph, params, training: params)
            GLOBALS.onnx_shape_inference = False
            onnx_utils._export(model, inputs, out, export_params=False,
                               opset_version=args.opset,
                               training=torch.onnx.TrainingMode.TRAINING,
                               do_constant_folding=False, onnx_shape_inference=False,
                               input_names=list(input_names), output_names=["loss"])
        finally:
            torch._C._jit_pass_onnx_deduplicate_initializers = dedup
            GLOBALS.onnx_shape_inference = inference
    t1 = time.perf_counter()

    m = onnx.load_model(out)
    graph = m.graph
    sd = model.state_dict(keep_vars=True)
    params = {id(p) for p in model.parameters()}
    state = [i.name for i in graph.input if i.name not in input_names]
    unknown = [n for n in state if n not in sd and n not in buffers]
    if unknown:
        sys.exit("error: --no-weights: graph inputs %s are no state_dict entry of the model"
                 % ", ".join(unknown))
    # Buffers: initializers with their values, identical ones once.
    canonical, stored = {}, {}
    for name in [n for n in state if n in buffers]:
        a = buffers[name].detach().cpu().contiguous().numpy()
        key = (a.dtype.str, a.shape, a.tobytes())
        if key not in stored:
            stored[key] = name
            graph.initializer.append(numpy_helper.from_array(a, name))
        canonical[name] = stored[key]
    kept = [i for i in graph.input if i.name not in buffers]
    del graph.input[:]
    graph.input.extend(kept)
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in canonical:
                node.input[k] = canonical[name]
    weightless = [n for n in state if n not in buffers]
    _set_metadata(m, NO_WEIGHTS_KEY, json.dumps(weightless, separators=(",", ":")))
    trainable = [n for n in weightless if sd[n].requires_grad]
    _set_metadata(m, TRAINABLE_KEY, json.dumps(trainable, separators=(",", ":")))
    # The state_dict layout: each key by the input or initializer holding
    # it (a tied key by its tensor's exported name).
    holder = {}
    for key, t in sd.items():
        name = canonical.get(key, key)
        if key in weightless or key in canonical:
            holder.setdefault(id(t), name)
    layout = []
    for key, t in sd.items():
        if id(t) in holder:
            layout.append([key, holder[id(t)]])
        elif id(t) in params:
            sys.exit("error: --no-weights: parameter %s is not used by the model's forward; "
                     "the file could not name its value" % key)
        else:  # a buffer the forward does not read: its value inline
            layout.append(state_dict_entry(key, buffers.get(key, t)))
    _set_metadata(m, STATE_DICT_KEY, json.dumps(layout, separators=(",", ":")))
    onnx.save_model(m, out)
    if _model_name:
        _write_sidecar(out, _model_name, input_names, args)
    count = sum(p.numel() for p in model.parameters())
    print("wrote %s (%d bytes): %d params without their values (%.1f GB as float32), "
          "%d trainable, %d buffers, opset %d, export %.2fs" % (
              out, os.path.getsize(out), count, count * 4 / 1e9, len(trainable),
              len(stored), args.opset, t1 - t0), file=sys.stderr)


def build_and_export(args, build_model, make_batch):
    """Seeds torch, builds the model and its example batch, and exports."""
    if _capture is not None:
        _capture.append(args)
        return
    import torch
    torch.manual_seed(args.seed)
    if getattr(args, "no_weights", False):
        with _ParametersOnMeta():
            model = build_model(args)
    else:
        model = build_model(args)
    try:
        apply_freeze(model, getattr(args, "freeze", None))
    except ValueError as e:
        sys.exit("error: %s" % e)
    inputs, names = make_batch(args)
    global _model_name
    model_file = build_model.__globals__.get("__file__") or sys.argv[0]
    _model_name = os.path.splitext(os.path.basename(model_file))[0]
    if getattr(args, "no_weights", False):
        export_no_weights(model, inputs, names, args)
    else:
        export(model, inputs, names, args)
