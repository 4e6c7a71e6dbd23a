//===- Export.cpp - a checkpoint as the model's state_dict or ONNX --------===//
#include "runtime/checkpoint/Export.h"

#include "runtime/io/OutputDir.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/onnx/StateDict.h"

#include <algorithm>
#include <set>

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

  std::map<std::string, std::string> meta{{"format", "pt"},
                                          {"producer", "dsrt"},
                                          {"step", std::to_string(ckpt.progress().step)}};
  std::string header = io::safeTensorsHeader(out, refs, meta);
  io::AtomicFile file(out, io::Existing::Refuse);
  file.write(header.data(), header.size());
  for (const Source &s : sources) {
    if (s.ckpt)
      ckpt.writeTo(s.entry->initializer, file);
    else
      file.write(s.entry->bytes.data(), s.entry->bytes.size());
  }
  file.commit();
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

} // namespace dsrt::checkpoint
