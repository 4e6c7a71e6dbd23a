//===- StateDict.h - the PyTorch state_dict of a plan's model ---*- C++ -*-===//
//
// dsc trains ONNX initializers; PyTorch's load_state_dict(strict=True) wants
// the model's state_dict, which differs from them: a tied weight
// (lm_head.weight = transformer.wte.weight) is one initializer but two keys,
// and the state_dict also holds buffers dsc compiles in as constants (a bool
// causal mask, int64 position ids) or that the traced graph never used. The
// exporter (models/export_common.py) records the mapping in the model's
// metadata under kStateDictKey; dsc keeps it in the plan's model.onnx, with
// the data of every initializer it does not train.
//
// `dsrt export --plan` writes a checkpoint as that state_dict; `dsrt --init`
// checks a state_dict saved as safetensors against it before training.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_ONNX_STATEDICT_H
#define DSRT_ONNX_STATEDICT_H

#include "io/DType.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dsrt::onnx_export {

/// metadata_props key: a JSON array with one item per state_dict key, in
/// state_dict order: [key, initializer] (the key's value is that
/// initializer's), or [key, null, dtype, shape, base64] (no initializer
/// holds it: safetensors dtype, shape, little-endian bytes).
inline constexpr const char *kStateDictKey = "dsc.state_dict";

/// One key of the model's state_dict.
struct StateDictEntry {
  std::string key;
  /// The initializer holding its value; empty when none does (`bytes` has
  /// the recorded value).
  std::string initializer;
  /// Its initializer is a weight dsc trains (its data is not in the plan's
  /// model: the run's or checkpoint's float32 value is the value).
  bool trained = false;
  io::DType dtype = io::DType::F32;
  std::vector<int64_t> shape;
  /// The value (little-endian) when `trained` is false, unless `unreadable`
  /// says why it cannot be had (a type dsrt does not write, say).
  std::string bytes;
  std::string unreadable;
};

/// The state_dict of the model in a plan's model.onnx.
struct StateDictLayout {
  /// The model recorded its state_dict (kStateDictKey). Without it, every
  /// initializer is one entry under its own name, as torch.onnx names it:
  /// tied aliases and buffers the graph does not use are unknown.
  bool recorded = false;
  std::vector<StateDictEntry> entries;
  /// The entry of `key`, or nullptr.
  const StateDictEntry *find(const std::string &key) const;
  /// Every initializer dsc trains (no data in the model), with its shape,
  /// whether or not a key names it.
  std::map<std::string, std::vector<int64_t>> trained;

  std::map<std::string, size_t> byKey;
};

/// Reads the layout of the model at `skeletonPath` (a plan's model.onnx).
/// Throws io::IoError naming the file and the entry at fault (a key twice,
/// an initializer the model does not have, a malformed record).
StateDictLayout readStateDict(const std::string &skeletonPath);

/// What checkInitWeights found, for the message.
struct InitCheck {
  int64_t weights = 0; // the plan's, all present
  int64_t tied = 0;    // aliases of a weight, equal to it
  int64_t buffers = 0; // constants of the plan, equal to the model's
};

/// Checks `path`, a model's state_dict saved as safetensors, as the initial
/// weights of the plan in `planDir` (dsrt --init): every weight of the plan
/// (PLAN/weights.safetensors) must be there in float32 with the plan's
/// shape; every other tensor must be a key of the model's state_dict: a
/// tied alias of a weight, equal to it, or a buffer the plan compiled in,
/// equal to the model's value (any other value would not take effect).
/// Throws io::IoError whose message starts "--init PATH: " and names the
/// tensor.
InitCheck checkInitWeights(const std::string &path, const std::string &planDir);

} // namespace dsrt::onnx_export

#endif // DSRT_ONNX_STATEDICT_H
