//===- ConvOps.cpp - ONNX convolutions, pooling and Pad -> nn ------------===//
//
// Conv and ConvTranspose become nn.conv and nn.conv_input_grad (the
// transposed convolution is the input gradient of the convolution whose
// weight it shares) plus a broadcast add of the bias. MaxPool and
// AveragePool become nn.max_pool / nn.avg_pool, the global pools
// reductions over the spatial dims, and Pad slices, concatenations and
// nn.slice_grad (which zero-pads) so that every gradient is an existing
// rule. Window attributes are checked here, so that an error names the node
// and the attribute.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The window attributes of a node over an input [N, C, S...].
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// `name` with one entry per spatial dim (default `dflt` each); fails naming
/// the attribute when its length is wrong.
FailureOr<SmallVector<int64_t>> perDim(GraphImporter &g, StringRef name, int64_t r,
                                       int64_t dflt, int64_t count) {
  auto v = attrInts(g.node(), name.str());
  if (!v)
    return SmallVector<int64_t>(count, dflt);
  if (int64_t(v->size()) != count) {
    (void)g.fail(name + " has " + Twine(v->size()) + " entries; the input's " + Twine(r) +
                 " spatial dims need " + Twine(count));
    return failure();
  }
  return SmallVector<int64_t>(v->begin(), v->end());
}

/// Reads kernel_shape (or takes `kernel`), strides, dilations and pads,
/// resolving auto_pad as ONNX defines it (SAME_UPPER puts the odd padding
/// at the end, SAME_LOWER at the start).
FailureOr<Window> readWindow(GraphImporter &g, ArrayRef<int64_t> input,
                             std::optional<ArrayRef<int64_t>> kernel, bool dilated) {
  int64_t r = int64_t(input.size()) - 2;
  if (r < 1 || r > 3) {
    (void)g.fail("expects an input [N, C, spatial...] with 1 to 3 spatial dims, got rank " +
                 Twine(input.size()));
    return failure();
  }
  Window w;
  if (kernel) {
    w.kernel.assign(kernel->begin(), kernel->end());
    if (auto k = attrInts(g.node(), "kernel_shape"); k && ArrayRef<int64_t>(*k) != *kernel) {
      (void)g.fail("kernel_shape " + nn::formatShape(*k) + " is not the weight's " +
                   nn::formatShape(*kernel));
      return failure();
    }
  } else {
    auto k = attrInts(g.node(), "kernel_shape");
    if (!k) {
      (void)g.fail("needs the kernel_shape attribute");
      return failure();
    }
    if (int64_t(k->size()) != r) {
      (void)g.fail("kernel_shape has " + Twine(k->size()) + " entries; the input's " + Twine(r) +
                   " spatial dims need " + Twine(r));
      return failure();
    }
    w.kernel.assign(k->begin(), k->end());
  }
  auto strides = perDim(g, "strides", r, 1, r);
  auto pads = perDim(g, "pads", r, 0, 2 * r);
  auto dilations = perDim(g, "dilations", r, 1, r);
  if (failed(strides) || failed(pads) || failed(dilations))
    return failure();
  w.strides = *strides;
  w.pads = *pads;
  w.dilations = *dilations;
  if (!dilated && llvm::any_of(w.dilations, [](int64_t d) { return d != 1; })) {
    (void)g.fail("dilations other than 1 are not supported by this op");
    return failure();
  }
  for (int64_t i = 0; i < r; ++i)
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1 || w.pads[i] < 0 ||
        w.pads[r + i] < 0) {
      (void)g.fail("spatial dim " + Twine(i) + ": kernel_shape " + Twine(w.kernel[i]) +
                   ", strides " + Twine(w.strides[i]) + " and dilations " +
                   Twine(w.dilations[i]) + " must be >= 1 and pads >= 0 (got " +
                   Twine(w.pads[i]) + ", " + Twine(w.pads[r + i]) + ")");
      return failure();
    }
  std::string autoPad = attrString(g.node(), "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < r; ++i) {
      int64_t in = input[2 + i], s = w.strides[i];
      int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + span - in);
      int64_t small = total / 2;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
      w.pads[r + i] = total - w.pads[i];
    }
  } else if (autoPad != "NOTSET") {
    (void)g.fail("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    return failure();
  }
  return w;
}

SmallVector<NamedAttribute> windowAttrs(GraphImporter &g, const Window &w, bool kernel,
                                        bool dilations) {
  auto &b = g.builder();
  SmallVector<NamedAttribute> attrs;
  if (kernel)
    attrs.push_back(g.attr("kernel_shape", b.getDenseI64ArrayAttr(w.kernel)));
  attrs.push_back(g.attr("strides", b.getDenseI64ArrayAttr(w.strides)));
  attrs.push_back(g.attr("pads", b.getDenseI64ArrayAttr(w.pads)));
  if (dilations)
    attrs.push_back(g.attr("dilations", b.getDenseI64ArrayAttr(w.dilations)));
  return attrs;
}

/// The float input k, or null after an error naming the node.
Value floatInput(GraphImporter &g, int k, StringRef what) {
  Value v = g.input(k);
  if (v && !nn::isFloatTensor(v.getType())) {
    (void)g.fail(what + " must be a float tensor");
    return {};
  }
  return v;
}

/// y + bias over dim 1 (the channels), bias [C].
Value addBias(Composer &c, Value y, Value bias) {
  if (!c.ok() || !bias)
    return y;
  auto yt = Composer::typeOf(y), bt = Composer::typeOf(bias);
  if (bt.getRank() != 1 || bt.getDimSize(0) != yt.getDimSize(1))
    return c.fail("bias " + nn::formatShape(bt.getShape()) + " must be [" +
                  Twine(yt.getDimSize(1)) + "], one per output channel");
  SmallVector<int64_t> shape(yt.getRank() - 1, 1);
  shape[0] = bt.getDimSize(0);
  return c.op<nn::AddOp>({y, c.reshape(bias, shape)});
}

/// Conv's and ConvTranspose's inputs: float x, weight of x's rank (the
/// layout `weightLayout` names), optional bias.
LogicalResult convInputs(GraphImporter &g, Value &x, Value &w, Value &bias,
                         StringRef weightLayout) {
  x = floatInput(g, 0, "the input");
  w = floatInput(g, 1, "the weight");
  if (!x || !w)
    return failure();
  if (g.hasInput(2) && !(bias = floatInput(g, 2, "the bias")))
    return failure();
  auto xs = typeOf(x).getShape(), ws = typeOf(w).getShape();
  if (ws.size() != xs.size())
    return g.fail("weight " + nn::formatShape(ws) + " must have the input's rank " +
                  Twine(xs.size()) + " (" + weightLayout + ")");
  return success();
}

LogicalResult conv(GraphImporter &g) {
  Value x, w, bias;
  if (failed(convInputs(g, x, w, bias, "[O, C / group, kernel...]")))
    return failure();
  auto xs = typeOf(x).getShape(), ws = typeOf(w).getShape();
  auto win = readWindow(g, xs, ws.drop_front(2), true);
  if (failed(win))
    return failure();
  int64_t groups = attrInt(g.node(), "group", 1);
  if (groups < 1 || xs[1] % groups || ws[0] % groups || ws[1] * groups != xs[1])
    return g.fail("weight " + nn::formatShape(ws) + " does not fit " + Twine(xs[1]) +
                  " input channels in " + Twine(groups) +
                  " groups: it needs [O, C / group, kernel...] with O divisible by group");
  std::string why;
  auto dims = nn::windowOutputDims(xs, win->kernel, win->strides, win->pads, win->dilations,
                                   false, why);
  if (failed(dims))
    return g.fail(why);
  SmallVector<int64_t> out{xs[0], ws[0]};
  llvm::append_range(out, *dims);
  Composer c(g);
  auto attrs = windowAttrs(g, *win, false, true);
  attrs.push_back(g.attr("groups", g.builder().getI64IntegerAttr(groups)));
  Value y = addBias(c, c.made<nn::ConvOp>(typeOf(x).clone(out), {x, w}, attrs), bias);
  return c.finish(y);
}

/// ConvTranspose: x [N, C_in, S...], weight [C_in, C_out / group, K...];
/// each spatial extent is stride * (S - 1) + output_padding + (K - 1) *
/// dilation + 1 - pad_begin - pad_end.
LogicalResult convTranspose(GraphImporter &g) {
  Value x, w, bias;
  if (failed(convInputs(g, x, w, bias, "[C_in, C_out / group, kernel...]")))
    return failure();
  auto xs = typeOf(x).getShape(), ws = typeOf(w).getShape();
  if (attrString(g.node(), "auto_pad", "NOTSET") != "NOTSET" ||
      findAttr(g.node(), "output_shape"))
    return g.fail("auto_pad and output_shape are not supported; give pads and output_padding "
                  "(as torch.onnx exports ConvTranspose)");
  auto win = readWindow(g, xs, ws.drop_front(2), true);
  if (failed(win))
    return failure();
  int64_t r = int64_t(xs.size()) - 2;
  auto outPad = perDim(g, "output_padding", r, 0, r);
  if (failed(outPad))
    return failure();
  int64_t groups = attrInt(g.node(), "group", 1);
  if (groups < 1 || ws[0] != xs[1] || xs[1] % groups)
    return g.fail("weight " + nn::formatShape(ws) + " does not fit " + Twine(xs[1]) +
                  " input channels in " + Twine(groups) +
                  " groups: it needs [C_in, C_out / group, kernel...]");
  SmallVector<int64_t> out{xs[0], ws[1] * groups};
  for (int64_t i = 0; i < r; ++i) {
    int64_t op = (*outPad)[i];
    if (op < 0 || (op >= win->strides[i] && op >= win->dilations[i]))
      return g.fail("output_padding " + Twine(op) + " of spatial dim " + Twine(i) +
                    " must be >= 0 and smaller than its stride or dilation");
    int64_t e = win->strides[i] * (xs[2 + i] - 1) + op +
                (win->kernel[i] - 1) * win->dilations[i] + 1 - win->pads[i] - win->pads[r + i];
    if (e < 1)
      return g.fail("spatial dim " + Twine(i) + ": pads " + Twine(win->pads[i]) + ", " +
                    Twine(win->pads[r + i]) + " leave no output");
    out.push_back(e);
  }
  Composer c(g);
  auto attrs = windowAttrs(g, *win, false, true);
  attrs.push_back(g.attr("groups", g.builder().getI64IntegerAttr(groups)));
  Value y = addBias(c, c.made<nn::ConvInputGradOp>(typeOf(x).clone(out), {x, w}, attrs), bias);
  return c.finish(y);
}

template <bool Max> LogicalResult pool(GraphImporter &g) {
  Value x = floatInput(g, 0, "the input");
  if (!x)
    return failure();
  if (Max && g.outputUsed(1))
    return g.fail("the Indices output is not supported (only the pooled values)");
  if (Max && attrInt(g.node(), "storage_order", 0) != 0)
    return g.fail("storage_order 1 (column major) is not supported");
  auto xs = typeOf(x).getShape();
  auto win = readWindow(g, xs, std::nullopt, Max);
  if (failed(win))
    return failure();
  bool ceil = attrInt(g.node(), "ceil_mode", 0) != 0;
  std::string why;
  auto dims = nn::windowOutputDims(xs, win->kernel, win->strides, win->pads, win->dilations,
                                   ceil, why);
  if (failed(dims))
    return g.fail(why);
  SmallVector<int64_t> out(xs.take_front(2));
  llvm::append_range(out, *dims);
  auto attrs = windowAttrs(g, *win, true, Max);
  if (ceil)
    attrs.push_back(g.attr("ceil_mode", g.builder().getUnitAttr()));
  if (!Max && attrInt(g.node(), "count_include_pad", 0) != 0)
    attrs.push_back(g.attr("count_include_pad", g.builder().getUnitAttr()));
  Composer c(g);
  Value y = Max ? c.made<nn::MaxPoolOp>(typeOf(x).clone(out), {x}, attrs)
                : c.made<nn::AvgPoolOp>(typeOf(x).clone(out), {x}, attrs);
  return c.finish(y);
}

template <typename ReduceOp> LogicalResult globalPool(GraphImporter &g) {
  Value x = floatInput(g, 0, "the input");
  if (!x)
    return failure();
  int64_t rank = typeOf(x).getRank();
  if (rank < 3)
    return g.fail("expects an input [N, C, spatial...], got rank " + Twine(rank));
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  Composer c(g);
  Value y = c.reduce<ReduceOp>(x, axes, true);
  return c.finish(y);
}

/// Pad: negative pads crop (a slice); then per mode
///   constant: slice_grad(x) puts x inside zeros, and a constant v != 0
///             is added where a slice_grad of ones is 0 (exact inside);
///   reflect:  the mirrored rows without the edge, one slice each;
///   edge:     the edge row repeated.
LogicalResult pad(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  auto padsOr = g.constantInts(1, "pads");
  if (failed(padsOr))
    return failure();
  std::vector<int64_t> given = *padsOr;
  // Opset 18's axes input names the padded dims; without it every dim.
  SmallVector<int64_t> axes;
  if (g.hasInput(3)) {
    auto a = g.constantInts(3, "axes");
    if (failed(a))
      return failure();
    for (int64_t v : *a) {
      int64_t n = v < 0 ? v + rank : v;
      if (n < 0 || n >= rank)
        return g.fail("axis " + Twine(v) + " is out of range for rank " + Twine(rank));
      axes.push_back(n);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (given.size() != 2 * axes.size())
    return g.fail("pads has " + Twine(given.size()) + " entries; " + Twine(axes.size()) +
                  " padded dims need " + Twine(2 * axes.size()) + " (begins, then ends)");
  SmallVector<int64_t> before(rank, 0), after(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    before[axes[i]] = given[i];
    after[axes[i]] = given[axes.size() + i];
  }
  std::string mode = attrString(g.node(), "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return g.fail("mode '" + mode + "' is not supported (constant, reflect, edge)");
  double value = 0.0;
  if (mode == "constant" && g.hasInput(2)) {
    const HostTensor *v = g.constant(2);
    if (!v || v->size() != 1)
      return g.fail("constant_value must be a compile-time scalar");
    value = v->asDouble(0);
  }
  Composer c(g);
  // Crop first.
  SmallVector<int64_t> start(rank, 0), limit(xt.getShape()), stride(rank, 1);
  bool crop = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (before[d] < 0) {
      start[d] = -before[d];
      before[d] = 0;
      crop = true;
    }
    if (after[d] < 0) {
      limit[d] += after[d];
      after[d] = 0;
      crop = true;
    }
    if (start[d] > limit[d])
      return g.fail("negative pads of dim " + Twine(d) + " remove more than its " +
                    Twine(xt.getDimSize(d)) + " elements");
  }
  Value y = crop ? c.slice(x, start, limit, stride) : x;
  bool any = llvm::any_of(before, [](int64_t v) { return v > 0; }) ||
             llvm::any_of(after, [](int64_t v) { return v > 0; });
  if (any && !nn::isFloatTensor(xt))
    return g.fail("padding an integer tensor is not supported (pad a float tensor)");
  if (any && mode == "constant" && c.ok()) {
    auto inner = Composer::typeOf(y);
    SmallVector<int64_t> shape, lo, hi, one(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      shape.push_back(inner.getDimSize(d) + before[d] + after[d]);
      lo.push_back(before[d]);
      hi.push_back(before[d] + inner.getDimSize(d));
    }
    auto &b = g.builder();
    SmallVector<NamedAttribute> attrs{g.attr("start", b.getDenseI64ArrayAttr(lo)),
                                      g.attr("limit", b.getDenseI64ArrayAttr(hi)),
                                      g.attr("stride", b.getDenseI64ArrayAttr(one))};
    Value padded = c.made<nn::SliceGradOp>(inner.clone(shape), {y}, attrs);
    if (value != 0.0 && c.ok()) {
      Value inside = c.made<nn::SliceGradOp>(inner.clone(shape), {g.splat(inner, 1.0)}, attrs);
      Value border = c.op<nn::SubOp>({c.scalar(1.0, y), inside});
      padded = c.op<nn::AddOp>({padded, c.op<nn::MulOp>({border, c.scalar(value, y)})});
    }
    y = padded;
  } else if (any && c.ok()) {
    for (int64_t d = 0; d < rank && c.ok(); ++d) {
      int64_t n = Composer::typeOf(y).getDimSize(d);
      if (before[d] == 0 && after[d] == 0)
        continue;
      if (mode == "reflect" && (before[d] >= n || after[d] >= n))
        return g.fail("reflect pads of dim " + Twine(d) + " (" + Twine(before[d]) + ", " +
                      Twine(after[d]) + ") must be smaller than its size " + Twine(n));
      if (n == 0)
        return g.fail("cannot " + mode + "-pad dim " + Twine(d) + " of size 0");
      SmallVector<Value> parts;
      for (int64_t k = before[d]; k >= 1; --k) {
        int64_t src = mode == "reflect" ? k : 0;
        parts.push_back(c.sliceAxis(y, d, src, src + 1));
      }
      parts.push_back(y);
      for (int64_t k = 1; k <= after[d]; ++k) {
        int64_t src = mode == "reflect" ? n - 1 - k : n - 1;
        parts.push_back(c.sliceAxis(y, d, src, src + 1));
      }
      y = c.concat(parts, d);
    }
  }
  return c.finish(y);
}

} // namespace

void registerConvConverters(ConverterTable &t) {
  t["Conv"] = conv;
  t["ConvTranspose"] = convTranspose;
  t["MaxPool"] = pool<true>;
  t["AveragePool"] = pool<false>;
  t["GlobalAveragePool"] = globalPool<nn::ReduceMeanOp>;
  t["GlobalMaxPool"] = globalPool<nn::ReduceMaxOp>;
  t["Pad"] = pad;
}

} // namespace dsc::onnx_import
