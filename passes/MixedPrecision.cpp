//===- MixedPrecision.cpp - bf16/fp16 compute over fp32 master weights ---===//
//
// Runs on the forward graph before autodiff (and before pipeline-split), so
// that everything after it sees ordinary typed IR:
//   * parameters stay fp32 `train.param` arguments (the master weights the
//     optimizer updates); an op that computes in the low precision reads a
//     low-precision copy, one `nn.cast` per parameter, placed at the top of
//     the function; gradient-accumulation hoists it out of the micro-batch
//     body, so it runs once per optimizer step, after the update;
//   * the gradient of a cast is a cast back (CastOp's gradient rule), so the
//     parameters' gradients come out of autodiff in fp32 and are accumulated
//     across micro-batches in fp32 (DeepSpeed's BF16_Optimizer default);
//   * ops are put in one of three classes (the table in policyOf):
//       low:    matmul, elementwise arithmetic, GELU / ReLU / tanh / erf /
//               sigmoid, dropout, softmax, layer_norm and the fused
//               attention: their float operands are cast to the low type
//               and they produce it. softmax and layer_norm keep fp32
//               statistics inside their kernels; layer_norm's scale and
//               bias stay fp32 (no copy, and their gradients are summed in
//               fp32 by the kernel); attention computes its scores in
//               fp32 and keeps its bias and row stats fp32;
//       fp32:   the losses, log_softmax, exp / log / sqrt / rsqrt /
//               reciprocal / pow, the reductions and the embedding gather:
//               their float operands are cast to fp32 and so is what they
//               produce (the loss, and every reduction that feeds it,
//               accumulates in fp32; the embedding reads the fp32 table, as
//               under autocast, so its scatter-add gradient sums in fp32 and
//               only the gathered rows are cast);
//       follow: layout ops (transpose, reshape, slice, concat, broadcast)
//               and select / cmp compute in the type of their inputs: low
//               if any float input is low, fp32 otherwise;
//     anything else (casts already in the model, train.* and dist.* ops,
//     the function's results) reads its operands in their original types.
//   * float constants feeding a low op become low constants (converted here,
//     round to nearest even), not casts.
// Compared with PyTorch's autocast: CUDA's fp16/bf16 list has the matmuls
// and convolutions (elementwise ops run in their inputs' type), its fp32
// list has softmax, log_softmax, layer_norm, the losses, exp/log/pow and
// the reductions; CPU bf16 autocast only lowers matmul/conv and keeps
// everything else fp32. dsc lowers elementwise, dropout and GELU too (the
// activations they produce are half the bytes, and DeepSpeed's bf16 runs
// the whole module in bf16), but keeps fp32 statistics where autocast
// keeps fp32 ops: softmax and layer_norm compute them in fp32 inside the
// kernel, the losses and reductions in fp32 outright.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dsc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

enum class Policy { Low, Fp32, Follow, Keep };

Policy policyOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, Policy>(op)
      .Case<nn::MatmulOp, nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::MaxOp, nn::MinOp,
            nn::NegOp, nn::AbsOp, nn::TanhOp, nn::ErfOp, nn::ReluOp, nn::SigmoidOp, nn::GeluOp,
            nn::DropoutOp, nn::SoftmaxOp, nn::LayerNormOp, nn::AttentionOp>(
          [](Operation *) { return Policy::Low; })
      .Case<nn::GatherOp, nn::CrossEntropyOp, nn::NllLossOp, nn::LogSoftmaxOp, nn::ExpOp, nn::LogOp,
            nn::SqrtOp, nn::RsqrtOp, nn::ReciprocalOp, nn::PowOp, nn::ReduceSumOp,
            nn::ReduceMeanOp, nn::ReduceMaxOp>([](Operation *) { return Policy::Fp32; })
      .Case<nn::TransposeOp, nn::ReshapeOp, nn::SliceOp, nn::ConcatOp, nn::BroadcastOp,
            nn::SelectOp, nn::CmpOp, nn::SinOp, nn::CosOp>(
          [](Operation *) { return Policy::Follow; }) // sin, cos: on autocast's lists neither
      // Tensor and sequence parallelism's collectives move what they are
      // given, as Megatron's do: a bf16 activation is all-reduced,
      // gathered or reduce-scattered in bf16 (half the bytes of fp32).
      .Case<dist::TpCopyOp, dist::TpReduceOp, dist::SpGatherOp, dist::SpScatterOp>(
          [](Operation *) { return Policy::Follow; })

      .Default([](Operation *) { return Policy::Keep; });
}

bool isFloatTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && isa<FloatType>(r.getElementType());
}

Type withElement(Type t, Type element) {
  return cast<RankedTensorType>(t).clone(element);
}

class Lowering {
public:
  Lowering(func::FuncOp fn, FloatType low, int64_t &casts, int64_t &lowered)
      : fn_(fn), low_(low), f32_(Float32Type::get(fn.getContext())), casts_(casts),
        lowered_(lowered) {}

  LogicalResult run() {
    // The ops as they are now: retyping changes nothing in the walk order.
    SmallVector<Operation *> ops;
    for (Operation &op : fn_.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return failure();
    // fp32 constants that only low ops read are gone now.
    for (Operation *op : ops)
      if (isa<arith::ConstantOp>(op) && op->use_empty())
        op->erase();
    return success();
  }

private:
  LogicalResult visit(Operation *op) {
    if (isa<arith::ConstantOp>(op))
      return success(); // converted where a low op reads it
    Policy policy = policyOf(op);
    if (policy == Policy::Keep) {
      // The op expects its operands as the model had them.
      for (OpOperand &use : op->getOpOperands())
        if (auto it = original_.find(use.get()); it != original_.end())
          use.set(valueAs(use.get(), getElementTypeOrSelf(it->second), op));
      return success();
    }
    Type target = f32_;
    if (policy == Policy::Low) {
      target = low_;
    } else if (policy == Policy::Follow) {
      for (Value v : op->getOperands())
        if (isFloatTensor(v.getType()) && !v.getDefiningOp<arith::ConstantOp>() &&
            getElementTypeOrSelf(v.getType()) == low_)
          target = low_;
    }
    // Only the float operands that carry the op's value: layer_norm's
    // scale and bias stay fp32 (statistics and their gradients in fp32),
    // and so do attention's bias (added to fp32 scores) and its stats.
    auto ln = dyn_cast<nn::LayerNormOp>(op);
    auto attention = dyn_cast<nn::AttentionOp>(op);
    for (OpOperand &use : op->getOpOperands()) {
      if (!isFloatTensor(use.get().getType()))
        continue;
      if (ln && use.getOperandNumber() != 0)
        continue;
      Type want = attention && use.getOperandNumber() == 3 ? f32_ : target;
      if (getElementTypeOrSelf(use.get().getType()) != want)
        use.set(valueAs(use.get(), want, op));
    }
    for (Value r : op->getResults()) {
      if (attention && r == attention.getStats())
        continue;
      if (!isFloatTensor(r.getType()) || getElementTypeOrSelf(r.getType()) == target)
        continue;
      original_.try_emplace(r, r.getType());
      r.setType(withElement(r.getType(), target));
    }
    if (target == low_)
      ++lowered_;
    return success();
  }

  /// `v` as element type `element`: itself, a converted constant, or one
  /// cast placed right after v's definition (cached, so every use shares it).
  Value valueAs(Value v, Type element, Operation *user) {
    if (getElementTypeOrSelf(v.getType()) == element)
      return v;
    auto key = std::make_pair(v, element);
    if (auto it = converted_.find(key); it != converted_.end())
      return it->second;
    Type type = withElement(v.getType(), element);
    Value result;
    if (auto c = v.getDefiningOp<arith::ConstantOp>()) {
      if (auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue())) {
        OpBuilder b(c);
        b.setInsertionPointAfter(c);
        auto target = cast<FloatType>(element);
        auto values = dense.mapValues(target, [&](const APFloat &x) {
          APFloat y = x;
          bool lost = false;
          y.convert(target.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
          return y.bitcastToAPInt();
        });
        result = arith::ConstantOp::create(b, c.getLoc(), cast<TypedAttr>(values));
      }
    }
    if (!result) {
      OpBuilder b(fn_.getContext());
      // Casts of arguments (the parameters' copies) at the top, in the
      // order they are first needed; others right after their value.
      if (isa<BlockArgument>(v)) {
        if (lastArgCast_)
          b.setInsertionPointAfter(lastArgCast_);
        else
          b.setInsertionPointToStart(&fn_.getBody().front());
      } else {
        b.setInsertionPointAfter(v.getDefiningOp());
      }
      auto castOp = nn::CastOp::create(b, user->getLoc(), type, v);
      if (isa<BlockArgument>(v))
        lastArgCast_ = castOp;
      result = castOp;
      ++casts_;
    }
    converted_[key] = result;
    return result;
  }

  func::FuncOp fn_;
  FloatType low_, f32_;
  int64_t &casts_, &lowered_;
  llvm::DenseMap<std::pair<Value, Type>, Value> converted_;
  llvm::DenseMap<Value, Type> original_; // results retyped here: their old type
  Operation *lastArgCast_ = nullptr;
};

struct MixedPrecision : impl::MixedPrecisionBase<MixedPrecision> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (dtype == FloatKind::FP32) {
      module.emitError("mixed-precision: dtype must be bf16 or fp16, not fp32");
      return signalPassFailure();
    }
    FloatType low = floatKindType(ctx, dtype);
    int64_t casts = 0, lowered = 0;
    for (auto fn : module.getOps<func::FuncOp>()) {
      bool isStep = false;
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        isStep |= bool(fn.getResultAttr(i, train::TrainDialect::kLoss));
      if (!isStep && !fn->hasAttr("dist.stage"))
        continue;
      if (fn.getBody().getBlocks().size() != 1) {
        fn.emitError("mixed-precision: expects a function of one block");
        return signalPassFailure();
      }
      for (Block::iterator it = fn.getBody().front().begin(); it != fn.getBody().front().end();
           ++it)
        if (isa<train::AccumulateOp>(&*it)) {
          it->emitError("mixed-precision: runs before gradient-accumulation (on the forward "
                        "graph, before autodiff)");
          return signalPassFailure();
        }
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (fn.getResultAttr(i, train::TrainDialect::kGrad)) {
          fn.emitError("mixed-precision: runs on the forward graph, before autodiff (this "
                       "function already has gradients)");
          return signalPassFailure();
        }
      Lowering lowering(fn, low, casts, lowered);
      if (failed(lowering.run()))
        return signalPassFailure();
      module->setAttr(train::TrainDialect::kPrecision, StringAttr::get(ctx, floatKindName(dtype)));
    }
    numCasts = casts;
    numLowered = lowered;
  }
};

} // namespace
} // namespace dsc
