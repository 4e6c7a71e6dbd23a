//===- dsc.cpp - the dsc compiler driver ---------------------------------===//
//
//   dsc model.onnx [--config ds_config.json] -o plan      # a dsrt plan
//   dsc model.onnx [--emit=nn|train] [-o out.mlir]        # the IR
//
// Imports an ONNX training graph (forward + loss), derives the training
// step (autodiff, gradient accumulation, optimizer, memory plan) with the
// DeepSpeed settings of --config, and writes the plan directory dsrt runs.
//
//===----------------------------------------------------------------------===//
#include "frontends/ModelFile.h"
#include "frontends/aten/AtenImporter.h"
#include "frontends/common/ForwardFunction.h"
#include "frontends/onnx/OnnxImporter.h"
#include "dialects/nn/SourceNode.h"
#include "passes/Explain.h"
#include "passes/TrainStep.h"
#include "target/plan/EmitPlan.h"
#include "config/CliChecks.h"
#include "tools/dsc/CompileConfig.h"
#include "tools/dsc/Elastic.h"
#include "tools/dsc/Auto.h"
#include "tools/dsc/Simulate.h"
#include "config/DsConfig.h"
#include "config/KeyTable.h"
#include "io/OutputDir.h"
#include "plan/Limits.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

#include <csignal>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>

namespace {

/// The first line of every file dsc writes with -o FILE: dsc writes over
/// an existing file only when it starts with this line.
constexpr const char *kFileHeader = "// Written by dsc";

/// Whether `output` may be written: a new file, or one dsc wrote earlier,
/// and never the model it reads. Sets `error` otherwise.
bool mayWriteFile(const std::string &output, const std::string &model, std::string &error) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(output, ec)))
    return true;
  if (dsrt::io::isWithin(output, model)) {
    error = "-o " + output + ": is the input model; dsc never writes over its input";
    return false;
  }
  // Only a regular file is opened: a FIFO would block the read.
  std::string first;
  if (std::filesystem::is_regular_file(output, ec)) {
    std::ifstream in(output);
    std::getline(in, first);
  }
  if (first.rfind(kFileHeader, 0) != 0) {
    error = "-o " + output + ": exists and was not written by dsc; dsc never writes over a " +
            "file it did not create: give a new file name";
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  // A write past the file-size limit (ulimit -f) fails with EFBIG and an
  // error naming the file, instead of SIGXFSZ ending the process with the
  // output half written.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"dsc: ahead-of-time compiler for distributed training"};
  std::string model, output = "-", emit, loss, batchSizeText;
  int64_t elide = 1024;
  // The flags that decide the training step go straight into `flags`
  // (tools/dsc/CompileConfig.h resolves them with the ds_config).
  dsrt::config::CompileFlags flags;
  std::optional<std::string> memoryBudgetText;
  std::vector<std::string> inputShapes, freeze;
  bool doExplain = false, printConfig = false, listConfigKeys = false, listOnnxOps = false,
       listAtenOps = false;
  app.add_option("model", model,
                 "the model's forward with its loss: ONNX (binary .onnx or textual .onnxtxt; "
                 "opsets 13-22, either PyTorch exporter) or a torch.export archive (.pt2)");
  app.add_flag("--list-config-keys", listConfigKeys,
               "print every ds_config key DeepSpeed reads and what dsc does with it "
               "(docs/ds-config-keys.md) and stop");
  app.add_flag("--list-onnx-ops", listOnnxOps,
               "print the ONNX ops dsc imports and the opsets it takes each in, one per line "
               "(docs/onnx-ops.md says how each lowers and differentiates) and stop");
  app.add_flag("--list-aten-ops", listAtenOps,
               "print the ATen operators dsc imports from a .pt2, one overload per line "
               "(docs/aten-ops.md says how each lowers) and stop");
  app.add_option("-o,--output", output, "where to write the result ('-' = stdout)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--emit", emit,
                 "what to produce: plan = a dsrt plan directory (the default with -o DIR), "
                 "nn = the imported IR (the default without -o or with -o FILE.mlir), "
                 "train = the IR of the planned training step")
      ->check(CLI::IsMember({"nn", "train", "plan"}));
  app.add_option("--config", flags.configPath,
                 "DeepSpeed ds_config.json: batch sizes, gradient accumulation, "
                 "optimizer, scheduler, gradient clipping")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--loss", loss, "graph output to train on (default: the single scalar output)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--batch-size", batchSizeText,
                 "value for a dynamic dimension 0 of every input")
      ->check(dsrt::cli::integer<int64_t>(1, int64_t(1) << 31));
  app.add_option("--input-shape", inputShapes,
                 "static shape of an input: NAME=DxDx...[:DTYPE] (a DTYPE only for a "
                 "TorchScript archive, which keeps none: float32, int64, ...)");
  app.add_option("--freeze", freeze,
                 "never train the initializers matching PATTERN (repeatable): a glob over the "
                 "whole name (* ? [..] {a,b}) or /regex/ (matching anywhere in the name); "
                 "a pattern matching no initializer is an error")
      ->type_name("PATTERN")
      ->allow_extra_args(false);
  using dsrt::cli::integer;
  using dsrt::limits::kMaxRanks;
  app.add_option("--dp", flags.dp, "data-parallel ranks the plan runs on (default 1)")
      ->check(integer<int64_t>(1, kMaxRanks));
  app.add_option("--zero", flags.zeroStage,
                 "ZeRO stage 0-3 (overrides zero_optimization.stage of the config)")
      ->check(integer<int64_t>(0, 3));
  app.add_option("--pp", flags.pp,
                 "pipeline stages (overrides pipeline.stages of the config; the plan runs "
                 "on pp x dp ranks)")
      ->check(integer<int64_t>(1, dsrt::config::kMaxPipelineStages));
  app.add_option("--tp", flags.tp,
                 "tensor-parallel ranks (Megatron's column/row GEMM splits, found in the graph; "
                 "overrides tensor_parallel.autotp_size; the plan runs on dp x tp ranks)")
      ->check(integer<int64_t>(1, kMaxRanks));
  app.add_flag("--sequence-parallel", flags.sequenceParallel,
               "with --tp: layer norm, dropout and residual regions on each rank's part of the "
               "tokens, all-gather / reduce-scatter instead of all-reduce (Korthikanti et al. "
               "2022)");
  addStepOptions(app, flags);
  app.add_option("--recompute", flags.recompute,
                 "activation checkpointing: none, layers (recompute each layer's forward in "
                 "its backward, keeping its input), selective (keep the GEMM outputs, "
                 "recompute attention scores, softmax, dropout, GELU, layer norm) or auto "
                 "(the least recomputation that fits --memory-budget); overrides the config's "
                 "activation_checkpointing")
      ->check(CLI::IsMember({"none", "layers", "selective", "auto"}));
  app.add_option("--memory-budget", memoryBudgetText,
                 "the planned peak per rank must fit SIZE (bytes, or K/M/G/T or KB/.. = powers of "
                 "1000, KiB/MiB/GiB/TiB = of 1024); --recompute auto chooses the least "
                 "recomputation that fits it")
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            std::optional<uint64_t> b = dsrt::config::parseByteSize(text);
            return b && *b > 0 ? std::string()
                               : "'" + text + "' is not a size (for example 6GiB, 512M, 1000000)";
          },
          "SIZE"));
  app.add_option("--precision", flags.precision,
                 "fp32, bf16 or fp16 (bf16/fp16: mixed precision over fp32 master weights); "
                 "overrides the config's bf16.enabled / fp16.enabled. Lightning's 32-true, "
                 "bf16-mixed, 16-mixed are accepted as aliases")
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            try {
              dsrt::config::precisionFromFlag(text);
              return {};
            } catch (const dsrt::config::ConfigError &e) {
              return e.what();
            }
          },
          "PRECISION"));
  app.add_flag("--print-config", printConfig,
               "print the effective ds_config (DeepSpeed's defaults, this command's flags and "
               "the \"auto\" values filled in, in DeepSpeed's JSON shape) and stop");
  app.add_flag("--explain", doExplain,
               "print a summary (inputs, parameters, cost per op kind) instead of the IR");
  dsc::driver::Simulation simulation;
  simulation.addOptions(app);
  dsc::driver::AutoOptions autoOptions;
  dsc::driver::addAutoOptions(app, autoOptions);
  app.add_option("--elide-constants", elide,
                 "print constants with more elements than this elided (0: never)")
      ->check(integer<int64_t>(0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    llvm::errs() << "dsc: error: " << e.what() << " (see dsc --help)\n";
    return 1;
  }
  if (listConfigKeys) {
    if (argc != 2) {
      llvm::errs() << "dsc: error: --list-config-keys takes no model or other flag\n";
      return 1;
    }
    llvm::outs() << dsrt::config::renderKeyTableMarkdown();
    return 0;
  }
  if (listAtenOps) {
    if (argc != 2) {
      llvm::errs() << "dsc: error: --list-aten-ops takes no model or other flag\n";
      return 1;
    }
    for (const auto &[op, convert] : dsc::aten::opTable())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (listOnnxOps) {
    if (argc != 2) {
      llvm::errs() << "dsc: error: --list-onnx-ops takes no model or other flag\n";
      return 1;
    }
    for (const auto &r : dsc::onnx_import::supportedOpRanges())
      llvm::outs() << r.op << " " << r.first << "-" << r.last << "\n";
    return 0;
  }
  if (model.empty()) {
    llvm::errs() << "dsc: error: model is required (see dsc --help)\n";
    return 1;
  }
  if (!batchSizeText.empty()) // checked by its validator
    flags.batchSize = std::stoll(batchSizeText);
  const int64_t batchSize = flags.batchSize;
  const std::string &configPath = flags.configPath;
  if (const auto &pp = flags.pp; pp && flags.dp * *pp > kMaxRanks) {
    llvm::errs() << "dsc: error: --pp " << *pp << " x --dp " << flags.dp << " = " << flags.dp * *pp
                 << " ranks: a plan runs on at most " << kMaxRanks << "\n";
    return 1;
  }

  if (printConfig) {
    if (app.count("--output") || app.count("--emit") || doExplain) {
      llvm::errs() << "dsc: error: --print-config prints the effective config and stops: drop "
                   << (app.count("--output") ? "-o" : app.count("--emit") ? "--emit" : "--explain")
                   << "\n";
      return 1;
    }
    emit = "train"; // read the config and the flags as a compile would, write nothing
  }
  if (emit.empty())
    emit = (output == "-" || llvm::StringRef(output).ends_with(".mlir")) ? "nn" : "plan";
  // Flags that would change nothing are errors, not silently ignored.
  if (emit == "plan" && app.count("--elide-constants")) {
    llvm::errs() << "dsc: error: --elide-constants: applies to printed IR (--emit=nn|train), "
                    "not to a plan\n";
    return 1;
  }
  if (!dsc::driver::checkAutoOptions(app, autoOptions, llvm::errs()) ||
      !simulation.configure(autoOptions.enabled, app.count("--emit"), emit, llvm::errs()))
    return 1;
  if (autoOptions.enabled)
    flags.dp = autoOptions.ranks; // the global batch: every rank data-parallel
  if (emit == "plan" && output == "-" && !simulation.enabled()) {
    llvm::errs() << "dsc: error: --emit=plan writes a directory: give it with -o DIR\n";
    return 1;
  }
  // Where the result goes is checked before compiling, so that a wrong -o
  // fails at once, and nothing of the user's is ever written over. A plan
  // is written beside -o and moved into place whole: an earlier plan there
  // is replaced only once the new one is complete.
  std::optional<dsrt::io::StagedDir> staged;
  if (emit == "plan" && output != "-") {
    bool existed = std::filesystem::exists(output);
    try {
      staged.emplace(output, "-o");
    } catch (const std::exception &e) {
      llvm::errs() << "dsc: error: " << e.what() << "\n";
      return 1;
    }
    if (existed && dsrt::io::isWithin(model, output)) {
      llvm::errs() << "dsc: error: -o " << output << ": holds the input model " << model
                   << "; dsc never replaces the folder of its input: choose another -o\n";
      return 1;
    }
  } else if (output != "-") {
    std::string error;
    if (!mayWriteFile(output, model, error)) {
      llvm::errs() << "dsc: error: " << error << "\n";
      return 1;
    }
  }

  if (memoryBudgetText)
    flags.memoryBudget = *dsrt::config::parseByteSize(*memoryBudgetText);
  // "auto" values (the Hugging Face Trainer's) are filled in from the
  // flags and the model, so a config that has them is read again once the
  // model is imported; a first reading gives the micro-batch a dynamic
  // batch dimension takes.
  dsrt::config::CompileInput input;
  try {
    input = dsrt::config::readCompileInput(flags);
  } catch (const std::exception &e) {
    llvm::errs() << "dsc: error: " << e.what() << "\n";
    return 1;
  }
  for (const std::string &note : input.notes)
    llvm::errs() << "dsc: note: " << configPath << ": " << note << "\n";

  dsc::frontend::ImportOptions options;
  options.lossName = loss;
  options.freeze = freeze;
  options.notes = &llvm::errs();
  // A dynamic batch dimension takes the configured micro-batch size (an
  // "auto" one is the model's: --batch-size fixes a dynamic one).
  options.batchSize = input.importBatch(flags);
  if (input.autoMicro && !batchSize)
    llvm::errs() << "dsc: note: " << configPath << ": the micro-batch is the batch dimension of "
                 << "the model's inputs (train_micro_batch_size_per_gpu is \"auto\" or not "
                    "given): --batch-size N sets a dynamic one\n";
  for (const auto &spec : inputShapes) {
    std::string error;
    if (!dsc::frontend::parseInputShape(spec, options, error)) {
      llvm::errs() << "dsc: error: " << error << "\n";
      return 1;
    }
  }

  mlir::MLIRContext ctx;
  auto module = dsc::frontend::importModel(ctx, model, options);
  if (!module) {
    llvm::errs() << "dsc: error: " << llvm::toString(module.takeError()) << "\n";
    return 1;
  }
  dsrt::config::ModelFacts facts;
  facts.batch = dsc::frontend::forwardBatch(**module);
  facts.hiddenSize = dsc::frontend::forwardHiddenSize(**module);
  dsrt::config::TrainConfig cfg;
  try {
    std::vector<std::string> notes;
    cfg = dsrt::config::readWithModel(flags, input, facts, notes);
    for (const std::string &note : notes)
      llvm::errs() << "dsc: note: " << configPath << ": " << note << "\n";
  } catch (const std::exception &e) {
    llvm::errs() << "dsc: error: " << e.what() << "\n";
    return 1;
  }
  if (autoOptions.enabled)
    return dsc::driver::runAuto(ctx, **module, model, options, flags, facts, autoOptions,
                                simulation.hardware(), cfg, {argv + 1, argv + argc}, llvm::outs(),
                                llvm::errs());

  // --batch-size fixes a dynamic batch dimension; on a model whose batch
  // is fixed it would change nothing, so it must agree (or it is an error).
  if (batchSize && dsc::frontend::forwardBatch(**module) != batchSize) {
    int64_t fixed = dsc::frontend::forwardBatch(**module);
    llvm::errs() << "dsc: error: --batch-size " << batchSize << ": "
                 << (fixed ? "the model's inputs have the fixed batch " + std::to_string(fixed)
                           : std::string("the model has no input with a batch dimension"))
                 << "; --batch-size sets only a dynamic dimension 0 (export the model with a "
                    "dynamic batch, e.g. models/*.py --dynamic-batch, or drop the flag)\n";
    return 1;
  }

  // The passes' and emit-plan's errors read as dsc's own: the model, the
  // node the op comes from, then the message (and its notes).
  ctx.printOpOnDiagnostic(false); // the node names the op
  mlir::ScopedDiagnosticHandler diagnostics(&ctx, [&](mlir::Diagnostic &d) {
    const char *kind = d.getSeverity() == mlir::DiagnosticSeverity::Error     ? "error"
                       : d.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning"
                       : d.getSeverity() == mlir::DiagnosticSeverity::Remark  ? "remark"
                                                                              : "note";
    llvm::errs() << "dsc: " << kind << ": " << model << ": ";
    if (std::string node = dsc::nn::sourceNode(d.getLocation()); !node.empty())
      llvm::errs() << "node '" << node << "': ";
    llvm::errs() << d.str() << "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      llvm::errs() << "dsc: note: " << note.str() << "\n";
    return mlir::success();
  });

  std::optional<dsc::driver::ElasticPlans> elastic; // elasticity's smaller sizes
  if (emit != "nn") {
    try {
      cfg = dsrt::config::applyCompileFlags(cfg, flags, input, facts);
    } catch (const std::exception &e) {
      llvm::errs() << "dsc: error: " << e.what() << "\n";
      return 1;
    }
    if (printConfig) {
      llvm::outs() << dsrt::config::toJson(cfg) << "\n";
      return 0;
    }
    if (cfg.elastic.enabled && emit == "plan")
      elastic.emplace(**module, flags, input, facts, cfg); // the module as imported
    if (mlir::failed(dsc::compileTrainStep(ctx, **module, cfg, emit == "plan", llvm::errs())))
      return 1;
  }
  if (emit == "plan") {
    dsc::EmitPlanOptions planOptions;
    planOptions.dir = staged ? staged->path() : std::string();
    planOptions.inspect = simulation.inspector();
    planOptions.config = cfg;
    // The initial weights, from the model file the module was imported from.
    planOptions.weights = [&](const std::set<std::string> &names,
                              const dsc::WeightConsumer &consume, std::string *skeleton,
                              const std::set<std::string> *strip) {
      return dsc::frontend::readFloatWeights(model, options, names, consume, skeleton, strip);
    };
    if (doExplain) {
      dsc::explainModule(**module, llvm::outs());
      planOptions.manifest = &llvm::outs();
    }
    if (mlir::failed(dsc::emitPlan(**module, planOptions)))
      return 1;
    if (!simulation.finish(doExplain, llvm::outs(), llvm::errs()))
      return 1;
    if (elastic && !planOptions.dir.empty() &&
        !elastic->compile(ctx, planOptions.dir, doExplain ? &llvm::outs() : nullptr, llvm::errs()))
      return 1;
    try {
      if (staged)
        staged->commit();
    } catch (const std::exception &e) {
      llvm::errs() << "dsc: error: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }

  std::error_code ec;
  auto out = std::make_unique<llvm::ToolOutputFile>(output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "dsc: error: cannot write '" << output << "': " << ec.message() << "\n";
    return 1;
  }
  if (output != "-")
    out->os() << kFileHeader << " from " << model << " (--emit=" << emit
              << "); dsc may write over this file\n";
  if (doExplain) {
    dsc::explainModule(**module, out->os());
  } else {
    mlir::OpPrintingFlags flags;
    if (elide > 0)
      flags.elideLargeElementsAttrs(elide);
    (*module)->print(out->os(), flags);
  }
  out->keep();
  return 0;
}
