#!/usr/bin/python3
"""PyTorch reference for the dsc/dsrt end-to-end parity tests.

Trains the model that models/<name>.py exported, starting from the weights
stored in the ONNX file, with the DeepSpeed semantics that ds_config.json
describes, and writes what dsrt writes:

    OUT/metrics.csv          step,loss,lr,grad_norm,step_time_s  (step from 1)
    OUT/weights.safetensors  final trainable parameters (float32) under their
                             ONNX initializer names; parameters with
                             requires_grad=False (export --freeze) and buffers
                             are not written, as dsrt writes only what it trains

    /usr/bin/python3 test/e2e/reference_train.py --onnx m.onnx \\
        --config ds_config.json --data DATA --steps 20 --out OUT

The model is rebuilt from the sidecar ``m.onnx.json`` that the export writes
(models/export_common.py); without one, pass ``--model NAME`` followed by the
export flags (``-- --size tiny --dropout 0``). Dropout must be 0.

Semantics replicated (single rank, float32; with ``--precision bf16``, dsc's
bf16 mixed precision as described in :class:`Bf16Semantics`):

* batch: train_batch_size = micro_batch * gradient_accumulation_steps; any two
  of the three keys determine the third, as DeepSpeed does.
* data: DATA is a folder of ``<input>.npy`` (dim 0 = samples) or a flat uint16
  token file (GPT: inputs input_ids and targets). Micro-batch k (counted over
  the whole run; step s from 0 uses s*gas .. s*gas+gas-1) takes rows
  (k*mb + i) mod N, i < mb. For a token file, overall row r starts at
  p = (r mod R) * T with R = (L - 1) // T windows (so p + T + 1 <= L), and
  input_ids = tok[p:p+T], targets = tok[p+1:p+T+1].
* gradient accumulation: each micro-batch loss / gas is back-propagated and
  the gradients are summed (DeepSpeed engine.backward scales by 1/gas).
* metrics: loss = mean of the (unscaled) micro-batch losses of the step,
  lr = the learning rate used by that step's update, grad_norm = global L2
  norm of the accumulated gradient before clipping.
* clipping: ``gradient_clipping`` > 0 (DeepSpeed's default 1.0) -> torch.nn.utils.clip_grad_norm_
  (coef = max_norm / (norm + 1e-6), applied when < 1), as DeepSpeed's
  clip_fp32_gradients does.
* optimizer (DeepSpeed engine._configure_basic_optimizer):
  "Adam"/"AdamW" -> AdamW semantics (FusedAdam adam_w_mode=True; "Adam" with
  params.adam_w_mode=false -> torch.optim.Adam, L2 decay). FusedAdam's
  defaults apply (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0 --
  note: *not* torch.optim.AdamW's 0.01), except with params.torch_adam=true,
  where DeepSpeed builds torch.optim.Adam/AdamW with torch's defaults.
  "SGD" -> torch.optim.SGD(**params).
  "Lamb" / "Lion" -> DeepSpeed's FusedLamb / FusedLion rules (ds_optimizers.py);
  "Adagrad" -> torch.optim.Adagrad(**params), as DeepSpeed builds it.
* scheduler: see :class:`DeepSpeedSchedule` (WarmupLR, WarmupDecayLR,
  WarmupCosineLR; no scheduler = constant params.lr).
"""

import argparse
import csv
import importlib
import json
import math
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(REPO, "models")


def fail(msg):
    print("reference_train: error: " + msg, file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------
# ds_config.json
# ---------------------------------------------------------------------------

def resolve_batch(cfg, world_size=1):
    """(train_batch_size, micro_batch, gas) like DeepSpeed's
    _set_batch_related_parameters (world_size ranks of data parallelism)."""
    tb = cfg.get("train_batch_size")
    mb = cfg.get("train_micro_batch_size_per_gpu")
    gas = cfg.get("gradient_accumulation_steps")
    if tb is not None and mb is not None and gas is not None:
        if tb != mb * gas * world_size:
            fail("train_batch_size %d != micro batch %d * gradient_accumulation_steps "
                 "%d * %d rank(s)" % (tb, mb, gas, world_size))
    elif tb is not None and mb is not None:
        gas = tb // mb // world_size
    elif tb is not None and gas is not None:
        mb = tb // world_size // gas
    elif mb is not None and gas is not None:
        tb = mb * gas * world_size
    elif tb is not None:
        gas, mb = 1, tb // world_size
    elif mb is not None:
        gas, tb = 1, mb * world_size
    else:
        fail("ds_config needs train_batch_size or train_micro_batch_size_per_gpu")
    if mb <= 0 or gas <= 0 or tb != mb * gas * world_size:
        fail("inconsistent batch settings: train_batch_size %s, micro batch %s, "
             "gradient_accumulation_steps %s" % (tb, mb, gas))
    return tb, mb, gas


WARMUP_LOG, WARMUP_LINEAR = "log", "linear"


class DeepSpeedSchedule:
    """DeepSpeed's lr schedules (deepspeed/runtime/lr_schedules.py), written
    independently as pure functions of ``last_batch_iteration`` i.

    When the lr is applied (DeepSpeed, current upstream):
      * engine._configure_lr_scheduler builds the scheduler from the config
        and does NOT call step().
      * the constructor, with last_batch_iteration = -1 (the default), writes
        get_lr() at i = -1 into the optimizer ("# Initialize lr in optimizer":
        WarmupLR / WarmupDecayLR -> warmup_min_lr; WarmupCosineLR -> 0.0,
        since its get_lr() returns [0.0] before it has started).
      * engine._take_model_step calls optimizer.step() and THEN
        lr_scheduler.step(), which sets i += 1 and writes get_lr() at i.
    So the k-th update (k = 1, 2, ...) uses

        lr_1 = f(-1)          (the constructor's value)
        lr_k = f(k - 2)       for k >= 2

    i.e. the first two updates both run at the start of the warmup (f(-1) ==
    f(0) == warmup_min_lr for WarmupLR; 0 and org_lr*warmup_min_ratio for
    WarmupCosineLR), and warmup_max_lr is first used by update
    warmup_num_steps + 2. (Older DeepSpeed releases did not write the lr in
    the constructor, so their first update used optimizer.params.lr.)

    f(i) per schedule (n = max(2, warmup_num_steps)):
      gamma_warm(i) = log(i + 1) / log(n)  [log]   or   i / n  [linear]
      WarmupLR:       i < n: min + (max - min) * gamma_warm(i);  else max
                      (warmup_max_lr defaults to optimizer lr)
      WarmupDecayLR:  as WarmupLR for i < n, then
                      min + (max - min) * max(0, (total - i) / max(1, total - n))
                      (warmup_max_lr defaults to 0.001)
      WarmupCosineLR: org_lr * ratio(i); i < n: wmin + gamma_warm(i) * (1 - wmin),
                      else max(0, cmin + (1 - cmin) * (1 + cos(pi * (i - n + 1)
                      / (total - n))) / 2)
    An unknown warmup_type falls back to log (DeepSpeed warns and does so).
    """

    def __init__(self, sched_cfg, base_lr):
        self.base_lr = base_lr
        self.kind = None
        if not sched_cfg:
            return
        self.kind = sched_cfg.get("type")
        p = dict(sched_cfg.get("params") or {})
        known = {
            "WarmupLR": {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                         "warmup_type", "last_batch_iteration"},
            "WarmupDecayLR": {"total_num_steps", "warmup_min_lr", "warmup_max_lr",
                              "warmup_num_steps", "warmup_type",
                              "last_batch_iteration"},
            "WarmupCosineLR": {"total_num_steps", "warmup_min_ratio",
                               "warmup_num_steps", "cos_min_ratio", "warmup_type",
                               "last_batch_iteration"},
            "OneCycle": {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate",
                         "cycle_first_step_size", "cycle_second_step_size",
                         "cycle_first_stair_count", "cycle_second_stair_count",
                         "decay_step_size", "cycle_momentum", "cycle_min_mom",
                         "cycle_max_mom", "decay_mom_rate", "last_batch_iteration"},
        }
        if self.kind not in known:
            fail("scheduler type %r is not implemented by the reference (have: %s)"
                 % (self.kind, ", ".join(sorted(known))))
        extra = set(p) - known[self.kind]
        if extra:
            fail("scheduler %s: unknown params %s" % (self.kind, sorted(extra)))
        if p.get("last_batch_iteration", -1) != -1:
            fail("scheduler last_batch_iteration != -1 (resuming) is not supported")
        if self.kind == "OneCycle":
            self._init_one_cycle(p)
            return
        wt = p.get("warmup_type", WARMUP_LOG)
        if wt not in (WARMUP_LOG, WARMUP_LINEAR):
            print("reference_train: warning: unknown warmup_type %r, using log "
                  "(as DeepSpeed does)" % wt, file=sys.stderr)
            wt = WARMUP_LOG
        self.warmup_type = wt
        self.n = max(2, int(p.get("warmup_num_steps", 1000)))
        self.inverse_log_warm_up = 1.0 / math.log(self.n)
        if self.kind in ("WarmupLR", "WarmupDecayLR"):
            self.min_lr = float(p.get("warmup_min_lr", 0.0))
            default_max = base_lr if self.kind == "WarmupLR" else 0.001
            mx = p.get("warmup_max_lr")
            self.max_lr = float(default_max if mx is None else mx)
            self.delta = self.max_lr - self.min_lr
        if self.kind in ("WarmupDecayLR", "WarmupCosineLR"):
            if "total_num_steps" not in p:
                fail("scheduler %s needs params.total_num_steps" % self.kind)
            self.total = int(p["total_num_steps"])
        if self.kind == "WarmupCosineLR":
            self.wmin = float(p.get("warmup_min_ratio", 0.0))
            self.cmin = float(p.get("cos_min_ratio", 0.0001))
            self.org_lr = base_lr

    def _init_one_cycle(self, p):
        """OneCycle's constructor (lr_schedules.py): the cycle's two halves,
        their stairs, the decay after it, and the momentum it writes into
        optimizers with betas as (momentum, 0.99)."""
        self.min_lr = float(p["cycle_min_lr"])
        self.max_lr = float(p["cycle_max_lr"])
        self.decay_lr_rate = float(p.get("decay_lr_rate", 0.0))
        first = float(p.get("cycle_first_step_size", 2000))
        second = p.get("cycle_second_step_size")
        second = first if second is None else float(second)
        self.total_size = first + second
        self.step_ratio = first / self.total_size
        self.first_size, self.second_size = first, second
        self.first_stairs = p.get("cycle_first_stair_count", 0)
        stairs2 = p.get("cycle_second_stair_count")
        self.second_stairs = self.first_stairs if stairs2 is None else stairs2
        self.decay_step_size = p.get("decay_step_size", 0)
        self.skip_lr_decay = math.isclose(self.decay_step_size, 0) or math.isclose(
            self.decay_lr_rate, 0)
        self.cycle_momentum = bool(p.get("cycle_momentum", True))
        self.min_mom = float(p.get("cycle_min_mom", 0.8))
        self.max_mom = float(p.get("cycle_max_mom", 0.9))
        self.decay_mom_rate = float(p.get("decay_mom_rate", 0.0))
        self.skip_mom_decay = math.isclose(self.decay_step_size, 0) or math.isclose(
            self.decay_mom_rate, 0)

    def _scale(self, i):
        """OneCycle._get_scale_factor at last_batch_iteration i."""
        b = i + 1
        cycle = math.floor(1 + b / self.total_size)
        x = 1.0 + b / self.total_size - cycle
        if x <= self.step_ratio:
            scale, stairs = x / self.step_ratio, self.first_stairs
        else:
            scale, stairs = (x - 1) / (self.step_ratio - 1), self.second_stairs
        if stairs > 0:
            pos = b % self.total_size
            if pos <= self.first_size:
                at = pos * stairs / self.first_size
            else:
                at = (self.total_size - pos) * stairs / self.second_size
            scale = math.floor(at) / stairs
        return scale

    def betas_for_update(self, k):
        """The (beta1, beta2) OneCycle writes into an optimizer with betas
        before the k-th update, or None when it leaves them alone."""
        if self.kind != "OneCycle" or not self.cycle_momentum:
            return None
        if k == 1:  # the constructor's min_moms
            return (self.min_mom, 0.99)
        i = k - 2
        if i < self.total_size:
            return (self.max_mom - (self.max_mom - self.min_mom) * self._scale(i), 0.99)
        if self.skip_mom_decay:
            return (self.max_mom, 0.99)
        interval = (i - self.total_size + 1) / self.decay_step_size
        return (self.max_mom * (1 + self.decay_mom_rate * interval), 0.99)

    def _gamma_warm(self, i):
        if self.warmup_type == WARMUP_LOG:
            return self.inverse_log_warm_up * math.log(i + 1)
        return i / self.n

    def f(self, i):
        """The lr DeepSpeed writes into the optimizer at last_batch_iteration i."""
        if self.kind is None:
            return self.base_lr
        if self.kind == "OneCycle":
            if i < 0:
                return self.min_lr
            if i < self.total_size:
                return self.min_lr + (self.max_lr - self.min_lr) * self._scale(i)
            if self.skip_lr_decay:
                return self.min_lr
            interval = (i - self.total_size + 1) / self.decay_step_size
            return self.min_lr / (1 + self.decay_lr_rate * interval)
        if self.kind in ("WarmupLR", "WarmupDecayLR"):
            if i < 0:
                return self.min_lr
            if i < self.n:
                gamma = self._gamma_warm(i)
            elif self.kind == "WarmupLR":
                gamma = 1.0
            else:
                gamma = max(0.0, float(self.total - i)
                            / float(max(1.0, self.total - self.n)))
            return self.min_lr + self.delta * gamma
        # WarmupCosineLR
        if i < 0:
            return 0.0
        if i < self.n:
            ratio = self.wmin + self._gamma_warm(i) * (1.0 - self.wmin)
        else:
            real_last = i - self.n + 1
            real_total = self.total - self.n
            ratio = (1 + math.cos(math.pi * real_last / real_total)) / 2
            ratio = max(0.0, self.cmin + (1.0 - self.cmin) * ratio)
        return self.org_lr * ratio

    def lr_for_update(self, k):
        """lr of the k-th optimizer update, k = 1, 2, ..."""
        return self.f(-1) if k == 1 else self.f(k - 2)


def optimizer_spec(cfg):
    """(factory(params) -> torch optimizer, base_lr) from the config."""
    ocfg = cfg.get("optimizer")
    if not ocfg or "type" not in ocfg:
        fail("ds_config has no optimizer.type")
    name = ocfg["type"]
    p = dict(ocfg.get("params") or {})
    if "max_grad_norm" in p:
        fail("optimizer.params.max_grad_norm is not supported (DeepSpeed rejects it "
             "too); use gradient_clipping")
    low = name.lower()
    if low in ("adam", "adamw"):
        torch_adam = bool(p.pop("torch_adam", False))
        adam_w_mode = bool(p.pop("adam_w_mode", True))
        decoupled = low == "adamw" or adam_w_mode
        if not p.pop("bias_correction", True):
            fail("optimizer.params.bias_correction=false is not supported")
        if p.pop("amsgrad", False):
            fail("amsgrad is not supported (FusedAdam rejects it)")
        extra = set(p) - {"lr", "betas", "eps", "weight_decay"}
        if extra:
            fail("optimizer %s: unknown params %s" % (name, sorted(extra)))
        kw = {}
        if not torch_adam:  # FusedAdam defaults
            kw = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        kw.update(p)
        if "betas" in kw:
            kw["betas"] = tuple(kw["betas"])

        def make(params):
            import torch
            cls = torch.optim.AdamW if decoupled else torch.optim.Adam
            return cls(params, **kw)
        base_lr = kw.get("lr", 1e-3)
    elif low == "sgd":
        extra = set(p) - {"lr", "momentum", "dampening", "weight_decay", "nesterov"}
        if extra:
            fail("optimizer SGD: unknown params %s" % sorted(extra))
        if "lr" not in p:
            fail("optimizer SGD needs params.lr")

        def make(params):
            import torch
            return torch.optim.SGD(params, **p)
        base_lr = p["lr"]
    elif low in ("lamb", "lion", "adagrad"):
        allowed = {"lamb": {"lr", "bias_correction", "betas", "eps", "weight_decay",
                            "max_coeff", "min_coeff"},
                   "lion": {"lr", "betas", "weight_decay"},
                   "adagrad": {"lr", "lr_decay", "weight_decay", "eps"}}[low]
        extra = set(p) - allowed
        if extra:
            fail("optimizer %s: unknown params %s" % (name, sorted(extra)))
        if "betas" in p:
            p["betas"] = tuple(p["betas"])

        def make(params):
            import torch
            import ds_optimizers
            cls = {"lamb": ds_optimizers.FusedLambRule, "lion": ds_optimizers.FusedLionRule,
                   "adagrad": torch.optim.Adagrad}[low]
            return cls(params, **p)
        base_lr = p.get("lr", 1e-2 if low == "adagrad" else 1e-3)
    elif low in ("onebitadam", "zerooneadam", "onebitlamb"):
        # The 1-bit family: each rule's keys; bias_correction and
        # eps_inside_sqrt are stored and never read by DeepSpeed, cuda_aware
        # and comm_backend_name choose its transport.
        rule, keys = {
            "onebitadam": ("OnebitAdamRule", {"freeze_step"}),
            "zerooneadam": ("ZeroOneAdamRule", {"var_freeze_step", "var_update_scaler",
                                                "local_step_scaler", "local_step_clipper"}),
            "onebitlamb": ("OnebitLambRule", {"freeze_step", "max_coeff", "min_coeff",
                                              "coeff_beta", "factor_max", "factor_min",
                                              "factor_threshold"}),
        }[low]
        for key in ("bias_correction", "eps_inside_sqrt", "cuda_aware", "comm_backend_name"):
            p.pop(key, None)
        extra = set(p) - {"lr", "betas", "eps", "weight_decay"} - keys
        if extra:
            fail("optimizer %s: unknown params %s" % (name, sorted(extra)))

        def make(params, workers, wrapped=False):
            import ds_optimizers
            return getattr(ds_optimizers, rule)(params, workers, wrapped=wrapped, **p)
        make.workers = True
        base_lr = p.get("lr", 1e-3)
    else:
        fail("optimizer type %r is not implemented by the reference "
             "(have: Adam, AdamW, SGD, Lamb, Lion, Adagrad, OneBitAdam, ZeroOneAdam, OneBitLamb)" % name)
    return make, float(base_lr)


def check_precision(cfg, precision="fp32"):
    """The config's precision sections: none for float32; with --precision
    bf16 a bf16 section may be there (dsc --precision overrides it too)."""
    allowed = ("bf16", "bfloat16") if precision == "bf16" else ()
    for key in ("fp16", "bf16", "bfloat16", "amp"):
        if key not in allowed and (cfg.get(key) or {}).get("enabled"):
            fail("%s.enabled: the parity reference trains in float32 or, with "
                 "--precision bf16, in bf16 mixed precision" % key)


# ---------------------------------------------------------------------------
# ONNX model and weights
# ---------------------------------------------------------------------------

ONNX_DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
               11: "float64"}


def onnx_graph_info(path):
    """(inputs [(name, dtype str, dims list with None for symbolic)],
    initializers {name: np.ndarray} in graph order)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {}
    for t in m.graph.initializer:
        inits[t.name] = numpy_helper.to_array(t)
    inputs = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        inputs.append((i.name, ONNX_DTYPES.get(tt.elem_type, str(tt.elem_type)), dims))
    return inputs, inits


def trainable_metadata(path):
    """The export's list of trainable initializers (export_common.TRAINABLE_KEY),
    or None when the file has none."""
    import onnx
    sys.path.insert(0, MODELS)
    import export_common as ec
    for e in onnx.load(path, load_external_data=False).metadata_props:
        if e.key == ec.TRAINABLE_KEY:
            return json.loads(e.value)
    return None


def load_model_args(onnx_path, model_name, flags):
    """(model name, module, namespace) from the sidecar or from flags."""
    sys.path.insert(0, MODELS)
    import export_common as ec
    side = ec.sidecar_path(onnx_path)
    if flags:
        if not model_name:
            fail("export flags given without --model")
        mod = importlib.import_module(model_name)
        return model_name, mod, ec.model_args(mod.main, flags)
    if os.path.exists(side):
        with open(side) as f:
            doc = json.load(f)
        if model_name and model_name != doc["model"]:
            fail("--model %s, but %s says %s" % (model_name, side, doc["model"]))
        mod = importlib.import_module(doc["model"])
        return doc["model"], mod, argparse.Namespace(**doc["args"])
    fail("no sidecar %s: pass --model NAME -- EXPORT_FLAGS..." % side)


def load_initializers(model, inits):
    """Copies every ONNX initializer into the model. Returns
    [(onnx_name, parameter)] for the trainable parameters, in ONNX order.
    Every initializer must name a parameter or buffer (tied parameters appear
    under several state_dict names but are one tensor), and every parameter
    must receive a value."""
    import numpy as np
    import torch
    sd = model.state_dict(keep_vars=True)
    unknown = [n for n in inits if n not in sd]
    if unknown:
        fail("ONNX initializers with no torch parameter/buffer: %s" % unknown)
    param_ids = {id(p) for p in model.parameters()}
    names_of = {}
    for n, t in sd.items():
        names_of.setdefault(id(t), []).append(n)
    onnx_order = {n: i for i, n in enumerate(inits)}
    out = []
    for tid, names in names_of.items():
        t = sd[names[0]]
        given = [n for n in names if n in inits]
        if not given:
            if tid in param_ids:
                fail("parameter %s has no ONNX initializer" % " = ".join(names))
            print("reference_train: warning: buffer %s not in the ONNX file; keeping "
                  "the built value" % names[0], file=sys.stderr)
            continue
        a = inits[given[0]]
        for other in given[1:]:
            if not np.array_equal(inits[other], a):
                fail("tied tensors %s and %s differ in the ONNX file" % (given[0], other))
        if tuple(a.shape) != tuple(t.shape):
            fail("initializer %s has shape %s, torch expects %s"
                 % (given[0], list(a.shape), list(t.shape)))
        src = torch.from_numpy(np.array(a, copy=True))
        if src.dtype != t.dtype:
            fail("initializer %s has dtype %s, torch expects %s"
                 % (given[0], src.dtype, t.dtype))
        with torch.no_grad():
            t.copy_(src)
        if tid in param_ids:
            out.append((given[0], t))
    out.sort(key=lambda x: onnx_order[x[0]])
    if len(out) != len(param_ids):
        fail("internal: %d of %d parameters mapped" % (len(out), len(param_ids)))
    return out


def write_safetensors(path, tensors):
    """tensors: [(name, float32 numpy array)]. 8-byte LE header length, JSON
    header padded with spaces to a multiple of 8, then the raw data."""
    import numpy as np
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

class Data:
    """Micro-batches in dsrt's order (see the module docstring)."""

    def __init__(self, path, inputs, mb):
        import numpy as np
        self.mb = mb
        self.inputs = inputs
        names = [n for n, _, _ in inputs]
        for n, _, dims in inputs:
            if dims and dims[0] is not None and dims[0] != mb:
                fail("ONNX input %s has batch dimension %d but the config's micro "
                     "batch is %d (export with --batch %d or --dynamic-batch)"
                     % (n, dims[0], mb, mb))
        if os.path.isdir(path):
            self.tokens = None
            self.arrays = {}
            for n, dt, dims in inputs:
                f = os.path.join(path, n + ".npy")
                if not os.path.exists(f):
                    fail("missing %s for graph input %s" % (f, n))
                a = np.load(f, mmap_mode="r")
                if list(a.shape[1:]) != [d for d in dims[1:]]:
                    fail("%s has shape %s; input %s needs [N, %s]"
                         % (f, list(a.shape), n, ", ".join(map(str, dims[1:]))))
                if np.dtype(dt).kind != a.dtype.kind:
                    fail("%s has dtype %s; input %s is %s" % (f, a.dtype, n, dt))
                self.arrays[n] = (a, np.dtype(dt))
            counts = {n: a.shape[0] for n, (a, _) in self.arrays.items()}
            if len(set(counts.values())) != 1:
                fail("the .npy files have different sample counts: %s" % counts)
            self.n = next(iter(counts.values()))
            if self.n == 0:
                fail("no samples in %s" % path)
        else:
            if sorted(names) != ["input_ids", "targets"]:
                fail("a token file feeds models with inputs input_ids and targets; "
                     "this one has %s" % names)
            self.tokens = np.fromfile(path, dtype="<u2")
            dims = dict((n, d) for n, _, d in inputs)
            self.T = dims["input_ids"][1]
            self.windows = (len(self.tokens) - 1) // self.T
            if self.windows < 1:
                fail("token file %s has %d tokens, fewer than seq+1 = %d"
                     % (path, len(self.tokens), self.T + 1))

    def micro_batch(self, k):
        import numpy as np
        import torch
        rows = np.arange(k * self.mb, (k + 1) * self.mb)
        if self.tokens is None:
            idx = rows % self.n
            out = []
            for n, _, _ in self.inputs:
                a, dt = self.arrays[n]
                out.append(torch.from_numpy(np.ascontiguousarray(a[idx]).astype(dt)))
            return out
        starts = (rows % self.windows) * self.T
        win = np.stack([self.tokens[p:p + self.T + 1] for p in starts]).astype(np.int64)
        t = {"input_ids": torch.from_numpy(win[:, :-1].copy()),
             "targets": torch.from_numpy(win[:, 1:].copy())}
        return [t[n] for n, _, _ in self.inputs]


# ---------------------------------------------------------------------------
# bf16 mixed precision (--precision bf16): dsc's mixed-precision pass, op by op
# ---------------------------------------------------------------------------

class Bf16Semantics:
    """A torch function mode that runs the model as a dsc bf16 plan does
    (passes/MixedPrecision.cpp, the gradient rules of
    dialects/nn/NNGradients.cpp and dsrt's 16-bit CPU kernels):

    * parameters stay float32: the master weights, which AdamW (with float32
      states), clipping and the gradient norm see. An op of the *low* class
      reads a bf16 copy, ``p.to(torch.bfloat16)``, made once per forward and
      shared by every op that reads it (dsc's one ``nn.cast`` per value;
      dsc makes it once per step, before the micro-batches, and the weights
      do not change in between, so the values are the same). The gradients
      of the copy's uses are summed in bf16 (autograd's buffer of the copy,
      as dsc adds them in the low type), the cast's backward returns them to
      float32, and ``param.grad`` accumulates the micro-batches in float32.
    * low: matmul (F.linear is the export's MatMul then Add: two ops, two
      roundings), add / sub / mul / div, neg, relu, gelu (one op: dsc's
      NNFusion folds the exported erf chain into nn.gelu before this pass),
      softmax, layer_norm, dropout (p = 0 only). Float32 operands are cast
      to bf16 (one shared cast per value); a Python float constant is
      rounded to float32, as the ONNX file stores it, then to bf16 (dsc
      converts constants, round to nearest even). The op computes in float32
      on the widened bf16 values and rounds its result once,
      ``f(x.float(), ...).to(torch.bfloat16)``, as dsrt's kernels do
      (elementwise ops on widened tiles, softmax and layer_norm with float32
      statistics, the bf16 matmul accumulating in float32: Half.h,
      MatmulHalf.cpp). layer_norm's scale and bias stay float32, and so do
      their gradients. Activations are torch.bfloat16 tensors, but no op
      runs PyTorch's own bf16 CPU kernel: a float32 op followed by one
      ``.to(torch.bfloat16)`` is one rounding of the float result by
      construction, which is what dsrt does. On PyTorch 1.13 (random
      inputs of this model's shapes) the bf16 kernels of matmul (forward and
      backward), add, mul, erf GELU, softmax and sum give the same bits as
      that; F.linear with a bias does not (it adds the bias before rounding,
      dsc rounds the matmul and then the add: 29% of elements differ), nor
      does tanh GELU (rounds in between: 40% differ), and layer_norm refuses
      float32 scale and bias with a bf16 input (with bf16 ones, 55% differ).
    * backward: autograd of ``x.float()`` rounds each low op's float32 input
      gradient to bf16 once, as dsc's gradient ops do (the two matmuls of a
      matmul's gradient, gelu_grad, layer_norm_grad, the reduce_sum of a
      broadcast operand's gradient: each one bf16 result from float math);
      a bf16 value read twice (the residual stream) gets its two bf16
      gradients added in bf16, as dsc's nn.add does. Where dsc's rule is not
      "float math, one rounding", an autograd Function here follows it:
      softmax_grad reads the *bf16* softmax output (PyTorch's backward reads
      the float32 one; with it the gradients of the tiny 2-layer GPT's
      attention and embedding weights differed from dsc's by up to 2e-4,
      with this rule they are dsc's bits); mul / div round the elementwise
      product before the reduce_sum of a broadcast operand, and div's
      divisor gradient is -((dy * y) / r), each rounded.
    * fp32: embedding (gathers from the float32 table), cross_entropy,
      nll_loss, log_softmax, exp, log, sqrt, rsqrt, reciprocal, sum, mean,
      amax: bf16 operands are cast to float32 (one shared cast per value),
      the op runs in float32.
    * follow (view, reshape, transpose, split, contiguous, masked_fill,
      where, cat, comparisons, ...): in their inputs' type, bf16 if any
      float tensor input is bf16 (the other float inputs are then cast).
    A torch function with no rule here (tanh, sigmoid, erf, abs, max, min,
    pow, casts in the model, ...) and a float input is refused, not guessed:
    dsc builds their gradients from several bf16 ops, each rounded.

    Not matched bit for bit: float32 summation orders, expf / erf
    implementations and dsrt's flush-to-zero of float denormals, all far
    below one bf16 rounding (a float32 difference moves a bf16 result only
    when it straddles a rounding boundary: rare, one bf16 ulp).

    With ``fused_attention`` (the plan has nn.attention: dsc --fuse
    attention or all, the default), the attention chain runs as dsc's fused
    op: a matmul of two 4-D operands (q k^T) computes in float32 from the
    bf16 operands and is not rounded; the scale, the mask or bias, softmax
    and dropout on that float32 chain stay float32 (a bf16 bias is widened,
    as dsc casts a lowered bias back to f32); the matmul of the chain's
    probabilities with v reads them rounded to bf16, as the kernel's bf16
    GEMM does, and rounds the result to bf16 once. Autograd then gives the
    fused gradient's roundings: float32 throughout the chain, but the
    scores' gradient rounded to bf16 where dq and dk's GEMMs read it, and
    dq, dk and dv rounded once where the bf16 q, k and v were widened
    (runtime/kernels/cpu/Attention.cpp).

    With ``fused_epilogue`` (the plan has nn.matmul_epilogue: dsc --fuse
    all, the default), a linear layer's bias and the add of a matmul's
    result to a value of its shape (a residual) join the float32 product
    and round once, as dsc's GEMM epilogue does: F.linear and a 2-D matmul
    keep their float32 sum beside their bf16 result, and an add that reads
    that result first takes the float32 sum instead. dsc folds the add only
    where it is the product's one use; the models these tests train read a
    linear layer's output once (a value read again after such an add would
    be summed here and not in dsc). The backward pass is the unfused
    chain's (dsc builds it before fusing), and autograd through the float32
    sum gives the same gradients, except the GELU's: dsc multiplies the
    derivative, rounded to bf16 where the forward stores it, into the
    float32 sum of the GEMM that makes the GELU's output gradient, where
    this reference rounds that gradient and multiplies it by the float32
    derivative. Not modelled: each element differs by at most a bf16
    rounding, well inside the gradient-norm and trained-loss bounds of
    parity-gpt-bf16.test.

    Use ``with semantics.forward():`` around the model call only; the
    backward pass runs outside the mode."""

    def __init__(self, fused_attention=False, fused_epilogue=False):
        import torch
        import torch.nn.functional as F
        from torch.overrides import TorchFunctionMode
        T = torch.Tensor
        self.torch, self.F = torch, F
        low = self.low = torch.bfloat16

        def R(t):  # float32 math, one rounding to bf16
            return t.to(low)

        def reduce_to(t, shape):
            """Sum of a broadcast gradient (float math, one rounding), or t."""
            if tuple(t.shape) == tuple(shape):
                return t
            return R(t.float().sum_to_size(shape))

        def widen(v):
            return v.float() if isinstance(v, torch.Tensor) else v

        class Softmax(torch.autograd.Function):
            """dsc softmax (float statistics, bf16 result) and softmax_grad
            (dx = y * (dy - sum(y * dy)) in float from the bf16 y)."""
            @staticmethod
            def forward(ctx, x, dim):
                y = R(torch.softmax(x.float(), dim))
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, dy):
                (y,) = ctx.saved_tensors
                yf, gf = y.float(), dy.float()
                return R(yf * (gf - (gf * yf).sum(ctx.dim, keepdim=True))), None

        class Mul(torch.autograd.Function):
            """a * b; d/da = reduce(R(dy * b)), as dsc's MulOp rule."""
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(*[v for v in (a, b) if isinstance(v, torch.Tensor)])
                ctx.ab = [None if isinstance(v, torch.Tensor) else v for v in (a, b)]
                return R(widen(a) * widen(b))

            @staticmethod
            def backward(ctx, dy):
                saved = list(ctx.saved_tensors)
                a, b = [saved.pop(0) if v is None else v for v in ctx.ab]
                da = db = None
                if ctx.needs_input_grad[0]:
                    da = reduce_to(R(dy.float() * widen(b)), a.shape)
                if ctx.needs_input_grad[1]:
                    db = reduce_to(R(dy.float() * widen(a)), b.shape)
                return da, db

        class Div(torch.autograd.Function):
            """a / b; d/da = reduce(R(dy / b)), d/db = reduce(-R(R(dy * y) / b))."""
            @staticmethod
            def forward(ctx, a, b):
                y = R(widen(a) / widen(b))
                ctx.save_for_backward(*[v for v in (a, b) if isinstance(v, torch.Tensor)], y)
                ctx.ab = [None if isinstance(v, torch.Tensor) else v for v in (a, b)]
                return y

            @staticmethod
            def backward(ctx, dy):
                saved = list(ctx.saved_tensors)
                y = saved.pop()
                a, b = [saved.pop(0) if v is None else v for v in ctx.ab]
                da = db = None
                if ctx.needs_input_grad[0]:
                    da = reduce_to(R(dy.float() / widen(b)), a.shape)
                if ctx.needs_input_grad[1]:
                    dyy = R(dy.float() * y.float())
                    db = reduce_to(-R(dyy.float() / widen(b)), b.shape)
                return da, db

        class RoundValue(torch.autograd.Function):
            """The probabilities as the fused kernel's 16-bit GEMMs read
            them: rounded to bf16 (and widened); the gradient passes as
            it is (the kernel's softmax gradient reads the float ones)."""
            @staticmethod
            def forward(ctx, x):
                return x.to(low).float()

            @staticmethod
            def backward(ctx, dy):
                return dy

        class RoundGrad(torch.autograd.Function):
            """The scores q k^T: the value as it is, the gradient rounded to
            bf16 where the kernel's dq and dk GEMMs read it."""
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, dy):
                return dy.to(low).float()

        self.softmax_fn, self.mul_fn, self.div_fn = Softmax, Mul, Div
        self.round_value_fn, self.round_grad_fn = RoundValue, RoundGrad

        def fs(*f):
            return set(f)
        self.matmul = fs(torch.matmul, T.matmul, T.__matmul__, torch.bmm, T.bmm)
        # (func, swapped operands?)
        self.muls = {torch.mul: False, T.mul: False, T.__mul__: False, T.__rmul__: True}
        self.divs = {torch.div: False, T.div: False, T.__truediv__: False,
                     T.__rtruediv__: True}
        self.addsub = fs(torch.add, T.add, T.__add__, T.__radd__, torch.sub, T.sub,
                         T.__sub__, T.__rsub__)
        self.elementwise = fs(torch.neg, T.neg, T.__neg__, torch.relu, T.relu, F.relu,
                              F.gelu)
        self.softmaxes = fs(F.softmax, torch.softmax, T.softmax)
        self.fp32 = fs(F.embedding, F.cross_entropy, F.nll_loss, F.log_softmax,
                       torch.log_softmax, T.log_softmax, torch.exp, T.exp, torch.log,
                       T.log, torch.sqrt, T.sqrt, torch.rsqrt, T.rsqrt, torch.reciprocal,
                       T.reciprocal, torch.sum, T.sum, torch.mean, T.mean, torch.amax, T.float,
                       T.amax)
        self.convs = fs(F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d,
                        F.conv_transpose3d)
        self.pools = fs(F.max_pool1d, F.max_pool2d, F.max_pool3d, F.avg_pool1d, F.avg_pool2d,
                        F.avg_pool3d, F.adaptive_avg_pool1d, F.adaptive_avg_pool2d,
                        F.adaptive_avg_pool3d, torch.max_pool1d, torch.max_pool2d,
                        torch.avg_pool1d)
        self.follow = fs(T.view, T.reshape, torch.reshape, T.transpose, torch.transpose,
                         T.permute, torch.permute, T.t, torch.t, T.split, torch.split,
                         T.chunk, torch.chunk, T.contiguous, T.unsqueeze, torch.unsqueeze,
                         T.squeeze, torch.squeeze, T.flatten, torch.flatten, T.expand,
                         T.__getitem__, T.masked_fill, torch.masked_fill, torch.where,
                         T.where, torch.cat, torch.concat, T.eq, T.ne, T.lt, T.le, T.gt,
                         T.ge, T.__eq__, T.__ne__, T.__lt__, T.__le__, T.__gt__, T.__ge__,
                         torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge)
        self.casts = {}  # (id(value), dtype) -> (value, cast): dsc's shared nn.cast
        self.fused_attention = fused_attention
        self.chain = {}  # id -> tensor: the fused attention chain's float32 values
        self.fused_epilogue = fused_epilogue
        self.products = {}  # id -> (bf16 result, its float32 sum): epilogue candidates
        sem = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return sem.dispatch(func, args, kwargs or {})
        self.mode_cls = Mode

    # -- helpers -------------------------------------------------------------
    def is_float(self, v):
        return isinstance(v, self.torch.Tensor) and v.is_floating_point()

    def cast(self, v, dtype):
        """v as dtype: itself, or one cast per value and forward, shared."""
        if v.dtype == dtype:
            return v
        key = (id(v), dtype)
        hit = self.casts.get(key)
        if hit is None:
            hit = (v, v.to(dtype))  # keeps v alive, so id(v) stays its own
            self.casts[key] = hit
        return hit[1]

    def as_low(self, v):
        """An operand of a low op: bf16 tensors, bf16-valued constants."""
        torch = self.torch
        if self.is_float(v):
            return self.cast(v, self.low)
        if isinstance(v, float):
            return float(torch.tensor(v, dtype=torch.float32).to(self.low).float())
        return v

    @staticmethod
    def widen(v):
        """Inside a low op's kernel, a bf16 operand as float32: not a graph
        cast, never shared, so each op rounds its own input gradient."""
        return v.float() if getattr(v, "dtype", None) is not None and \
            v.dtype.is_floating_point else v

    def low_op(self, func, args, kwargs):
        """func in float32 on the widened bf16 operands, rounded once."""
        args = [self.widen(self.as_low(v)) for v in args]
        kwargs = {k: self.widen(self.as_low(v)) for k, v in kwargs.items()}
        return func(*args, **kwargs).to(self.low)

    @staticmethod
    def refuse(func, why):
        fail("--precision bf16: %s %s" % (getattr(func, "__name__", func), why))

    def in_chain(self, v):
        return isinstance(v, self.torch.Tensor) and id(v) in self.chain

    def chained(self, t):
        self.chain[id(t)] = t  # kept alive, so the id stays its own
        return t

    def fused_rule(self, func, args, kwargs):
        """dsc's fused attention (see the class): the result, or None where
        the op is not on an attention chain."""
        torch, F = self.torch, self.F
        if func in self.matmul and not kwargs and len(args) == 2:
            a, b = args
            if self.in_chain(a):  # probabilities @ v: read in bf16, one rounding
                return torch.matmul(self.round_value_fn.apply(a),
                                    self.widen(self.as_low(b))).to(self.low)
            if self.is_float(a) and self.is_float(b) and a.dim() == 4 and b.dim() == 4:
                return self.chained(self.round_grad_fn.apply(
                    torch.matmul(self.widen(self.as_low(a)), self.widen(self.as_low(b)))))
            return None
        flat = list(args) + list(kwargs.values())
        if not any(self.in_chain(v) for v in flat):
            return None
        if func is F.dropout:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            if p != 0.0:
                self.refuse(func, "p=%s: parity needs dropout 0" % p)
            return args[0]
        if func in self.muls or func in self.divs or func in self.addsub or \
                func in self.softmaxes or func in self.follow:
            args = [self.widen(v) if self.is_float(v) else v for v in args]
            kwargs = {k: self.widen(v) if self.is_float(v) else v for k, v in kwargs.items()}
            return self.chained(func(*args, **kwargs))
        self.refuse(func, "on a fused attention chain has no rule")

    def check_matmul(self, func, a, b, kwargs):
        if kwargs or (a.dim() > 2 and b.dim() > 2 and a.shape[:-2] != b.shape[:-2]) \
                or (a.dim() == 2 and b.dim() > 2):
            self.refuse(func, "with broadcast batch dimensions has no rule (dsc "
                              "rounds the batched gradient, then its sum)")

    def product(self, f):
        """The bf16 result of a float32 product sum f, kept as an epilogue
        candidate."""
        y = f.to(self.low)
        self.products[id(y)] = (y, f)  # keeps y alive, so the id stays its own
        return y

    def epilogue_rule(self, func, args, kwargs):
        """dsc's nn.matmul_epilogue (see the class): the result, or None."""
        torch, F = self.torch, self.F
        if func is F.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            f = torch.matmul(self.widen(self.as_low(x)), self.widen(self.as_low(w).t()))
            return self.product(f if b is None else f + self.widen(self.as_low(b)))
        if func in self.matmul and len(args) == 2:
            a, b = args
            if not (self.is_float(a) and self.is_float(b)) or (a.dim() > 2 and b.dim() > 2):
                return None  # batched (attention's): no epilogue in these models
            self.check_matmul(func, a, b, kwargs)
            return self.product(torch.matmul(self.widen(self.as_low(a)),
                                             self.widen(self.as_low(b))))
        if func in (torch.add, self.torch.Tensor.add, self.torch.Tensor.__add__,
                    self.torch.Tensor.__radd__) and len(args) == 2 and not kwargs:
            for mine, other in ((args[0], args[1]), (args[1], args[0])):
                hit = self.products.get(id(mine)) if isinstance(mine, torch.Tensor) else None
                if hit is None or not self.is_float(other):
                    continue
                y, f = hit
                other = self.as_low(other)
                if other.shape == y.shape or (other.dim() == 1 and other.shape[0] == y.shape[-1]):
                    del self.products[id(mine)]
                    return self.product(f + self.widen(other))
        if func is F.dropout and (args[1] if len(args) > 1 else kwargs.get("p", 0.5)) == 0.0:
            return None  # the identity, which dsc's import drops: not a use
        # Any other use comes first: dsc does not fold a product read twice.
        for v in list(args) + list(kwargs.values()):
            if isinstance(v, torch.Tensor):
                self.products.pop(id(v), None)
        return None

    # -- the policy ----------------------------------------------------------
    def dispatch(self, func, args, kwargs):
        torch, F = self.torch, self.F
        if self.fused_attention:
            fused = self.fused_rule(func, args, kwargs)
            if fused is not None:
                return fused
        if self.fused_epilogue:
            fused = self.epilogue_rule(func, args, kwargs)
            if fused is not None:
                return fused
        if func is F.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            y = self.low_op(torch.matmul, [x, self.as_low(w).t()], {})
            return y if b is None else self.low_op(torch.add, [b, y], {})
        if func in self.matmul:
            a, b = args[0], args[1]
            self.check_matmul(func, a, b, kwargs)
            return self.low_op(torch.matmul, [a, b], {})
        if func in self.muls or func in self.divs:
            swapped = self.muls.get(func, self.divs.get(func))
            if kwargs or len(args) != 2:
                self.refuse(func, "with extra arguments has no rule")
            a, b = (args[1], args[0]) if swapped else (args[0], args[1])
            fn = self.mul_fn if func in self.muls else self.div_fn
            return fn.apply(self.as_low(a), self.as_low(b))
        if func in self.addsub:
            if kwargs.get("alpha", 1) != 1 or len(args) > 2:
                self.refuse(func, "with alpha has no rule")
            return self.low_op(func, args, {})
        if func in self.elementwise:
            if func is F.gelu and set(kwargs) - {"approximate"}:
                self.refuse(func, "with these arguments has no rule")
            return self.low_op(func, args, kwargs)
        if func in self.softmaxes:
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            dtype = args[3] if len(args) > 3 else kwargs.get("dtype")
            if dim is None or dtype is not None:
                self.refuse(func, "without dim or with dtype has no rule")
            return self.softmax_fn.apply(self.as_low(args[0]), dim)
        if func is F.layer_norm:
            # Float statistics; scale and bias are read as they are (float32).
            return func(self.widen(self.as_low(args[0])), *args[1:], **kwargs).to(self.low)
        if func in self.convs:
            # dsc keeps the convolution in float32 (its kernels are float32)
            # and adds the bias as a low op, as Conv imports.
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.pop("bias", None)
            rest = list(args[3:])
            f32 = torch.float32
            y = func(self.cast(x, f32), self.cast(w, f32), None, *rest, **kwargs)
            if b is None:
                return y
            shape = [-1] + [1] * (y.dim() - 2)
            return self.low_op(torch.add, [y, b.reshape(shape)], {})
        if func in self.pools or (func is F.pad and (args[2] if len(args) > 2 else
                                                     kwargs.get("mode", "constant")) == "constant"):
            # float32 kernels (pooling), slice_grad (constant padding): the
            # operands as the model had them, float32.
            f32 = torch.float32
            return func(*[self.cast(v, f32) if self.is_float(v) else v for v in args], **kwargs)
        if func is F.dropout:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            if p != 0.0:
                self.refuse(func, "p=%s: parity needs dropout 0" % p)
            return args[0]
        if func in self.fp32:
            f32 = torch.float32
            args = [self.cast(v, f32) if self.is_float(v) else v for v in args]
            kwargs = {k: self.cast(v, f32) if self.is_float(v) else v
                      for k, v in kwargs.items()}
            return func(*args, **kwargs)
        if func in self.follow:
            seq = func in (torch.cat, torch.concat)
            flat = (list(args[0]) + list(args[1:]) if seq else list(args)) \
                + list(kwargs.values())
            if any(self.is_float(v) and v.dtype == self.low for v in flat):
                def lowered(v):
                    return self.cast(v, self.low) if self.is_float(v) else v
                args = ([[lowered(v) for v in args[0]]] + list(args[1:]) if seq
                        else [lowered(v) for v in args])
                kwargs = {k: lowered(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        if any(self.is_float(v) for v in list(args) + list(kwargs.values())) and \
                any(self.is_float(v) for v in outs):
            self.refuse(func, "has no mixed-precision rule in the reference")
        return out

    def forward(self):
        """The mode for one forward pass, with a fresh set of casts."""
        self.casts = {}
        self.chain = {}
        self.products = {}
        return self.mode_cls()


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------

def grad_norm(params):
    """Global L2 norm as torch.nn.utils.clip_grad_norm_ computes it."""
    import torch
    gs = [p.grad.detach() for p in params if p.grad is not None]
    if not gs:
        return 0.0
    return float(torch.norm(torch.stack([torch.norm(g, 2.0) for g in gs]), 2.0))


def onebit_engine(opt, local, clip):
    """DeepSpeed's engine around a 1-bit optimizer, fp32 (engine.py
    allreduce_gradients, clip_fp32_gradients -> runtime/utils.py
    clip_grad_norm_): in the warm-up the gradients are averaged over the
    workers and clipped by the average's norm; once compressed, each worker
    keeps its own, clipped by the mean of the workers' local norms. Under
    bf16 / fp16 (opt.wrapped: FP16_Optimizer, runtime/fp16/fused_optimizer.py
    step -> get_flattened_grad_norm, which reduces over model parallelism
    only) each worker clips by its own local norm. Returns (the norm clipped
    by, as rank 0 reports it; each worker's gradients)."""
    import torch
    w = len(local)
    if not opt.compressed_phase(opt.t + 1):
        avg = [sum(g[k] for g in local) / w for k in range(len(local[0]))]
        local = [avg] * w
        norm = float(torch.linalg.norm(torch.stack([torch.linalg.norm(g) for g in avg])))
    else:
        norms = [float(torch.linalg.norm(torch.stack([torch.linalg.norm(g) for g in gs])))
                 for gs in local]
        if getattr(opt, "wrapped", False):
            if clip > 0:
                local = [[g * min(1.0, clip / (n + 1e-6)) for g in gs]
                         for gs, n in zip(local, norms)]
            return norms[0], local
        norm = sum(norms) / w
    if clip > 0:
        coef = min(1.0, clip / (norm + 1e-6))
        local = [[g * coef for g in gs] for gs in local]
    return norm, local


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Export flags for --model go after '--'.")
    ap.add_argument("--onnx", metavar="MODEL.onnx")
    ap.add_argument("--model", choices=["mlp", "gpt", "bert", "llama", "classifier"],
                    help="model script (default: from MODEL.onnx.json)")
    ap.add_argument("--config", metavar="ds_config.json")
    ap.add_argument("--data", metavar="DATA", help=".npy folder or uint16 token file")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0,
                    help="accepted for dsrt's command line; unused (dropout is 0)")
    ap.add_argument("--out", metavar="DIR")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--self-check", action="store_true",
                    help="also check that the ONNX initializers equal a fresh build "
                         "with the export seed, and that this export model's loss on "
                         "micro-batch 0 and at step 1 equals this run's")
    ap.add_argument("--float64", action="store_true",
                    help="train in float64 (to measure how far float32 rounding "
                         "alone moves the metrics; weights are still written as F32)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: dsc's mixed precision (float32 master weights and "
                         "AdamW states, bf16 compute where dsc's pass puts it; see "
                         "Bf16Semantics)")
    ap.add_argument("--fused-attention", action="store_true",
                    help="with --precision bf16: the attention chain as dsc's fused "
                         "nn.attention computes it (float32 inside, one rounding; see "
                         "Bf16Semantics)")
    ap.add_argument("--fused-epilogue", action="store_true",
                    help="with --precision bf16: linear layers' biases and residual adds "
                         "as dsc's nn.matmul_epilogue computes them (with the float32 "
                         "product, one rounding; see Bf16Semantics)")
    ap.add_argument("--dp", type=int, default=1, metavar="N",
                    help="model buffers as DistributedDataParallel leaves them on rank 0 of "
                         "N ranks: micro-batch j of a step is rank j %% N's, and only rank "
                         "0's update BatchNorm's running statistics")
    ap.add_argument("--print-lr", action="store_true",
                    help="print the lr of updates 1..--steps for --config and exit")
    ap.add_argument("--print-micro-batch", action="store_true",
                    help="print the config's micro batch size and exit")
    ap.add_argument("flags", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if not a.config:
        fail("--config is required")
    with open(a.config) as f:
        cfg = json.load(f)
    _, mb, gas = resolve_batch(cfg)
    if a.print_micro_batch:
        print(mb)
        return 0
    make_opt, base_lr = optimizer_spec(cfg)
    sched = DeepSpeedSchedule(cfg.get("scheduler"), base_lr)
    if a.print_lr:
        for k in range(1, a.steps + 1):
            print("%d %.9g" % (k, sched.lr_for_update(k)))
        return 0
    check_precision(cfg, a.precision)
    if a.precision == "bf16" and a.float64:
        fail("--float64 and --precision bf16 exclude each other")
    # DeepSpeed's default is 1.0 since PR #8068 (0, off, before).
    clip = float(cfg.get("gradient_clipping", 1.0) or 0.0)
    for need in ("onnx", "data", "out"):
        if not getattr(a, need):
            fail("--%s is required" % need)

    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    # PyTorch 1.13's oneDNN (mkldnn) convolution backward returns garbage
    # (zeros, NaN or 1e19, varying run to run) for a Conv1d whose output
    # gradient arrives permuted, as Whisper's conv -> gelu -> permute
    # writes it; float64 and the native kernels agree with each other.
    # The reference uses the native kernels.
    torch.backends.mkldnn.enabled = False

    name, mod, margs = load_model_args(a.onnx, a.model, a.flags)
    if getattr(margs, "dropout", 0.0) != 0.0:
        fail("the model was exported with dropout %s; parity needs --dropout 0"
             % margs.dropout)
    inputs, inits = onnx_graph_info(a.onnx)
    data = Data(a.data, inputs, mb)

    torch.manual_seed(margs.seed)
    model = mod.build_model(margs)
    ec = sys.modules["export_common"]
    ec.apply_freeze(model, getattr(margs, "freeze", None))
    named_all = load_initializers(model, inits)
    # PyTorch's own rule: what requires_grad trains (the export's metadata
    # must say the same, or dsc would be told something else).
    named_params = [(n, p) for n, p in named_all if p.requires_grad]
    frozen = [(n, p.detach().clone()) for n, p in named_all if not p.requires_grad]
    trainable = trainable_metadata(a.onnx)
    if trainable is not None and sorted(trainable) != sorted(n for n, _ in named_params):
        fail("the ONNX metadata's trainable set %s differs from requires_grad's %s"
             % (sorted(trainable), sorted(n for n, _ in named_params)))
    params = [p for _, p in named_params]
    if a.dp < 1 or gas % a.dp:
        fail("--dp %d must divide the reference's gradient accumulation %d" % (a.dp, gas))
    if a.float64:
        model.double()
    # BatchNorm's running statistics: model state the forward pass updates
    # (dsrt writes them with the final weights); after .double(), which
    # replaces the buffers.
    running = []
    for mname, m in model.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            for b in ("running_mean", "running_var"):
                full = "%s.%s" % (mname, b) if mname else b
                if full in inits:
                    running.append((full, getattr(m, b)))
    semantics = Bf16Semantics(a.fused_attention, a.fused_epilogue) \
        if a.precision == "bf16" else None

    def forward(m, batch):
        if semantics is None:
            return m(*batch)
        with semantics.forward():
            return m(*batch)
    model.train()
    # The 1-bit optimizers see each data-parallel worker's own gradient:
    # micro-batch j is worker j % dp's.
    per_worker = getattr(make_opt, "workers", False)
    opt = make_opt(params, a.dp, a.precision != "fp32") if per_worker else make_opt(params)

    os.makedirs(a.out, exist_ok=True)
    rows = []
    first_mb_loss = None
    for step in range(a.steps):
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        losses = []
        local = [[torch.zeros_like(p) for p in params] for _ in range(a.dp)]
        for j in range(gas):
            batch = data.micro_batch(step * gas + j)
            if a.float64:
                batch = [t.double() if t.is_floating_point() else t for t in batch]
            kept = [b.detach().clone() for _, b in running] if j % a.dp else None
            # 0/1 Adam's local steps: each worker trains its own weights.
            if hasattr(opt, "replica"):
                with torch.no_grad():
                    for p, mine in zip(params, opt.replica[j % a.dp]):
                        p.copy_(mine)
            loss = forward(model, batch)
            losses.append(float(loss.detach()))
            if first_mb_loss is None:
                first_mb_loss = loss.detach().clone()
            (loss / gas).backward()
            if per_worker:  # worker j % dp's mean over its micro-batches
                for acc, p in zip(local[j % a.dp], params):
                    acc.add_(p.grad, alpha=a.dp)
                    p.grad = None
            if kept is not None:  # another rank's micro-batch: rank 0 keeps its own
                with torch.no_grad():
                    for (_, b), v in zip(running, kept):
                        b.copy_(v)
        if per_worker:
            norm, worker_grads = onebit_engine(opt, local, clip)
        elif clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
        else:
            norm = grad_norm(params)
        lr = sched.lr_for_update(step + 1)
        betas = sched.betas_for_update(step + 1) if "betas" in opt.defaults else None
        for g in opt.param_groups:
            g["lr"] = lr
            if betas is not None:
                g["betas"] = betas
        if per_worker:
            opt.step(worker_grads)
        else:
            opt.step()
        dt = time.perf_counter() - t0
        rows.append((step + 1, sum(losses) / len(losses), lr, norm, dt))

    with open(os.path.join(a.out, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["step", "loss", "lr", "grad_norm", "step_time_s"])
        for s, l, lr, n, dt in rows:
            w.writerow([s, "%.9g" % l, "%.9g" % lr, "%.9g" % n, "%.6f" % dt])
    write_safetensors(os.path.join(a.out, "weights.safetensors"),
                      [(n, p.detach().numpy()) for n, p in named_params] +
                      [(n, b.detach().float().numpy()) for n, b in running])
    print("reference_train: %s, %d params, %d steps (mb %d x gas %d, %s): loss %.6g -> %.6g"
          % (name, sum(p.numel() for p in params), a.steps, mb, gas, a.precision,
             rows[0][1] if rows else float("nan"),
             rows[-1][1] if rows else float("nan")), file=sys.stderr)

    for n, before in frozen:
        if not torch.equal(before, dict(named_all)[n].detach()):
            fail("frozen parameter %s changed in training" % n)

    if a.self_check and not a.float64:
        torch.manual_seed(margs.seed)
        fresh = mod.build_model(margs)
        fresh.train()
        fsd = fresh.state_dict()
        updated = {n for n, _ in running}  # changed by training, as they should
        for n, arr in inits.items():
            if n not in updated and not np.array_equal(fsd[n].detach().numpy(), arr):
                fail("self-check: initializer %s differs from a fresh build with "
                     "seed %d" % (n, margs.seed))
        with torch.no_grad():
            mb_losses = [forward(fresh, data.micro_batch(j)) for j in range(gas)]
        ref = mb_losses[0]
        if not torch.equal(ref, first_mb_loss):
            fail("self-check: export-model loss on micro-batch 0 is %.9g, this run "
                 "computed %.9g" % (float(ref), float(first_mb_loss)))
        step1 = sum(float(l) for l in mb_losses) / gas
        if rows and step1 != rows[0][1]:
            fail("self-check: export-model step-1 loss is %.9g, metrics.csv has %.9g"
                 % (step1, rows[0][1]))
        print("reference_train: self-check ok: %d initializers equal a fresh build "
              "(seed %d); its step-1 loss %.9g (micro-batch 0: %.9g) matches"
              % (len(inits), margs.seed, step1, float(ref)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
