//===- Auto.cpp - dsc --auto: the layout search ----------------------------===//
#include "tools/dsc/Auto.h"

#include "config/CliChecks.h"
#include "frontends/ModelFile.h"
#include "frontends/common/ForwardFunction.h"
#include "config/DsConfig.h"
#include "passes/TrainStep.h"
#include "target/plan/EmitPlan.h"
#include "target/plan/PlanManifest.h"
#include "target/sim/Simulator.h"

#include "plan.pb.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

namespace dsc::driver {

void addAutoOptions(CLI::App &app, AutoOptions &o) {
  app.add_flag("--auto", o.enabled,
               "search the layouts of --ranks ranks (tp, pp, dp, ZeRO stage, recompute, offload, "
               "and a dynamic-batch model's micro-batch size) for the "
               "shortest step predicted on --hardware that fits --device-memory; layout flags "
               "given fix that part of the search; prints the best and their dsc commands");
  app.add_option("--ranks", o.ranks, "with --auto: the ranks (devices) to lay the model out on")
      ->check(dsrt::cli::integer<int64_t>(1, 65536));
  app.add_option("--device-memory", o.deviceMemoryText,
                 "with --auto: the memory of one device (SIZE as for --memory-budget)");
  app.add_option("--host-memory", o.hostMemoryText,
                 "with --auto: the host memory of one node (SIZE); a layout whose optimizer "
                 "state on the host (ZeRO-Offload) needs more is ruled out");
  app.add_option("--top", o.top, "with --auto: how many plans to list (default 5)")
      ->check(dsrt::cli::integer<int64_t>(1, 1000));
}

bool checkAutoOptions(const CLI::App &app, AutoOptions &o, llvm::raw_ostream &errs) {
  const char *withAuto[] = {"--ranks", "--device-memory", "--host-memory", "--top"};
  if (!o.enabled) {
    for (const char *f : withAuto)
      if (app.count(f)) {
        errs << "dsc: error: " << f << ": is read by --auto only; add it or drop the flag\n";
        return false;
      }
    return true;
  }
  if (!o.ranks || o.deviceMemoryText.empty()) {
    errs << "dsc: error: --auto needs --ranks N and --device-memory SIZE (the devices to lay "
            "the model out on and the memory of each)\n";
    return false;
  }
  // A positive SIZE, or an error naming the flag with examples.
  auto size = [&](const char *flag, const std::string &text, const char *examples,
                  uint64_t &out) {
    std::optional<uint64_t> bytes = dsrt::config::parseByteSize(text);
    if (!bytes || *bytes == 0) {
      errs << "dsc: error: " << flag << ": '" << text << "' is not a size (for example "
           << examples << ")\n";
      return false;
    }
    out = *bytes;
    return true;
  };
  if (!size("--device-memory", o.deviceMemoryText, "80GiB, 24G", o.deviceMemory) ||
      (!o.hostMemoryText.empty() &&
       !size("--host-memory", o.hostMemoryText, "2TiB, 512G", o.hostMemory)))
    return false;
  for (const char *f : {"--dp", "--output", "--emit", "--memory-budget", "--explain"})
    if (app.count(f)) {
      errs << "dsc: error: --auto: " << f
           << (std::string(f) == "--dp"
                   ? ": the data-parallel ranks are what --ranks leaves after tp and pp"
                   : ": --auto prints the best layouts and their dsc commands; run the chosen "
                     "command with -o")
           << "\n";
      return false;
    }
  return true;
}

namespace {

struct Candidate {
  int64_t dp = 1, tp = 1, pp = 1, zero = 0, micro = 1;
  int64_t mbs = 0;      // the micro-batch size searched (0: the configured one)
  bool configured = false; // a ds_config gives the micro-batch size
  bool sp = false;
  std::string recompute = "none";
  std::string offload;  // "", "cpu", "nvme": the optimizer state's tier ("": the config's)
  std::string paramOffload; // the parameters' tier at ZeRO 3 (ZeRO-Infinity), alike
  int64_t tile = 0;     // sub_group_size (0: the config's)
  enum Status { Fits, TooBig, Refused } status = Refused;
  uint64_t memory = 0; // the largest rank's planned peak
  uint64_t hostMemory = 0; // a node's host tier (the offloaded state), at most
  bool hostBound = false;  // too big for --host-memory, not for the device
  sim::Report report;
  std::string reason;

  std::string layout() const {
    std::string s = "dp " + std::to_string(dp) + " x pp " + std::to_string(pp) + " x tp " +
                    std::to_string(tp) + (sp ? "+sp" : "") + ", ZeRO " + std::to_string(zero) +
                    ", recompute " + recompute;
    if (mbs)
      s += ", micro-batch " + std::to_string(mbs);
    if (pp > 1)
      s += ", " + std::to_string(micro) + " micro-batches";
    if (!offload.empty())
      s += ", optimizer state on " + std::string(offload == "cpu" ? "the host" : "NVMe");
    if (!paramOffload.empty())
      s += ", parameters on " + std::string(paramOffload == "cpu" ? "the host" : "NVMe");
    if (hostMemory)
      s += " (" + humanBytes(int64_t(hostMemory)) + " of host memory a node)";
    if (tile)
      s += ", sub_group_size " + std::to_string(tile);
    return s;
  }
  /// What the config must say for the layout (flags do not express it).
  std::string configKeys() const {
    std::string s;
    if (mbs && configured)
      s += "train_micro_batch_size_per_gpu " + std::to_string(mbs);
    if (!offload.empty())
      s += std::string(s.empty() ? "" : ", ") + "zero_optimization.offload_optimizer.device \"" +
           offload + "\"";
    if (!paramOffload.empty())
      s += std::string(s.empty() ? "" : ", ") + "zero_optimization.offload_param.device \"" +
           paramOffload + "\"";
    if (tile)
      s += std::string(s.empty() ? "" : ", ") + "zero_optimization.sub_group_size " +
           std::to_string(tile);
    return s.empty() ? s : "   # with " + s + " in the config";
  }
  /// The layout's flags.
  std::string flags() const {
    std::string s = "--dp " + std::to_string(dp);
    if (mbs && !configured)
      s += " --batch-size " + std::to_string(mbs);
    if (tp > 1)
      s += " --tp " + std::to_string(tp) + (sp ? " --sequence-parallel" : "");
    if (pp > 1)
      s += " --pp " + std::to_string(pp);
    s += " --zero " + std::to_string(zero) + " --recompute " + recompute + " --micro-batches " +
         std::to_string(micro);
    return s;
  }
};

class Search {
public:
  Search(mlir::MLIRContext &ctx, mlir::ModuleOp module, const std::string &model,
         const dsc::frontend::ImportOptions &import, const dsrt::config::CompileFlags &flags,
         const dsrt::config::ModelFacts &facts, const AutoOptions &options,
         const sim::Hardware &hw)
      : ctx_(ctx), module_(module), model_(model), import_(import), flags_(flags),
        facts_(facts), options_(options), hw_(hw) {}

  /// The model imported with its dynamic batch at `size` (null when the
  /// import fails).
  mlir::ModuleOp moduleAt(int64_t size) {
    auto found = reimported_.find(size);
    if (found == reimported_.end()) {
      dsc::frontend::ImportOptions o = import_;
      o.batchSize = size;
      o.notes = nullptr;
      auto m = dsc::frontend::importModel(ctx_, model_, o);
      mlir::OwningOpRef<mlir::ModuleOp> owned;
      if (m)
        owned = std::move(*m);
      else
        llvm::consumeError(m.takeError());
      found = reimported_.emplace(size, std::move(owned)).first;
    }
    return found->second ? *found->second : mlir::ModuleOp();
  }

  /// Compiles, measures and (when it fits) simulates `c`.
  void evaluate(Candidate &c, int64_t globalBatch, int64_t microBatchSize) {
    if (c.mbs)
      microBatchSize = c.mbs;
    const int64_t perStep = globalBatch / microBatchSize;
    if (perStep % c.dp) {
      c.reason = "the global batch of " + std::to_string(globalBatch) +
                 " samples does not divide over dp " + std::to_string(c.dp);
      return;
    }
    c.micro = perStep / c.dp;
    dsrt::config::CompileFlags f = flags_;
    f.dp = c.dp;
    f.tp = c.tp;
    f.pp = c.pp;
    f.zeroStage = c.zero;
    f.recompute = c.recompute;
    f.sequenceParallel = c.sp;
    f.microBatches = c.micro;
    dsrt::config::TrainConfig cfg;
    dsrt::config::ModelFacts facts = facts_;
    if (c.mbs && !c.configured)
      facts.batch = c.mbs; // without a config the model's batch is the micro-batch
    try {
      dsrt::config::CompileInput input = dsrt::config::readCompileInput(f);
      std::vector<std::string> notes;
      cfg = dsrt::config::resolveCompileConfig(f, input, facts, notes);
    } catch (const std::exception &e) {
      c.reason = e.what();
      return;
    }
    if (c.mbs)
      cfg.microBatchPerGpu = c.mbs; // the config's, searched
    mlir::ModuleOp source = c.mbs ? moduleAt(c.mbs) : module_;
    if (!source) {
      c.reason = "the model does not import with a batch of " + std::to_string(c.mbs);
      return;
    }
    using Device = dsrt::config::ZeroConfig::OffloadDevice;
    if (!c.offload.empty())
      cfg.zero.offloadOptimizer = c.offload == "cpu" ? Device::Cpu : Device::Nvme;
    if (!c.paramOffload.empty()) {
      cfg.zero.offloadParam = c.paramOffload == "cpu" ? Device::Cpu : Device::Nvme;
      if (cfg.zero.offloadParamNvmePath.empty())
        cfg.zero.offloadParamNvmePath = cfg.zero.offloadNvmePath;
    }
    if (c.tile)
      cfg.zero.subGroupSize = c.tile;
    mlir::OwningOpRef<mlir::ModuleOp> copy(source.clone());
    std::string firstError;
    mlir::ScopedDiagnosticHandler capture(&ctx_, [&](mlir::Diagnostic &d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty())
        firstError = d.str();
      return mlir::success();
    });
    std::string diag;
    llvm::raw_string_ostream diagStream(diag);
    if (mlir::failed(dsc::compileTrainStep(ctx_, *copy, cfg, false, diagStream))) {
      c.reason = firstError.empty() ? diag : firstError;
      return;
    }
    dsc::EmitPlanOptions o;
    o.config = cfg;
    o.inspect = [&](const plan::Plan &p) {
      c.memory = p.arena_bytes();
      for (const plan::Plan &s : p.stages())
        c.memory = std::max<uint64_t>(c.memory, s.arena_bytes());
      // The host tier of each rank on a node (ZeRO-Offload's state in
      // pinned host memory), the largest stage's on every one of them.
      uint64_t hostPerRank = p.host_tier_bytes();
      for (const plan::Plan &s : p.stages())
        hostPerRank = std::max<uint64_t>(hostPerRank, s.host_tier_bytes());
      const int64_t ranksPerNode =
          hw_.devicesPerNode > 0 ? std::min<int64_t>(hw_.devicesPerNode, options_.ranks)
                                 : options_.ranks;
      c.hostMemory = hostPerRank * uint64_t(ranksPerNode);
      if (c.memory > options_.deviceMemory) {
        c.status = Candidate::TooBig;
        return;
      }
      if (options_.hostMemory && c.hostMemory > options_.hostMemory) {
        c.status = Candidate::TooBig;
        c.hostBound = true;
        return;
      }
      try {
        c.report = sim::simulate(p, hw_);
        c.status = Candidate::Fits;
      } catch (const sim::SimulationError &e) {
        c.reason = e.what();
      }
    };
    if (mlir::failed(dsc::emitPlan(*copy, o)) && c.reason.empty())
      c.reason = firstError;
  }

private:
  mlir::MLIRContext &ctx_;
  mlir::ModuleOp module_;
  const std::string &model_;
  const dsc::frontend::ImportOptions &import_;
  std::map<int64_t, mlir::OwningOpRef<mlir::ModuleOp>> reimported_;
  const dsrt::config::CompileFlags &flags_;
  const dsrt::config::ModelFacts &facts_;
  const AutoOptions &options_;
  const sim::Hardware &hw_;
};

std::vector<int64_t> divisorsOf(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

/// The user's arguments without the model, the search's flags and the
/// layout flags (which each candidate sets), for the printed command; and
/// without --batch-size when the candidate sets the micro-batch size.
std::string otherArgs(const std::vector<std::string> &args, const std::string &model,
                      bool setsBatch) {
  static const std::vector<std::string> dropped = {
      "--auto", "--ranks", "--device-memory", "--host-memory", "--top", "--hardware", "--dp",
      "--tp", "--pp",
      "--zero", "--recompute", "--micro-batches", "--sequence-parallel"};
  static const std::vector<std::string> flagsOnly = {"--auto", "--sequence-parallel"};
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    std::string name = a.substr(0, a.find('='));
    if (std::find(dropped.begin(), dropped.end(), name) != dropped.end() ||
        (setsBatch && name == "--batch-size")) {
      if (name == a && std::find(flagsOnly.begin(), flagsOnly.end(), a) == flagsOnly.end())
        ++i; // its value
      continue;
    }
    if (a == model)
      continue;
    out += (a.find(' ') == std::string::npos ? a : "'" + a + "'") + " ";
  }
  return out;
}


} // namespace

int runAuto(mlir::MLIRContext &ctx, mlir::ModuleOp module, const std::string &model,
            const dsc::frontend::ImportOptions &importOptions,
            const dsrt::config::CompileFlags &flags, const dsrt::config::ModelFacts &facts,
            const AutoOptions &options, const sim::Hardware &hw,
            const dsrt::config::TrainConfig &allData, const std::vector<std::string> &args,
            llvm::raw_ostream &outs, llvm::raw_ostream &errs) {
  const auto start = std::chrono::steady_clock::now();
  // The samples of a step, the same for every layout: the config's, or
  // (without one) the model's batch per micro-batch on every rank.
  const int64_t microBatchSize =
      flags.configPath.empty() && facts.batch ? facts.batch : allData.microBatchPerGpu;
  const int64_t globalBatch =
      microBatchSize * flags.microBatches.value_or(allData.gradAccumSteps) * options.ranks;
  const int64_t N = options.ranks;
  // tp: powers of two that divide N, inside one node (Megatron's rule:
  // a tensor-parallel all-reduce per layer does not cross nodes).
  std::vector<int64_t> tps;
  for (int64_t t = 1; t <= N; t *= 2)
    if (N % t == 0 && (hw.devicesPerNode == 0 || t <= hw.devicesPerNode) &&
        (!flags.tp || *flags.tp == t))
      tps.push_back(t);
  const std::vector<std::string> recomputes =
      flags.recompute ? std::vector<std::string>{*flags.recompute}
                      : std::vector<std::string>{"none", "selective", "layers"};
  Search search(ctx, module, model, importOptions, flags, facts, options, hw);
  // A model exported with a dynamic batch: the micro-batch size is searched
  // too (the powers of two dividing a data-parallel rank's samples, and the
  // configured size), as DeepSpeed's autotuner does, the global batch kept.
  std::vector<int64_t> sizes{0};
  if (facts.batch && search.moduleAt(2 * facts.batch) &&
      dsc::frontend::forwardBatch(search.moduleAt(2 * facts.batch)) == 2 * facts.batch) {
    sizes.clear();
    for (int64_t m = 1; m <= globalBatch; m *= 2)
      sizes.push_back(m);
    if (std::find(sizes.begin(), sizes.end(), microBatchSize) == sizes.end())
      sizes.push_back(microBatchSize);
    std::sort(sizes.begin(), sizes.end());
  }
  const bool searchSizes = sizes.size() > 1 || sizes[0] != 0;
  std::vector<Candidate> all;
  int64_t tried = 0;
  // The optimizer's tiles an offloaded state may take (sub_group_size):
  // the config's, then ten times smaller each, down to 1e5 elements.
  std::vector<int64_t> tiles;
  for (int64_t t = allData.zero.subGroupSize; t >= 100000 && tiles.size() < 5; t /= 10)
    tiles.push_back(t);
  if (tiles.empty())
    tiles.push_back(allData.zero.subGroupSize);
  const bool configOffloads =
      allData.zero.offloadOptimizer != dsrt::config::ZeroConfig::OffloadDevice::None;
  // One tp x pp x dp: at each ZeRO stage the least recomputation (and,
  // offloaded, the largest tile) that fits; more only adds work.
  auto searchLayout = [&](int64_t tp, int64_t pp, const std::string &offload,
                          const std::string &paramOffload) {
    const int64_t dp = N / tp / pp;
    for (int64_t mbs : sizes) {
    // A size must divide a data-parallel rank's samples, into at least as
    // many micro-batches as stages.
    if (mbs && (globalBatch % (dp * mbs) || globalBatch / (dp * mbs) < pp))
      continue;
    for (int64_t zero = 0; zero <= (dp > 1 || !offload.empty() || configOffloads ? 3 : 0);
         ++zero) {
      if (flags.zeroStage && *flags.zeroStage != zero)
        continue;
      if (!paramOffload.empty() && zero != 3)
        continue; // DeepSpeed offloads the parameters at ZeRO 3 only
      for (const std::string &r : recomputes) {
        bool fitted = false;
        for (int64_t tile : (offload.empty() && !configOffloads) ? std::vector<int64_t>{0} : tiles) {
          Candidate c;
          c.dp = dp, c.tp = tp, c.pp = pp, c.zero = zero, c.recompute = r;
          c.sp = tp > 1 && (flags.sequenceParallel || !flags.tp);
          c.offload = offload;
          c.paramOffload = paramOffload;
          c.mbs = mbs;
          c.configured = !flags.configPath.empty();
          c.tile = tile == allData.zero.subGroupSize ? 0 : tile; // 0: the config's
          search.evaluate(c, globalBatch, microBatchSize);
          ++tried;
          errs << "dsc: --auto [" << tried << "] " << c.layout() << ": "
               << (c.status == Candidate::Fits ? "fits, " + humanBytes(int64_t(c.memory)) +
                                                    " per rank, step " +
                                                    sim::durationText(c.report.stepSeconds)
                   : c.hostBound
                       ? "needs " + humanBytes(int64_t(c.hostMemory)) + " of host memory a node"
                   : c.status == Candidate::TooBig
                       ? "needs " + humanBytes(int64_t(c.memory)) + " per rank"
                       : "refused: " + c.reason.substr(0, c.reason.find('\n')))
               << "\n";
          all.push_back(c);
          if (c.status == Candidate::Refused)
            return; // the compiler refuses this tp x pp whatever the stage
          if (c.status == Candidate::Fits) {
            fitted = true;
            break;
          }
        }
        if (fitted)
          break;
      }
    }
    }
  };
  auto searchAll = [&](const std::string &offload, const std::string &paramOffload = "") {
    for (int64_t tp : tps)
      for (int64_t pp : divisorsOf(N / tp))
        if (!flags.pp || *flags.pp == pp)
          searchLayout(tp, pp, offload, paramOffload);
  };
  searchAll("");
  // Nothing fits on the devices: ZeRO-Offload's host tier for the
  // optimizer state, as a DeepSpeed user would turn to next (NVMe only
  // where the config names a folder for it).
  auto anyFits = [&] {
    return std::any_of(all.begin(), all.end(),
                       [](const Candidate &c) { return c.status == Candidate::Fits; });
  };
  // dsc offloads neither LAMB's nor a 1-bit optimizer's state
  // (CompileConfig.cpp says why).
  const std::string &opt = allData.optimizer.type;
  const bool canOffload =
      opt != "Lamb" && opt != "OneBitAdam" && opt != "ZeroOneAdam" && opt != "OneBitLamb";
  if (!anyFits() && !configOffloads && canOffload) {
    errs << "dsc: --auto: no layout fits on the devices alone; trying the optimizer state "
            "in host memory (ZeRO-Offload)\n";
    searchAll("cpu");
    if (!anyFits() && !allData.zero.offloadNvmePath.empty())
      searchAll("nvme");
  }
  // Still nothing: ZeRO-Infinity's parameters in the tier too (ZeRO 3; the
  // fp32 master weights leave the device), as DeepSpeed's users do next.
  const bool configOffloadsParams =
      allData.zero.offloadParam != dsrt::config::ZeroConfig::OffloadDevice::None;
  if (!anyFits() && !configOffloadsParams && canOffload &&
      (!flags.zeroStage || *flags.zeroStage == 3)) {
    const std::string tier = configOffloads ? "" : "cpu";
    errs << "dsc: --auto: no layout fits with the optimizer state offloaded; trying the "
            "parameters in host memory too (ZeRO-Infinity's offload_param, ZeRO 3)\n";
    searchAll(tier, "cpu");
    const bool nvme = !allData.zero.offloadNvmePath.empty() ||
                      !allData.zero.offloadParamNvmePath.empty();
    if (!anyFits() && nvme)
      searchAll(configOffloads ? "" : "nvme", "nvme");
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<const Candidate *> fits;
  int64_t tooBig = 0, refusedCount = 0;
  for (const Candidate &c : all) {
    if (c.status == Candidate::Fits)
      fits.push_back(&c);
    tooBig += c.status == Candidate::TooBig;
    refusedCount += c.status == Candidate::Refused;
  }
  // Shortest step first; steps within 0.1% of each other are a tie, which
  // the lower ZeRO stage (less traffic at scale), then less memory, wins.
  std::stable_sort(fits.begin(), fits.end(), [](const Candidate *a, const Candidate *b) {
    const double x = a->report.stepSeconds, y = b->report.stepSeconds;
    if (std::fabs(x - y) > 1e-3 * std::min(x, y))
      return x < y;
    return a->zero != b->zero ? a->zero < b->zero : a->memory < b->memory;
  });
  outs << "dsc --auto: " << N << " ranks of " << humanBytes(int64_t(options.deviceMemory))
       << " on " << hw.name << "\n";
  outs << "global batch:     " << globalBatch << " samples per step ("
       << (searchSizes ? std::string("micro-batch searched: the model's batch is dynamic")
                       : "micro-batch " + std::to_string(microBatchSize))
       << "), for every layout\n";
  outs << "searched:         " << all.size() << " layouts in " << llvm::format("%.1f", took)
       << " s: " << fits.size() << " fit, " << tooBig << " need more memory, " << refusedCount
       << " refused by the compiler\n";
  if (fits.empty()) {
    const Candidate *least = nullptr, *leastHost = nullptr;
    for (const Candidate &c : all) {
      if (c.status == Candidate::TooBig && !c.hostBound && (!least || c.memory < least->memory))
        least = &c;
      if (c.hostBound && (!leastHost || c.hostMemory < leastHost->hostMemory))
        leastHost = &c;
    }
    errs << "dsc: error: --auto: no layout of " << N << " ranks fits "
         << humanBytes(int64_t(options.deviceMemory)) << " per rank";
    if (options.hostMemory)
      errs << " and " << humanBytes(int64_t(options.hostMemory)) << " of host memory a node";
    if (least)
      errs << "; the least device memory is " << humanBytes(int64_t(least->memory)) << " ("
           << least->layout() << ")";
    if (leastHost)
      errs << "; of the layouts that fit the devices, the least host memory is "
           << humanBytes(int64_t(leastHost->hostMemory)) << " a node (" << leastHost->layout()
           << ")";
    errs << "\n";
    return 1;
  }
  outs << "\n rank  predicted step  samples/s    MFU  memory/rank  layout\n";
  for (size_t i = 0; i < fits.size() && int64_t(i) < options.top; ++i) {
    const Candidate &c = *fits[i];
    outs << llvm::format("%5zu  %14s %10.2f %5.1f%%  %11s  ", i + 1,
                         sim::durationText(c.report.stepSeconds).c_str(),
                         double(globalBatch) / c.report.stepSeconds, 100 * c.report.mfu,
                         humanBytes(int64_t(c.memory)).c_str())
         << c.layout() << "\n";
  }
  if (!options.hostMemory && fits[0]->hostMemory)
    outs << "\nhost memory:      not checked (--host-memory SIZE gives a node's): the best plan "
            "keeps "
         << humanBytes(int64_t(fits[0]->hostMemory)) << " in each node's host tier\n";
  outs << "\nbest:  dsc " << model << " " << otherArgs(args, model, fits[0]->mbs) << fits[0]->flags() << " -o PLAN"
       << fits[0]->configKeys() << "\n";
  if (fits.size() > 1)
    outs << "next:  dsc " << model << " " << otherArgs(args, model, fits[1]->mbs) << fits[1]->flags() << " -o PLAN" << fits[1]->configKeys() << " ("
         << llvm::format("%.1f%%", 100 * (fits[1]->report.stepSeconds / fits[0]->report.stepSeconds - 1))
         << " slower)\n";
  return 0;
}

} // namespace dsc::driver
