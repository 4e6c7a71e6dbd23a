//===- Export.h - a checkpoint as the model's state_dict or ONNX -*- C++ -*-===//
//
// `dsrt export CKPT --plan PLAN -o FILE` writes a checkpoint's weights as
// the PyTorch model's state_dict (runtime/onnx/StateDict.h: every key in
// state_dict order, a tied weight under each of its names, the buffers dsc
// compiled in with the model's values), so that
// model.load_state_dict(tensors, strict=True) takes it; `--onnx FILE`
// writes the plan's ONNX model with the checkpoint's trained weights, as
// `dsrt --export-onnx` does at the end of a run. Both stream the
// checkpoint's tensors slice by slice.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CHECKPOINT_EXPORT_H
#define DSRT_CHECKPOINT_EXPORT_H

#include "runtime/checkpoint/Checkpoint.h"

#include <cstdint>
#include <string>
#include <functional>

namespace dsrt::checkpoint {

/// What exportStateDict wrote.
struct StateDictExport {
  int64_t tensors = 0; // keys written
  int64_t tied = 0;    // of which a weight's other names
  int64_t buffers = 0; // of which values of the model (not in the checkpoint)
  uint64_t bytes = 0;  // of tensor data
  bool recorded = false; // the model recorded its state_dict (else: its initializers)
};

/// Writes the checkpoint as the state_dict of the model in `planDir`
/// (PLAN/model.onnx) to `out`, a new safetensors file. Throws
/// CheckpointError when the checkpoint's parameters are not the plan's
/// trained weights (another model), io::IoError for the files.
StateDictExport exportStateDict(const Reader &ckpt, const std::string &planDir,
                                const std::string &out);

/// Writes PLAN/model.onnx with the checkpoint's trained weights to `out`
/// (and `out`.data beside it for a model over 2 GiB). Neither may exist.
void exportOnnxModel(const Reader &ckpt, const std::string &planDir, const std::string &out);

/// `dsrt export CKPT [--plan PLAN] [-o FILE] [--onnx FILE]`.
struct ExportRequest {
  std::string checkpoint; // a --save-dir (its latest) or DIR/TAG
  std::string out;        // the safetensors file ("": none)
  std::string planDir;    // names the state_dict's keys ("": initializer names)
  std::string onnxOut;    // the ONNX model ("": none; needs planDir)
};

/// Checks the request before writing anything (something to write, --onnx
/// with --plan, outputs that are new and distinct), then writes the
/// state_dict and/or the ONNX model, saying what it wrote as it goes
/// (`say(line, note)`: notes are for stderr). Throws (CheckpointError,
/// io::IoError, std::runtime_error) with a message naming the flag or file.
void exportCheckpoint(const ExportRequest &request,
                      const std::function<void(const std::string &line, bool note)> &say);

} // namespace dsrt::checkpoint

#endif // DSRT_CHECKPOINT_EXPORT_H
