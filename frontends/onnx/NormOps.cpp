//===- NormOps.cpp - ONNX BatchNormalization, InstanceNormalization -> nn -===//
//
// Both normalize with statistics of the batch, composed from reductions and
// elementwise ops so that autodiff differentiates through the statistics
// (the gradient PyTorch's batch_norm_backward computes in closed form).
//
// BatchNormalization in training mode also updates its running mean and
// variance, as PyTorch's batch norm does in train(): running = momentum'
// * running + (1 - momentum') * statistic, with the ONNX momentum m = 1 -
// PyTorch's, and the variance unbiased (n / (n - 1), PyTorch's rule; the
// ONNX text says the biased one, but torch.onnx exports PyTorch's layer
// as this node). The running tensors are model buffers (train.buffer) and
// train.assign writes the new values into them, once per forward (per
// micro-batch), so checkpoints, the final weights and exports carry them.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

#include "dialects/train/TrainDialect.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// v [C] viewed as [C, 1, ...] against x [N, C, S...] (broadcast over N).
Value perChannel(Composer &c, Value v, int64_t rank) {
  SmallVector<int64_t> shape(rank - 1, 1);
  shape[0] = Composer::typeOf(v).getDimSize(0);
  return c.reshape(v, shape);
}

/// Checks that each of inputs `from`.. is a float [C].
LogicalResult channelInputs(GraphImporter &g, Value x, int from, int to,
                            SmallVectorImpl<Value> &out) {
  int64_t channels = typeOf(x).getDimSize(1);
  static const char *names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int k = from; k < to; ++k) {
    Value v = g.input(k);
    if (!v)
      return failure();
    auto t = typeOf(v);
    if (!nn::isFloatTensor(t) || t.getRank() != 1 || t.getDimSize(0) != channels)
      return g.fail(Twine(names[k]) + " must be a float [" + Twine(channels) +
                    "] (one per channel of X), is " + nn::formatShape(t.getShape()));
    out.push_back(v);
  }
  return success();
}

/// The function argument behind `v` when it is a model buffer (an
/// initializer not yet classified, or classified frozen).
BlockArgument bufferArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return {};
  auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!fn || !(fn.getArgAttr(arg.getArgNumber(), "dsc.initializer") ||
               fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kBuffer)))
    return {};
  return arg;
}

/// Batch statistics of x over `axes` (kept as 1s) and x normalized with
/// them: the centered values times rsqrt(biased variance + eps).
struct Normalized {
  Value mean, var, y;
};
Normalized normalize(Composer &c, Value x, ArrayRef<int64_t> axes, double eps) {
  Normalized r;
  r.mean = c.reduce<nn::ReduceMeanOp>(x, axes, true);
  Value centered = c.op<nn::SubOp>({x, r.mean});
  r.var = c.reduce<nn::ReduceMeanOp>(c.op<nn::MulOp>({centered, centered}), axes, true);
  Value inv = c.unary<nn::RsqrtOp>(c.op<nn::AddOp>({r.var, c.scalar(eps, x)}));
  r.y = c.op<nn::MulOp>({centered, inv});
  return r;
}

/// y * scale + bias with [C] scale and bias over dim 1.
Value affine(Composer &c, Value y, Value scale, Value bias, int64_t rank) {
  return c.op<nn::AddOp>({c.op<nn::MulOp>({y, perChannel(c, scale, rank)}),
                          perChannel(c, bias, rank)});
}

LogicalResult batchNorm(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  auto xt = typeOf(x);
  if (!nn::isFloatTensor(xt) || xt.getRank() < 2)
    return g.fail("X must be a float [N, C, ...], is " + nn::formatShape(xt.getShape()));
  SmallVector<Value> in; // scale, B, input_mean, input_var
  if (failed(channelInputs(g, x, 1, 5, in)))
    return failure();
  double eps = attrFloat(g.node(), "epsilon", 1e-5);
  double momentum = attrFloat(g.node(), "momentum", 0.9);
  // Opset 14 names the mode; before it, training mode is the node with the
  // running statistics (and the saved ones) among its outputs.
  bool training = g.opset() >= 14 ? attrInt(g.node(), "training_mode", 0) != 0
                                  : g.node().output_size() > 1;
  if (!training && g.node().output_size() > 1 && (g.outputUsed(1) || g.outputUsed(2)))
    return g.fail("the running statistics outputs are only defined in training mode");
  if (!(eps > 0.0))
    return g.fail("epsilon " + num(eps) + " must be positive");
  if (training && !(momentum >= 0.0 && momentum <= 1.0))
    return g.fail("momentum " + num(momentum) + " must be in [0, 1]");
  int64_t rank = xt.getRank();
  SmallVector<int64_t> axes{0};
  int64_t n = xt.getDimSize(0);
  for (int64_t d = 2; d < rank; ++d) {
    axes.push_back(d);
    n *= xt.getDimSize(d);
  }
  Composer c(g);
  Value mean, var, y;
  if (training) {
    if (n < 2)
      return g.fail("training mode needs more than one value per channel (the batch and "
                    "spatial dims of X " + nn::formatShape(xt.getShape()) +
                    " hold " + Twine(n) + "), as PyTorch requires");
    Normalized s = normalize(c, x, axes, eps);
    mean = s.mean, var = s.var, y = s.y;
  } else {
    mean = perChannel(c, in[2], rank);
    var = perChannel(c, in[3], rank);
    Value centered = c.op<nn::SubOp>({x, mean});
    y = c.op<nn::MulOp>({centered, c.unary<nn::RsqrtOp>(c.op<nn::AddOp>({var, c.scalar(eps, x)}))});
  }
  y = affine(c, y, in[0], in[1], rank);
  if (!c.ok())
    return failure();
  g.setOutput(0, y);
  if (!training)
    return success();
  // The running statistics.
  int64_t channels = xt.getDimSize(1);
  auto flat = [&](Value v) { return c.reshape(v, {channels}); };
  Value keep = c.scalar(momentum, x), take = c.scalar(1.0 - momentum, x);
  Value unbiased = c.op<nn::MulOp>({flat(var), c.scalar(double(n) / double(n - 1), x)});
  Value runMean = c.op<nn::AddOp>({c.op<nn::MulOp>({in[2], keep}),
                                   c.op<nn::MulOp>({flat(mean), take})});
  Value runVar = c.op<nn::AddOp>({c.op<nn::MulOp>({in[3], keep}),
                                  c.op<nn::MulOp>({unbiased, take})});
  if (!c.ok())
    return failure();
  for (auto [k, value] : {std::pair{2, runMean}, std::pair{3, runVar}})
    if (BlockArgument buffer = bufferArgument(in[k]))
      train::AssignOp::create(g.builder(), g.loc(), buffer, value);
  if (g.outputUsed(1))
    g.setOutput(1, runMean);
  if (g.outputUsed(2))
    g.setOutput(2, runVar);
  return success();
}

/// InstanceNormalization: per (n, c), over the spatial dims (biased
/// variance); torch's GroupNorm exports as one on [N, groups, -1].
LogicalResult instanceNorm(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  auto xt = typeOf(x);
  if (!nn::isFloatTensor(xt) || xt.getRank() < 3)
    return g.fail("input must be a float [N, C, spatial...], is " +
                  nn::formatShape(xt.getShape()));
  SmallVector<Value> in;
  if (failed(channelInputs(g, x, 1, 3, in)))
    return failure();
  double eps = attrFloat(g.node(), "epsilon", 1e-5);
  if (!(eps > 0.0))
    return g.fail("epsilon " + num(eps) + " must be positive");
  int64_t rank = xt.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  Composer c(g);
  Value y = affine(c, normalize(c, x, axes, eps).y, in[0], in[1], rank);
  return c.finish(y);
}

} // namespace

void registerNormConverters(ConverterTable &t) {
  t["BatchNormalization"] = batchNorm;
  t["InstanceNormalization"] = instanceNorm;
}

} // namespace dsc::onnx_import
