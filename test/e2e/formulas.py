"""GPT-3 175B's plan for 1024 ranks against the published formulas.

  formulas.py PLAN/manifest.txt

The plan: dp 8 x pp 16 x tp 8 with sequence parallelism, ZeRO 1, bf16,
selective recompute, 1F1B with 64 micro-batches of 1 x 2048 tokens
(test/e2e/gpt3-175b-plan.test). Prints one line per quantity, "name:
formula F, dsc D" and "equal" or the ratio; exits 1 when a quantity that
must be equal is not. docs/planning-at-scale.md is this table.
"""
import re
import sys

l, h, a, s, V, b = 96, 12288, 96, 2048, 50304, 1
t, p, d, M = 8, 16, 8, 64

text = open(sys.argv[1]).read()
stages = re.split(r"\n== stage (\d+) ==\n", text)
head, per = stages[0], {int(stages[i]): stages[i + 1] for i in range(1, len(stages), 2)}
bad = []


def num(pattern, where):
    m = re.search(pattern, where)
    if not m:
        sys.exit("not in the manifest: " + pattern)
    return int(m.group(1))


def report(name, formula, dsc, must_equal=True):
    if formula == dsc:
        verdict = "equal"
    else:
        verdict = "dsc/formula %.3f" % (dsc / formula)
        if must_equal:
            bad.append(name)
    print("%s: formula %d, dsc %d, %s" % (name, formula, dsc, verdict))


# Megatron-LM (Narayanan et al. 2021): 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h)),
# plus the final layer norm's 2h the formula leaves out.
P = 12 * l * h * h + 13 * l * h + (V + s) * h
layer = 12 * h * h + 13 * h
first = num(r"\n +0 +\S+ +(\d+) ", head)
middle = num(r"\n +1 +\S+ +(\d+) ", head)
last = num(r"\n +15 +\S+ +(\d+) ", head)
report("parameters, whole model (+ final layer norm 2h)", P + 2 * h,
       first + 14 * middle + last - V * h)  # the tied LM head counted once
report("parameters, middle stage (l/p layers)", l // p * layer, middle)
report("parameters, first stage (+ embeddings (V + s) h)", l // p * layer + (V + s) * h, first)

# Per tp rank: column-parallel weights and biases split 1/t, row-parallel
# weights split, their biases and the layer norms (6h per layer) whole.
psi = l // p * ((12 * h * h + 7 * h) // t + 6 * h)
report("parameters per rank, middle stage (Psi)", psi,
       num(r"P = (\d+) parameters \(this tp rank's part\)", per[1]))
# ZeRO (Rajbhandari et al. 2020), stage 1, mixed precision: 2 Psi + 2 Psi +
# K Psi / N_d with K = 12; DeepSpeed's BF16_Optimizer keeps fp32 gradients
# (4 Psi instead of 2 Psi), which dsc plans: 2 + 4 + 12/8.
report("model states per rank, ZeRO paper (4 + 12/N_d) Psi", 4 * psi + 12 * psi // d,
       num(r"ZeRO paper: +(\d+) bytes", per[1]))
# What dsc holds of them besides the gradients (summed over the
# micro-batches, among the activations): fp32 master weights 4 Psi / N_d,
# Adam 8 Psi / N_d, bf16 copies 2 Psi' of all but the layer norms' 4h per
# layer (they are read in fp32).
psi16 = psi - l // p * 4 * h
report("fp32 weights + Adam + bf16 copies per rank, 12 Psi / N_d + 2 Psi'",
       12 * psi // d + 2 * psi16,
       num(r"\n  parameters: +(\d+) bytes", per[1])
       + num(r"\n  16-bit copies: +(\d+) bytes", per[1])
       + num(r"\n  optimizer: +(\d+) bytes", per[1]))
# Data parallel (ZeRO 1): reduce-scatter of the gradients and all-gather of
# the parameters, 2 Psi elements per step.
report("data-parallel elements per rank and step (2 Psi)", 2 * psi,
       num(r"all_gather: \d+ calls, (\d+) elements", per[1])
       + num(r"reduce_scatter: \d+ calls, (\d+) elements", per[1]))
# Sequence parallelism (Korthikanti et al. 2022): each of tensor
# parallelism's 4 all-reduces per layer and micro-batch becomes an
# all-gather and a reduce-scatter of s b h elements (forward 2 AG + 2 RS,
# backward 2 RS + 2 AG), and the backward gathers the two column GEMMs'
# inputs again for their weight gradients: 6 AG + 4 RS.
ag = re.search(r"(\d+) all-gathers of (\d+), (\d+) reduce-scatters of (\d+)", per[1])
report("tp all-gathers per stage and step (6 per layer and micro-batch)", 6 * (l // p) * M,
       int(ag.group(1)))
report("tp all-gather elements per stage and step", 6 * (l // p) * M * s * b * h,
       int(ag.group(2)))
report("tp reduce-scatters per stage and step (4 per layer and micro-batch)", 4 * (l // p) * M,
       int(ag.group(3)))
report("tp reduce-scatter elements per stage and step", 4 * (l // p) * M * s * b * h,
       int(ag.group(4)))
# 1F1B (Narayanan et al. 2021): stage i holds p - i micro-batches in
# flight, so the planned peaks of stages with the same layers differ by one
# micro-batch's activations; Korthikanti's selective recompute with
# sequence parallelism keeps 34 s b h / t bytes per layer.
live = [num(r"live at once: +(\d+) bytes", per[i]) for i in range(p)]
steps = [live[i] - live[i + 1] for i in range(1, p - 2)]
print("1F1B: the bytes live at once fall by the same step from stage 1 to 14: %d (%s)"
      % (steps[0], "equal" if len(set(steps)) == 1 else "not equal: %s" % steps))
if len(set(steps)) != 1:
    bad.append("1F1B in-flight micro-batches")
per_layer = steps[0] // (l // p)
report("activation bytes per layer and micro-batch (34 s b h / t)", 34 * s * b * h // t,
       per_layer, must_equal=False)
# Not equal (docs/planning-at-scale.md): below the formula, as dsc's
# selective recompute also recomputes the layer norms and GELU. The bound
# guards what is measured.
if per_layer > 1.1 * 34 * s * b * h / t:
    bad.append("activation bytes per layer above 1.1x the formula")
if bad:
    sys.exit("differ from the formulas: " + ", ".join(bad))
