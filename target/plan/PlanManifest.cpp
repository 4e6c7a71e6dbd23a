//===- PlanManifest.cpp - manifest.txt: a plan explained before the run ---===//
//
// What dsc writes next to plan.pb (and --explain prints): inputs, per-rank
// memory by kind of state, the schedule, the data-parallel and
// tensor-parallel communication of one step in the ZeRO paper's units,
// recompute and mixed precision. Read from the plan itself, so that it
// states what dsrt will run.
//
//===----------------------------------------------------------------------===//
#include "target/plan/PlanManifest.h"

#include "config/DsConfig.h"
#include "plan/ElementBytes.h"
#include "plan/StepRule.h"
#include "plan/Version.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dsc {

using dsrt::plan_util::elementBytes;

std::string humanBytes(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (bytes >= (1ll << 30))
    os << llvm::format("%.2f GiB", bytes / double(1ll << 30));
  else if (bytes >= (1ll << 20))
    os << llvm::format("%.2f MiB", bytes / double(1ll << 20));
  else
    os << llvm::format("%.1f KiB", bytes / 1024.0);
  return s;
}

int64_t numel(const google::protobuf::RepeatedField<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {

/// "1.0004x": the arena over the most bytes live at once.
std::string fragmentation(uint64_t arena, uint64_t live) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.4fx", double(arena) / double(live));
  return s;
}

/// "1.49x less" (with fewer bytes than without), "1.04x more" (with more).
std::string lessOrMore(int64_t without, int64_t with) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (with > 0 && with <= without)
    os << llvm::format("%.2fx", double(without) / double(with)) << " less";
  else
    os << llvm::format("%.2fx", without > 0 ? double(with) / double(without) : 0.0) << " more";
  return s;
}

/// Elements of this tp rank's part of the tensor a PARAM buffer holds
/// (before a ZeRO stage shards it over the dp group; the whole tensor
/// without tensor parallelism): what the data-parallel group partitions.
int64_t tpPartNumel(const plan::Buffer &b, int64_t tp) {
  if (b.tp_split_size())
    return numel(b.full_shape()) / std::max<int64_t>(1, tp);
  return b.shard_count() > 1 ? numel(b.full_shape()) : numel(b.shape());
}

/// Per-rank memory by kind of state, and the communication of one step in
/// the ZeRO paper's units (an all-reduce of n elements moves 2n, a
/// reduce-scatter or all-gather of an n-element tensor moves n), with P the
/// number of parameters, so stages 0-2 read 2P and stage 3 up to 3P.
/// The 16-bit copies of the parameters (an nn.cast of a PARAM buffer, whole
/// or its chunk, or a PARAM_COPY the fused update keeps), counted as whole
/// copies.
struct LowCopies {
  int64_t elements = 0;
  /// Held through the step (all but ZeRO-3's gathered-per-use ones).
  int64_t heldElements = 0;
  /// Of `elements`, those of the working copies kept across steps.
  int64_t keptElements = 0;
  const char *name = nullptr; // "bf16", "fp16", or none
};

LowCopies lowPrecisionCopies(const plan::Plan &p) {
  LowCopies low;
  auto count = [&](const plan::Buffer &param, plan::DType to) {
    int64_t n = tpPartNumel(param, p.tp());
    low.elements += n;
    if (p.zero_stage() < 3 || param.shard_count() <= 1)
      low.heldElements += n;
    low.name = to == plan::BF16 ? "bf16" : "fp16";
    return n;
  };
  std::set<uint32_t> cast;
  const plan::Program &prog = p.program();
  for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()})
    for (const plan::Instr &i : *list)
      if (i.op() == "nn.cast" && i.inputs_size() == 1 && i.outputs_size() == 1 &&
          p.buffers(i.inputs(0)).role() == plan::PARAM &&
          elementBytes(p.buffers(i.outputs(0)).dtype()) == 2 && cast.insert(i.inputs(0)).second)
        count(p.buffers(i.inputs(0)), p.buffers(i.outputs(0)).dtype());
  std::map<std::string, const plan::Buffer *> params;
  for (const plan::Buffer &b : p.buffers())
    if (b.role() == plan::PARAM)
      params.emplace(b.name(), &b);
  for (const plan::Buffer &b : p.buffers())
    if (b.role() == plan::PARAM_COPY)
      if (auto it = params.find(dsrt::copiedParameter(b.name())); it != params.end())
        low.keptElements += count(*it->second, b.dtype());
  return low;
}

/// The precision the plan trains in, as the baked config and the plan's
/// casts state it: what is 16-bit, what stays fp32, the dtypes gradients
/// accumulate and travel in, the loss scaler, and the 16-bit copies' bytes.
void writePrecision(const plan::Plan &p, const dsrt::config::TrainConfig &cfg,
                    llvm::raw_ostream &os) {
  using namespace dsrt::config;
  const PrecisionConfig &pc = cfg.precision;
  LowCopies low = lowPrecisionCopies(p);
  if (pc.kind == Precision::FP32) {
    os << "precision:        fp32 (no mixed precision: weights, activations, gradients, "
          "optimizer states and collectives in fp32)\n";
    return;
  }
  const char *k = precisionName(pc.kind);
  os << "precision:        " << k << " mixed: " << k << " compute over fp32 master weights "
     << "and optimizer states\n";
  // What the plan does, read from its buffers: the gradient accumulators'
  // dtype, and the dtype the gradient collectives carry.
  const plan::Program &prog = p.program();
  auto dtypeName = [](plan::DType t) {
    return t == plan::BF16 ? "bf16" : t == plan::F16 ? "fp16" : "fp32";
  };
  std::set<std::string> accum, reduced;
  std::set<uint32_t> grads(prog.gradient_buffers().begin(), prog.gradient_buffers().end());
  for (uint32_t b : grads)
    accum.insert(dtypeName(p.buffers(b).dtype()));
  for (const auto *list : {&prog.micro_batch(), &prog.epilogue()})
    for (const plan::Instr &i : *list)
      if ((i.op() == "dist.all_reduce" || i.op() == "dist.reduce_scatter") && i.inputs_size())
        reduced.insert(dtypeName(p.buffers(i.inputs(0)).dtype()));
  auto list = [](const std::set<std::string> &s) {
    std::string r;
    for (const std::string &x : s)
      r += (r.empty() ? "" : " and ") + x;
    return r.empty() ? std::string("-") : r;
  };
  // One micro-batch's gradients that the fused update reads in 16 bits
  // (fuse-optimizer) were never accumulated: they are not the sums' dtype.
  const int64_t narrow = p.fused_update_narrow_grads();
  if (narrow && prog.micro_batches() <= 1 && !pc.gradAccumDtypeSetting)
    accum.erase(dtypeName(pc.kind == Precision::FP16 ? plan::F16 : plan::BF16));
  if (accum.empty())
    accum.insert("fp32");
  os << "  gradients:      accumulated in " << list(accum) << " (data_types.grad_accum_dtype"
     << (pc.gradAccumDtypeSetting ? "" : " not given: fp32, as BF16_Optimizer keeps them") << ")";
  if (!reduced.empty())
    os << ", reduced in " << list(reduced) << " (communication_data_type)";
  if (narrow && prog.micro_batches() <= 1)
    os << "; with one micro-batch nothing is summed, and " << narrow << " gradients stay " << k
       << " until the fused update widens them (exactly) as it reads them";
  os << "\n";
  os << "  16-bit copies:  " << 2 * low.heldElements << " bytes per rank ("
     << humanBytes(2 * low.heldElements) << ") held through the step, " << low.elements
     << " parameters cast to " << (low.name ? low.name : k)
     << (low.keptElements ? ", " + std::to_string(low.keptElements) +
                                " of them kept across steps (the fused update writes them)"
                          : std::string())
     << (p.zero_stage() == 3 && low.heldElements != low.elements
             ? "; ZeRO-3's partitioned ones gathered per use"
             : "")
     << "\n";
  if (pc.kind == Precision::FP16) {
    const Fp16Config &f = pc.fp16;
    if (f.dynamicLossScale())
      os << "  loss scaler:    dynamic: initial 2^" << f.initialScalePower << ", x2 after "
         << f.lossScaleWindow << " steps without overflow, /2 after " << f.hysteresis
         << " overflow(s) (hysteresis" << (f.consecutiveHysteresis ? ", consecutive" : "")
         << "), min " << f.minLossScale << "; an overflowing step is skipped\n";
    else
      os << "  loss scaler:    static, " << f.lossScale << "\n";
  } else {
    os << "  loss scaler:    none (bf16 has fp32's range); a non-finite gradient stops the "
          "run\n";
  }
}

/// What a 1-bit optimizer's plan holds of it: its updates (instructions
/// `op`), its compressions, the bytes of its worker and server errors, 1-bit
/// LAMB's padding elements, and whether the errors are DeepSpeed's bf16 /
/// fp16 wrapper's one flat tensor's.
struct OneBitParts {
  int64_t updates = 0, compressions = 0, errorBytes = 0, padding = 0;
  bool flat = false;
};
OneBitParts oneBitParts(const plan::Plan &p, llvm::StringRef op) {
  OneBitParts parts;
  for (const plan::Instr &c : p.program().epilogue()) {
    parts.compressions += c.op() == "train.onebit_compress";
    parts.updates += c.op() == op;
  }
  for (const plan::Buffer &b : p.buffers()) {
    llvm::StringRef name = b.name();
    if (b.role() != plan::OPT_STATE)
      continue;
    if (name.ends_with("/worker_error") || name.ends_with("/server_error")) {
      parts.errorBytes += 4 * numel(b.shape());
      parts.flat |= name.starts_with("fp32_flat_group/");
    }
    if (name.ends_with("/exp_avg_padding"))
      parts.padding = numel(b.shape());
  }
  return parts;
}

/// The first steps of class `c` (exactly: local steps that do not sync
/// when c is kStepLocal), as ranges: "2-4, 6, 8, 12, ..." (up to 8 ranges,
/// searched over the first 100000 steps past the freeze; "none" if none).
std::string classSteps(const dsrt::ZeroOneRule &rule, uint32_t c) {
  auto is = [&](int64_t s) {
    uint32_t k = rule.classOf(s);
    return c == dsrt::kStepLocal ? k == dsrt::kStepLocal : (k & c) == c;
  };
  std::string out;
  int ranges = 0;
  const int64_t horizon = rule.firstFrozenStep() + 100000;
  for (int64_t s = 1; s <= horizon; ++s) {
    if (!is(s))
      continue;
    if (ranges == 8) {
      out += ", ...";
      return out;
    }
    int64_t e = s;
    while (e + 1 <= horizon && is(e + 1))
      ++e;
    out += (ranges ? ", " : "") + std::to_string(s);
    if (e == horizon && c & (dsrt::kStepLocal | dsrt::kStepSync) && e > s)
      return out + " on";
    if (e > s)
      out += "-" + std::to_string(e);
    ++ranges;
    s = e;
  }
  return ranges ? out : "none";
}

void writeDataParallel(const plan::Plan &p, llvm::raw_ostream &os) {
  int64_t dp = std::max<int64_t>(1, p.dp()), stage = p.zero_stage();
  // P: parameters; pad: padding elements when every parameter is split
  // into dp chunks of ceil(n / dp); Pp/padP: the same over the parameters
  // stage 3 partitions (the others are persistent, whole on every rank).
  int64_t P = 0, pad = 0, Pp = 0, padP = 0, paramTensors = 0, stateTensors = 0, errorBytes = 0,
          scalarStateBytes = 0;
  bool lambScalars = false, lambScaling = false; // 1-bit LAMB's (else 0/1 Adam's lrs)
  bool lambPadding = false;
  int64_t paramBytes = 0, stateBytes = 0;
  for (const plan::Buffer &b : p.buffers()) {
    int64_t n = numel(b.shape());
    bool sharded = b.shard_count() > 1;
    int64_t full = b.role() == plan::PARAM ? tpPartNumel(b, p.tp()) : sharded ? numel(b.full_shape()) : n;
    int64_t padding = (full + dp - 1) / dp * dp - full;
    if (b.role() == plan::PARAM) {
      ++paramTensors;
      P += full;
      pad += padding;
      paramBytes += 4 * n;
      if (sharded)
        Pp += full, padP += padding;
    }
    if (b.role() == plan::OPT_STATE) {
      // 1-bit Adam's error-feedback buffers are sized by the padding, not P.
      if (llvm::StringRef(b.name()).ends_with("/worker_error") ||
          llvm::StringRef(b.name()).ends_with("/server_error") ||
          llvm::StringRef(b.name()).ends_with("/exp_avg_padding")) {
        errorBytes += 4 * n;
        lambPadding |= llvm::StringRef(b.name()).ends_with("/exp_avg_padding");
      }
      else if (b.shape_size() == 0) { // 0/1 Adam's lrs, 1-bit LAMB's coefficients
        scalarStateBytes += 4;
        lambScalars |= llvm::StringRef(b.name()).ends_with("/last_factor");
        lambScaling |= llvm::StringRef(b.name()).ends_with("/scaling_coeff");
      }
      else
        ++stateTensors;
      stateBytes += 4 * n;
    }
  }
  int64_t statesPerParam = paramTensors ? stateTensors / paramTensors : 0;
  const plan::Program &prog = p.program();
  // Mixed precision: the 16-bit copies of the parameters.
  LowCopies low = lowPrecisionCopies(p);
  int64_t lowElements = low.elements, lowHeldElements = low.heldElements;
  const char *lowName = low.name;
  int64_t gradBytes = 0;
  std::set<uint32_t> sums(prog.gradient_buffers().begin(), prog.gradient_buffers().end());
  bool lowGrads = false; // grad_accum_dtype bf16 / fp16
  for (uint32_t b : sums) {
    int64_t eb = elementBytes(p.buffers(b).dtype());
    lowGrads |= eb == 2;
    gradBytes += eb * numel(p.buffers(b).shape());
  }
  struct Kind {
    int64_t calls = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, Kind> comm;
  int64_t largestBucket = 0;
  // Instructions of a range of optimizer steps (plan format 5: 1-bit
  // Adam's phases): `step` 0 counts every instruction, another step those
  // that run on it.
  // Plan format 7 (0/1 Adam): `cls`, a step class's bits, counts the
  // instructions of that class.
  int64_t step = 0;
  uint32_t cls = 0;
  auto runsOn = [&](const plan::Instr &i) {
    if (cls)
      return i.step_classes() == 0 || (i.step_classes() & cls) != 0;
    return step == 0 ||
           (step >= i.first_step() && (i.last_step() == 0 || step <= i.last_step()));
  };
  auto count = [&](const google::protobuf::RepeatedPtrField<plan::Instr> &list,
                   int64_t times) {
    for (const plan::Instr &i : list) {
      if (i.op() != "dist.all_reduce" && i.op() != "dist.reduce_scatter" &&
          i.op() != "dist.all_gather" && i.op() != "dist.all_to_all")
        continue;
      if (i.axis() == 2 || !runsOn(i))
        continue; // the tensor-parallel group's: its own section
      int64_t in = 0, out = 0;
      for (uint32_t b : i.inputs())
        in += numel(p.buffers(b).shape());
      for (uint32_t b : i.outputs())
        out += numel(p.buffers(b).shape());
      Kind &k = comm[i.op().substr(5)];
      k.calls += times;
      int64_t moved = i.op() == "dist.all_reduce" ? 2 * in : i.op() == "dist.all_gather" ? out : in;
      k.elements += times * moved;
      // One element type per collective in practice; a mixed bucket is
      // weighed by its first operand's.
      k.bytes += times * moved *
                 (i.inputs_size() ? elementBytes(p.buffers(i.inputs(0)).dtype()) : 4);
      largestBucket = std::max(largestBucket, 4 * std::max(in, out));
    }
  };
  count(prog.prologue(), 1);
  count(prog.micro_batch(), prog.micro_batches());
  count(prog.epilogue(), 1);
  int64_t activations = (int64_t)p.arena_bytes() - (int64_t)p.persistent_bytes() - gradBytes;

  os << "data parallel:    " << dp << " ranks, ZeRO stage " << stage << ", P = " << P
     << " parameters" << (p.tp() > 1 ? " (this tp rank's part)" : "") << ", padding " << pad
     << " (chunks of ceil(n/" << dp << ") per tensor)\n";
  os << "per rank:\n";
  auto line = [&](const char *what, int64_t bytes, const std::string &formula) {
    os << "  " << what << bytes << " bytes (" << humanBytes(bytes) << ")" << formula << "\n";
  };
  auto whole = [&](int64_t k) {
    return " = " + std::to_string(k) + "P = " + std::to_string(k) + "*" + std::to_string(P);
  };
  auto split = [&](int64_t k, int64_t n, int64_t padding) {
    return " = " + std::to_string(k) + "(P+pad)/dp = " + std::to_string(k) + "*(" +
           std::to_string(n) + "+" + std::to_string(padding) + ")/" + std::to_string(dp);
  };
  if (stage == 3)
    line("parameters:     ", paramBytes,
         " = 4(Pp+pad)/dp + 4(P-Pp) = 4*(" + std::to_string(Pp) + "+" + std::to_string(padP) +
             ")/" + std::to_string(dp) + " + 4*" + std::to_string(P - Pp) +
             " (Pp: partitioned, the rest persistent)");
  else if (Pp)
    line("parameters:     ", paramBytes,
         split(4, P, pad) + (lowName ? " (fp32 master weights)" : ""));
  else
    line("parameters:     ", paramBytes, whole(4) + (lowName ? " (fp32 master weights)" : ""));
  // The 16-bit copies live through the step (stages 0-2: cast, or
  // gathered, once per step); stage 3 gathers them per use, transiently.
  int64_t lowBytes = 2 * lowElements;
  if (lowName)
    line("16-bit copies:  ", lowBytes,
         " = 2P' = 2*" + std::to_string(lowElements) + " (" + lowName + ", " +
             (low.keptElements == lowElements
                  ? "kept across steps, written by the fused update"
              : stage == 0 ? "cast once per step"
              : stage < 3  ? "gathered once per step"
                           : "gathered per use if partitioned, cast once per step if "
                             "persistent") +
             (low.keptElements == lowElements ? "; beside the parameters)"
                                              : "; inside the activations)"));
  line("gradients:      ", gradBytes,
       lowGrads ? whole(2) + " (16-bit accumulation, grad_accum_dtype)"
                : (stage >= 2 ? split(4, P, pad) : whole(4)) +
                      (lowName ? " (fp32 accumulation)" : ""));
  line("optimizer:      ", stateBytes,
       (stage >= 1 ? split(4 * statesPerParam, P, pad) : whole(4 * statesPerParam)) +
           (errorBytes ? " + " + std::to_string(errorBytes) +
                             (lambPadding ? " (1-bit LAMB's worker and server errors, padded, "
                                            "and its flat momentum's padding)"
                                          : " (1-bit worker and server errors, padded)")
                       : std::string()) +
           (scalarStateBytes
                ? " + " + std::to_string(scalarStateBytes) +
                      (!lambScalars ? " (0/1 Adam's lrs, one float per tensor)"
                       : lambScaling ? " (1-bit LAMB's lamb_coeff_freeze, last_factor and "
                                       "scaling_coeff, three floats per tensor)"
                                     : " (1-bit LAMB's lamb_coeff_freeze and last_factor, two "
                                       "floats per tensor: equal copies of the flat tensor's)")
                : std::string()));
  if (lowName) {
    // The ZeRO paper's mixed-precision model state (Rajbhandari et al.
    // 2020, section 3.1): 2P 16-bit parameters + 2P 16-bit gradients +
    // KP fp32 master weights and Adam moments (K = 12), partitioned as the
    // stage says.
    int64_t held = paramBytes + 2 * lowHeldElements + gradBytes + stateBytes;
    int64_t Ppad = P + pad;
    int64_t paper = stage == 0   ? 16 * P
                    : stage == 1 ? 4 * P + 12 * Ppad / dp
                    : stage == 2 ? 2 * P + 14 * Ppad / dp
                                 : 16 * Ppad / dp;
    const char *paperFormula = stage == 0   ? "2P + 2P + 12P"
                               : stage == 1 ? "2P + 2P + 12(P+pad)/dp"
                               : stage == 2 ? "2P + (2+12)(P+pad)/dp"
                                            : "(2+2+12)(P+pad)/dp";
    line("model state:    ", held, " (parameters, 16-bit copies held, gradients, optimizer)");
    os << "  ZeRO paper:     " << paper << " bytes (" << humanBytes(paper) << ") = "
       << paperFormula << " (mixed precision, K = 12)\n";
    if (stage < 3) {
      // dsc - paper = G/2 (its gradients G are fp32, the paper's 16-bit)
      // - 2(P - P') (parameters read only in fp32 have no 16-bit copy).
      os << "  dsc - paper:    " << (held - paper) << " bytes = G/2 - 2(P-P') = " << gradBytes / 2
         << " - 2*" << (P - lowElements)
         << " (G: the fp32 gradients above, 16-bit in the paper; P-P': parameters only read in "
            "fp32, such as layer-norm weights, without a 16-bit copy)\n";
    } else {
      os << "  dsc - paper:    " << (held - paper)
         << " bytes (the same 16 bytes per partitioned parameter: fp32 parameters, gradients "
            "and moments, 4+4+8, where the paper has 2+2+12"
         << (held != paper ? "; parameters under stage3_param_persistence_threshold are whole on "
                             "every rank, with their 16-bit copies"
                           : "")
         << ")\n";
    }
  }
  line("activations:    ", activations, "");
  line("comm buffers:   ", largestBucket, " (largest bucket, inside the activations)");
  line("planned peak:   ", (int64_t)p.arena_bytes(), " (the arena)");
  if (p.peak_live_bytes())
    line("live at once:   ", (int64_t)p.peak_live_bytes(),
         " (the most the plan holds at one time; the arena is " +
             fragmentation(p.arena_bytes(), p.peak_live_bytes()) + " it)");
  // The steps where the set of running collectives changes.
  std::set<int64_t> starts;
  for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()})
    for (const plan::Instr &i : *list)
      if (i.first_step() || i.last_step()) {
        starts.insert(std::max<int64_t>(1, i.first_step()));
        if (i.last_step())
          starts.insert(i.last_step() + 1);
      }
  auto write = [&](const char *indent) {
    int64_t total = 0, calls = 0, totalBytes = 0;
    for (auto &[kind, k] : comm) {
      os << indent << kind << ": " << k.calls << (k.calls == 1 ? " call, " : " calls, ")
         << k.elements << " elements, " << k.bytes << " bytes\n";
      total += k.elements;
      totalBytes += k.bytes;
      calls += k.calls;
    }
    os << indent << "total: " << calls << (calls == 1 ? " call, " : " calls, ") << total
       << " elements = " << llvm::format("%.3f", P ? double(total) / P : 0.0) << " P, "
       << totalBytes << " bytes (" << humanBytes(totalBytes) << ")\n";
    return totalBytes;
  };
  if (p.has_step_rule()) {
    // 0/1 Adam: by the step's class.
    const dsrt::ZeroOneRule rule = dsrt::zeroOneRuleOf(p.step_rule());
    os << "communication per step (elements; an all-reduce counts 2x), by the step's class:\n";
    std::vector<std::pair<std::string, int64_t>> phases; // (class, bytes)
    for (uint32_t c : {uint32_t(dsrt::kStepVariance), uint32_t(dsrt::kStepCompressedGrad),
                       uint32_t(dsrt::kStepLocal), uint32_t(dsrt::kStepLocal | dsrt::kStepSync)}) {
      cls = c;
      comm.clear();
      count(prog.prologue(), 1);
      count(prog.micro_batch(), prog.micro_batches());
      count(prog.epilogue(), 1);
      std::string name = std::string(dsrt::stepClassName(c & dsrt::kStepSync ? dsrt::kStepSync : c)) +
                         " steps";
      os << "  " << name << " (" << classSteps(rule, c) << "):\n";
      phases.push_back({name, write("    ")});
    }
    cls = 0;
    if (phases.front().second > 0)
      for (size_t k = 1; k < phases.size(); ++k)
        os << "  " << phases[k].first << " move " << phases[k].second << " bytes, 1/"
           << llvm::format("%.1f", double(phases.front().second) /
                                       double(std::max<int64_t>(1, phases[k].second)))
           << " of the variance steps' " << phases.front().second << "\n";
    return;
  }
  if (starts.empty()) {
    os << "communication per step (elements; an all-reduce counts 2x):\n";
    write("  ");
    return;
  }
  starts.insert(1);
  os << "communication per step (elements; an all-reduce counts 2x), by the optimizer steps "
        "it runs on:\n";
  std::vector<std::pair<std::string, int64_t>> phases; // (steps, bytes)
  for (auto it = starts.begin(); it != starts.end(); ++it) {
    step = *it;
    auto next = std::next(it);
    std::string steps = "steps " + std::to_string(step) +
                        (next == starts.end() ? " on" : "-" + std::to_string(*next - 1));
    comm.clear();
    count(prog.prologue(), 1);
    count(prog.micro_batch(), prog.micro_batches());
    count(prog.epilogue(), 1);
    os << "  " << steps << ":\n";
    phases.push_back({steps, write("    ")});
  }
  // The last phase against the first (1-bit Adam: compressed vs warm-up).
  if (phases.size() > 1 && phases.back().second > 0)
    os << "  " << phases.back().first << " move " << phases.back().second << " bytes, 1/"
       << llvm::format("%.1f", double(phases.front().second) / double(phases.back().second))
       << " of " << phases.front().first << "' " << phases.front().second << "\n";
}

/// Tensor parallelism: the split GEMMs, those left whole and why, the
/// per-rank parameters against the whole model, and the tp group's
/// communication per step (Megatron: per layer and micro-batch, 2
/// all-reduces of the activations forward and 2 backward).
void writeTensorParallel(const plan::Plan &p, llvm::raw_ostream &os) {
  int64_t tp = p.tp(), whole = 0, local = 0, split = 0;
  for (const plan::Buffer &b : p.buffers())
    if (b.role() == plan::PARAM) {
      // The tp part (before a ZeRO stage 3 shards it over the dp group).
      int64_t n = tpPartNumel(b, tp);
      local += n;
      whole += b.tp_split_size() ? n * tp : n;
      split += b.tp_split_size() ? n : 0;
    }
  os << "tensor parallel:  tp " << tp << " (world rank w: tp rank w % " << tp
     << (p.schedule().empty() ? ", dp index w / " + std::to_string(tp) : std::string())
     << "); " << p.tp_column_gemms() << " GEMMs column parallel, " << p.tp_row_gemms()
     << " row parallel, " << p.tp_whole_gemms_size() << " with a weight left whole\n";
  for (const std::string &w : p.tp_whole_gemms())
    os << "  whole: " << w << "\n";
  os << "  parameters per rank: " << local << " of " << whole << " ("
     << llvm::format("%.1f%%", whole ? 100.0 * double(local) / double(whole) : 0.0) << "; "
     << split << " split 1/" << tp << ", " << local - split << " whole on every rank)\n";
  // all-reduces; with sequence parallelism also all-gathers (counted by
  // their whole output) and reduce-scatters (by their whole input).
  int64_t calls = 0, elements = 0, gathers = 0, gathered = 0, scatters = 0, scattered = 0;
  const plan::Program &prog = p.program();
  // And the vocabulary-parallel embedding gathers and cross-entropies.
  int64_t embeddings = 0, losses = 0, classes = 0;
  auto count = [&](const google::protobuf::RepeatedPtrField<plan::Instr> &list, int64_t times) {
    for (const plan::Instr &i : list) {
      embeddings += i.op() == "nn.gather" && i.ints_size() == 2;
      if (i.op() == "nn.vocab_ce_loss" && i.ints_size() > 0) {
        ++losses;
        classes = i.ints(0);
      }
      if (i.axis() != 2)
        continue;
      if (i.op() == "dist.all_reduce") {
        calls += times;
        for (uint32_t b : i.inputs())
          elements += times * numel(p.buffers(b).shape());
      } else if (i.op() == "dist.all_gather") {
        gathers += times;
        for (uint32_t b : i.outputs())
          gathered += times * numel(p.buffers(b).shape());
      } else if (i.op() == "dist.reduce_scatter") {
        scatters += times;
        for (uint32_t b : i.inputs())
          scattered += times * numel(p.buffers(b).shape());
      }
    }
  };
  count(prog.prologue(), 1);
  count(prog.micro_batch(), prog.micro_batches());
  count(prog.epilogue(), 1);
  os << "  tp communication per step: " << calls << " all-reduces of " << elements
     << " elements";
  if (gathers || scatters)
    os << ", " << gathers << " all-gathers of " << gathered << ", " << scatters
       << " reduce-scatters of " << scattered;
  os << " (" << 2 * elements + gathered + scattered
     << " in the ZeRO paper's units, as dsrt counts)\n";
  if (losses || embeddings)
    os << "  vocabulary parallel: " << embeddings << " embedding gather"
       << (embeddings == 1 ? "" : "s") << " and " << losses << " LM head cross-entropy"
       << (losses == 1 ? "" : "s") << " over " << classes / std::max<int64_t>(tp, 1) << " of "
       << classes << " classes per rank\n";
  if (gathers || scatters)
    os << "  sequence parallel: layer norms, dropouts and residual adds on 1/" << tp
       << " of the tokens; per layer and micro-batch 2 all-gathers + 2 reduce-scatters forward, "
          "4 + 2 backward (the GEMM inputs gathered again), in place of 2 + 2 all-reduces\n";
}

} // namespace

/// ZeRO-Offload / ZeRO-Infinity: the tiers, what they hold, the tiles and
/// the copies of a step.
void writeOffload(const plan::Plan &p, llvm::raw_ostream &os) {
  auto bytesOf = [&](const plan::Buffer &b) {
    int64_t n = 1;
    for (int64_t d : b.shape())
      n *= d;
    return n * 4;
  };
  // Per tier (0 host, 1 NVMe): tensors and bytes of parameters and state.
  struct Held {
    int64_t params = 0, paramBytes = 0, states = 0, stateBytes = 0;
  } held[2];
  for (const plan::Buffer &b : p.buffers())
    if (b.tier() != plan::ARENA) {
      Held &h = held[b.tier() == plan::NVME];
      (b.role() == plan::PARAM ? h.params : h.states) += 1;
      (b.role() == plan::PARAM ? h.paramBytes : h.stateBytes) += bytesOf(b);
    }
  // The copies of a step (a micro-batch's run micro_batches times), each
  // way, per tier.
  int64_t tiles = 0, largest = 0, in[2] = {0, 0}, out[2] = {0, 0}, paramFetches = 0;
  const plan::Program &prog = p.program();
  for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()}) {
    const int64_t times = list == &prog.micro_batch() ? std::max<int64_t>(1, prog.micro_batches()) : 1;
    for (const plan::Instr &i : *list) {
      const bool fetch = i.op() == "tier.fetch";
      if (!fetch && i.op() != "tier.store")
        continue;
      int64_t t = 0;
      for (uint32_t k : fetch ? i.inputs() : i.outputs()) {
        const plan::Buffer &b = p.buffers(int(k));
        (fetch ? in : out)[b.tier() == plan::NVME] += bytesOf(b) * times;
        t += bytesOf(b);
      }
      // A tile is fetched and stored once; the other fetches are a
      // parameter's readers' (a pipeline's schedule is all in the prologue).
      if (!fetch) {
        ++tiles;
        largest = std::max(largest, t);
        paramFetches -= times;
      } else {
        paramFetches += times;
      }
    }
  }
  const bool params = held[0].params || held[1].params;
  const bool states = held[0].states || held[1].states;
  auto device = [&](bool param) {
    for (int n = 0; n < 2; ++n)
      if (param ? held[n].params : held[n].states)
        return n ? "nvme" : "cpu";
    return "none";
  };
  const bool anyNvme = p.nvme_tier().bytes() > 0;
  os << "offload:          " << (anyNvme ? "ZeRO-Infinity (" : "ZeRO-Offload (");
  if (states)
    os << "offload_optimizer.device " << device(false) << (params ? ", " : "");
  if (params)
    os << "offload_param.device " << device(true);
  os << "): ";
  if (!params) {
    os << "the optimizer state in " << (anyNvme ? "an NVMe tier, one file per rank under " +
                                                      p.nvme_tier().path()
                                                : std::string("the host tier"))
       << "\n";
  } else {
    os << (states ? "the parameters and the optimizer state" : "the parameters")
       << " in memory tiers";
    if (anyNvme && !p.nvme_tier().param_path().empty())
      os << " (NVMe: two files per rank, the optimizer state's under " << p.nvme_tier().path()
         << " and the parameters' under " << p.nvme_tier().param_path() << ", from byte "
         << p.nvme_tier().param_offset() << " of the tier on)";
    else if (anyNvme)
      os << " (NVMe: one file per rank under " << p.nvme_tier().path() << ")";
    os << "\n";
  }
  for (int n = 0; n < 2; ++n) {
    const Held &h = held[n];
    const uint64_t tierBytes = n ? p.nvme_tier().bytes() : p.host_tier_bytes();
    if (!tierBytes)
      continue;
    os << (n ? "  NVMe tier:      " : "  host tier:      ") << tierBytes << " bytes per rank ("
       << humanBytes(int64_t(tierBytes)) << "; " << h.params + h.states << " tensors, ";
    if (h.params)
      os << humanBytes(h.paramBytes) << " of parameters" << (h.states ? ", " : "");
    if (h.states)
      os << humanBytes(h.stateBytes) << " of state";
    os << ", each tensor 4096-aligned)\n";
  }
  os << "  tiles:          " << tiles << " (sub_group_size), the largest " << humanBytes(largest)
     << ": the arena holds one tile's working copies at a time\n";
  if (params) {
    int64_t tiered = held[0].params + held[1].params, all = 0;
    for (const plan::Buffer &b : p.buffers())
      all += b.role() == plan::PARAM;
    os << "  parameters:     " << tiered << " of " << all << " in a tier (fp32, this rank's "
       << "shards)";
    if (all > tiered)
      os << "; " << all - tiered << " under stage3_param_persistence_threshold stay in the "
         << "arena, as ZeRO-3 keeps them whole";
    os << "; each is fetched into a working copy before each reader (its all-gather, its "
          "16-bit cast): "
       << paramFetches << " fetches per step besides the tiles'\n";
  }
  // As a GPU would copy to host memory (PCIe 4.0 x16, one direction), or a
  // PCIe 4.0 NVMe drive reads and writes sequentially.
  for (int n = 0; n < 2; ++n) {
    if (!(n ? p.nvme_tier().bytes() : p.host_tier_bytes()))
      continue;
    const double rate = n ? 2e9 : 25e9;
    os << (params ? (n ? "  NVMe transfers: " : "  host transfers: ") : "  transfers:      ")
       << "per step " << humanBytes(in[n]) << (n ? " read" : " host -> arena")
       << " (tier.fetch) and " << humanBytes(out[n]) << (n ? " written" : " back")
       << " (tier.store); " << llvm::format("%.2f", double(in[n] + out[n]) / rate * 1e3)
       << (n ? " ms at 2 GB/s each way (a PCIe 4.0 NVMe drive; dsrt_aio_bench measures yours)\n"
             : " ms at 25 GB/s each way (PCIe 4.0 x16)\n");
  }
  if (anyNvme)
    os << "  I/O:            O_DIRECT through io_uring, requests of " << p.nvme_tier().block_size()
       << " bytes, " << p.nvme_tier().queue_depth() << " in flight (aio)\n";
  if (anyNvme && (p.nvme_tier().pipeline_read() || p.nvme_tier().pipeline_write())) {
    // The buffers dsrt adds: the largest fetch's and store's NVMe bytes.
    int64_t ahead = 0, behind = 0;
    for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()})
      for (const plan::Instr &i : *list) {
        const bool fetch = i.op() == "tier.fetch";
        if (!fetch && i.op() != "tier.store")
          continue;
        int64_t n = 0;
        for (uint32_t k : fetch ? i.inputs() : i.outputs())
          if (p.buffers(int(k)).tier() == plan::NVME)
            n += bytesOf(p.buffers(int(k)));
        (fetch ? ahead : behind) = std::max(fetch ? ahead : behind, n);
      }
    os << "  pipelined:      on an I/O thread;";
    if (p.nvme_tier().pipeline_read())
      os << " each fetch starts reading the next of its list (pipeline_read; a read-ahead "
            "buffer of "
         << humanBytes(ahead) << ")" << (p.nvme_tier().pipeline_write() ? ";" : "");
    if (p.nvme_tier().pipeline_write())
      os << " each store returns while its bytes are written (pipeline_write; a write-behind "
            "buffer of "
         << humanBytes(behind) << ")";
    os << "\n";
  }
  if (p.host_tier_bytes())
    os << "  note:           on dsrt's CPU runtime the host tier and the arena are the same RAM: "
          "this frees no memory here, and the copies run anyway, so that the schedule is "
          "exercised and timed; a GPU would hold the arena ("
       << humanBytes(int64_t(p.arena_bytes())) << ") and not the host tier\n";
}

/// The parameter update: the optimizer and its hyperparameters as the baked
/// config gives them, the update instructions the epilogue runs, and, for
/// LAMB, how its per-tensor trust ratios are completed across ranks.
void writeOptimizer(const plan::Plan &p, const dsrt::config::TrainConfig &cfg,
                    llvm::raw_ostream &os) {
  using namespace dsrt::config;
  const OptimizerConfig &o = cfg.optimizer;
  auto num = [](double v) { return llvm::format("%g", v); };
  os << "optimizer:        " << o.type;
  if (o.type == "Adam" || o.type == "AdamW")
    os << (o.decoupled ? " (decoupled weight decay)" : " (L2 weight decay)");
  os << ", lr " << num(o.lr);
  if (o.type == "SGD")
    os << ", momentum " << num(o.momentum);
  else if (o.type != "Adagrad")
    os << ", betas [" << num(o.beta1) << ", " << num(o.beta2) << "]";
  if (o.type != "SGD" && o.type != "Lion")
    os << ", eps " << num(o.eps);
  os << ", weight_decay " << num(o.weightDecay);
  if (o.type == "Lamb")
    os << ", trust ratio clamped to [" << num(o.minCoeff) << ", " << num(o.maxCoeff) << "]";
  if (o.type == "Adagrad")
    os << ", lr_decay " << num(o.lrDecay);
  if (o.type == "OneBitAdam")
    os << ", freeze_step " << o.freezeStep;
  if (o.type == "OneBitLamb")
    os << ", trust ratio clamped to [" << num(o.minCoeff) << ", " << num(o.maxCoeff)
       << "], freeze_step " << o.freezeStep << ", coeff_beta " << num(o.coeffBeta)
       << ", factor in [" << num(o.factorMin) << ", " << num(o.factorMax) << "] moving at most "
       << num(o.factorThreshold) << " a step";
  if (o.type == "ZeroOneAdam")
    os << ", var_freeze_step " << o.freezeStep << ", var_update_scaler " << o.varUpdateScaler
       << ", local_step_scaler " << o.localStepScaler << ", local_step_clipper "
       << o.localStepClipper;
  const SchedulerConfig &sc = cfg.scheduler;
  if (sc.type == "OneCycle" && sc.cycleMomentum && o.type != "SGD" && o.type != "Adagrad")
    os << " (OneCycle cycles beta1, beta2 0.99)";
  os << "\n";
  // 1-bit Adam: its phases, in the optimizer step's count, and what the
  // compressed one holds and runs.
  for (const plan::Instr &i : p.program().epilogue()) {
    if (i.op() != "train.onebit_adam" || i.ints_size() < 2)
      continue;
    int64_t last = std::max<int64_t>(i.ints(0), 2) - i.ints(1);
    const auto [updates, compressions, errorBytes, padding, flat] =
        oneBitParts(p, "train.onebit_adam");
    os << "1-bit Adam:       steps 1-" << last
       << " warm-up (Adam without bias correction on the averaged gradients; "
       << (i.ints(1) ? "DeepSpeed's bf16/fp16 wrapper made the first, initialising call at "
                       "construction"
                     : "DeepSpeed's first call only initialises")
       << "), steps " << last + 1 << " on compressed: ";
    if (compressions && flat)
      os << "the " << updates << " momenta as one flat tensor (DeepSpeed's bf16/fp16 "
         << "wrapper's) through the 1-bit error-compensated all-reduce (worker and server "
         << "errors " << errorBytes << " bytes), v frozen, the gradients not all-reduced, "
         << "clipping by each rank's own norm, a non-finite norm on any rank seen by "
            "every rank (fp16 skips the step everywhere)\n";
    else if (compressions)
      os << compressions << " momenta through the 1-bit error-compensated all-reduce (worker "
         << "and server errors " << errorBytes << " bytes), v frozen, the gradients not "
         << "all-reduced, clipping by the mean of the ranks' local norms\n";
    else
      os << "one rank, nothing to compress: m = b1 m + (1-b1) g, v frozen\n";
    break;
  }
  // 1-bit LAMB: its phases and the one flat compressed momentum.
  for (const plan::Instr &i : p.program().epilogue()) {
    if (i.op() != "train.onebit_lamb" || i.ints_size() < 2)
      continue;
    int64_t last = std::max<int64_t>(i.ints(0), 2) - i.ints(1);
    const auto [updates, compressions, errorBytes, padding, flat] =
        oneBitParts(p, "train.onebit_lamb");
    // bf16 / fp16: DeepSpeed's wrapper's one flat tensor of the whole model.
    const bool wrapped = i.ints(1) != 0;
    if (wrapped) {
      os << "1-bit LAMB:       steps 1-" << last
         << " warm-up (LAMB without bias correction on the averaged gradients; DeepSpeed's "
            "bf16/fp16 wrapper made the first, initialising call at construction), steps "
         << last + 1 << " on compressed; the whole model is the wrapper's one flat tensor: one "
         << "trust ratio, one frozen ratio and one factor, from norms over every tensor";
      if (compressions)
        os << ", the " << updates << " momenta through one 1-bit error-compensated all-reduce "
           << "(worker and server errors " << errorBytes << " bytes), the gradients not "
           << "all-reduced, clipping by each rank's own norm, a non-finite norm on any rank "
              "seen by every rank (fp16 skips the step everywhere)";
      os << "\n";
      break;
    }
    os << "1-bit LAMB:       steps 1-" << last
       << " warm-up (LAMB without bias correction on the averaged gradients, each tensor's "
          "trust ratio averaged into its frozen one; DeepSpeed's first call only "
          "initialises), steps "
       << last + 1 << " on compressed: ";
    if (compressions)
      os << "the " << updates << " momenta, each scaled to their mean size, as one flat tensor "
         << "through the 1-bit error-compensated all-reduce (worker and server errors "
         << errorBytes << " bytes" << (padding ? ", its padding of " + std::to_string(padding) +
                                                     " elements a state"
                                               : std::string())
         << "), v frozen, the trust ratio the frozen one times a factor from the fresh "
            "variance, the gradients not all-reduced, clipping by the mean of the ranks' "
            "local norms\n";
    else
      os << "one rank, nothing to compress; v frozen, the trust ratio the frozen one times a "
            "factor from the fresh variance\n";
    break;
  }
  // 0/1 Adam: its classes of steps and what each does.
  if (p.has_step_rule() && o.type == "ZeroOneAdam") {
    const dsrt::ZeroOneRule rule = dsrt::zeroOneRuleOf(p.step_rule());
    const auto [updates, compressions, errorBytes, padding, flat] =
        oneBitParts(p, "train.zero_one_adam");
    os << "0/1 Adam:         "
       << (rule.stepOffset ? "DeepSpeed's wrapper made the first, initialising call at "
                             "construction"
                           : "DeepSpeed's first call only initialises (step 1)")
       << "; variance steps ("
       << classSteps(rule, dsrt::kStepVariance)
       << "): m and v as Adam's, without bias correction, on the averaged gradients;\n"
       << "                  compressed-gradient steps (" << classSteps(rule, dsrt::kStepCompressedGrad)
       << "): "
       << (compressions ? "m from the 1-bit all-reduce of the local gradients"
                        : "one rank, nothing to compress: m stays")
       << ", v as it was;\n"
       << "                  after var_freeze_step, from step " << rule.firstFrozenStep()
       << ", local steps on each rank's own gradients (v frozen), and a momentum sync on steps "
       << classSteps(rule, dsrt::kStepSync) << " (" << (compressions ? "the 1-bit all-reduce of u (sqrt(v) + eps)" : "one rank: no all-reduce")
       << ")";
    if (compressions && flat)
      os << "; clipping by each rank's own norm on all but the variance steps, a non-finite "
            "norm on any rank seen by every rank; the "
         << updates << " tensors compressed as one flat tensor (DeepSpeed's bf16/fp16 "
         << "wrapper's; worker and server errors " << errorBytes << " bytes, zeroed at step "
         << rule.firstFrozenStep() << ")";
    else if (compressions)
      os << "; clipping by the mean of the ranks' local norms on all but the variance steps; "
         << compressions << " tensors compressed (worker and server errors "
         << errorBytes << " bytes, zeroed at step " << rule.firstFrozenStep() << ")";
    os << "\n";
  }
  // LAMB's partial sums of squares and what they flow through (the concat
  // that packs them, the collective, the slices that unpack them), and the
  // all-reduces that complete them, by group. Tracked by arena offset: a
  // wait's results are other buffers over the collective's bytes.
  std::set<uint64_t> sums;
  auto at = [&](uint32_t b) { return p.buffers(b).offset(); };
  int64_t lambStats = 0;
  const char *statsOp = "train.lamb_stats";
  std::map<std::string, int> calls;
  for (const plan::Instr &i : p.program().epilogue()) {
    bool fromSums = i.inputs_size() > 0 &&
                    std::all_of(i.inputs().begin(), i.inputs().end(),
                                [&](uint32_t b) { return sums.count(at(b)) != 0; });
    if (i.op() == "train.lamb_stats")
      ++lambStats;
    else if (i.op() == "train.fused_lamb_stats")
      lambStats += i.outputs_size(), statsOp = "train.fused_lamb_stats";
    else if (!fromSums || i.op() == "train.lamb" || i.op() == "train.fused_lamb")
      continue;
    else if (i.op() == "dist.all_reduce")
      ++calls[i.axis() == 2 ? "tp" : i.axis() == 1 ? "pp" : "dp"];
    for (uint32_t b : i.outputs())
      sums.insert(at(b));
  }
  if (!lambStats)
    return;
  os << "  trust ratios:   per tensor (FusedLamb's |p| / |update|): " << lambStats
     << " tensors' sums of squares (" << statsOp << ") on this rank's elements, ";
  if (calls.empty()) {
    os << "each over the whole tensor\n";
    return;
  }
  os << "completed over the ranks holding parts of a tensor by ";
  bool first = true;
  for (auto [axis, n] : calls) {
    os << (first ? "" : " and ") << n << " all-reduce" << (n > 1 ? "s" : "") << " over "
       << axis;
    first = false;
  }
  os << "\n";
}

void writeManifest(const plan::Plan &p, const dsrt::config::TrainConfig &cfg,
                   llvm::raw_ostream &os) {
  int64_t params = 0, paramCount = 0, states = 0, constants = 0;
  std::vector<const plan::Buffer *> inputs;
  for (const plan::Buffer &b : p.buffers()) {
    int64_t n = 1;
    for (int64_t d : b.shape())
      n *= d;
    if (b.role() == plan::PARAM)
      params += n, ++paramCount;
    if (b.role() == plan::OPT_STATE)
      states += n;
    if (b.role() == plan::CONSTANT)
      ++constants;
    if (b.role() == plan::INPUT) {
      // A pipeline stage has one copy per micro-batch: list the name once.
      auto same = std::find_if(inputs.begin(), inputs.end(),
                               [&](const plan::Buffer *o) { return o->name() == b.name(); });
      if (same == inputs.end())
        inputs.push_back(&b);
      else if (b.index_bound() && !(*same)->index_bound())
        *same = &b;
    }
  }
  os << "dsc plan (format " << p.format_version() << ", " << p.producer() << ")\n";
  os << "model:            " << p.source_model() << "\n";
  if (p.no_weights())
    os << "weights:          none (the model file holds no parameter values: a --no-weights "
          "export); dsrt runs this plan with --init or --resume\n";
  os << "parameters:       " << params << " in " << paramCount << " tensors ("
     << humanBytes(params * 4) << " fp32)\n";
  os << "optimizer states: " << states << " elements (" << humanBytes(states * 4) << ")\n";
  os << "inputs (per micro-batch of " << p.micro_batch_size() << "):\n";
  for (const plan::Buffer *b : inputs) {
    os << "  " << b->name() << ": [";
    for (int i = 0; i < b->shape_size(); ++i)
      os << (i ? "," : "") << b->shape(i);
    os << "] " << plan::DType_Name(b->dtype());
    if (b->index_bound())
      os << ", values in [0, " << b->index_bound() << ")";
    os << "\n";
  }
  os << "arena:            " << p.arena_bytes() << " bytes (" << humanBytes(p.arena_bytes())
     << "), planned peak\n";
  os << "  model state:    " << p.persistent_bytes() << " bytes ("
     << humanBytes(p.persistent_bytes()) << ")\n";
  os << "  activations:    " << p.arena_bytes() - p.persistent_bytes() << " bytes ("
     << humanBytes(p.arena_bytes() - p.persistent_bytes()) << ")\n";
  if (p.peak_live_bytes())
    os << "  live at once:   " << p.peak_live_bytes() << " bytes ("
       << humanBytes(p.peak_live_bytes()) << ") at the busiest point (model state, "
       << "activations and collective staging): the arena is "
       << fragmentation(p.arena_bytes(), p.peak_live_bytes()) << " it\n";
  if (!p.recompute().empty() && p.recompute() != "none") {
    os << "recompute:        " << p.recompute() << ": " << p.recomputed_ops()
       << " forward ops recomputed per micro-batch, "
       << llvm::format("%.6f", p.recomputed_flops() / 1e9) << " GFLOP added";
    if (p.arena_bytes_without_recompute()) {
      int64_t without = int64_t(p.arena_bytes_without_recompute()) - int64_t(p.persistent_bytes());
      int64_t with = int64_t(p.arena_bytes()) - int64_t(p.persistent_bytes());
      os << "; activations " << humanBytes(without) << " without recompute -> "
         << humanBytes(with) << " (" << lessOrMore(without, with) << ")";
    }
    os << "\n";
  }
  // The epilogues' parts, in the order the line names them.
  std::vector<std::string> epilogue;
  if (p.epilogue_biases() || p.epilogue_addends())
    epilogue.push_back("add " + std::to_string(p.epilogue_biases()) + " biases and " +
                       std::to_string(p.epilogue_addends()) + " residual or gradient sums");
  if (p.epilogue_scales())
    epilogue.push_back("multiply in " + std::to_string(p.epilogue_scales()) +
                       " GELU derivatives (the GELU's gradient, nn.gelu_with_derivative)");
  if (p.epilogue_column_sums())
    epilogue.push_back("sum " + std::to_string(p.epilogue_column_sums()) +
                       " bias gradients (the product's column sums)");
  if (p.fused_attention() || !epilogue.empty() || p.fused_updates()) {
    os << "fusion:           ";
    if (p.fused_attention()) {
      os << p.fused_attention() << " attention ops keep no scores (nn.attention)";
      if (p.attention_bshd())
        os << ", " << p.attention_bshd()
           << " of them reading the heads in place (bshd: no head permutes)";
      if (p.arena_bytes_without_fusion()) {
        int64_t without = int64_t(p.arena_bytes_without_fusion()) - int64_t(p.persistent_bytes());
        int64_t with = int64_t(p.arena_bytes()) - int64_t(p.persistent_bytes());
        os << "; activations " << humanBytes(without) << " without fusion -> "
           << humanBytes(with) << " (" << lessOrMore(without, with) << ")";
      }
      if (!epilogue.empty())
        os << "; ";
    }
    for (size_t i = 0; i < epilogue.size(); ++i)
      os << (i ? ", " : "GEMM epilogues (nn.matmul_epilogue) ") << epilogue[i];
    if (p.fused_updates()) {
      if (p.fused_attention() || !epilogue.empty())
        os << "; ";
      const int64_t lamb = p.fused_lamb_updates(), adam = p.fused_updates() - lamb;
      if (adam)
        os << adam << " Adam update" << (adam == 1 ? "" : "s") << " (train.fused_adam)";
      if (lamb)
        os << (adam ? " and " : "") << lamb << " LAMB update" << (lamb == 1 ? "" : "s")
           << " (train.fused_lamb, the trust ratios' sums in train.fused_lamb_stats)";
      os << " over " << p.fused_update_tensors() << " parameters";
      if (p.fused_clips())
        os << ", clipping folded in (train.clip_coef)";
      if (p.fused_update_narrow_grads())
        os << ", " << p.fused_update_narrow_grads() << " gradients read in "
           << (p.precision() == plan::PRECISION_FP16 ? "fp16" : "bf16");
    }
    os << "\n";
  }
  const plan::Program &prog = p.program();
  os << "schedule:         " << prog.prologue_size() << " prologue + "
     << prog.micro_batches() << " x " << prog.micro_batch_size()
     << " micro-batch + " << prog.epilogue_size() << " epilogue instructions, "
     << constants << " constants\n";
  {
    // The step's flops by dsc's cost model (Instr.flops), as the flops
    // profiler splits them: the forward (the evaluation program's
    // instructions, or a pipeline's phase 1) and the rest of the
    // micro-batches (the backward, with any recomputed forward).
    double fwd = 0, bwd = 0, other = 0;
    const bool pipelined = p.pipeline_micro_batches() > 0; // a pipeline stage's plan
    auto add = [&](const plan::Instr &i, int64_t runs, bool micro) {
      double f = i.flops() * double(runs);
      bool forward = pipelined ? i.phase() == 1 : i.eval();
      bool backward = pipelined ? i.phase() >= 2 : micro && !i.eval();
      (forward ? fwd : backward ? bwd : other) += f;
    };
    for (const plan::Instr &i : prog.prologue())
      add(i, 1, false);
    for (const plan::Instr &i : prog.micro_batch())
      add(i, prog.micro_batches(), true);
    for (const plan::Instr &i : prog.epilogue())
      add(i, 1, false);
    os << "flops per step:   forward " << llvm::format("%.0f", fwd) << ", backward "
       << llvm::format("%.0f", bwd) << " (" << llvm::format("%.6f", (fwd + bwd) / 1e9)
       << " GFLOP per rank, dsc's cost model; the step's other instructions "
       << llvm::format("%.0f", other) << ")\n";
  }
  if (!p.eval_refused().empty()) {
    os << "evaluation:       none: " << p.eval_refused() << "\n";
  } else {
    int evals = 0, all = 0;
    for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()})
      for (const plan::Instr &i : *list) {
        ++all;
        evals += i.eval();
      }
    os << "evaluation:       " << evals << " of the " << all
       << " instructions (the forward and the loss, with the gathers and messages they read; "
          "dropout off), in the training arena (dsrt --eval-data)\n";
  }
  writePrecision(p, cfg, os);
  writeOptimizer(p, cfg, os);
  if (p.dp() > 1 || p.zero_stage() > 0)
    writeDataParallel(p, os);
  if (p.tp() > 1)
    writeTensorParallel(p, os);
  if (p.host_tier_bytes() || p.nvme_tier().bytes())
    writeOffload(p, os);
  // offload_param that tiers no parameter: said, not silent.
  if (cfg.zero.offloadParam != dsrt::config::ZeroConfig::OffloadDevice::None) {
    int64_t tiered = 0, params = 0;
    for (const plan::Buffer &b : p.buffers())
      if (b.role() == plan::PARAM) {
        ++params;
        tiered += b.tier() != plan::ARENA;
      }
    if (!tiered)
      os << "offload_param:    offloads nothing on this " << (p.pp() > 1 ? "stage" : "rank")
         << ": its " << params << " parameters are all under "
         << "stage3_param_persistence_threshold (" << cfg.zero.stage3ParamPersistenceThreshold
         << " elements), which ZeRO-3 keeps whole in the arena\n";
  }
  std::map<std::string, int> kinds;
  for (const plan::Instr &i : prog.micro_batch())
    ++kinds[i.op()];
  os << "micro-batch ops:  ";
  bool first = true;
  for (auto &[k, n] : kinds) {
    os << (first ? "" : ", ") << k << " x" << n;
    first = false;
  }
  os << "\n";
}

} // namespace dsc
