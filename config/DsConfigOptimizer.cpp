//===- DsConfigOptimizer.cpp - ds_config optimizer and scheduler -===//
//
// The optimizer and scheduler sections against tables of their parameters.
//
//===----------------------------------------------------------------------===//
#include "config/Readers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::config::detail {

//===--- optimizer --------------------------------------------------------===//

const std::vector<std::string> kAdamParams = {
    "lr",          "betas",           "eps",       "weight_decay",
    "adam_w_mode", "bias_correction", "torch_adam"};
const std::vector<std::string> kSgdParams = {"lr", "momentum", "dampening",
                                             "weight_decay", "nesterov"};
/// FusedLamb's constructor (DeepSpeed edaa722 ops/lamb/fused_lamb.py).
const std::vector<std::string> kLambParams = {
    "lr",           "bias_correction", "betas",     "eps",      "eps_inside_sqrt",
    "weight_decay", "max_coeff",       "min_coeff", "amsgrad"};
/// FusedLion's (ops/lion/fused_lion.py).
const std::vector<std::string> kLionParams = {"lr", "betas", "weight_decay"};
/// torch.optim.Adagrad's, which DeepSpeed builds without offload.
const std::vector<std::string> kAdagradParams = {"lr", "lr_decay", "weight_decay",
                                                 "initial_accumulator_value", "eps"};
/// OnebitAdam's (runtime/fp16/onebit/adam.py); max_grad_norm is the
/// engine's error, as for every optimizer.
const std::vector<std::string> kOneBitAdamParams = {
    "lr",           "freeze_step", "betas",   "eps",        "weight_decay",
    "bias_correction", "eps_inside_sqrt", "amsgrad", "cuda_aware", "comm_backend_name"};
/// ZeroOneAdam's (runtime/fp16/onebit/zoadam.py).
const std::vector<std::string> kZeroOneAdamParams = {
    "lr",           "betas",           "eps",           "weight_decay",
    "bias_correction", "eps_inside_sqrt", "amsgrad",    "cuda_aware",
    "comm_backend_name", "var_freeze_step", "var_update_scaler", "local_step_scaler",
    "local_step_clipper"};
/// OnebitLamb's (runtime/fp16/onebit/lamb.py).
const std::vector<std::string> kOneBitLambParams = {
    "lr",          "freeze_step", "bias_correction", "betas",       "eps",
    "eps_inside_sqrt", "weight_decay", "max_coeff", "min_coeff",   "amsgrad",
    "cuda_aware",  "comm_backend_name", "coeff_beta", "factor_max", "factor_min",
    "factor_threshold"};
const std::vector<std::string> kOptimizerTypes = {"Adam",       "AdamW",       "SGD",
                                                  "Lamb",       "Lion",        "Adagrad",
                                                  "OneBitAdam", "ZeroOneAdam", "OneBitLamb"};
/// DeepSpeed's own optimizers (config.py DEEPSPEED_OPTIMIZERS) dsc does not
/// build yet.
const std::vector<std::string> kOtherDeepSpeedOptimizers = {
    "muadam", "muadamw", "musgd", "muon"};

std::string resolveOptimizerType(const Section &opt, const std::string &name) {
  // config.py lower-cases names in DEEPSPEED_OPTIMIZERS; anything else goes
  // to getattr(torch.optim, name), which is case-sensitive.
  std::string l = lower(name);
  if (l == "adam")
    return "Adam";
  if (l == "adamw")
    return "AdamW";
  if (name == "SGD")
    return "SGD";
  if (l == "lamb")
    return "Lamb";
  if (l == "lion")
    return "Lion";
  if (l == "adagrad")
    return "Adagrad";
  if (l == "onebitadam")
    return "OneBitAdam";
  if (l == "zerooneadam")
    return "ZeroOneAdam";
  if (l == "onebitlamb")
    return "OneBitLamb";
  if (std::find(kOtherDeepSpeedOptimizers.begin(),
                kOtherDeepSpeedOptimizers.end(),
                l) != kOtherDeepSpeedOptimizers.end())
    opt.fail("optimizer '" + name +
             "' is a DeepSpeed optimizer dsc does not implement (supported: " +
             join(kOptimizerTypes) + ")");
  // Anything else DeepSpeed looks up in torch.optim.
  static const std::vector<std::string> torchOptimizers = {
      "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "ASGD", "LBFGS",
      "NAdam", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam"};
  if (std::find(torchOptimizers.begin(), torchOptimizers.end(), name) != torchOptimizers.end())
    opt.fail("optimizer '" + name + "' is torch.optim." + name +
             ", which DeepSpeed would build; dsc does not implement it (supported: " +
             join(kOptimizerTypes) + ")");
  opt.fail("unknown optimizer type '" + name + "' at '" + opt.path("type") +
           "'" + didYouMean(name, kOptimizerTypes) +
           "; supported: " + join(kOptimizerTypes));
}

/// The 1-bit family with ZeRO: unsound, whatever dsc builds. Each update
/// compresses a parameter's whole momentum with one scale and one error
/// buffer, while ZeRO leaves each rank a part of it; DeepSpeed asserts the
/// same in _configure_basic_optimizer ("1bit-Adam is not compatible with
/// ZeRO", edaa722 engine.py:2152, and likewise for 0/1 Adam and 1-bit LAMB).
void refuseOneBitWithZero(const Section &top, const Section &opt, const std::string &name) {
  static const std::map<std::string, const char *> family = {
      {"onebitadam", "1bit-Adam"}, {"zerooneadam", "0/1 Adam"}, {"onebitlamb", "1bit-Lamb"}};
  auto it = family.find(lower(name));
  if (it == family.end() || !top.has("zero_optimization"))
    return;
  const json &z = top.raw("zero_optimization");
  int64_t stage = z.is_boolean() ? (z.get<bool>() ? 1 : 0)
                  : z.is_object() && z.contains("stage") && z["stage"].is_number()
                      ? int64_t(z["stage"].get<double>())
                      : 0;
  if (stage < 1)
    return;
  opt.fail("optimizer '" + name + "' with ZeRO stage " + std::to_string(stage) +
           " (zero_optimization): a 1-bit optimizer compresses each parameter's whole "
           "momentum, with one scale and one error buffer, and ZeRO leaves each rank only a "
           "part of it (DeepSpeed asserts the same: \"" + it->second +
           " is not compatible with ZeRO\"). Use zero_optimization.stage 0 with it (it "
           "compresses the data-parallel traffic itself), or keep ZeRO with Adam or AdamW" +
           "");
}

/// The 1-bit family's transport choices (cuda_aware, comm_backend_name):
/// the numbers are the same whichever DeepSpeed takes, so each is said in
/// a note; a backend DeepSpeed does not have is refused.
void noteTransport(const Section &params, std::vector<std::string> &notes) {
  if (params.has("cuda_aware")) {
    bool aware = *params.boolean("cuda_aware");
    notes.push_back("'" + params.path("cuda_aware") + "' = " + (aware ? "true" : "false") +
                    " chooses nothing in dsc: it picks how DeepSpeed's MPI backend moves GPU "
                    "buffers; dsc plans the compressed all-reduce as dsrt's own collectives "
                    "on its communicator for the device");
  }
  if (params.has("comm_backend_name")) {
    std::optional<std::string> backend = params.string("comm_backend_name");
    static const std::vector<std::string> backends = {"nccl", "mpi", "compressed"};
    if (std::find(backends.begin(), backends.end(), *backend) == backends.end())
      params.fail("'optimizer.params.comm_backend_name' is '" + *backend +
                  "'; DeepSpeed's 1-bit backends are nccl, mpi and compressed (hccl is "
                  "Ascend's, which dsc does not run on)" +
                  (*backend == "hccl" ? std::string() : didYouMean(*backend, backends)));
    notes.push_back("'" + params.path("comm_backend_name") + "' = '" + *backend +
                    "' chooses nothing in dsc: the compressed all-reduce is planned as "
                    "dsrt's own collectives (all_to_all and all_gather of the packed "
                    "signs), on its communicator for the device");
  }
}

void readOptimizer(const Section &top, OptimizerConfig &o, std::vector<std::string> &notes) {
  Section opt = top.object("optimizer");
  opt.checkKeys({"type", "params"});
  std::optional<std::string> name = opt.string("type");
  if (!name)
    opt.fail("'optimizer.type' is required when an optimizer section is "
             "given");
  o = OptimizerConfig();
  refuseOneBitWithZero(top, opt, *name);
  o.type = resolveOptimizerType(opt, *name);

  Section params = opt.optionalObject("params");
  bool sgd = o.type == "SGD";
  const std::vector<std::string> &known = sgd                 ? kSgdParams
                                          : o.type == "Lamb"    ? kLambParams
                                          : o.type == "Lion"    ? kLionParams
                                          : o.type == "Adagrad" ? kAdagradParams
                                          : o.type == "OneBitAdam" ? kOneBitAdamParams
                                          : o.type == "ZeroOneAdam" ? kZeroOneAdamParams
                                          : o.type == "OneBitLamb" ? kOneBitLambParams
                                                                : kAdamParams;
  params.checkKeys(known, [&](const std::string &key) -> std::string {
    if (key == "max_grad_norm")
      return "'" + params.path(key) +
             "' is not supported as an optimizer parameter, please switch to "
             "using the deepspeed parameter 'gradient_clipping' (engine.py "
             "rejects it too)";
    // A key of another optimizer: say whose.
    static const std::vector<std::pair<const char *, const std::vector<std::string> *>> owners = {
        {"Adam/AdamW", &kAdamParams}, {"SGD", &kSgdParams},  {"Lamb", &kLambParams},
        {"Lion", &kLionParams},       {"Adagrad", &kAdagradParams},
        {"OneBitAdam", &kOneBitAdamParams}, {"ZeroOneAdam", &kZeroOneAdamParams},
        {"OneBitLamb", &kOneBitLambParams}};
    std::vector<std::string> whose;
    for (const auto &[owner, keys] : owners)
      if (std::find(keys->begin(), keys->end(), key) != keys->end())
        whose.push_back(owner);
    if (!whose.empty())
      return "'" + params.path(key) + "' is not a parameter of " + o.type +
             " (it belongs to " + join(whose) + ")" + didYouMean(key, known);
    return "";
  });

  // The default lr: FusedAdam's, FusedLamb's and FusedLion's 1e-3;
  // torch.optim.Adagrad's 1e-2. (SGD has none in torch; DeepSpeed's
  // config.py default, 1e-3, fills it.)
  o.lr = params.number("lr").value_or(o.type == "Adagrad" ? 1e-2 : 1e-3);
  params.atLeast("lr", o.lr, 0);
  auto readBetas = [&] {
    if (!params.has("betas"))
      return;
    const json &b = params.raw("betas");
    if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
      params.fail("'optimizer.params.betas' must be an array of two "
                  "numbers, got " +
                  shown(b));
    o.beta1 = b[0].get<double>();
    o.beta2 = b[1].get<double>();
    for (double beta : {o.beta1, o.beta2})
      if (!(beta >= 0 && beta < 1))
        params.fail("'optimizer.params.betas' must lie in [0, 1), got [" +
                    formatNumber(o.beta1) + ", " + formatNumber(o.beta2) + "]");
  };
  // FusedLamb's and OnebitLamb's clamp of the trust ratio.
  auto readTrustRatioClamp = [&] {
    o.maxCoeff = params.number("max_coeff").value_or(10.0);
    o.minCoeff = params.number("min_coeff").value_or(0.01);
    params.atLeast("min_coeff", o.minCoeff, 0);
    if (o.minCoeff > o.maxCoeff)
      params.fail("'optimizer.params.min_coeff' (" + formatNumber(o.minCoeff) +
                  ") must not exceed 'optimizer.params.max_coeff' (" +
                  formatNumber(o.maxCoeff) + "): they clamp LAMB's trust ratio");
  };
  if (o.type == "Lamb") {
    o.decoupled = false;
    o.biasCorrection = params.boolean("bias_correction").value_or(true);
    o.eps = params.number("eps").value_or(1e-8);
    if (!(o.eps > 0))
      params.fail("'optimizer.params.eps' must be > 0, got " + formatNumber(o.eps));
    if (params.boolean("eps_inside_sqrt").value_or(false))
      params.fail("'optimizer.params.eps_inside_sqrt': true is FusedLamb's other eps mode "
                  "(sqrt(v + eps)); dsc implements the default, eps added after the square "
                  "root. Remove the key or set it to false");
    // FusedLamb raises RuntimeError('FusedLamb does not support the AMSGrad variant.').
    if (params.boolean("amsgrad").value_or(false))
      params.fail("'optimizer.params.amsgrad': FusedLamb does not support the AMSGrad "
                  "variant (DeepSpeed raises the same error); remove the key");
    readBetas();
    readTrustRatioClamp();
  } else if (o.type == "Lion") {
    o.decoupled = true;
    readBetas();
  } else if (o.type == "OneBitLamb") {
    // DeepSpeed's OnebitLamb (edaa722 runtime/fp16/onebit/lamb.py; dsc's
    // reading of it: docs/deepspeed-optimizers.md, section 7).
    o.decoupled = true; // u = m / (sqrt(v) + eps) + wd p
    o.biasCorrection = false;
    o.eps = params.number("eps").value_or(1e-8);
    if (!(o.eps > 0))
      params.fail("'optimizer.params.eps' must be > 0, got " + formatNumber(o.eps));
    readBetas();
    o.freezeStep = params.count("freeze_step", 0, int64_t(1) << 40).value_or(100000);
    if (params.boolean("amsgrad").value_or(false))
      params.fail("'optimizer.params.amsgrad': 1-bit Lamb does not support the AMSGrad variant "
                  "(DeepSpeed raises the same error); remove the key");
    readTrustRatioClamp();
    o.coeffBeta = params.number("coeff_beta").value_or(0.9);
    if (!(o.coeffBeta >= 0 && o.coeffBeta <= 1))
      params.fail("'optimizer.params.coeff_beta' must lie in [0, 1] (the trust ratio's moving "
                  "average), got " + formatNumber(o.coeffBeta));
    o.factorMax = params.number("factor_max").value_or(4.0);
    o.factorMin = params.number("factor_min").value_or(0.5);
    o.factorThreshold = params.number("factor_threshold").value_or(0.1);
    params.atLeast("factor_min", o.factorMin, 0);
    params.atLeast("factor_threshold", o.factorThreshold, 0);
    if (o.factorMin > o.factorMax)
      params.fail("'optimizer.params.factor_min' (" + formatNumber(o.factorMin) +
                  ") must not exceed 'optimizer.params.factor_max' (" +
                  formatNumber(o.factorMax) + "): they clamp 1-bit LAMB's factor");
    for (const char *key : {"bias_correction", "eps_inside_sqrt"})
      if (params.has(key))
        notes.push_back("'" + params.path(key) + "' changes nothing: OnebitLamb stores it and "
                        "never reads it (DeepSpeed edaa722 lamb.py); its update has no bias "
                        "correction and adds eps after the square root");
    noteTransport(params, notes);
  } else if (o.type == "OneBitAdam" || o.type == "ZeroOneAdam") {
    // DeepSpeed's OnebitAdam and ZeroOneAdam (edaa722 runtime/fp16/onebit/
    // adam.py and zoadam.py; dsc's reading of them:
    // docs/deepspeed-optimizers.md, sections 5 to 7).
    const bool zeroOne = o.type == "ZeroOneAdam";
    const char *file = zeroOne ? "zoadam.py" : "adam.py";
    o.decoupled = true; // p -= lr (m / (sqrt(v) + eps) + wd p)
    o.biasCorrection = false;
    o.eps = params.number("eps").value_or(1e-8);
    if (!(o.eps > 0))
      params.fail("'optimizer.params.eps' must be > 0, got " + formatNumber(o.eps));
    readBetas();
    const int64_t big = int64_t(1) << 40;
    if (zeroOne) {
      o.freezeStep = params.count("var_freeze_step", 0, big).value_or(100000);
      o.varUpdateScaler = params.count("var_update_scaler", 0, big).value_or(16);
      o.localStepScaler = params.count("local_step_scaler", 0, big).value_or(32678);
      // min(clipper, 2 x interval) is the next interval: 0 would make
      // DeepSpeed's `step % local_step_interval` divide by zero.
      o.localStepClipper = params.count("local_step_clipper", 1, big).value_or(16);
    } else {
      o.freezeStep = params.count("freeze_step", 0, big).value_or(100000);
    }
    if (params.boolean("amsgrad").value_or(false))
      params.fail(std::string("'optimizer.params.amsgrad': ") +
                  (zeroOne ? "0/1 Adam" : "1-bit Adam") +
                  " does not support the AMSGrad variant (DeepSpeed raises the same error); "
                  "remove the key");
    // Keys DeepSpeed stores and never reads: said, not ignored.
    for (const char *key : {"bias_correction", "eps_inside_sqrt"})
      if (params.has(key))
        notes.push_back("'" + params.path(key) + "' changes nothing: " +
                        (zeroOne ? "ZeroOneAdam" : "OnebitAdam") +
                        " stores it and never reads it (DeepSpeed edaa722 " + file +
                        "); its update has no bias correction and adds eps after the square "
                        "root");
    noteTransport(params, notes);
  } else if (o.type == "Adagrad") {
    o.decoupled = false;
    o.eps = params.number("eps").value_or(1e-10);
    if (!(o.eps > 0))
      params.fail("'optimizer.params.eps' must be > 0, got " + formatNumber(o.eps));
    o.lrDecay = params.number("lr_decay").value_or(0.0);
    params.atLeast("lr_decay", o.lrDecay, 0);
    double initial = params.number("initial_accumulator_value").value_or(0.0);
    if (initial != 0)
      params.fail("'optimizer.params.initial_accumulator_value' is " + formatNumber(initial) +
                  ": dsc starts every optimizer state at zero (torch's default, and what "
                  "DeepSpeed's CPU Adagrad always does); remove the key or set it to 0");
  } else if (sgd) {
    o.decoupled = false;
    o.momentum = params.number("momentum").value_or(0.0);
    o.dampening = params.number("dampening").value_or(0.0);
    o.nesterov = params.boolean("nesterov").value_or(false);
    params.atLeast("momentum", o.momentum, 0);
    // torch.optim.SGD's own check.
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      params.fail("'optimizer.params.nesterov' requires momentum > 0 and "
                  "dampening 0 (torch.optim.SGD), got momentum " +
                  formatNumber(o.momentum) + ", dampening " +
                  formatNumber(o.dampening));
  } else {
    // engine.py _configure_basic_optimizer: "AdamW" forces decoupled decay;
    // "Adam" follows adam_w_mode, default True.
    o.torchAdam = params.boolean("torch_adam").value_or(false);
    o.decoupled =
        o.type == "AdamW" || params.boolean("adam_w_mode").value_or(true);
    if (o.torchAdam && params.has("bias_correction"))
      params.fail("'optimizer.params.bias_correction' cannot be used with "
                  "torch_adam: true (torch.optim.Adam has no such argument)");
    o.biasCorrection = params.boolean("bias_correction").value_or(true);
    // torch.optim.AdamW defaults weight_decay to 1e-2; FusedAdam and
    // torch.optim.Adam to 0.
    if (o.torchAdam && o.decoupled)
      o.weightDecay = 1e-2;
    o.eps = params.number("eps").value_or(1e-8);
    params.atLeast("eps", o.eps, 0);
    readBetas();
  }
  o.weightDecay = params.number("weight_decay").value_or(o.weightDecay);
  params.atLeast("weight_decay", o.weightDecay, 0);
}

//===--- scheduler --------------------------------------------------------===//

enum class Kind { Number, Count, Flag, WarmupType };

/// One scheduler parameter: its constructor default (lr_schedules.py), or
/// where the default comes from when it depends on another value.
struct ParamSpec {
  const char *name;
  Kind kind;
  double defaultValue;
  bool required = false;
  const char *defaultFrom = nullptr; // another param, or "optimizer.lr"
  bool strictlyPositive = false;     // > 0 rather than the usual >= 0
  bool anySign = false;              // no lower bound at all
  bool momentum = false;             // a beta: < 1 as well
};

struct ScheduleSpec {
  const char *type;
  std::vector<ParamSpec> params;
};

ParamSpec warmupType() { return {"warmup_type", Kind::WarmupType, 0}; }
/// DeepSpeed takes any count, 0 included, and warms up over max(2, n)
/// steps (LrSchedule.cpp).
ParamSpec warmupSteps() { return {"warmup_num_steps", Kind::Count, 1000}; }
ParamSpec totalSteps() {
  ParamSpec p{"total_num_steps", Kind::Count, 0};
  p.required = true;
  return p;
}

const std::vector<ScheduleSpec> &scheduleSpecs() {
  static const std::vector<ScheduleSpec> specs = [] {
    ParamSpec rtStep{"lr_range_test_step_size", Kind::Count, 2000};
    rtStep.strictlyPositive = true;
    // Not anySign, unlike DeepSpeed: a negative rate drives the lr below 0.
    ParamSpec rtRate{"lr_range_test_step_rate", Kind::Number, 1.0};

    ParamSpec minLr{"cycle_min_lr", Kind::Number, 0};
    minLr.required = true;
    ParamSpec maxLr{"cycle_max_lr", Kind::Number, 0};
    maxLr.required = true;
    ParamSpec first{"cycle_first_step_size", Kind::Count, 2000};
    first.strictlyPositive = true;
    ParamSpec second{"cycle_second_step_size", Kind::Count, 0};
    second.defaultFrom = "cycle_first_step_size";
    second.strictlyPositive = true;
    ParamSpec secondStairs{"cycle_second_stair_count", Kind::Count, 0};
    secondStairs.defaultFrom = "cycle_first_stair_count";
    ParamSpec minMom{"cycle_min_mom", Kind::Number, 0.8};
    minMom.momentum = true;
    ParamSpec maxMom{"cycle_max_mom", Kind::Number, 0.9};
    maxMom.momentum = true;
    ParamSpec decayMom{"decay_mom_rate", Kind::Number, 0};
    decayMom.anySign = true;
    // Not anySign, unlike DeepSpeed: lr = min_lr / (1 + rate * t) divides by
    // zero, then turns negative, for a negative rate.
    ParamSpec decayLr{"decay_lr_rate", Kind::Number, 0};

    ParamSpec warmupMax{"warmup_max_lr", Kind::Number, 0};
    warmupMax.defaultFrom = "optimizer.lr";

    return std::vector<ScheduleSpec>{
        {"LRRangeTest",
         {{"lr_range_test_min_lr", Kind::Number, 1e-3},
          rtStep,
          rtRate,
          {"lr_range_test_staircase", Kind::Flag, 0}}},
        {"OneCycle",
         {minLr,
          maxLr,
          decayLr,
          first,
          second,
          {"cycle_first_stair_count", Kind::Count, 0},
          secondStairs,
          {"decay_step_size", Kind::Count, 0},
          {"cycle_momentum", Kind::Flag, 1},
          minMom,
          maxMom,
          decayMom}},
        {"WarmupLR",
         {{"warmup_min_lr", Kind::Number, 0},
          warmupMax,
          warmupSteps(),
          warmupType()}},
        {"WarmupDecayLR",
         {totalSteps(),
          {"warmup_min_lr", Kind::Number, 0},
          {"warmup_max_lr", Kind::Number, 0.001},
          warmupSteps(),
          warmupType()}},
        {"WarmupCosineLR",
         {totalSteps(),
          {"warmup_min_ratio", Kind::Number, 0},
          warmupSteps(),
          {"cos_min_ratio", Kind::Number, 1e-4},
          warmupType()}},
    };
  }();
  return specs;
}

/// The SchedulerConfig field behind a Kind::Flag parameter.
bool &flagField(SchedulerConfig &s, const std::string &name) {
  return name == "cycle_momentum" ? s.cycleMomentum : s.staircase;
}
bool flagField(const SchedulerConfig &s, const std::string &name) {
  return name == "cycle_momentum" ? s.cycleMomentum : s.staircase;
}

const ScheduleSpec *findSchedule(const std::string &type) {
  for (const ScheduleSpec &s : scheduleSpecs())
    if (type == s.type)
      return &s;
  return nullptr;
}

std::vector<std::string> paramNames(const ScheduleSpec &spec) {
  std::vector<std::string> names;
  for (const ParamSpec &p : spec.params)
    names.push_back(p.name);
  return names;
}

void readScheduler(const Section &top, const OptimizerConfig &opt,
                   SchedulerConfig &s) {
  Section sched = top.object("scheduler");
  sched.checkKeys({"type", "params"});
  std::optional<std::string> type = sched.string("type");
  if (!type)
    sched.fail("'scheduler.type' is required when a scheduler section is "
               "given");
  // engine.py _scheduler_from_config: getattr(lr_schedules, name), so the
  // name is case-sensitive.
  const ScheduleSpec *spec = findSchedule(*type);
  if (!spec) {
    std::vector<std::string> types;
    for (const ScheduleSpec &sp : scheduleSpecs())
      types.push_back(sp.type);
    // DeepSpeed falls back to torch.optim.lr_scheduler.
    static const std::vector<std::string> torchSchedulers = {
        "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
        "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler",
        "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
        "PolynomialLR"};
    if (std::find(torchSchedulers.begin(), torchSchedulers.end(), *type) !=
        torchSchedulers.end())
      sched.fail("scheduler '" + *type + "' is torch.optim.lr_scheduler." + *type +
                 ", which DeepSpeed would build; dsc implements DeepSpeed's own schedules (" +
                 join(types) + ")");
    sched.fail("unknown scheduler type '" + *type + "' at 'scheduler.type'" +
               didYouMean(*type, types) + "; supported: " + join(types));
  }
  s = SchedulerConfig();
  s.type = spec->type;

  Section params = sched.optionalObject("params");
  std::vector<std::string> known = paramNames(*spec);
  // Every DeepSpeed scheduler's constructor takes last_batch_iteration,
  // default -1 (a fresh schedule): that value asks for nothing.
  if (std::optional<int64_t> last = params.count("last_batch_iteration", INT64_MIN, INT64_MAX);
      last && *last != -1)
    params.fail("'" + params.path("last_batch_iteration") + "' is " + std::to_string(*last) +
                ": not supported by dsc: DeepSpeed starts the schedule after that step; dsc "
                "schedules start at step 0, and dsrt --resume restores a checkpoint's step "
                "and schedule; remove it or give -1");
  known.push_back("last_batch_iteration");
  params.checkKeys(known, [&](const std::string &key) -> std::string {
    std::vector<std::string> owners;
    for (const ScheduleSpec &other : scheduleSpecs()) {
      std::vector<std::string> names = paramNames(other);
      if (std::find(names.begin(), names.end(), key) != names.end())
        owners.push_back(other.type);
    }
    if (owners.empty())
      return "";
    return "'" + params.path(key) + "' is not a parameter of " + s.type +
           " (it belongs to " + join(owners) + ")" + didYouMean(key, known);
  });

  // Plain defaults first, so dependent defaults can read them.
  for (const ParamSpec &p : spec->params) {
    switch (p.kind) {
    case Kind::Flag: {
      bool v = params.boolean(p.name).value_or(p.defaultValue != 0);
      flagField(s, p.name) = v;
      continue;
    }
    case Kind::WarmupType: {
      std::string v = params.string(p.name).value_or("log");
      if (v != "log" && v != "linear")
        params.fail("'" + params.path(p.name) + "' must be \"log\" or " +
                    "\"linear\", got \"" + v + "\"" +
                    didYouMean(v, {"log", "linear"}));
      s.warmupType = v;
      continue;
    }
    case Kind::Number:
    case Kind::Count: {
      std::optional<double> v;
      if (p.kind == Kind::Count) {
        // Step counts are kept as doubles: bounded so they stay exact.
        if (std::optional<int64_t> i =
                params.count(p.name, p.strictlyPositive ? 1 : 0, kMaxSteps))
          v = double(*i);
      } else {
        v = params.number(p.name);
      }
      if (!v && p.required)
        params.fail("'" + params.path(p.name) + "' is required by " + s.type);
      if (v) {
        if (p.kind == Kind::Number && !p.anySign)
          params.atLeast(p.name, *v, 0);
        if (p.momentum && !(*v < 1))
          params.fail("'" + params.path(p.name) +
                      "' must lie in [0, 1) (it becomes Adam's beta1), got " +
                      formatNumber(*v));
        s.params[p.name] = *v;
      } else if (!p.defaultFrom) {
        s.params[p.name] = p.defaultValue;
      }
      continue;
    }
    }
  }
  for (const ParamSpec &p : spec->params) {
    if (!p.defaultFrom || s.params.count(p.name))
      continue;
    s.params[p.name] = p.defaultFrom == std::string("optimizer.lr")
                           ? opt.lr
                           : s.params.at(p.defaultFrom);
  }
}

/// The scheduler's params as toJson writes them (nullopt: no known type).
std::optional<ordered_json> schedulerParamsJson(const SchedulerConfig &s) {
  const ScheduleSpec *spec = findSchedule(s.type);
  if (!spec)
    return std::nullopt;
  ordered_json sp = ordered_json::object();
  for (const ParamSpec &p : spec->params) {
    switch (p.kind) {
    case Kind::Flag:
      sp[p.name] = flagField(s, p.name);
      break;
    case Kind::WarmupType:
      sp[p.name] = s.warmupType;
      break;
    case Kind::Count:
      sp[p.name] = static_cast<int64_t>(s.param(p.name));
      break;
    case Kind::Number:
      sp[p.name] = s.param(p.name);
      break;
    }
  }
  return sp;
}

} // namespace dsrt::config::detail
