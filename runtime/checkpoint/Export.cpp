//===- Export.cpp - a checkpoint as the model's state_dict or ONNX --------===//
#include "runtime/checkpoint/Export.h"

#include "io/OutputDir.h"
#include "io/SafeTensors.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/onnx/StateDict.h"

#include "runtime/io/Process.h"

#include <algorithm>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>

namespace dsrt::checkpoint {
namespace {

/// The checkpoint's parameters must be exactly the weights the plan's model
/// trains, of the same shapes: otherwise it is a checkpoint of another model.
void checkSameModel(const Reader &ckpt, const onnx_export::StateDictLayout &layout,
                    const std::string &skeleton) {
  for (const auto &[name, t] : ckpt.tensors()) {
    if (t.kind != "param")
      continue;
    auto it = layout.trained.find(name);
    if (it == layout.trained.end() || it->second != t.shape)
      throw CheckpointError(
          "checkpoint " + ckpt.path() + ": param '" + name + "' " + io::formatShape(t.shape) +
          (it == layout.trained.end()
               ? " is not a weight the model trains"
               : " is " + io::formatShape(it->second) + " in the model") +
          " (" + skeleton + "): a checkpoint of another model than the plan's?");
  }
  for (const auto &[name, shape] : layout.trained) {
    auto it = ckpt.tensors().find(name);
    if (it == ckpt.tensors().end() || it->second.kind != "param")
      throw CheckpointError("checkpoint " + ckpt.path() + ": has no param '" + name +
                            "', which the model (" + skeleton +
                            ") trains: a checkpoint of another model than the plan's?");
  }
}

} // namespace

StateDictExport exportStateDict(const Reader &ckpt, const std::string &planDir,
                                const std::string &out) {
  std::string skeleton = planDir + "/model.onnx";
  onnx_export::StateDictLayout layout = onnx_export::readStateDict(skeleton);
  checkSameModel(ckpt, layout, skeleton);
  io::checkNewFile(out, "-o");

  // Every key, in state_dict order: a float32 tensor of the checkpoint (a
  // trained or frozen weight, under each of its names) or the model's value.
  struct Source {
    const onnx_export::StateDictEntry *entry;
    const Reader::Tensor *ckpt; // or the entry's bytes
  };
  StateDictExport result;
  result.recorded = layout.recorded;
  std::vector<io::TensorRef> refs;
  std::vector<Source> sources;
  std::set<std::string> written; // initializers
  for (const onnx_export::StateDictEntry &e : layout.entries) {
    auto it = e.initializer.empty() ? ckpt.tensors().end() : ckpt.tensors().find(e.initializer);
    if (it != ckpt.tensors().end() && (it->second.kind == "param" || it->second.kind == "frozen")) {
      if (it->second.shape != e.shape)
        throw CheckpointError("checkpoint " + ckpt.path() + ": '" + e.initializer + "' is " +
                              io::formatShape(it->second.shape) + ", the model's (" + skeleton +
                              ") is " + io::formatShape(e.shape));
      refs.push_back({e.key, io::DType::F32, e.shape, nullptr});
      sources.push_back({&e, &it->second});
      result.tied += !written.insert(e.initializer).second;
    } else {
      if (e.trained || !e.unreadable.empty())
        throw CheckpointError("checkpoint " + ckpt.path() + ": the state_dict key '" + e.key +
                              "' has no value: " +
                              (e.trained ? "the checkpoint has no '" + e.initializer + "'"
                                         : "in " + skeleton + ", " + e.unreadable));
      refs.push_back({e.key, e.dtype, e.shape, nullptr});
      sources.push_back({&e, nullptr});
      ++result.buffers;
      if (!e.initializer.empty())
        written.insert(e.initializer);
    }
    result.bytes += refs.back().nbytes();
  }

  io::streamSafeTensors(out, refs, io::weightsMetadata(ckpt.progress().step),
                        [&](io::AtomicFile &file) {
                          for (const Source &s : sources) {
                            if (s.ckpt)
                              ckpt.writeTo(s.entry->initializer, file);
                            else
                              file.write(s.entry->bytes.data(), s.entry->bytes.size());
                          }
                        });
  result.tensors = int64_t(refs.size());
  return result;
}

void exportOnnxModel(const Reader &ckpt, const std::string &planDir, const std::string &out) {
  std::string skeleton = planDir + "/model.onnx";
  onnx_export::StateDictLayout layout = onnx_export::readStateDict(skeleton);
  checkSameModel(ckpt, layout, skeleton);
  io::checkNewFile(out, "--onnx");
  io::checkNewFile(out + ".data", "--onnx (its external data)");
  std::vector<onnx_export::WeightSource> weights;
  for (const auto &[name, t] : ckpt.tensors())
    if (t.kind == "param")
      weights.push_back({name, t.shape, [&ckpt, name = name](int64_t start, int64_t count,
                                                              float *dst) {
                           ckpt.read(name, start, count, dst);
                         }});
  onnx_export::exportOnnx(skeleton, weights, out);
}

namespace {
std::string formatted(const char *format, ...) __attribute__((format(printf, 1, 2)));
std::string formatted(const char *format, ...) {
  // Sized first: a line names paths, which have no length bound here.
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(size_t(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, again);
  va_end(again);
  out.resize(size_t(std::max(n, 0)));
  return out;
}
} // namespace

void exportCheckpoint(const ExportRequest &r,
                      const std::function<void(const std::string &, bool)> &say) {
  namespace fs = std::filesystem;
  if (r.out.empty() && r.onnxOut.empty())
    throw std::runtime_error(
        "dsrt export: nothing to write: give -o FILE (safetensors) and/or --onnx FILE");
  if (!r.onnxOut.empty() && r.planDir.empty())
    throw std::runtime_error(
        "dsrt export: --onnx needs --plan PLAN (the ONNX model is the plan's model.onnx)");
  // Both outputs are checked before either is written.
  if (!r.out.empty())
    io::checkNewFile(r.out, "-o");
  if (!r.onnxOut.empty()) {
    io::checkNewFile(r.onnxOut, "--onnx");
    io::checkNewFile(r.onnxOut + ".data", "--onnx (its external data)");
  }
  if (!r.out.empty() && !r.onnxOut.empty() &&
      fs::weakly_canonical(r.out) == fs::weakly_canonical(r.onnxOut))
    throw std::runtime_error("dsrt export: -o and --onnx name the same file, " + r.out);
  auto start = std::chrono::steady_clock::now();
  Reader reader = Reader::open(r.checkpoint);
  double weightsMiB = 0;
  for (const auto &[name, t] : reader.tensors())
    if (t.kind == "param" || t.kind == "frozen")
      weightsMiB += double(t.numel) * 4 / 1048576.0;
  if (!r.out.empty() && r.planDir.empty()) {
    int64_t n = exportWeights(reader, r.out);
    say(formatted("dsrt export: %s: %lld float32 tensors under the model's "
                                     "initializer names",
                                     r.out.c_str(), (long long)n),
        false);
    say("dsrt export: without --plan, tied weights appear under one name "
                           "and the buffers dsc compiled in are left out; PyTorch's "
                           "load_state_dict(strict=True) needs the file --plan PLAN writes",
        true);
  } else if (!r.out.empty()) {
    StateDictExport e = exportStateDict(reader, r.planDir, r.out);
    say(formatted(
        "dsrt export: %s: the model's state_dict%s, %lld tensors (%lld from the checkpoint, "
        "%lld tied, %lld buffers of the model), %.1f MiB",
        r.out.c_str(), e.recorded ? "" : " as its initializers (no record of it)",
        (long long)e.tensors, (long long)(e.tensors - e.buffers - e.tied), (long long)e.tied,
        (long long)e.buffers, e.bytes / 1048576.0),
        false);
  }
  if (!r.onnxOut.empty()) {
    exportOnnxModel(reader, r.planDir, r.onnxOut);
    say("dsrt export: " + r.onnxOut +
                           ": the ONNX model with the trained weights",
        false);
  }
  say(formatted(
      "dsrt export: step %lld of %s in %.1fs, peak RSS %lld MiB (the weights: %.1f MiB)",
      (long long)reader.progress().step, reader.path().c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      (long long)io::peakRssMiB(), weightsMiB), false);
}

} // namespace dsrt::checkpoint
