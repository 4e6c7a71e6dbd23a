//===- KernelCoverageTest.cpp - every (instruction, dtype) has a kernel ---===//
//
// plan/Instructions.h lists, for each instruction, the dtypes its data
// operand (output 0; input 0 without outputs) may hold, and emit-plan
// refuses anything else naming the op. This test holds the other end: it
// builds one instruction per (instruction, listed dtype), with operands of
// the shapes its kernel expects, and binds it
//  * on the CPU, which must bind every one (a plan dsc compiles is a plan
//    dsrt runs: an int64 nn.transpose once compiled and was refused);
//  * on the CPU with every dtype the layout does not list, which must be
//    refused (the list is the CPU's truth, not a guess);
//  * on the CUDA backend, which binds it or refuses it naming the
//    instruction (--device auto then keeps the plan on the CPU); the
//    refusals are listed in the test's output.
// An instruction added to the vocabulary without a case here fails.
//
//===----------------------------------------------------------------------===//
#include "test/runtime/core/InstrUtil.h"

#include "plan/Instructions.h"
#include "runtime/core/Backend.h"
#include "runtime/core/Executor.h"

#include "plan.pb.h"

#include <gmock/gmock.h>

#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dsrt::test {
namespace {

namespace plan = dsc::plan;
using plan::DType;

constexpr DType kAllDTypes[] = {plan::F32, plan::BF16, plan::F16, plan::I64,
                                plan::I32, plan::BOOL, plan::U8,  plan::F64};

/// One instruction under test and the buffers it owns.
struct Case {
  std::vector<std::unique_ptr<Buf>> bufs;
  Instr instr;

  Tensor *t(std::vector<int64_t> dims, DType d) {
    bufs.push_back(std::make_unique<Buf>(std::move(dims), d));
    return bufs.back().get();
  }
  Tensor *f(std::vector<int64_t> dims) { return t(std::move(dims), plan::F32); }
  Tensor *scalar(DType d = plan::F32) { return t({}, d); }
  /// An output written in place over `in` (same bytes).
  Tensor *over(const Tensor *in) {
    std::vector<int64_t> dims(in->shape.dims, in->shape.dims + in->shape.rank);
    Tensor *o = t(dims, in->dtype);
    o->offset = in->offset;
    return o;
  }
  void set(std::vector<Tensor *> in, std::vector<Tensor *> out, std::vector<int64_t> ints = {},
           std::vector<double> floats = {}) {
    instr.in = std::move(in);
    instr.out = std::move(out);
    instr.ints = std::move(ints);
    instr.floats = std::move(floats);
  }
};

/// Fills `c` with an instruction `op` whose data operand holds `d`.
using Builder = std::function<void(Case &c, DType d)>;

const std::map<std::string, Builder> &builders() {
  static const std::map<std::string, Builder> table = [] {
    std::map<std::string, Builder> b;
    const double adam[] = {0.9, 0.999, 1e-8, 0.01};
    for (const char *op : {"nn.abs", "nn.cos", "nn.erf", "nn.exp", "nn.log", "nn.neg",
                           "nn.reciprocal", "nn.relu", "nn.rsqrt", "nn.sigmoid", "nn.sin",
                           "nn.sqrt", "nn.tanh", "accumulate"})
      b[op] = [](Case &c, DType d) { c.set({c.t({2, 3}, d)}, {c.t({2, 3}, d)}); };
    for (const char *op : {"nn.add", "nn.sub", "nn.mul", "nn.div", "nn.pow", "nn.max", "nn.min"})
      b[op] = [](Case &c, DType d) { c.set({c.t({2, 3}, d), c.t({3}, d)}, {c.t({2, 3}, d)}); };
    b["nn.gelu"] = [](Case &c, DType d) { c.set({c.t({2, 3}, d)}, {c.t({2, 3}, d)}, {0}); };
    b["nn.gelu_grad"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d), c.t({2, 3}, d)}, {c.t({2, 3}, d)}, {1});
    };
    b["nn.gelu_with_derivative"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d)}, {c.t({2, 3}, d), c.t({2, 3}, d)}, {0});
    };
    b["nn.not"] = [](Case &c, DType d) { c.set({c.t({6}, d)}, {c.t({6}, d)}); };
    b["nn.cmp"] = [](Case &c, DType d) { c.set({c.f({2, 3}), c.f({3})}, {c.t({2, 3}, d)}, {0}); };
    b["nn.select"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, plan::BOOL), c.t({2, 3}, d), c.t({3}, d)}, {c.t({2, 3}, d)});
    };
    b["nn.cast"] = [](Case &c, DType d) { c.set({c.f({6})}, {c.t({6}, d)}); };
    b["nn.broadcast"] = [](Case &c, DType d) { c.set({c.t({3}, d)}, {c.t({2, 3}, d)}); };
    b["fill"] = [](Case &c, DType d) { c.set({}, {c.t({2, 3}, d)}, {}, {0.5}); };
    b["nn.matmul"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d), c.t({3, 4}, d)}, {c.t({2, 4}, d)}, {0, 0});
    };
    // Every operand and both outputs (the column sums, format 21).
    b["nn.matmul_epilogue"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d), c.t({3, 4}, d), c.t({4}, d), c.t({2, 4}, d), c.t({2, 4}, d)},
            {c.t({2, 4}, d), c.t({4}, d)}, {0, 0, 1, 1, 1});
    };
    b["nn.layer_norm"] = [](Case &c, DType d) {
      c.set({c.t({2, 4}, d), c.f({4}), c.f({4})}, {c.t({2, 4}, d)}, {1}, {1e-5});
    };
    b["nn.layer_norm_grad"] = [](Case &c, DType d) {
      c.set({c.t({2, 4}, d), c.t({2, 4}, d), c.f({4})}, {c.t({2, 4}, d), c.f({4}), c.f({4})},
            {1}, {1e-5});
    };
    for (const char *op : {"nn.softmax", "nn.log_softmax"})
      b[op] = [](Case &c, DType d) { c.set({c.t({2, 4}, d)}, {c.t({2, 4}, d)}, {1}); };
    for (const char *op : {"nn.softmax_grad", "nn.log_softmax_grad"})
      b[op] = [](Case &c, DType d) {
        c.set({c.t({2, 4}, d), c.t({2, 4}, d)}, {c.t({2, 4}, d)}, {1});
      };
    for (const char *op : {"nn.reduce_sum", "nn.reduce_mean", "nn.reduce_max"})
      b[op] = [](Case &c, DType d) { c.set({c.t({2, 4}, d)}, {c.t({2}, d)}, {1}); };
    b["nn.argmax"] = [](Case &c, DType d) { c.set({c.f({2, 4})}, {c.t({2}, d)}, {1}); };
    b["nn.transpose"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d)}, {c.t({3, 2}, d)}, {1, 0});
    };
    b["nn.slice"] = [](Case &c, DType d) {
      c.set({c.t({4, 6}, d)}, {c.t({2, 3}, d)}, {0, 0, 2, 2});
    };
    b["nn.slice_grad"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d)}, {c.t({4, 6}, d)}, {0, 0, 2, 2});
    };
    b["nn.concat"] = [](Case &c, DType d) {
      c.set({c.t({2, 3}, d), c.t({2, 2}, d)}, {c.t({2, 5}, d)}, {1});
    };
    b["nn.dropout"] = [](Case &c, DType d) {
      c.set({c.t({2, 4}, d)}, {c.t({2, 4}, d), c.t({2, 4}, plan::BOOL)}, {0}, {0.1});
    };
    b["nn.dropout_grad"] = [](Case &c, DType d) {
      c.set({c.t({2, 4}, d), c.t({2, 4}, plan::BOOL)}, {c.t({2, 4}, d)}, {}, {0.1});
    };
    // Attention: query [2, 3, 4], key [2, 5, 4], value [2, 5, 6], a bias
    // over the keys (f32, as the stats); ints scale_divides, causal,
    // rng_stream, bshd; scale, ratio. The gradient's operands are bshd:
    // [T, H, E] with 2 heads.
    b["nn.attention"] = [](Case &c, DType d) {
      c.set({c.t({2, 3, 4}, d), c.t({2, 5, 4}, d), c.t({2, 5, 6}, d), c.f({2, 1, 5})},
            {c.t({2, 3, 6}, d), c.f({2, 3, 2})}, {0, 1, 0, 0}, {0.5, 0.1});
    };
    b["nn.attention_grad"] = [](Case &c, DType d) {
      c.set({c.t({3, 2, 6}, d), c.t({3, 2, 4}, d), c.t({5, 2, 4}, d), c.t({5, 2, 6}, d),
             c.f({2, 3, 2})},
            {c.t({3, 2, 4}, d), c.t({5, 2, 4}, d), c.t({5, 2, 6}, d)}, {1, 0, 3, 1}, {2.0, 0.0});
    };
    // Convolution and pooling over [1, 2, 5, 5] / [1, 2, 4, 4] images.
    const std::vector<int64_t> conv = {1, 1, 0, 0, 0, 0, 1, 1, 1};
    b["nn.conv"] = [conv](Case &c, DType d) {
      c.set({c.t({1, 2, 5, 5}, d), c.t({3, 2, 3, 3}, d)}, {c.t({1, 3, 3, 3}, d)}, conv);
    };
    b["nn.conv_input_grad"] = [conv](Case &c, DType d) {
      c.set({c.t({1, 3, 3, 3}, d), c.t({3, 2, 3, 3}, d)}, {c.t({1, 2, 5, 5}, d)}, conv);
    };
    b["nn.conv_weight_grad"] = [conv](Case &c, DType d) {
      c.set({c.t({1, 2, 5, 5}, d), c.t({1, 3, 3, 3}, d)}, {c.t({3, 2, 3, 3}, d)}, conv);
    };
    const std::vector<int64_t> maxPool = {2, 2, 2, 2, 0, 0, 0, 0, 1, 1};
    const std::vector<int64_t> avgPool = {2, 2, 2, 2, 0, 0, 0, 0, 0};
    b["nn.max_pool"] = [maxPool](Case &c, DType d) {
      c.set({c.t({1, 2, 4, 4}, d)}, {c.t({1, 2, 2, 2}, d)}, maxPool);
    };
    b["nn.max_pool_grad"] = [maxPool](Case &c, DType d) {
      c.set({c.t({1, 2, 4, 4}, d), c.t({1, 2, 2, 2}, d)}, {c.t({1, 2, 4, 4}, d)}, maxPool);
    };
    b["nn.avg_pool"] = [avgPool](Case &c, DType d) {
      c.set({c.t({1, 2, 4, 4}, d)}, {c.t({1, 2, 2, 2}, d)}, avgPool);
    };
    b["nn.avg_pool_grad"] = [avgPool](Case &c, DType d) {
      c.set({c.t({1, 2, 2, 2}, d)}, {c.t({1, 2, 4, 4}, d)}, avgPool);
    };
    // Losses: [4, 5] logits, 4 labels, the mean.
    for (const char *op : {"nn.cross_entropy", "nn.nll_loss"})
      b[op] = [](Case &c, DType d) {
        c.set({c.t({4, 5}, d), c.t({4}, plan::I64)}, {c.t({}, d)}, {1, 0, 0});
      };
    b["nn.nll_loss_grad"] = [](Case &c, DType d) {
      c.set({c.t({4, 5}, d), c.t({4}, plan::I64), c.t({}, d)}, {c.t({4, 5}, d)}, {1, 0, 0});
    };
    // Its logits and gradient in any float type, the loss's gradient f32.
    b["nn.cross_entropy_grad"] = [](Case &c, DType d) {
      c.set({c.t({4, 5}, d), c.t({4}, plan::I64), c.f({})}, {c.t({4, 5}, d)}, {1, 0, 0});
    };
    b["nn.gather"] = [](Case &c, DType d) {
      c.set({c.t({10, 4}, d), c.t({3}, plan::I64)}, {c.t({3, 4}, d)}, {0});
    };
    b["nn.gather_grad"] = [](Case &c, DType d) {
      c.set({c.t({3, 4}, d), c.t({3}, plan::I64)}, {c.t({10, 4}, d)}, {0});
    };
    b["nn.vocab_ce_sums"] = [](Case &c, DType d) {
      c.set({c.f({4, 5}), c.t({4}, plan::I64), c.f({4})}, {c.t({8}, d)}, {1});
    };
    b["nn.vocab_ce_sums_grad"] = [](Case &c, DType d) {
      c.set({c.f({4, 5}), c.t({4}, plan::I64), c.f({4}), c.f({8})}, {c.t({4, 5}, d)}, {1});
    };
    b["nn.vocab_ce_loss"] = [](Case &c, DType d) {
      c.set({c.f({2, 4}), c.f({4}), c.t({4}, plan::I64)}, {c.t({}, d)}, {5, 1, 0, 0});
    };
    b["nn.vocab_ce_loss_grad"] = [](Case &c, DType d) {
      c.set({c.f({2, 4}), c.t({4}, plan::I64), c.f({})}, {c.t({2, 4}, d)}, {5, 1, 0, 0});
    };
    // The tiers: a host buffer and its arena working copy.
    b["tier.fetch"] = [](Case &c, DType d) {
      Tensor *home = c.t({4}, d);
      home->tier = plan::HOST;
      c.set({home}, {c.t({4}, d)}, {0});
    };
    b["tier.store"] = [](Case &c, DType d) {
      Tensor *home = c.t({4}, d);
      home->tier = plan::HOST;
      c.set({c.t({4}, d)}, {home}, {0});
    };
    // Optimizers: [4] parameters, the lr and the step.
    b["train.adam"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4}), *v = c.f({4});
      c.set({p, c.f({4}), m, v, c.scalar(), c.scalar(plan::I64)}, {c.over(p), c.over(m), c.over(v)},
            {1, 1}, {adam[0], adam[1], adam[2], adam[3]});
    };
    // Two parameters (the first of type d), an f32 and a bf16 gradient, and
    // the factor.
    b["train.fused_adam"] = [adam](Case &c, DType d) {
      // The second parameter with its bf16 working copy (copy_of 1).
      Tensor *p = c.t({4}, d), *q = c.f({3}), *m = c.f({4}), *n = c.f({3}), *v = c.f({4}),
             *w = c.f({3}), *copy = c.t({3}, plan::BF16);
      c.set({p, q, c.f({4}), c.t({3}, plan::BF16), m, n, v, w, c.scalar(), c.scalar(plan::I64),
             c.scalar(), copy},
            {c.over(p), c.over(q), c.over(m), c.over(n), c.over(v), c.over(w), c.over(copy)},
            {1, 1, 1, 1}, {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.clip_coef"] = [](Case &c, DType d) {
      c.set({c.f({4}), c.t({3}, plan::BF16)}, {c.t({}, d), c.scalar()}, {0, 0}, {1.0});
    };
    b["train.onebit_adam"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4}), *v = c.f({4});
      c.set({p, c.f({4}), m, v, c.scalar(), c.scalar(plan::I64)}, {c.over(p), c.over(m), c.over(v)},
            {2, 0}, {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.lamb"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4}), *v = c.f({4});
      c.set({p, c.f({4}), m, v, c.scalar(), c.scalar(plan::I64), c.f({2})},
            {c.over(p), c.over(m), c.over(v)}, {1}, {adam[0], adam[1], 1e-6, 0.01, 10, 0.01});
    };
    b["train.lamb_stats"] = [adam](Case &c, DType d) {
      c.set({c.f({4}), c.f({4}), c.f({4}), c.f({4})}, {c.t({2}, d)}, {},
            {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.fused_lamb_stats"] = [adam](Case &c, DType d) {
      // Two tensors, one gradient in bf16, with a clip's factor.
      c.set({c.f({4}), c.f({3}), c.f({4}), c.t({3}, plan::BF16), c.f({4}), c.f({3}), c.f({4}),
             c.f({3}), c.scalar()},
            {c.t({2}, d), c.f({2})}, {1}, {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.fused_lamb"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *q = c.f({3}), *m = c.f({4}), *n = c.f({3}), *v = c.f({4}),
             *w = c.f({3});
      c.set({p, q, c.f({4}), c.t({3}, plan::BF16), m, n, v, w, c.f({2}), c.f({2}), c.scalar(),
             c.scalar(plan::I64), c.scalar()},
            {c.over(p), c.over(q), c.over(m), c.over(n), c.over(v), c.over(w)}, {1, 1},
            {adam[0], adam[1], 1e-6, 0.01, 10, 0.01});
    };
    b["train.lion"] = [](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4});
      c.set({p, c.f({4}), m, c.scalar()}, {c.over(p), c.over(m)}, {}, {0.9, 0.99, 0.01});
    };
    b["train.adagrad"] = [](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *s = c.f({4});
      c.set({p, c.f({4}), s, c.scalar(), c.scalar(plan::I64)}, {c.over(p), c.over(s)}, {},
            {1e-10, 0, 0});
    };
    b["train.sgd"] = [](Case &c, DType d) {
      Tensor *p = c.t({4}, d);
      c.set({p, c.f({4}), c.scalar()}, {c.over(p)}, {0}, {0, 0, 0});
    };
    b["train.clip_grad_norm"] = [](Case &c, DType d) {
      Tensor *g = c.t({4}, d);
      c.set({g}, {c.over(g), c.scalar()}, {}, {1.0});
    };
    b["train.lr_schedule"] = [](Case &c, DType d) {
      c.set({c.scalar(plan::I64)}, {c.t({}, d)});
    };
    b["train.sum_sq"] = [](Case &c, DType d) { c.set({c.f({4}), c.f({3})}, {c.t({}, d)}); };
    b["train.assign"] = [](Case &c, DType d) {
      Tensor *out = c.t({4}, d);
      out->role = plan::FROZEN;
      c.set({c.t({4}, d)}, {out});
    };
    b["train.reset_at"] = [](Case &c, DType d) {
      c.set({c.t({4}, d), c.scalar(plan::I64)}, {c.t({4}, d)}, {1});
    };
    // The 1-bit optimizers: 16 values, 2 ranks' signs.
    b["train.onebit_compress"] = [](Case &c, DType d) {
      Tensor *err = c.f({16});
      c.set({c.f({16}), err}, {c.t({2}, d), c.scalar(), c.over(err)});
    };
    b["train.onebit_server"] = [](Case &c, DType d) {
      Tensor *err = c.f({16});
      c.set({c.t({4}, plan::U8), c.f({2}), err}, {c.t({2}, d), c.scalar(), c.over(err)});
    };
    b["train.onebit_expand"] = [](Case &c, DType d) {
      c.set({c.t({4}, plan::U8), c.f({2})}, {c.t({32}, d)});
    };
    b["train.onebit_lamb"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4}), *v = c.f({4}), *fresh = c.f({4});
      Tensor *coeff = c.scalar(), *factor = c.scalar();
      c.set({p, c.f({4}), m, v, fresh, coeff, factor, c.scalar(), c.scalar(),
             c.scalar(plan::I64)},
            {c.over(p), c.over(m), c.over(v), c.over(fresh), c.over(coeff), c.over(factor)},
            {0, 0, 0, 0},
            {adam[0], adam[1], adam[2], adam[3], 10, 0.01, 0.9, 4, 0.5, 0.1});
    };
    b["train.onebit_lamb_stats"] = [adam](Case &c, DType d) {
      c.set({c.f({4}), c.f({4}), c.f({4}), c.f({4}), c.f({4}), c.scalar(plan::I64)},
            {c.t({3}, d)}, {0, 0, 0, 1}, {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.onebit_lamb_scaling"] = [](Case &c, DType d) {
      c.set({c.f({4}), c.scalar(), c.scalar(plan::I64)}, {c.t({}, d)}, {1});
    };
    b["train.zero_one_adam"] = [adam](Case &c, DType d) {
      Tensor *p = c.t({4}, d), *m = c.f({4}), *v = c.f({4}), *acc = c.f({4});
      Tensor *lrs = c.scalar();
      c.set({p, c.f({4}), m, v, acc, lrs, c.scalar(), c.scalar(plan::I64)},
            {c.over(p), c.over(m), c.over(v), c.over(acc), c.over(lrs)}, {100, 16, 0, 16, 0},
            {adam[0], adam[1], adam[2], adam[3]});
    };
    b["train.zero_one_payload"] = [](Case &c, DType d) {
      c.set({c.f({4}), c.f({4}), c.f({4}), c.f({4}), c.f({4}), c.scalar(), c.scalar(plan::I64)},
            {c.t({4}, d)}, {100, 16, 0, 16, 0}, {0.9, 1e-8, 0});
    };
    // Collectives over a group of 2 (bound only: nothing is sent).
    b["dist.all_reduce"] = [](Case &c, DType d) { c.set({c.t({4}, d)}, {c.t({4}, d)}, {2, 0, 0}); };
    b["dist.reduce_scatter"] = [](Case &c, DType d) {
      c.set({c.t({4}, d)}, {c.t({2}, d)}, {2, 0, 0});
    };
    b["dist.all_gather"] = [](Case &c, DType d) { c.set({c.t({2}, d)}, {c.t({4}, d)}, {2, 0}); };
    b["dist.all_to_all"] = [](Case &c, DType d) { c.set({c.t({4}, d)}, {c.t({4}, d)}, {2, 0}); };
    b["dist.chunk"] = [](Case &c, DType d) { c.set({c.t({4}, d)}, {c.t({2}, d)}, {2}); };
    b["dist.send"] = [](Case &c, DType d) { c.set({c.t({4}, d)}, {}, {2, 1, 0, 0}); };
    b["dist.recv"] = [](Case &c, DType d) { c.set({}, {c.t({4}, d)}, {2, 1, 0, 0}); };
    b["dist.wait"] = [](Case &c, DType) { c.set({}, {}, {0}); };
    b["load_batch"] = [](Case &c, DType d) {
      Tensor *in = c.t({4}, d);
      in->role = plan::INPUT;
      c.set({}, {in}, {0});
    };
    return b;
  }();
  return table;
}

/// The case of `op` on `d`, or null when it has no builder.
std::unique_ptr<Case> build(const std::string &op, DType d) {
  auto it = builders().find(op);
  if (it == builders().end())
    return nullptr;
  auto c = std::make_unique<Case>();
  c->instr.op = op;
  c->instr.opId = instructionId(op);
  it->second(*c, d);
  return c;
}

/// The data operand's dtype of a built case (what the layout speaks of).
const Tensor *dataOperand(const Instr &i) {
  return !i.out.empty() ? i.out[0] : !i.in.empty() ? i.in[0] : nullptr;
}

/// The CPU binder's error, or "" when it binds.
std::string cpuError(Instr &i) {
  try {
    bindInstr(i, i.op);
  } catch (const PlanError &e) {
    return e.what();
  }
  return std::string();
}

std::vector<DType> listed(std::string_view op) {
  std::vector<DType> ds;
  for (DType d : kAllDTypes)
    if (instructionTakes(op, plan::DType_Name(d)))
      ds.push_back(d);
  return ds;
}

TEST(KernelCoverage, EveryInstructionHasACase) {
  std::vector<std::string> missing;
  for (std::string_view op : kPlanInstructions)
    if (!builders().count(std::string(op)))
      missing.emplace_back(op);
  EXPECT_THAT(missing, ::testing::IsEmpty()) << "instructions this test builds no case of";
  EXPECT_EQ(builders().size(), kPlanInstructions.size()) << "cases of no instruction";
}

TEST(KernelCoverage, TheCpuBindsEveryListedDType) {
  std::vector<std::string> refused;
  size_t pairs = 0;
  for (std::string_view name : kPlanInstructions) {
    const std::string op(name);
    const std::vector<DType> ds = listed(op);
    if (ds.empty()) { // no data operand (dist.wait)
      EXPECT_EQ(instructionLayout(op)->dtypes, "") << op;
      std::unique_ptr<Case> c = build(op, plan::F32);
      ASSERT_TRUE(c) << op;
      EXPECT_EQ(cpuError(c->instr), "") << op;
      continue;
    }
    for (DType d : ds) {
      std::unique_ptr<Case> c = build(op, d);
      ASSERT_TRUE(c) << op;
      ASSERT_TRUE(dataOperand(c->instr)) << op;
      EXPECT_EQ(dataOperand(c->instr)->dtype, d) << op << ": the case's data operand";
      ++pairs;
      if (std::string e = cpuError(c->instr); !e.empty())
        refused.push_back(e + " [" + plan::DType_Name(d) + "]");
    }
  }
  EXPECT_THAT(refused, ::testing::IsEmpty())
      << "(instruction, dtype) pairs plan/Instructions.h lists that the CPU refuses";
  EXPECT_GT(pairs, kPlanInstructions.size());
}

TEST(KernelCoverage, TheCpuRefusesEveryDTypeNotListed) {
  // The layout is exactly the CPU's kernels, so emit-plan refuses what dsrt
  // would. The tiers' binder moves bytes of any dtype, but a plan keeps
  // only float32 in a tier (the executor checks it when it loads).
  std::vector<std::string> bound;
  for (std::string_view name : kPlanInstructions) {
    const std::string op(name);
    if (op == "tier.fetch" || op == "tier.store" || listed(op).empty())
      continue;
    for (DType d : kAllDTypes) {
      if (instructionTakes(op, plan::DType_Name(d)))
        continue;
      std::unique_ptr<Case> c = build(op, d);
      if (cpuError(c->instr).empty())
        bound.push_back(op + " on " + plan::DType_Name(d));
    }
  }
  EXPECT_THAT(bound, ::testing::IsEmpty())
      << "kernels the CPU has that plan/Instructions.h does not list (add the dtype there)";
}

TEST(KernelCoverage, TheCudaBackendBindsOrRefusesByName) {
  std::unique_ptr<Case> probe = build("nn.add", plan::F32);
  ASSERT_TRUE(cpuError(probe->instr).empty());
  if (std::string r = cudaKernelRefusal(probe->instr); r.find("built without CUDA") != r.npos)
    GTEST_SKIP() << r;
  std::vector<std::string> refusals, unnamed;
  size_t bound = 0;
  for (std::string_view name : kPlanInstructions) {
    const std::string op(name);
    std::vector<DType> ds = listed(op);
    if (ds.empty())
      ds.push_back(plan::F32);
    for (DType d : ds) {
      std::unique_ptr<Case> c = build(op, d);
      ASSERT_TRUE(cpuError(c->instr).empty()) << op;
      std::string r = cudaKernelRefusal(c->instr);
      if (r.empty()) {
        ++bound;
        continue;
      }
      (r.find(op) == std::string::npos ? unnamed : refusals)
          .push_back(r + " [" + plan::DType_Name(d) + "]");
    }
  }
  EXPECT_THAT(unnamed, ::testing::IsEmpty()) << "CUDA refusals that do not name the instruction";
  EXPECT_GT(bound, 0u);
  std::cout << "CUDA backend: " << bound << " (instruction, dtype) pairs bind, "
            << refusals.size() << " are refused by name (those plans run on the CPU under "
            << "--device auto):\n";
  for (const std::string &r : refusals)
    std::cout << "  " << r << "\n";
}

} // namespace
} // namespace dsrt::test
