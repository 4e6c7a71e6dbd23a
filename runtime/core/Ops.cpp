//===- Ops.cpp - the ops a plan may use, their checks and kernels --------===//
//
// One entry per instruction of the plan format (the table; the losses, the
// optimizer ops and the collectives are in OpsLoss.cpp, OpsTrain.cpp and
// OpsDist.cpp, OpsInternal.h what they share). Each instruction's
// attributes (Instr.ints / Instr.floats: names, order, counts and what a
// plan may leave out) are declared once, in plan/Instructions.h
// (kInstructionLayouts); a binder refuses other counts with Check::layout
// and checks the values itself. The operands, where more than their types
// and shapes say:
//   nn.cast, nn.broadcast  any dtype
//   nn.argmax              an int64 result, the axis dropped or 1
//   nn.slice, nn.concat    also move int64 tensors
//   nn.gather(_grad)       on a vocabulary-parallel part the table is rows
//                          [tp rank * A, + A) of A * parts
//   nn.vocab_ce_sums(_grad) the logits [N, C] are classes [tp rank * C,
//                          + C); OpsLoss.cpp
//   nn.conv, nn.conv_input_grad, nn.conv_weight_grad: x [N, C, S...], w
//                          [O, C / groups, K...], y [N, O, R...] (r = 1 to
//                          3 spatial dims) with R the floor of the window
//                          formula: conv (x, w) -> y, conv_input_grad
//                          (dy, w) -> dx, conv_weight_grad (x, dy) -> dw
//   nn.max_pool(_grad)     max_pool (x) -> y, max_pool_grad (x, dy) -> dx;
//                          R the floor or the ceil-mode extent
//   nn.avg_pool(_grad)     avg_pool (x) -> y, avg_pool_grad (dy) -> dx
//   train.assign           1 input, 1 output: the FROZEN buffer (a model
//                          buffer the forward pass updates, BatchNorm's
//                          running statistics) gets the input's value
//   train.clip_grad_norm   N gradients [, with has_sum_sq the global sum of
//                          squares (sharded gradients)] [, with
//                          has_loss_scale fp16's loss scale (overflow:
//                          Context::overflow)] -> N results and the norm
//   train.lamb_stats       param, grad, exp_avg, exp_avg_sq -> f32[2]
//   train.onebit_adam      param, grad, exp_avg, exp_avg_sq, lr, step[,
//                          compressed] -> param, exp_avg, exp_avg_sq in
//                          place
//   train.onebit_lamb      param, grad, exp_avg, exp_avg_sq,
//                          exp_avg_sq_fresh, lamb_coeff_freeze,
//                          last_factor, scaling_coeff, lr, step[,
//                          compressed][, stats f32[3]] -> param, exp_avg,
//                          exp_avg_sq, exp_avg_sq_fresh, lamb_coeff_freeze,
//                          last_factor in place
//   train.onebit_lamb_stats n params, grads, exp_avgs, exp_avg_sqs,
//                          exp_avg_sq_freshes[, compressed], step -> f32[3]
//   train.onebit_lamb_scaling k momenta, k coefficients, step -> k
//                          coefficients, set on step `at` only
//   train.zero_one_adam    param, grad, exp_avg, exp_avg_sq,
//                          momentum_accumulator, lrs, lr, step[,
//                          compressed] -> param, exp_avg, exp_avg_sq,
//                          momentum_accumulator, lrs in place
//   train.zero_one_payload param, grad, exp_avg, exp_avg_sq,
//                          momentum_accumulator, lr, step -> what the 1-bit
//                          all-reduce carries
//   train.reset_at         input f32[n], step -> zeros on step `at`, else
//                          the input
//   train.onebit_compress  input f32[n], error f32[n] -> bits u8[n/8], scale
//                          f32[1], new error f32[n]: in place of the error
//                          or apart from the operands
//   train.onebit_server    bits u8[W n/8], scales f32[W], error f32[n] ->
//                          bits u8[n/8], scale f32[1], new error f32[n]
//   train.onebit_expand    bits u8[W c/8], scales f32[W] -> f32[W c]
//   accumulate             out += in
//   train.sum_sq           k inputs -> f32 scalar: sum of squares
//   load_batch             (pipeline plans only) 0 inputs, k outputs: INPUT
//                          buffers (the model's inputs this stage reads,
//                          the same names, order and shapes for every
//                          micro-batch m), filled by the data loader with
//                          global micro-batch ((step - 1) * M + m) * dp + dp
//                          index, which also becomes the dropout counter.
// Communication. Instr.axis names the group: 0 the data-parallel group
// (the ranks of this pipeline stage, the plan's dp), 1 the pipeline group
// (the ranks of this data-parallel index, one per stage, pp), 2 the
// tensor-parallel group (the plan's tp). Collectives
// and messages are non-blocking: the instruction starts one, `dist.wait`
// with the same handle completes it (0 inputs, 0 outputs); until then its
// inputs must not be written nor its outputs read (the memory plan
// guarantees it). Handles are one namespace over the dp, pp and tp groups.
// Collectives: k inputs, k outputs.
//   dist.all_reduce        output j is input j reduced over the group
//   dist.reduce_scatter    output j is chunk `rank` of input j flattened and
//                          zero-padded to size chunks of ceil(n / size)
//   dist.all_gather        output j is the concatenation of every rank's
//                          input j, cut to its length (any n with ceil(n /
//                          size) = chunk)
//   dist.all_to_all        input j is size equal chunks; output j (its
//                          shape) holds chunk `rank` of every rank's input
//                          j, in rank order
//   dist.chunk             1 input, 1 output: chunk `rank` of the flattened
//                          input, zero-padded as for reduce_scatter (a
//                          local copy)
//   dist.send              1 input (any dtype), 0 outputs: its bytes go to
//                          the rank `peer` steps along the group (+1 the
//                          next pipeline stage, -1 the previous; inside the
//                          group). No staging.
//   dist.recv              0 inputs, 1 output (any dtype): filled from the
//                          rank `peer` steps along the group. Messages pair
//                          by (source, destination, tag), several with one
//                          tag in the order sent; a size mismatch fails the
//                          wait.
// Dropout in a pipeline plan draws from the global micro-batch of its
// Instr.micro_batch (the instructions of several micro-batches interleave).
// Axes are non-negative. Every check runs at load time; kernels trust them:
// each shape relation a kernel relies on (element counts, broadcasts, batch
// dims, the non-concatenated dims), dtypes of every operand, one-element
// scalars, flags 0/1 and the attribute ranges of the dialects' verifiers.
// Element counts of different buffers multiply with overflow checks (one
// buffer's are bounded by the executor), and an empty tensor whose kernel
// would divide by its zero extent runs no kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/OpsInternal.h"

namespace dsrt {
using namespace ops;

namespace {

/// Checks nn.matmul's and nn.matmul_epilogue's product op(A) op(B) -> C
/// (ints 0 and 1: the transposes); returns N.
int64_t checkProduct(const Instr &i, const Check &c) {
  const cpu::Shape &a = i.in[0]->shape, &b = i.in[1]->shape, &o = i.out[0]->shape;
  if (a.rank < 2 || b.rank < 2 || o.rank < 2)
    c.fail("operands must have rank >= 2");
  int64_t m = i.ints[0] ? a.dims[a.rank - 1] : a.dims[a.rank - 2];
  int64_t k = i.ints[0] ? a.dims[a.rank - 2] : a.dims[a.rank - 1];
  int64_t k2 = i.ints[1] ? b.dims[b.rank - 1] : b.dims[b.rank - 2];
  int64_t n = i.ints[1] ? b.dims[b.rank - 2] : b.dims[b.rank - 1];
  std::string shapes = Check::shape(i.in[0]) + " x " + Check::shape(i.in[1]) + " -> " +
                       Check::shape(i.out[0]);
  if (k != k2 || o.dims[o.rank - 2] != m || o.dims[o.rank - 1] != n)
    c.fail("shapes " + shapes + " do not multiply");
  // The kernel walks the result's batch index and steps each operand by
  // it (stride 0 where the operand has 1 or no such dim): the batch dims
  // must broadcast (numpy) to exactly the result's.
  int ob = o.rank - 2, ab = a.rank - 2, bb = b.rank - 2;
  if (ob != std::max(ab, bb))
    c.fail("batch dimensions of " + shapes + " do not broadcast to the result's");
  for (int d = 0; d < ob; ++d) {
    int64_t ad = d >= ob - ab ? a.dims[d - (ob - ab)] : 1;
    int64_t bd = d >= ob - bb ? b.dims[d - (ob - bb)] : 1;
    if ((ad != 1 && bd != 1 && ad != bd) || o.dims[d] != (ad == 1 ? bd : ad))
      c.fail("batch dimensions of " + shapes + " do not broadcast to the result's");
  }
  // OpenBLAS takes 32-bit sizes; the kernel may fold the batch into rows.
  int64_t rows = n ? i.out[0]->numel / n : 0;
  for (int64_t v : {rows, n, k, a.dims[a.rank - 1], b.dims[b.rank - 1]})
    if (v > INT32_MAX)
      c.fail("shapes " + shapes + ": a matrix dimension exceeds 2^31 - 1, the GEMM limit");
  return n;
}

/// The window of a conv / pooling instruction from its ints: [kernel r]
/// (pooling), strides r, pads 2r, [dilations r]; the conv kernel extents
/// come from the weight.
cpu::Window windowOf(const std::vector<int64_t> &ints, int r, bool kernel, bool dilations) {
  cpu::Window w;
  w.spatial = r;
  size_t k = 0;
  for (int d = 0; d < r; ++d)
    w.kernel[d] = kernel ? ints[k + d] : 1;
  k += kernel ? r : 0;
  for (int d = 0; d < r; ++d) {
    w.stride[d] = ints[k + d];
    w.padBegin[d] = ints[k + r + d];
    w.padEnd[d] = ints[k + 2 * r + d];
    w.dilation[d] = dilations ? ints[k + 3 * r + d] : 1;
  }
  return w;
}

/// Spatial extent of a window over `in` (<= 0: none fits); attributes
/// already bounded to [0, 2^31) so nothing overflows.
int64_t extentOf(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil) {
  int64_t span = in + pb + pe - ((k - 1) * d + 1);
  if (span < 0)
    return 0;
  int64_t out = (span + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (out - 1) * s >= in + pb)
    --out;
  return out;
}

/// Checks the window attributes' count and ranges; returns the spatial rank.
int checkWindowAttrs(const Instr &i, const Check &c, const Tensor *x, bool kernel,
                     bool dilations, size_t extra) {
  int r = x->shape.rank - 2;
  if (r < 1 || r > 3)
    c.fail("operand " + Check::shape(x) + " must be [N, C] and 1 to 3 spatial dims");
  size_t n = size_t(r) * ((kernel ? 1 : 0) + 3 + (dilations ? 1 : 0)) + extra;
  c.layout(n); // the declared lists, sized by the spatial rank
  const int64_t limit = int64_t(1) << 31;
  size_t k = 0;
  auto range = [&](const char *what, size_t count, int64_t lo) {
    for (size_t j = 0; j < count; ++j, ++k)
      if (i.ints[k] < lo || i.ints[k] >= limit)
        c.fail(std::string(what) + " " + std::to_string(i.ints[k]) + " is outside [" +
               std::to_string(lo) + ", 2^31)");
  };
  if (kernel)
    range("kernel size", r, 1);
  range("stride", r, 1);
  range("padding", 2 * r, 0);
  if (dilations)
    range("dilation", r, 1);
  return r;
}

/// nn.conv (pass 0), nn.conv_input_grad (1), nn.conv_weight_grad (2).
void checkConv(Instr &i, const Check &c, int pass) {
  c.arity(2, 1);
  // x, w, y whatever the pass: which are inputs and which the output.
  const Tensor *x = pass == 1 ? i.out[0] : i.in[0];
  const Tensor *w = pass == 2 ? i.out[0] : i.in[1];
  const Tensor *y = pass == 0 ? i.out[0] : pass == 1 ? i.in[0] : i.in[1];
  c.floats({x, w, y});
  int r = checkWindowAttrs(i, c, x, false, true, 1);
  int64_t groups = i.ints[4 * r];
  std::string shapes = "x " + Check::shape(x) + ", weight " + Check::shape(w) + ", y " +
                       Check::shape(y);
  if (w->shape.rank != r + 2 || y->shape.rank != r + 2)
    c.fail(shapes + ": ranks differ");
  const int64_t *xs = x->shape.dims, *ws = w->shape.dims, *ys = y->shape.dims;
  if (groups < 1 || groups >= (int64_t(1) << 31) || xs[1] % groups || ws[0] % groups ||
      ws[1] * groups != xs[1] || ys[0] != xs[0] || ys[1] != ws[0])
    c.fail(shapes + " do not fit " + std::to_string(groups) +
           " groups ([N, C, S...], [O, C / groups, K...], [N, O, R...])");
  cpu::Window win = windowOf(i.ints, r, false, true);
  for (int d = 0; d < r; ++d) {
    if (ws[2 + d] < 1 || ws[2 + d] >= (int64_t(1) << 31))
      c.fail(shapes + ": kernel extents must be in [1, 2^31)");
    int64_t e = extentOf(xs[2 + d], ws[2 + d], win.stride[d], win.padBegin[d], win.padEnd[d],
                         win.dilation[d], false);
    if (e < 1 || e != ys[2 + d])
      c.fail(shapes + ": spatial dim " + std::to_string(d) + " of y must be " +
             std::to_string(e) + " for this window");
  }
  // Make the oneDNN primitive now: a configuration it cannot run is a
  // load-time error, not a failure in the middle of a step.
  if (x->numel && w->numel && y->numel) {
    try {
      (void)cpu::convImpl(cpu::ConvPass(pass), x->shape, w->shape, y->shape, win, groups);
    } catch (const std::exception &e) {
      c.fail(shapes + ": oneDNN has no convolution for this window: " + e.what());
    }
  }
  i.g[0] = pass;
  i.run = [](const Instr &i, Context &) {
    int r = i.in[0]->shape.rank - 2;
    cpu::Window win = windowOf(i.ints, r, false, true);
    int pass = int(i.g[0]);
    Tensor *x = pass == 1 ? i.out[0] : i.in[0];
    Tensor *w = pass == 2 ? i.out[0] : i.in[1];
    Tensor *y = pass == 0 ? i.out[0] : pass == 1 ? i.in[0] : i.in[1];
    cpu::conv(cpu::ConvPass(pass), x->f32(), x->shape, w->f32(), w->shape, y->f32(), y->shape,
              win, i.ints[4 * r]);
  };
}

/// nn.max_pool / nn.avg_pool (grad: their input gradients).
void checkPool(Instr &i, const Check &c, bool max, bool grad) {
  // max_pool (x) -> y; max_pool_grad (x, dy) -> dx; avg_pool (x) -> y;
  // avg_pool_grad (dy) -> dx.
  c.arity(max && grad ? 2 : 1, 1);
  const Tensor *x = grad && !max ? i.out[0] : i.in[0];
  const Tensor *y = !grad ? i.out[0] : max ? i.in[1] : i.in[0];
  c.floats({x, y, i.out[0]});
  if (max && grad)
    c.sameShape(i.in[0], i.out[0]);
  int r = checkWindowAttrs(i, c, x, true, max, max ? 0 : 1);
  if (!max)
    c.flag(size_t(4 * r), "count_include_pad");
  std::string shapes = "x " + Check::shape(x) + ", y " + Check::shape(y);
  if (y->shape.rank != r + 2 || y->shape.dims[0] != x->shape.dims[0] ||
      y->shape.dims[1] != x->shape.dims[1])
    c.fail(shapes + ": y must be [N, C, R...] of x [N, C, S...]");
  cpu::Window win = windowOf(i.ints, r, true, max);
  for (int d = 0; d < r; ++d) {
    int64_t in = x->shape.dims[2 + d], out = y->shape.dims[2 + d];
    int64_t lo = extentOf(in, win.kernel[d], win.stride[d], win.padBegin[d], win.padEnd[d],
                          win.dilation[d], false);
    int64_t hi = extentOf(in, win.kernel[d], win.stride[d], win.padBegin[d], win.padEnd[d],
                          win.dilation[d], true);
    if (lo < 1 || (out != lo && out != hi))
      c.fail(shapes + ": spatial dim " + std::to_string(d) + " of y must be " +
             std::to_string(lo) + (hi != lo ? " or " + std::to_string(hi) + " (ceil mode)" : "") +
             " for this window");
  }
  if (max)
    i.run = grad ? [](const Instr &i, Context &) {
      cpu::Window w = windowOf(i.ints, i.in[0]->shape.rank - 2, true, true);
      cpu::maxPoolGrad(i.in[0]->f32(), i.in[0]->shape, i.in[1]->f32(), i.in[1]->shape,
                       i.out[0]->f32(), w);
    } : KernelFn([](const Instr &i, Context &) {
      cpu::Window w = windowOf(i.ints, i.in[0]->shape.rank - 2, true, true);
      cpu::maxPool(i.in[0]->f32(), i.in[0]->shape, i.out[0]->f32(), i.out[0]->shape, w);
    });
  else
    i.run = grad ? [](const Instr &i, Context &) {
      int r = i.out[0]->shape.rank - 2;
      cpu::Window w = windowOf(i.ints, r, true, false);
      cpu::avgPoolGrad(i.in[0]->f32(), i.in[0]->shape, i.out[0]->f32(), i.out[0]->shape, w,
                       i.ints[4 * r] != 0);
    } : KernelFn([](const Instr &i, Context &) {
      int r = i.in[0]->shape.rank - 2;
      cpu::Window w = windowOf(i.ints, r, true, false);
      cpu::avgPool(i.in[0]->f32(), i.in[0]->shape, i.out[0]->f32(), i.out[0]->shape, w,
                   i.ints[4 * r] != 0);
    });
}

const std::map<std::string, OpDef> &table() {
  static const std::map<std::string, OpDef> ops = [] {
    std::map<std::string, OpDef> t;
    t["nn.add"] = {bindBinary<cpu::Binary::Add>};
    t["nn.sub"] = {bindBinary<cpu::Binary::Sub>};
    t["nn.mul"] = {bindBinary<cpu::Binary::Mul>};
    t["nn.div"] = {bindBinary<cpu::Binary::Div>};
    t["nn.pow"] = {bindBinary<cpu::Binary::Pow>};
    t["nn.max"] = {bindBinary<cpu::Binary::Max>};
    t["nn.min"] = {bindBinary<cpu::Binary::Min>};
    t["nn.neg"] = {bindUnary<cpu::Unary::Neg>};
    t["nn.abs"] = {bindUnary<cpu::Unary::Abs>};
    t["nn.exp"] = {bindUnary<cpu::Unary::Exp>};
    t["nn.log"] = {bindUnary<cpu::Unary::Log>};
    t["nn.sqrt"] = {bindUnary<cpu::Unary::Sqrt>};
    t["nn.rsqrt"] = {bindUnary<cpu::Unary::Rsqrt>};
    t["nn.reciprocal"] = {bindUnary<cpu::Unary::Reciprocal>};
    t["nn.tanh"] = {bindUnary<cpu::Unary::Tanh>};
    t["nn.sin"] = {bindUnary<cpu::Unary::Sin>};
    t["nn.cos"] = {bindUnary<cpu::Unary::Cos>};
    t["nn.erf"] = {bindUnary<cpu::Unary::Erf>};
    t["nn.relu"] = {bindUnary<cpu::Unary::Relu>};
    t["nn.sigmoid"] = {bindUnary<cpu::Unary::Sigmoid>};

    t["nn.not"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      c.dtype(i.in[0], plan::BOOL, "input");
      c.dtype(i.out[0], plan::BOOL, "result");
      c.sameShape(i.in[0], i.out[0]);
      i.run = [](const Instr &i, Context &) {
        cpu::logicalNot(i.in[0]->u8(), i.out[0]->u8(), i.out[0]->numel);
      };
    }};
    t["nn.gelu"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      c.flag(0, "tanh approximation");
      plan::DType d = c.sameFloat({i.in[0], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::unary(i.ints[0] ? cpu::Unary::GeluTanh : cpu::Unary::GeluErf, as<T>(i.in[0]),
                     as<T>(i.out[0]), i.out[0]->numel);
        };
      });
    }};
    t["nn.gelu_grad"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      c.flag(0, "tanh approximation");
      plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[1], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::geluGrad(i.ints[0] != 0, as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]),
                        i.out[0]->numel);
        };
      });
    }};
    t["nn.gelu_with_derivative"] = {[](Instr &i, const Check &c) {
      c.arity(1, 2);
      c.layout();
      c.flag(0, "tanh approximation");
      plan::DType d = c.sameFloat({i.in[0], i.out[0], i.out[1]});
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[0], i.out[1]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::geluWithDerivative(i.ints[0] != 0, as<T>(i.in[0]), as<T>(i.out[0]),
                                  as<T>(i.out[1]), i.out[0]->numel);
        };
      });
    }};
    t["nn.cmp"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      if (i.ints[0] < 0 || i.ints[0] > 5)
        c.fail("unknown comparison predicate " + std::to_string(i.ints[0]));
      c.dtype(i.out[0], plan::BOOL, "result");
      plan::DType d = i.in[0]->dtype;
      if (i.in[1]->dtype != d ||
          (d != plan::F32 && d != plan::BF16 && d != plan::F16 && d != plan::I64))
        c.fail("operands must both be F32 (or BF16, or F16) or both I64");
      c.broadcastsTo(i.in[0], i.out[0]);
      c.broadcastsTo(i.in[1], i.out[0]);
      i.run = d != plan::I64
                  ? byFloat(d, [](auto tag) -> KernelFn {
                      using T = typename decltype(tag)::type;
                      return [](const Instr &i, Context &) {
                        cpu::compare(cpu::Cmp(i.ints[0]), as<T>(i.in[0]), i.in[0]->shape,
                                     as<T>(i.in[1]), i.in[1]->shape, i.out[0]->u8(),
                                     i.out[0]->shape);
                      };
                    })
                  : KernelFn([](const Instr &i, Context &) {
                      cpu::compareI64(cpu::Cmp(i.ints[0]), i.in[0]->i64(), i.in[0]->shape,
                                      i.in[1]->i64(), i.in[1]->shape, i.out[0]->u8(),
                                      i.out[0]->shape);
                    });
    }};
    t["nn.select"] = {[](Instr &i, const Check &c) {
      c.arity(3, 1);
      c.layout();
      c.dtype(i.in[0], plan::BOOL, "condition");
      plan::DType d = c.sameFloat({i.in[1], i.in[2], i.out[0]});
      for (int k = 0; k < 3; ++k)
        c.broadcastsTo(i.in[k], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::select(i.in[0]->u8(), i.in[0]->shape, as<T>(i.in[1]), i.in[1]->shape,
                      as<T>(i.in[2]), i.in[2]->shape, as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.cast"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      if (i.in[0]->numel != i.out[0]->numel)
        c.fail("element counts differ");
      i.run = [](const Instr &i, Context &) {
        cpu::cast(i.in[0]->data, kernelDType(i.in[0]->dtype), i.out[0]->data,
                  kernelDType(i.out[0]->dtype), i.out[0]->numel);
      };
    }};
    t["nn.broadcast"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      // Any element type: a bool mask input is broadcast too (the key
      // padding mask of nn.MultiheadAttention). g[0]: the element size.
      c.dtype(i.out[0], i.in[0]->dtype, "result");
      c.broadcastsTo(i.in[0], i.out[0]);
      i.g[0] = i.in[0]->numel ? int64_t(i.in[0]->bytes() / size_t(i.in[0]->numel)) : 1;
      i.run = [](const Instr &i, Context &) {
        cpu::broadcastTo(i.in[0]->data, i.in[0]->shape, i.out[0]->data, i.out[0]->shape,
                         size_t(i.g[0]));
      };
    }};
    t["nn.matmul"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      plan::DType dt = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.flag(0, "transpose_lhs");
      c.flag(1, "transpose_rhs");
      checkProduct(i, c);
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::matmul(as<T>(i.in[0]), i.in[0]->shape, i.ints[0] != 0, as<T>(i.in[1]),
                      i.in[1]->shape, i.ints[1] != 0, as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.matmul_epilogue"] = {[](Instr &i, const Check &c) {
      c.layout();
      c.flag(0, "transpose_lhs");
      c.flag(1, "transpose_rhs");
      c.flag(2, "has_bias");
      c.flag(3, "has_addend");
      if (i.ints.size() > 4)
        c.flag(4, "has_scale");
      const bool hasBias = i.ints[2] != 0, hasAddend = i.ints[3] != 0,
                 hasScale = i.ints.size() > 4 && i.ints[4] != 0;
      // A second output (format 21): the result's column sums.
      const bool hasSum = i.out.size() == 2;
      if (!hasBias && !hasAddend && !hasScale && !hasSum)
        c.fail("has neither a bias, a scale, an addend nor column sums");
      c.arity(2 + hasBias + hasScale + hasAddend, 1 + hasSum);
      plan::DType dt = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      if (hasSum)
        c.dtype(i.out[1], dt, "column sums");
      if (hasBias)
        c.dtype(i.in[2], dt, "bias");
      if (hasScale)
        c.dtype(i.in[2 + hasBias], dt, "scale");
      if (hasAddend)
        c.dtype(i.in.back(), dt, "addend");
      const int64_t n = checkProduct(i, c);
      if (hasBias && (i.in[2]->shape.rank != 1 || i.in[2]->shape.dims[0] != n))
        c.fail("bias " + Check::shape(i.in[2]) + " must be a vector of the " + std::to_string(n) +
               " columns");
      if (hasScale)
        c.sameShape(i.in[2 + hasBias], i.out[0]);
      if (hasAddend)
        c.sameShape(i.in.back(), i.out[0]);
      if (hasSum && (i.out[1]->shape.rank != 1 || i.out[1]->shape.dims[0] != n))
        c.fail("column sums " + Check::shape(i.out[1]) + " must be a vector of the " +
               std::to_string(n) + " columns");
      i.g[0] = hasScale;
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          const T *bias = i.ints[2] ? as<T>(i.in[2]) : nullptr;
          const T *scale = i.g[0] ? as<T>(i.in[2 + (i.ints[2] != 0)]) : nullptr;
          const T *addend = i.ints[3] ? as<T>(i.in.back()) : nullptr;
          cpu::matmulEpilogue(as<T>(i.in[0]), i.in[0]->shape, i.ints[0] != 0, as<T>(i.in[1]),
                              i.in[1]->shape, i.ints[1] != 0, bias, scale, addend,
                              as<T>(i.out[0]), i.out[0]->shape,
                              i.out.size() == 2 ? as<T>(i.out[1]) : nullptr);
        };
      });
    }};
    t["nn.layer_norm"] = {[](Instr &i, const Check &c) {
      if (i.in.size() != 2 && i.in.size() != 3)
        c.fail("expects 2 or 3 inputs");
      c.arity(i.in.size(), 1);
      c.layout();
      // x and y share a float type; scale and bias are fp32 (with mixed
      // precision they are the master parameters themselves).
      plan::DType d = c.sameFloat({i.in[0], i.out[0]});
      c.floats({i.in[1]});
      if (i.in.size() == 3)
        c.floats({i.in[2]});
      c.floatIn(0, "epsilon", 0, INFINITY);
      c.axis(i.ints[0], i.in[0]);
      c.sameShape(i.in[0], i.out[0]);
      i.g[0] = prod(i.in[0]->shape, 0, (int)i.ints[0]);
      i.g[1] = prod(i.in[0]->shape, (int)i.ints[0], i.in[0]->shape.rank);
      if (i.in[1]->numel != i.g[1] || (i.in.size() == 3 && i.in[2]->numel != i.g[1]))
        c.fail("scale and bias need " + std::to_string(i.g[1]) + " elements");
      // Empty rows: nothing to normalize (the kernel divides by the row).
      i.run = i.in[0]->numel == 0 ? runNothing : byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::layerNorm(as<T>(i.in[0]), i.in[1]->f32(),
                         i.in.size() == 3 ? i.in[2]->f32() : nullptr, as<T>(i.out[0]), i.g[0],
                         i.g[1], (float)i.floats[0]);
        };
      });
    }};
    t["nn.layer_norm_grad"] = {[](Instr &i, const Check &c) {
      c.arity(3, 3);
      c.layout();
      // dy, x and dx share a float type; the scale and its gradients are fp32.
      plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.floats({i.in[2], i.out[1], i.out[2]});
      c.floatIn(0, "epsilon", 0, INFINITY);
      c.axis(i.ints[0], i.in[1]);
      c.sameShape(i.in[0], i.in[1]);
      c.sameShape(i.in[1], i.out[0]);
      i.g[0] = prod(i.in[1]->shape, 0, (int)i.ints[0]);
      i.g[1] = prod(i.in[1]->shape, (int)i.ints[0], i.in[1]->shape.rank);
      if (i.in[2]->numel != i.g[1] || i.out[1]->numel != i.g[1] || i.out[2]->numel != i.g[1])
        c.fail("scale and its gradients need " + std::to_string(i.g[1]) + " elements");
      if (i.in[1]->numel == 0) {
        // No rows (or empty ones): the scale's gradients are empty sums,
        // and the kernel would divide by the zero extent.
        i.run = [](const Instr &i, Context &) {
          cpu::fill(i.out[1]->f32(), i.out[1]->numel, 0.0f);
          cpu::fill(i.out[2]->f32(), i.out[2]->numel, 0.0f);
        };
        return;
      }
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::layerNormGrad(as<T>(i.in[0]), as<T>(i.in[1]), i.in[2]->f32(), as<T>(i.out[0]),
                             i.out[1]->f32(), i.out[2]->f32(), i.g[0], i.g[1],
                             (float)i.floats[0]);
        };
      });
    }};
    // softmax / log_softmax and their gradients: one float type, fp32
    // statistics inside the kernel. `kernelOf(d)` picks the instance.
    auto softmaxLike = [&](const char *name, KernelFn (*kernelOf)(plan::DType), bool grad) {
      t[name] = {[kernelOf, grad](Instr &i, const Check &c) {
        c.arity(grad ? 2 : 1, 1);
        c.layout();
        plan::DType d = grad ? c.sameFloat({i.in[0], i.in[1], i.out[0]})
                             : c.sameFloat({i.in[0], i.out[0]});
        c.sameShape(i.in[0], i.out[0]);
        if (grad)
          c.sameShape(i.in[1], i.out[0]);
        c.axis(i.ints[0], i.in[0]);
        splitAround(i, i.in[0], i.ints[0]);
        // Empty: nothing to compute (the kernel divides by the axis' size).
        i.run = i.in[0]->numel ? kernelOf(d) : runNothing;
      }};
    };
    softmaxLike(
        "nn.softmax",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::softmax(as<T>(i.in[0]), as<T>(i.out[0]), i.g[0], i.g[1], i.g[2]);
            };
          });
        },
        false);
    softmaxLike(
        "nn.log_softmax",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::logSoftmax(as<T>(i.in[0]), as<T>(i.out[0]), i.g[0], i.g[1], i.g[2]);
            };
          });
        },
        false);
    softmaxLike(
        "nn.softmax_grad",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::softmaxGrad(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]), i.g[0], i.g[1],
                               i.g[2]);
            };
          });
        },
        true);
    softmaxLike(
        "nn.log_softmax_grad",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::logSoftmaxGrad(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]), i.g[0],
                                  i.g[1], i.g[2]);
            };
          });
        },
        true);

    addLossOps(t);
    auto reduce = [&](const char *name, cpu::Reduce kind) {
      t[name] = {[kind](Instr &i, const Check &c) {
        c.arity(1, 1);
        plan::DType d = c.sameFloat({i.in[0], i.out[0]});
        c.layout(); // any number of axes, each checked below
        uint32_t mask = 0;
        int64_t kept = 1;
        for (int64_t a : i.ints) {
          c.axis(a, i.in[0]);
          mask |= 1u << a;
        }
        for (int d = 0; d < i.in[0]->shape.rank; ++d)
          if (!(mask & (1u << d)))
            kept *= i.in[0]->shape.dims[d];
        if (i.out[0]->numel != kept)
          c.fail("result " + Check::shape(i.out[0]) + " does not match the reduction");
        i.g[0] = mask;
        i.g[1] = (int64_t)kind;
        if (d == plan::F32) {
          i.run = [](const Instr &i, Context &) {
            cpu::reduce(cpu::Reduce(i.g[1]), i.in[0]->f32(), i.in[0]->shape, (uint32_t)i.g[0],
                        i.out[0]->f32());
          };
          return;
        }
        // A 16-bit reduction (a bias gradient under mixed precision) sums in
        // float into scratch reserved here, then rounds once into the result.
        i.scratch.assign(size_t(i.out[0]->numel), 0.0f);
        i.run = byFloat(d, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            cpu::reduce(cpu::Reduce(i.g[1]), as<T>(i.in[0]), i.in[0]->shape, (uint32_t)i.g[0],
                        i.scratch.data());
            cpu::cast(i.scratch.data(), cpu::DType::F32, i.out[0]->data,
                      kernelDType(i.out[0]->dtype), i.out[0]->numel);
          };
        });
      }};
    };
    t["nn.argmax"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      plan::DType d = c.sameFloat({i.in[0]});
      c.dtype(i.out[0], plan::I64, "result");
      c.axis(i.ints[0], i.in[0]);
      int a = int(i.ints[0]);
      if (i.in[0]->shape.rank == 0)
        c.fail("operand must have rank >= 1");
      i.g[0] = prod(i.in[0]->shape, 0, a);
      i.g[1] = i.in[0]->shape.dims[a];
      i.g[2] = prod(i.in[0]->shape, a + 1, i.in[0]->shape.rank);
      if (i.g[1] == 0 && i.g[0] * i.g[2] > 0)
        c.fail("argmax over an empty axis");
      if (i.out[0]->numel != i.g[0] * i.g[2])
        c.fail("result " + Check::shape(i.out[0]) + " does not match the reduction");
      i.run = i.out[0]->numel == 0 ? runNothing : byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::argmax(as<T>(i.in[0]), i.g[0], i.g[1], i.g[2], i.out[0]->i64());
        };
      });
    }};
    reduce("nn.reduce_sum", cpu::Reduce::Sum);
    reduce("nn.reduce_mean", cpu::Reduce::Mean);
    reduce("nn.reduce_max", cpu::Reduce::Max);
    t["nn.transpose"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout(); // the permutation's length is checked against the rank below
      // A layout op moves values: int64 too (a one-hot router's expert
      // ids transposed, F.one_hot(topk, E).transpose(0, 1)).
      plan::DType dt = c.sameMoved({i.in[0], i.out[0]});
      int r = i.in[0]->shape.rank;
      if ((int)i.ints.size() != r || i.out[0]->shape.rank != r)
        c.fail("permutation needs one entry per dimension");
      uint32_t seen = 0;
      for (int d = 0; d < r; ++d) {
        c.axis(i.ints[d], i.in[0]);
        seen |= 1u << i.ints[d];
        if (i.out[0]->shape.dims[d] != i.in[0]->shape.dims[i.ints[d]])
          c.fail("result shape does not match the permutation");
      }
      if (seen != (r ? (1u << r) - 1 : 0))
        c.fail("not a permutation");
      i.run = byMoved(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::transpose(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(), as<T>(i.out[0]));
        };
      });
    }};
    auto sliceLike = [&](const char *name, bool grad) {
      t[name] = {[grad](Instr &i, const Check &c) {
        c.arity(1, 1);
        c.layout(); // start and stride's lengths are checked against the rank below
        // A slice also moves int64 indices (a shifted label row); its
        // gradient is float.
        plan::DType dt = grad ? c.sameFloat({i.in[0], i.out[0]})
                              : c.sameMoved({i.in[0], i.out[0]});
        const Tensor *big = grad ? i.out[0] : i.in[0], *small = grad ? i.in[0] : i.out[0];
        int r = big->shape.rank;
        c.minRank(big, 1, "sliced operand"); // the kernel walks rows of the last dim
        if ((int)i.ints.size() != 2 * r || small->shape.rank != r)
          c.fail("needs start and stride per dimension");
        for (int d = 0; d < r; ++d) {
          int64_t &start = i.ints[d], &stride = i.ints[r + d], n = small->shape.dims[d];
          int64_t last = 0;
          if (start < 0 || stride <= 0 ||
              (n > 0 && (__builtin_mul_overflow(n - 1, stride, &last) ||
                         __builtin_add_overflow(start, last, &last) ||
                         last >= big->shape.dims[d])))
            c.fail("dimension " + std::to_string(d) + " slice is out of bounds");
          // One element (or none) takes no step: a stride past the end is
          // then harmless, but the kernel's offset arithmetic would overflow.
          if (n <= 1)
            stride = 1;
          if (n == 0)
            start = 0;
        }
        i.run = grad ? byFloat(dt, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            int r = i.out[0]->shape.rank;
            cpu::sliceGrad(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(), i.ints.data() + r,
                           as<T>(i.out[0]), i.out[0]->shape);
          };
        })
                     : byMoved(dt, [](auto tag) -> KernelFn {
                         using T = typename decltype(tag)::type;
                         return [](const Instr &i, Context &) {
                           int r = i.in[0]->shape.rank;
                           cpu::slice(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(),
                                      i.ints.data() + r, as<T>(i.out[0]), i.out[0]->shape);
                         };
                       });
      }};
    };
    // Convolution and pooling: fp32 kernels (oneDNN, loops).
    t["nn.conv"] = {[](Instr &i, const Check &c) { checkConv(i, c, 0); }};
    t["nn.conv_input_grad"] = {[](Instr &i, const Check &c) { checkConv(i, c, 1); }};
    t["nn.conv_weight_grad"] = {[](Instr &i, const Check &c) { checkConv(i, c, 2); }};
    t["nn.max_pool"] = {[](Instr &i, const Check &c) { checkPool(i, c, true, false); }};
    t["nn.max_pool_grad"] = {[](Instr &i, const Check &c) { checkPool(i, c, true, true); }};
    t["nn.avg_pool"] = {[](Instr &i, const Check &c) { checkPool(i, c, false, false); }};
    t["nn.avg_pool_grad"] = {[](Instr &i, const Check &c) { checkPool(i, c, false, true); }};
    sliceLike("nn.slice", false);
    sliceLike("nn.slice_grad", true);
    t["nn.concat"] = {[](Instr &i, const Check &c) {
      if (i.in.empty() || i.out.size() != 1)
        c.fail("expects inputs and one output");
      c.layout();
      plan::DType dt = c.sameMoved({i.out[0]}); // float, or int64 indices
      c.minRank(i.out[0], 1, "result");
      c.axis(i.ints[0], i.out[0]);
      // The kernel copies rows of the result's inner size from each input:
      // every dimension but the axis must be the result's.
      const cpu::Shape &os = i.out[0]->shape;
      int64_t total = 0;
      for (size_t k = 0; k < i.in.size(); ++k) {
        const Tensor *t = i.in[k];
        c.dtype(t, dt, "input");
        bool same = t->shape.rank == os.rank;
        for (int d = 0; same && d < os.rank; ++d)
          same = d == i.ints[0] || t->shape.dims[d] == os.dims[d];
        if (!same)
          c.fail("input " + std::to_string(k) + " " + Check::shape(t) +
                 " differs from the result " + Check::shape(i.out[0]) + " outside axis " +
                 std::to_string(i.ints[0]));
        total = c.add(total, t->shape.dims[i.ints[0]]);
        i.shapes.push_back(t->shape);
      }
      if (total != os.dims[i.ints[0]])
        c.fail("inputs do not add up to the result along the axis");
      i.ptrs.assign(i.in.size(), nullptr);
      // i.ptrs holds the inputs' addresses (the executor fills them as
      // floats); the 16-bit kernels read them as their own type.
      i.run = byMoved(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::concat(reinterpret_cast<const T *const *>(i.ptrs.data()), i.shapes.data(),
                      (int)i.in.size(), (int)i.ints[0], as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.dropout"] = {[](Instr &i, const Check &c) {
      c.arity(1, 2);
      // ints: stream, then [dim, blocks, tp] on a tensor-parallel part.
      c.layout();
      if (i.ints.size() == 4) {
        // The part's runs of the whole tensor (as for a split parameter).
        Tensor &whole = i.tpWhole;
        whole = *i.out[0];
        whole.tpDim = i.ints[1];
        whole.tpBlocks = i.ints[2];
        whole.tpSize = i.ints[3];
        c.axis(whole.tpDim, i.out[0]);
        if (whole.tpBlocks < 1 || whole.tpSize < 1)
          c.fail("tensor-parallel blocks and size must be positive");
        whole.fullShape = i.out[0]->shape;
        whole.fullShape.dims[whole.tpDim] *= whole.tpSize;
        if (i.out[0]->shape.dims[whole.tpDim] % whole.tpBlocks)
          c.fail("the split dimension does not divide into its blocks");
      }
      plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
      c.dtype(i.out[1], plan::BOOL, "mask");
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[0], i.out[1]);
      c.floatIn(0, "ratio", 0, 1);
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &ctx) {
          uint64_t counter = ctx.pipelined ? uint64_t(ctx.globalMicroBatch(i.microBatch))
                                           : ctx.rngCounter;
          // Evaluation: the identity (ratio 0 keeps every element, x 1).
          const float ratio = ctx.eval ? 0.0f : float(i.floats[0]);
          if (i.ints.size() == 4) {
            // A tensor-parallel rank's part: each run draws the whole
            // tensor's bits for its elements, as the unsplit run does.
            for (const TpRun &r : tpRuns(i.tpWhole, ctx.ranks[2]))
              cpu::dropout(as<T>(i.in[0]) + r.part, as<T>(i.out[0]) + r.part,
                           i.out[1]->u8() + r.part, r.count, ratio, ctx.seed,
                           (uint64_t)i.ints[0], counter, uint64_t(r.whole));
            return;
          }
          cpu::dropout(as<T>(i.in[0]), as<T>(i.out[0]), i.out[1]->u8(), i.out[0]->numel, ratio,
                       ctx.seed, (uint64_t)i.ints[0], counter);
        };
      });
    }};
    t["nn.dropout_grad"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      c.floatIn(0, "ratio", 0, 1);
      plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::BOOL, "mask");
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[1], i.out[0]);
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::dropoutGrad(as<T>(i.in[0]), i.in[1]->u8(), as<T>(i.out[0]), i.out[0]->numel,
                           (float)i.floats[0]);
        };
      });
    }};

    addTrainOps(t);
    addDistOps(t);
    addAttentionOps(t);
    return t;
  }();
  return ops;
}
} // namespace

void bindInstr(Instr &instr, const std::string &where) {
  auto it = table().find(instr.op);
  if (it == table().end())
    throw PlanError(where + ": unknown op '" + instr.op +
                    "' (the plan was written by a newer dsc?)");
  it->second.bind(instr, Check{instr, where});
}

std::vector<std::string> knownOps() {
  std::vector<std::string> names;
  for (auto &[name, def] : table())
    names.push_back(name);
  return names;
}

namespace ops {

bool bytesOverlap(const Tensor *a, const Tensor *b) { return Region(a).overlaps(b); }

bool deadAfter(const std::vector<Instr> &list, size_t from, const Tensor *t) {
  Region r(t);
  for (size_t j = from; j < list.size(); ++j) {
    for (const Tensor *in : list[j].in)
      if (r.overlaps(in))
        return false;
    for (const Tensor *out : list[j].out)
      if (r.overlaps(out))
        return true;
  }
  return false;
}

} // namespace ops

} // namespace dsrt
