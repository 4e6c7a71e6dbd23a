//===- OnnxExport.h - trained weights back into an ONNX model ---*- C++ -*-===//
//
// dsc stores the source model in the plan as model.onnx with the data of
// every trained (and frozen) initializer removed. exportOnnx fills those
// initializers with the run's weights, in the type the model declares, and
// writes a model that PyTorch, ONNX Runtime or dsc itself can load.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_ONNX_ONNXEXPORT_H
#define DSRT_ONNX_ONNXEXPORT_H

#include "io/SafeTensors.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsrt::onnx_export {

/// Protobuf cannot hold a message over 2 GiB: larger models keep their
/// weights in an external data file, as onnx.save_model does.
inline constexpr uint64_t kInlineLimitBytes = (uint64_t(2) << 30) - (uint64_t(64) << 20);

/// Reads the skeleton at `skeletonPath` and checks that each of `names` is a
/// floating-point initializer without data. Call it before training, so that
/// a plan without a model fails before the run rather than after it. Throws
/// io::IoError.
void checkSkeleton(const std::string &skeletonPath, const std::vector<std::string> &names);

/// Writes the skeleton with `weights` (float32, matched by name and shape)
/// to `outPath`. When the model would exceed `inlineLimit` bytes, the
/// weights go to `outPath`.data beside it, referenced as ONNX external
/// data. Every initializer without data must get one and every weight must
/// name such an initializer. Neither file may exist: an existing one is
/// never written over (io::Existing::Refuse); on error nothing is written.
/// Throws io::IoError.
void exportOnnx(const std::string &skeletonPath, const std::vector<io::TensorRef> &weights,
                const std::string &outPath, uint64_t inlineLimit = kInlineLimitBytes);

/// A float32 weight that is read in slices (a checkpoint's, from its
/// files): read(start, count, dst) copies elements [start, start + count)
/// of the flattened weight to dst.
struct WeightSource {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(int64_t start, int64_t count, float *dst)> read;
};

/// exportOnnx from weights read slice by slice: with external data, the
/// peak memory is a slice, not the model; inline (a model under
/// `inlineLimit`), the model in protobuf once (it is serialized straight
/// into the file).
void exportOnnx(const std::string &skeletonPath, const std::vector<WeightSource> &weights,
                const std::string &outPath, uint64_t inlineLimit = kInlineLimitBytes);

} // namespace dsrt::onnx_export

#endif // DSRT_ONNX_ONNXEXPORT_H
