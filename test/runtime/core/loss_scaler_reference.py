#!/usr/bin/env python3
"""Expected loss-scale sequences for dsrt::LossScaler, from DeepSpeed's logic.

The scaler below is DeepSpeed's own DynamicLossScaler.update_scale, transcribed
line for line (logging kept, with dist.get_rank() and the logger stubbed) from

  deepspeedai/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py
  at commit edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (version.txt 0.19.6;
  the file last changed in 32d51a184),

and the step driver is what ZeRO's step (deepspeed/runtime/zero/
stage_1_and_2.py DeepSpeedZeroOptimizer.step, and stage3.py alike) and the
engine (engine.py _take_model_step) do with it: update_scale(overflow) first
(it may raise), then skip the update and the lr-scheduler step when the
(MAX-reduced) overflow flag is set. Static scaling (fp16.loss_scale > 0) is
DeepSpeed's LossScaler, whose update_scale does nothing; the overflow still
skips the step.

Usage:
  loss_scaler_reference.py                 print the expected file
  loss_scaler_reference.py --check FILE    regenerate and diff against FILE
  loss_scaler_reference.py --against PY    also replay every case through the
                                           real DynamicLossScaler in PY (a
                                           DeepSpeed loss_scaler.py; needs
                                           torch) and require the same output

Output format (read by LossScalerTest.cpp), one case after another:
  case NAME
  config init=S window=W hysteresis=H consecutive=0|1 min=M raise=0|1 static=L
  step OVERFLOW APPLIED SCALE CUR_ITER LAST_OVERFLOW_ITER CUR_HYSTERESIS
  ...
  error ITER        (only when update_scale raised at the step with cur_iter
                     ITER: no step line for it, the state is unchanged)
  end
SCALE and the counters are the state after update_scale; a static case
prints '-' for the counters (DeepSpeed's static scaler keeps none). Scales
are Python's repr of the float: exact, and read back exactly by strtod.
"""

import argparse
import difflib
import importlib.util
import random
import sys
import types

DEEPSPEED_COMMIT = "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"

# --- stubs for what loss_scaler.py imports ------------------------------------


class _Dist:

    @staticmethod
    def get_rank():
        return 1  # not rank 0: the log lines are not printed


dist = _Dist()


class _Logger:

    def info(self, *args, **kwargs):
        pass


logger = _Logger()
torch = types.SimpleNamespace(half="torch.half")

# --- transcribed from deepspeed/runtime/fp16/loss_scaler.py --------------------


class LossScalerBase:
    """LossScalarBase
    Base class for a loss scaler
    """

    def __init__(self, cur_scale):
        super(LossScalerBase, self).__init__()
        self.cur_scale = cur_scale
        self.dynamic = False

    @property
    def loss_scale(self):
        return self.cur_scale

    def update_scale(self, overflow):
        pass


class LossScaler(LossScalerBase):

    def __init__(self, scale=1):
        super(LossScaler, self).__init__(scale)


class DynamicLossScaler(LossScalerBase):

    def __init__(self,
                 init_scale,
                 scale_window,
                 min_scale,
                 delayed_shift,
                 consecutive_hysteresis,
                 raise_error_at_min_scale=True,
                 dtype=torch.half):
        super(DynamicLossScaler, self).__init__(init_scale)
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.delayed_shift = delayed_shift
        self.cur_hysteresis = delayed_shift
        self.consecutive_hysteresis = consecutive_hysteresis
        self.raise_error_at_min_scale = raise_error_at_min_scale
        self.dynamic = True
        self.dtype = dtype

    # `overflow` is boolean indicating whether the gradient overflowed
    def update_scale(self, overflow):
        if overflow:
            # self.cur_scale /= self.scale_factor
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                if (self.cur_scale == self.min_scale) and self.raise_error_at_min_scale:
                    raise Exception(
                        "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
                else:
                    next_scale = max(self.cur_scale / self.scale_factor, self.min_scale)
                    if dist.get_rank() == 0:
                        overflow_msg = f"[deepspeed] OVERFLOW! Rank {dist.get_rank()} Skipping step."
                        if self.dtype == torch.half:
                            overflow_msg += f" Attempted loss scale: {int(self.cur_scale)}, reducing to {int(next_scale)}"
                        logger.info(overflow_msg)
                    self.cur_scale = next_scale
            else:
                if dist.get_rank() == 0:
                    overflow_msg = f"[deepspeed] OVERFLOW! Rank {dist.get_rank()} Skipping step."
                    if self.dtype == torch.half:
                        overflow_msg += f" Attempted loss scale: {int(self.cur_scale)}, but hysteresis is {self.cur_hysteresis}. Reducing hysteresis to {self.cur_hysteresis-1}"
                    logger.info(overflow_msg)
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                if dist.get_rank() == 0:
                    hysteresis_msg = f"Consecutive hysteresis is enabled. Restoring hysteresis to {self.delayed_shift}"
                    logger.info(hysteresis_msg)
                self.cur_hysteresis = self.delayed_shift

            stable_interval = (self.cur_iter - self.last_overflow_iter) - 1
            if (stable_interval > 0) and (stable_interval % self.scale_window == 0):
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1


# --- transcribed from deepspeed/runtime/fp16/fused_optimizer.py ----------------
# FP16_Optimizer._update_scale (fp16 without ZeRO; FP16_UnfusedOptimizer's is
# the same): no hysteresis and no error at the minimum. Only used to check the
# claim in docs/architecture.md that it equals DynamicLossScaler with
# hysteresis 1 where that one does not raise.


def fused_update_scale(cfg, skip):
    if cfg.dynamic_loss_scale:
        if skip:
            cfg.cur_scale = max(cfg.cur_scale / cfg.scale_factor, cfg.min_loss_scale)
            cfg.last_overflow_iter = cfg.cur_iter
        else:
            # Ensure self.loss_scale_config.scale_window updates since last overflow
            stable_interval = (cfg.cur_iter - cfg.last_overflow_iter) - 1
            if (stable_interval > 0) and (stable_interval % cfg.scale_window == 0):
                cfg.cur_scale *= cfg.scale_factor
    cfg.cur_iter += 1


# --- the scripted overflow patterns ---------------------------------------------
# '.' a clean step, 'X' an overflow (after the MAX over ranks).


def config(init=2.0**16, window=1000, hysteresis=2, consecutive=False, min_scale=1, raise_error=True, static=0.0):
    # DeepSpeed's ds_config defaults: initial_scale_power 16, loss_scale_window
    # 1000, hysteresis 2, consecutive_hysteresis false, min_loss_scale 1; the
    # engine never passes raise_error_at_min_scale, so it is True.
    return dict(init=init,
                window=window,
                hysteresis=hysteresis,
                consecutive=consecutive,
                min=min_scale,
                raise_error=raise_error,
                static=static)


def random_pattern(seed, n, p):
    rng = random.Random(seed)  # random() is reproducible across Python versions
    return "".join("X" if rng.random() < p else "." for _ in range(n))


def cases():
    out = []

    def add(name, cfg, pattern):
        out.append((name, cfg, pattern))

    # Static scale: constant, and an overflow still skips the step.
    add("static_128", config(static=128.0), "..X.XX...X..")
    # No overflow yet: last_overflow_iter is -1, so the first growth comes at
    # cur_iter == window (after window + 1 clean steps), then every window.
    add("h1_growth_from_the_start", config(init=2.0**4, window=3, hysteresis=1), "." * 11)
    # After an overflow at cur_iter k the scale grows at k + window + 1,
    # k + 2 window + 1, ...: the window counts from the last overflow.
    add("h1_window_from_last_overflow", config(init=2.0**10, window=4, hysteresis=1), ".X" + "." * 10 + "X" + "." * 9)
    add("h1_overflow_runs", config(init=2.0**16, window=3, hysteresis=1), "XX...X..X......XXX.......")
    # Hysteresis 2 without consecutive_hysteresis: only a completed window
    # refills it, so a second overflow halves the scale even after clean steps.
    h2 = "X.X.X.....X....X.X..........XX...."
    add("h2_consecutive_off", config(init=2.0**16, window=4, hysteresis=2), h2)
    # consecutive_hysteresis: every clean step refills it.
    add("h2_consecutive_on", config(init=2.0**16, window=4, hysteresis=2, consecutive=True), h2)
    h3 = "XX.XX.XXX.......XX.X..XXX...X"
    add("h3_consecutive_off", config(init=2.0**16, window=5, hysteresis=3), h3)
    add("h3_consecutive_on", config(init=2.0**16, window=5, hysteresis=3, consecutive=True), h3)
    # The minimum: with raise_error_at_min_scale false the scale stays there
    # and steps keep being skipped; with it (DeepSpeed's default) the overflow
    # at the minimum raises.
    add("min_scale_clamped", config(init=2.0**3, window=3, hysteresis=1, raise_error=False), "XXXXXX....XX......")
    add("min_scale_error_h1", config(init=2.0**3, window=3, hysteresis=1), "XXX.XX..")
    add("min_scale_error_h2", config(init=4.0, window=3, hysteresis=2), "XX.XX...")
    add("min_scale_error_h2_consecutive", config(init=4.0, window=3, hysteresis=2, consecutive=True), "XX.XX.XXX...")
    # min_loss_scale is any positive integer: the last halving is clamped to it.
    add("min_not_a_power_of_two", config(init=16.0, window=2, hysteresis=1, min_scale=3), "XXX...X.X...")
    add("min_not_a_power_of_two_clamped",
        config(init=16.0, window=2, hysteresis=1, min_scale=3, raise_error=False), "XXX...X.X...")
    # min_loss_scale above the initial scale: DeepSpeed's max() raises it.
    add("min_above_initial", config(init=1.0, window=2, hysteresis=1, min_scale=4, raise_error=False), "..X..X...")
    # initial_scale_power 32 (the end-to-end fp16 test): skipped steps until
    # the scale fits, the first overflow absorbed by hysteresis 2.
    add("power32_until_it_fits", config(init=2.0**32), "X" * 18 + "." * 40)
    # DeepSpeed's defaults over a long run: the 1000-step window.
    add("defaults_window_1000", config(), "XX" + "." * 1100 + "X" + "." * 1001 + "XX" + "." * 10)
    # Random patterns: every hysteresis / consecutive combination, reaching
    # the minimum.
    for h in (1, 2, 3):
        for cons in (False, True):
            add(f"random_h{h}_consecutive_{'on' if cons else 'off'}",
                config(init=2.0**8, window=5, hysteresis=h, consecutive=cons, raise_error=False),
                random_pattern(1000 + 10 * h + cons, 300, 0.3))
    add("random_h2_until_error", config(init=2.0**6, window=5, hysteresis=2), random_pattern(7, 300, 0.5))
    return out


# --- replay -----------------------------------------------------------------------


def fmt(x):
    return repr(float(x))


def make_scaler(cfg, dynamic_cls):
    if cfg["static"] > 0:
        return LossScaler(scale=cfg["static"])
    return dynamic_cls(init_scale=cfg["init"],
                       scale_window=cfg["window"],
                       min_scale=cfg["min"],
                       delayed_shift=cfg["hysteresis"],
                       consecutive_hysteresis=cfg["consecutive"],
                       raise_error_at_min_scale=cfg["raise_error"],
                       dtype=torch.half)


def replay(name, cfg, pattern, dynamic_cls=DynamicLossScaler):
    lines = [
        f"case {name}",
        f"config init={fmt(cfg['init'])} window={cfg['window']} hysteresis={cfg['hysteresis']} "
        f"consecutive={int(cfg['consecutive'])} min={fmt(cfg['min'])} raise={int(cfg['raise_error'])} "
        f"static={fmt(cfg['static'])}",
    ]
    scaler = make_scaler(cfg, dynamic_cls)
    for ch in pattern:
        overflow = ch == "X"
        try:
            scaler.update_scale(overflow)
        except Exception as e:
            assert "already at minimum" in str(e), e
            lines.append(f"error {scaler.cur_iter}")
            break
        applied = not overflow  # ZeRO's step returns before the update; no scheduler step
        if scaler.dynamic:
            counters = f"{scaler.cur_iter} {scaler.last_overflow_iter} {scaler.cur_hysteresis}"
        else:
            counters = "- - -"
        lines.append(f"step {int(overflow)} {int(applied)} {fmt(scaler.cur_scale)} {counters}")
    lines.append("end")
    return lines


def check_fused_equivalence(name, cfg, pattern, lines):
    """FP16_Optimizer (no ZeRO) == DynamicLossScaler with hysteresis 1, no error."""
    if cfg["static"] > 0 or cfg["hysteresis"] != 1 or any(l.startswith("error") for l in lines):
        return
    fused = types.SimpleNamespace(dynamic_loss_scale=True,
                                  cur_scale=cfg["init"],
                                  scale_factor=2.0,
                                  min_loss_scale=cfg["min"],
                                  scale_window=cfg["window"],
                                  cur_iter=0,
                                  last_overflow_iter=-1)
    steps = [l.split() for l in lines if l.startswith("step ")]
    for ch, step in zip(pattern, steps):
        fused_update_scale(fused, ch == "X")
        got = [fmt(fused.cur_scale), str(fused.cur_iter), str(fused.last_overflow_iter)]
        if got != step[3:6]:
            sys.exit(f"{name}: FP16_Optimizer._update_scale differs from DynamicLossScaler: {got} vs {step[3:6]}")


def generate(dynamic_cls=DynamicLossScaler):
    out = [
        "# Expected dsrt::LossScaler sequences: DeepSpeed's DynamicLossScaler.update_scale",
        f"# (deepspeed/runtime/fp16/loss_scaler.py at {DEEPSPEED_COMMIT})",
        "# replayed over scripted overflow patterns. Generated by loss_scaler_reference.py;",
        "# do not edit (ctest loss-scaler-reference regenerates and diffs it).",
        "# step OVERFLOW APPLIED SCALE CUR_ITER LAST_OVERFLOW_ITER CUR_HYSTERESIS (after the update)",
    ]
    for name, cfg, pattern in cases():
        lines = replay(name, cfg, pattern, dynamic_cls)
        if dynamic_cls is DynamicLossScaler:
            check_fused_equivalence(name, cfg, pattern, lines)
        out.extend(lines)
    return "\n".join(out) + "\n"


def load_real_scaler(path):
    """DeepSpeed's DynamicLossScaler from its source file, imports stubbed."""
    import torch as real_torch  # noqa: F401 (loss_scaler.py imports it)
    stubs = {
        "deepspeed": types.ModuleType("deepspeed"),
        "deepspeed.runtime": types.ModuleType("deepspeed.runtime"),
        "deepspeed.runtime.config_utils": types.ModuleType("deepspeed.runtime.config_utils"),
        "deepspeed.utils": types.ModuleType("deepspeed.utils"),
    }
    stubs["deepspeed.runtime.config_utils"].DeepSpeedConfigObject = object
    stubs["deepspeed.utils"].logger = logger
    stubs["deepspeed"].comm = dist
    stubs["deepspeed.comm"] = dist
    sys.modules.update(stubs)
    spec = importlib.util.spec_from_file_location("ds_loss_scaler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def real_cls(**kwargs):
        kwargs["dtype"] = real_torch.half
        return module.DynamicLossScaler(**kwargs)

    return real_cls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="FILE", help="diff the generated output against FILE")
    parser.add_argument("--against", metavar="PY", help="DeepSpeed's loss_scaler.py to replay as well")
    args = parser.parse_args()
    text = generate()
    if args.against:
        real = generate(load_real_scaler(args.against))
        if real != text:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), real.splitlines(True), "transcribed",
                                                       args.against))
            sys.exit("the transcription differs from " + args.against)
        print("the transcription matches " + args.against, file=sys.stderr)
    if args.check:
        with open(args.check) as f:
            expected = f.read()
        if expected != text:
            sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), args.check,
                                                       "regenerated"))
            sys.exit(args.check + " is out of date: regenerate it with " + sys.argv[0])
        return
    if not args.against:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
