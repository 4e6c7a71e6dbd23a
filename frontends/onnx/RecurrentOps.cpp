//===- RecurrentOps.cpp - ONNX LSTM, GRU and RNN, unrolled -> nn ---------===//
//
// The recurrent layers are unrolled over the static sequence length into
// matmuls, slices and elementwise ops, so autodiff, the memory plan,
// recompute and ZeRO see ordinary ops. Per direction, the input projection
// of every time step is one matmul (X W^T + Wb), and each step adds the
// recurrent one (H R^T + Rb) to its slice: PyTorch's CPU layers compute the
// same sums in the same order (linear_ih over the sequence, then linear_hh
// per step), and the cells keep PyTorch's formulas:
//   LSTM (gates i o f c):  c' = f * c + i * g,  h' = o * tanh(c')
//   GRU  (gates z r h, linear_before_reset = 1, as torch exports it):
//        n = tanh(x_n + r * (h R_n^T + Rb_n)),  h' = n + z * (h - n)
//   RNN:  h' = act(x W^T + Wb + h R^T + Rb), act Tanh or Relu.
// Directions forward, reverse and bidirectional, layout 0 ([seq, batch,
// ...]) and 1 ([batch, seq, ...]), initial states; sequence_lens, clip,
// input_forget, peepholes and other activations are refused with the
// reason.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

enum class Cell { Lstm, Gru, Rnn };

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

int gatesOf(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

template <Cell K> LogicalResult recurrent(GraphImporter &g) {
  const int gates = gatesOf(K);
  Value x = g.input(0), w = g.input(1), r = g.input(2);
  if (!x || !w || !r)
    return failure();
  for (Value v : {x, w, r})
    if (!nn::isFloatTensor(v.getType()))
      return g.fail("X, W and R must be float tensors");
  int64_t hidden = attrInt(g.node(), "hidden_size", 0);
  std::string direction = attrString(g.node(), "direction", "forward");
  int64_t layout = attrInt(g.node(), "layout", 0);
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return g.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (layout != 0 && layout != 1)
    return g.fail("layout " + Twine(layout) + " is not 0 or 1");
  if (findAttr(g.node(), "clip"))
    return g.fail("clip (cell clipping) is not supported; PyTorch's layers do not clip");
  if (K == Cell::Lstm && attrInt(g.node(), "input_forget", 0) != 0)
    return g.fail("input_forget (coupled input and forget gates) is not supported");
  if (K == Cell::Gru && attrInt(g.node(), "linear_before_reset", 0) == 0)
    return g.fail("linear_before_reset 0 is not supported: PyTorch's GRU (and torch.onnx's "
                  "export) applies the reset gate after the recurrent projection "
                  "(linear_before_reset 1)");
  if (auto acts = findAttr(g.node(), "activations")) {
    std::vector<std::string> want;
    if (K == Cell::Lstm)
      want = {"Sigmoid", "Tanh", "Tanh"};
    else if (K == Cell::Gru)
      want = {"Sigmoid", "Tanh"};
    bool ok = true;
    for (int k = 0; k < acts->strings_size(); ++k) {
      const std::string &a = acts->strings(k);
      if (K == Cell::Rnn)
        ok &= a == "Tanh" || a == "Relu";
      else
        ok &= a == want[k % want.size()];
    }
    if (!ok || (K == Cell::Rnn && acts->strings_size() == 2 &&
                acts->strings(0) != acts->strings(1)))
      return g.fail("activations other than PyTorch's (LSTM Sigmoid, Tanh, Tanh; GRU Sigmoid, "
                    "Tanh; RNN Tanh or Relu, the same in both directions) are not supported");
  }
  bool relu = false;
  if (auto acts = findAttr(g.node(), "activations"); K == Cell::Rnn && acts &&
                                                     acts->strings_size() > 0)
    relu = acts->strings(0) == "Relu";
  // Inputs: sequence_lens (4 for all), initial_h (5), initial_c (6, LSTM),
  // P (7, LSTM).
  if (g.hasInput(4)) {
    const HostTensor *lens = g.constant(4);
    bool full = false;
    if (lens) {
      int64_t seq = typeOf(x).getDimSize(layout == 0 ? 0 : 1);
      full = true;
      for (int64_t k = 0; k < lens->size(); ++k)
        full &= lens->asInt(k) == seq;
    }
    if (!full)
      return g.fail("sequence_lens shorter than the sequence (packed sequences) are not "
                    "supported: pad the batch and mask the loss instead");
  }
  if (K == Cell::Lstm && g.hasInput(7))
    return g.fail("peephole weights (input P) are not supported; PyTorch's LSTM has none");

  auto xt = typeOf(x);
  if (xt.getRank() != 3)
    return g.fail("X must be [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1), "
                  "is " + nn::formatShape(xt.getShape()));
  Composer c(g);
  if (layout == 1)
    x = c.op<nn::TransposeOp>(
        {x}, {g.attr("permutation", g.builder().getDenseI64ArrayAttr({1, 0, 2}))});
  if (!c.ok())
    return failure();
  const int64_t seq = typeOf(x).getDimSize(0), batch = typeOf(x).getDimSize(1),
                in = typeOf(x).getDimSize(2), gh = gates * hidden;
  auto expect = [&](Value v, ArrayRef<int64_t> shape, StringRef what) -> LogicalResult {
    if (typeOf(v).getShape() != shape)
      return g.fail(what + " must be " + nn::formatShape(shape) + " (num_directions " +
                    Twine(dirs) + ", " + Twine(gates) + " gates of hidden_size " +
                    Twine(hidden) + "), is " + nn::formatShape(typeOf(v).getShape()));
    return success();
  };
  if (hidden < 1)
    return g.fail("hidden_size must be given and positive");
  if (failed(expect(w, {dirs, gh, in}, "W")) || failed(expect(r, {dirs, gh, hidden}, "R")))
    return failure();
  Value bias;
  if (g.hasInput(3)) {
    if (!(bias = g.input(3)) || failed(expect(bias, {dirs, 2 * gh}, "B")))
      return failure();
  }
  Value h0, c0;
  if (g.hasInput(5)) {
    if (!(h0 = g.input(5)) || failed(expect(h0, {dirs, batch, hidden}, "initial_h")))
      return failure();
  }
  if (K == Cell::Lstm && g.hasInput(6)) {
    if (!(c0 = g.input(6)) || failed(expect(c0, {dirs, batch, hidden}, "initial_c")))
      return failure();
  }
  auto &b = g.builder();
  Type et = xt.getElementType();
  auto matmulT = [&](Value a, Value m) { // a @ m^T
    return c.op<nn::MatmulOp>({a, m}, {g.attr("transpose_rhs", b.getUnitAttr())});
  };
  auto dirSlice = [&](Value v, int64_t d, ArrayRef<int64_t> shape) {
    return c.reshape(c.sliceAxis(v, 0, d, d + 1), shape);
  };
  auto gate = [&](Value v, int k) { return c.sliceAxis(v, 1, k * hidden, (k + 1) * hidden); };
  auto sigmoid = [&](Value v) { return c.unary<nn::SigmoidOp>(v); };
  auto tanh = [&](Value v) { return c.unary<nn::TanhOp>(v); };

  SmallVector<Value> ys(dirs), lastH(dirs), lastC(dirs);
  for (int64_t d = 0; d < dirs && c.ok(); ++d) {
    Value wd = dirSlice(w, d, {gh, in}), rd = dirSlice(r, d, {gh, hidden});
    Value wb, rb;
    if (bias) {
      Value bd = dirSlice(bias, d, {2 * gh});
      wb = c.sliceAxis(bd, 0, 0, gh);
      rb = c.sliceAxis(bd, 0, gh, 2 * gh);
    }
    // The input projection of every step: [seq, batch, gates * hidden].
    Value xw = matmulT(x, wd);
    if (wb)
      xw = c.op<nn::AddOp>({xw, wb});
    Value h = h0 ? dirSlice(h0, d, {batch, hidden})
                 : g.splat(RankedTensorType::get({batch, hidden}, et), 0.0);
    Value cs;
    if (K == Cell::Lstm)
      cs = c0 ? dirSlice(c0, d, {batch, hidden})
              : g.splat(RankedTensorType::get({batch, hidden}, et), 0.0);
    bool reverse = direction == "reverse" || d == 1;
    SmallVector<Value> steps(seq);
    for (int64_t s = 0; s < seq && c.ok(); ++s) {
      int64_t t = reverse ? seq - 1 - s : s;
      Value xt = c.reshape(c.sliceAxis(xw, 0, t, t + 1), {batch, gh});
      Value hw = matmulT(h, rd);
      if (K == Cell::Gru) {
        // PyTorch: r = sigma(x_r + h_r), z = sigma(x_z + h_z), n = tanh(x_n
        // + r * h_n), h' = n + z * (h - n); h_ includes Rb.
        if (rb)
          hw = c.op<nn::AddOp>({hw, rb});
        Value z = sigmoid(c.op<nn::AddOp>({gate(hw, 0), gate(xt, 0)}));
        Value rg = sigmoid(c.op<nn::AddOp>({gate(hw, 1), gate(xt, 1)}));
        Value n = tanh(c.op<nn::AddOp>({gate(xt, 2), c.op<nn::MulOp>({rg, gate(hw, 2)})}));
        h = c.op<nn::AddOp>({n, c.op<nn::MulOp>({z, c.op<nn::SubOp>({h, n})})});
      } else {
        if (rb)
          hw = c.op<nn::AddOp>({hw, rb});
        Value pre = c.op<nn::AddOp>({hw, xt});
        if (K == Cell::Rnn) {
          h = relu ? c.unary<nn::ReluOp>(pre) : tanh(pre);
        } else {
          Value i = sigmoid(gate(pre, 0)), o = sigmoid(gate(pre, 1));
          Value f = sigmoid(gate(pre, 2)), cg = tanh(gate(pre, 3));
          cs = c.op<nn::AddOp>({c.op<nn::MulOp>({f, cs}), c.op<nn::MulOp>({i, cg})});
          h = c.op<nn::MulOp>({o, tanh(cs)});
        }
      }
      steps[t] = c.reshape(h, {1, 1, batch, hidden});
    }
    ys[d] = c.concat(steps, 0);
    lastH[d] = c.reshape(h, {1, batch, hidden});
    if (K == Cell::Lstm)
      lastC[d] = c.reshape(cs, {1, batch, hidden});
  }
  Value y = c.concat(ys, 1);
  if (layout == 1) // [batch, seq, dirs, hidden]
    y = c.op<nn::TransposeOp>(
        {y}, {g.attr("permutation", b.getDenseI64ArrayAttr({2, 0, 1, 3}))});
  Value yh = c.concat(lastH, 0), yc = K == Cell::Lstm ? c.concat(lastC, 0) : Value();
  if (layout == 1) { // [batch, dirs, hidden]
    auto perm = g.attr("permutation", b.getDenseI64ArrayAttr({1, 0, 2}));
    yh = c.op<nn::TransposeOp>({yh}, {perm});
    if (yc)
      yc = c.op<nn::TransposeOp>({yc}, {perm});
  }
  if (!c.ok())
    return failure();
  g.setOutput(0, y);
  if (g.outputUsed(1))
    g.setOutput(1, yh);
  if (K == Cell::Lstm && g.outputUsed(2))
    g.setOutput(2, yc);
  return success();
}

} // namespace

void registerRecurrentConverters(ConverterTable &t) {
  t["LSTM"] = recurrent<Cell::Lstm>;
  t["GRU"] = recurrent<Cell::Gru>;
  t["RNN"] = recurrent<Cell::Rnn>;
}

} // namespace dsc::onnx_import
