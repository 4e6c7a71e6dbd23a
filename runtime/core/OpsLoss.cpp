//===- OpsLoss.cpp - losses, embeddings, vocabulary-parallel ops -===//
//
// nn.cross_entropy / nn.nll_loss and their gradients, nn.gather(_grad)
// (whole tables and vocabulary-parallel parts), the vocabulary-parallel
// cross-entropy (their attributes: plan/Instructions.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/core/OpsInternal.h"

namespace dsrt::ops {

void addLossOps(OpTable &t) {
    // Losses: input [N, C, inner...], labels [N, inner...].
    auto lossGeometry = [](Instr &i, const Check &c, const Tensor *input, const Tensor *labels) {
      if (i.ints[0] < 0 || i.ints[0] > 2)
        c.fail("unknown reduction " + std::to_string(i.ints[0]));
      c.flag(1, "has_ignore_index");
      if (input->shape.rank < 2)
        c.fail("input must be [N, C, ...]");
      c.dtype(labels, plan::I64, "labels");
      i.g[0] = input->shape.dims[0];
      i.g[1] = input->shape.dims[1];
      i.g[2] = prod(input->shape, 2, input->shape.rank);
      // The kernels divide by C; a loss over no classes means nothing.
      if (i.g[1] < 1)
        c.fail("input " + Check::shape(input) + " has no classes (dimension 1 is 0)");
      if (labels->numel != i.g[0] * i.g[2])
        c.fail("labels " + Check::shape(labels) + " do not match input " + Check::shape(input));
    };
    auto lossForward = [&](const char *name, bool logits) {
      t[name] = {[lossGeometry, logits](Instr &i, const Check &c) {
        c.arity(2, 1);
        c.layout();
        // From format 19 the cross-entropy reads 16-bit logits (a mixed
        // precision head's, its widening folded in); the loss is float.
        if (logits)
          (void)c.sameFloat({i.in[0]});
        else
          c.floats({i.in[0]});
        c.floats({i.out[0]});
        lossGeometry(i, c, i.in[0], i.in[1]);
        int64_t expected = i.ints[0] == 0 ? i.g[0] * i.g[2] : 1;
        if (i.out[0]->numel != expected)
          c.fail("loss must have " + std::to_string(expected) + " elements");
        i.run = logits ? byFloat(i.in[0]->dtype, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &ctx) {
            noteBad(ctx,
                    cpu::crossEntropy(as<const T>(i.in[0]), i.in[1]->i64(),
                                      i.out[0]->f32(), i.g[0], i.g[1], i.g[2], (int)i.ints[0],
                                      i.ints[1] != 0, i.ints[2]),
                    i);
          };
        })
                       : KernelFn([](const Instr &i, Context &ctx) {
                           noteBad(ctx,
                                   cpu::nllLoss(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(),
                                                i.g[0], i.g[1], i.g[2], (int)i.ints[0],
                                                i.ints[1] != 0, i.ints[2]),
                                   i);
                         });
      }};
    };
    lossForward("nn.cross_entropy", true);
    lossForward("nn.nll_loss", false);
    auto lossBackward = [&](const char *name, bool logits) {
      t[name] = {[lossGeometry, logits](Instr &i, const Check &c) {
        c.arity(3, 1);
        c.layout();
        // The cross-entropy's gradient in its logits' type (16-bit from
        // format 19: rounded once, the narrowing cast folded in).
        if (logits)
          (void)c.sameFloat({i.in[0], i.out[0]});
        else
          c.floats({i.in[0], i.out[0]});
        c.floats({i.in[2]});
        c.sameShape(i.in[0], i.out[0]);
        lossGeometry(i, c, i.in[0], i.in[1]);
        int64_t expected = i.ints[0] == 0 ? i.g[0] * i.g[2] : 1;
        if (i.in[2]->numel != expected)
          c.fail("loss gradient must have " + std::to_string(expected) + " elements");
        // Bad labels are counted once, by the forward op.
        i.run = logits ? byFloat(i.in[0]->dtype, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            cpu::crossEntropyGrad(as<const T>(i.in[0]), i.in[1]->i64(), i.in[2]->f32(),
                                  as<T>(i.out[0]), i.g[0],
                                  i.g[1], i.g[2], (int)i.ints[0], i.ints[1] != 0, i.ints[2]);
          };
        })
                       : KernelFn([](const Instr &i, Context &) {
                           cpu::nllLossGrad(i.in[1]->i64(), i.in[2]->f32(), i.out[0]->f32(),
                                            i.g[0], i.g[1], i.g[2], (int)i.ints[0],
                                            i.ints[1] != 0, i.ints[2]);
                         });
      }};
    };
    lossBackward("nn.cross_entropy_grad", true);
    lossBackward("nn.nll_loss_grad", false);

    // ints: axis, then (a vocabulary-parallel part of the table along axis
    // 0) the number of parts: this part is rows [tp rank * A, + A) of A * parts.
    auto vocabPart = [](Instr &i, const Check &c, const Tensor *table) {
      if (i.ints.size() == 2 && (i.ints[0] != 0 || i.ints[1] < 1 || i.g[0] != 1 ||
                                 c.mul(i.g[1], i.ints[1]) < 1 || table->dtype != plan::F32))
        c.fail("a vocabulary-parallel part is a float32 table split along axis 0 into " +
               std::to_string(i.ints.size() == 2 ? i.ints[1] : 0) + " parts");
    };
    t["nn.gather"] = {[vocabPart](Instr &i, const Check &c) {
      c.arity(2, 1);
      // A layout op moves values: an int64 table too (a row of a one-hot
      // router's ids), not differentiated.
      const bool ints = i.in[0]->dtype == plan::I64;
      if (ints)
        c.dtype(i.out[0], plan::I64, "result");
      else
        c.floats({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::I64, "indices");
      c.minRank(i.in[0], 1, "data");
      c.layout();
      c.axis(i.ints[0], i.in[0]);
      splitAround(i, i.in[0], i.ints[0]);
      vocabPart(i, c, i.in[0]);
      i.g[3] = i.in[1]->numel;
      if (i.out[0]->numel != c.mul(c.mul(i.g[0], i.g[3]), i.g[2]))
        c.fail("result " + Check::shape(i.out[0]) + " is not the gathered shape");
      if (i.ints.size() == 2) {
        i.run = [](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::gatherPart(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[1],
                                  i.g[2], i.g[3], ctx.ranks[2] * i.g[1], i.g[1] * i.ints[1]),
                  i);
        };
        return;
      }
      // Empty rows: nothing to copy (the kernel divides by the row length),
      // but the indices are still checked.
      if (ints && i.g[2] != 0) {
        i.run = [](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::gather(i.in[0]->i64(), i.in[1]->i64(), i.out[0]->i64(), i.g[0], i.g[1],
                              i.g[2], i.g[3]),
                  i);
        };
        return;
      }
      i.run = i.g[2] == 0 ? countBadIndices : KernelFn([](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::gather(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[0], i.g[1],
                            i.g[2], i.g[3]),
                i);
      });
    }};
    t["nn.gather_grad"] = {[vocabPart](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.floats({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::I64, "indices");
      c.minRank(i.out[0], 1, "data gradient");
      c.layout();
      c.axis(i.ints[0], i.out[0]);
      splitAround(i, i.out[0], i.ints[0]);
      vocabPart(i, c, i.out[0]);
      i.g[3] = i.in[1]->numel;
      if (i.in[0]->numel != c.mul(c.mul(i.g[0], i.g[3]), i.g[2]))
        c.fail("gradient " + Check::shape(i.in[0]) + " is not the gathered shape");
      if (i.ints.size() == 2) {
        if (i.in[0]->dtype != plan::F32)
          c.fail("a vocabulary-parallel part's gradient is float32");
        i.run = [](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::gatherGradPart(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[1],
                                      i.g[2], i.g[3], ctx.ranks[2] * i.g[1],
                                      i.g[1] * i.ints[1]),
                  i);
        };
        return;
      }
      i.run = i.g[2] == 0 ? countBadIndices : KernelFn([](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::gatherGrad(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[0], i.g[1],
                                i.g[2], i.g[3]),
                i);
      });
    }};
    // Vocabulary-parallel cross-entropy (Megatron's): ints [parts] for the
    // sums, [classes, reduction, has_ignore, ignore_index] for the loss.
    auto vocabRows = [](Instr &i, const Check &c, const Tensor *logits) {
      c.dtype(logits, plan::F32, "logits");
      if (logits->shape.rank != 2)
        c.fail("logits must be [N, C], not " + Check::shape(logits));
      i.g[0] = logits->shape.dims[0];
      i.g[1] = logits->shape.dims[1];
      if (i.g[1] < 1)
        c.fail("logits " + Check::shape(logits) + " have no classes");
    };
    auto rowVector = [](const Check &c, const Tensor *t, int64_t n, plan::DType d,
                        const char *what) {
      c.dtype(t, d, what);
      if (t->numel != n)
        c.fail(std::string(what) + " " + Check::shape(t) + " must have " + std::to_string(n) +
               " elements");
    };
    t["nn.vocab_ce_sums"] = {[vocabRows, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      c.layout();
      vocabRows(i, c, i.in[0]);
      rowVector(c, i.in[1], i.g[0], plan::I64, "labels");
      rowVector(c, i.in[2], i.g[0], plan::F32, "max");
      rowVector(c, i.out[0], c.mul(2, i.g[0]), plan::F32, "sums");
      if (i.ints[0] < 1)
        c.fail("parts must be at least 1");
      i.run = [](const Instr &i, Context &ctx) {
        cpu::crossEntropyPartSums(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(), i.g[0],
                                  i.g[1], ctx.ranks[2] * i.g[1], i.out[0]->f32());
      };
    }};
    t["nn.vocab_ce_sums_grad"] = {[vocabRows, rowVector](Instr &i, const Check &c) {
      c.arity(4, 1);
      c.layout();
      vocabRows(i, c, i.in[0]);
      rowVector(c, i.in[1], i.g[0], plan::I64, "labels");
      rowVector(c, i.in[2], i.g[0], plan::F32, "max");
      rowVector(c, i.in[3], c.mul(2, i.g[0]), plan::F32, "sums gradient");
      c.dtype(i.out[0], plan::F32, "logits gradient");
      c.sameShape(i.in[0], i.out[0]);
      i.run = [](const Instr &i, Context &ctx) {
        cpu::crossEntropyPartSumsGrad(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(),
                                      i.in[3]->f32(), i.out[0]->f32(), i.g[0], i.g[1],
                                      ctx.ranks[2] * i.g[1]);
      };
    }};
    auto vocabLoss = [rowVector](Instr &i, const Check &c, const Tensor *sums,
                                 const Tensor *labels) {
      c.layout();
      c.dtype(sums, plan::F32, "sums");
      if (sums->shape.rank != 2 || sums->shape.dims[0] != 2)
        c.fail("sums must be [2, N], not " + Check::shape(sums));
      i.g[0] = sums->shape.dims[1];
      rowVector(c, labels, i.g[0], plan::I64, "labels");
      if (i.ints[0] < 1 || i.ints[1] < 0 || i.ints[1] > 2)
        c.fail("classes must be positive and reduction 0, 1 or 2");
    };
    t["nn.vocab_ce_loss"] = {[vocabLoss, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      vocabLoss(i, c, i.in[0], i.in[2]);
      rowVector(c, i.in[1], i.g[0], plan::F32, "max");
      rowVector(c, i.out[0], i.ints[1] == 0 ? i.g[0] : 1, plan::F32, "loss");
      i.run = [](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::crossEntropyPartLoss(i.in[0]->f32(), i.in[1]->f32(), i.in[2]->i64(),
                                          i.out[0]->f32(), i.g[0], i.ints[0], (int)i.ints[1],
                                          i.ints[2] != 0, i.ints[3]),
                i);
      };
    }};
    t["nn.vocab_ce_loss_grad"] = {[vocabLoss, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      vocabLoss(i, c, i.in[0], i.in[1]);
      rowVector(c, i.in[2], i.ints[1] == 0 ? i.g[0] : 1, plan::F32, "loss gradient");
      c.dtype(i.out[0], plan::F32, "sums gradient");
      c.sameShape(i.in[0], i.out[0]);
      // Bad labels are counted once, by the forward op.
      i.run = [](const Instr &i, Context &) {
        cpu::crossEntropyPartLossGrad(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(),
                                      i.out[0]->f32(), i.g[0], i.ints[0], (int)i.ints[1],
                                      i.ints[2] != 0, i.ints[3]);
      };
    }};
}

} // namespace dsrt::ops
