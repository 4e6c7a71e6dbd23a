//===- CudaBackend.cpp - the program on a CUDA device ---------------------===//
//
// The CUDA backend (runtime/core/Backend.h). The plan is loaded and
// validated as for the CPU (bindInstr: shapes, dtypes, attributes and
// geometry), then every instruction is re-bound here to a kernel of
// runtime/kernels/cuda on the device arena (Tensor::dev). What runs on the device and what on the host:
//  * every tensor computation, the optimizer update and the gradient
//    norm's sum of squares run on the device, in plan order on one stream;
//  * the step counter and the lr are host values (the executor writes the
//    STEP buffer; train.lr_schedule computes the lr from the plan's schedule)
//    copied to the device for the kernels that read them there;
//  * the clipping instruction brings the sum of squares to the host (one
//    8-byte copy, the step's one synchronization inside it), decides
//    clipping, a non-finite norm and fp16's overflow as the CPU does, and
//    scales the gradients on the device;
//  * at the step's end the loss, the norm, the lr and the bad-index
//    counters come back (a few bytes).
// The arena is one cudaMalloc of the planned size; the kernels' scratch
// (the largest any instruction needs), the bad-index counters, the sum of
// squares and the cuBLAS workspace are allocated with it at initialize():
// the step loop allocates nothing. The host copy of the arena is where
// weights are loaded, inputs filled and checkpoints read; whole copies
// move between the two only at those points (pull, the state a restore
// wrote).
//
// Two bind-time fusions run before the binding: the attention softmax's
// scale and mask (FuseSoftmax.cpp) and the casts around a bf16
// cross-entropy (FuseCrossEntropy.cpp); both give the unfused bits.
// dsc's fused attention (nn.attention) is composed from the same kernels
// over the scratch (Attention.cpp).
//
// Not yet on the device (each refused by name, so that `--device auto`
// runs such a plan on the CPU): plans for several ranks (collectives over
// NCCL), fp16 plans, SGD, and log_softmax, nll_loss, broadcast, concat,
// cmp, not, the vocabulary-parallel ops, tensor-parallel dropout, gathers
// along an axis other than 0, losses and softmaxes over an inner
// dimension, casts other than float32 <-> bf16. bf16 plans run: their
// kernels are the float ones templated on the element type (math in float,
// each result rounded once as the CPU rounds) and cuBLAS bf16 GEMMs with
// float accumulation.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DeviceState.h"
#include "runtime/backends/cuda/Fusions.h"
#include "runtime/core/Backend.h"
#include "runtime/kernels/cuda/Kernels.h"

#include <cstdlib>
#include <memory>

namespace dsrt {

namespace {
using namespace ops;

template <typename T = float> T *dev(const Tensor *t) { return static_cast<T *>(t->dev); }

/// The kernel `make` builds for float32 or bf16 (as ops::byFloat).
template <typename Make> KernelFn byType(plan::DType d, Make &&make) {
  return d == plan::BF16 ? make(Tag<cpu::Bf16>{}) : make(Tag<float>{});
}

/// One op's device binding: sets i.run, adds to the scratch it needs, or
/// throws DeviceUnsupported.
struct Binder {
  Instr &i;
  const std::string &where;
  size_t &scratch;
  std::vector<Instr *> &counting;

  [[noreturn]] void refuse(const std::string &why) const {
    throw DeviceUnsupported(where + ": " + why);
  }
  /// Only float32 operands (the kernel has no 16-bit variant).
  void floats() const {
    for (const std::vector<Tensor *> *list : {&i.in, &i.out})
      for (const Tensor *t : *list)
        if (t->dtype == plan::BF16 || t->dtype == plan::F16)
          refuse(std::string("no CUDA kernel for ") + plan::DType_Name(t->dtype) + " " + i.op +
                 " yet");
  }
  /// float32 or bf16 operands (templated kernels); fp16 is refused.
  plan::DType floatOrBf16() const {
    for (const std::vector<Tensor *> *list : {&i.in, &i.out})
      for (const Tensor *t : *list)
        if (t->dtype == plan::F16)
          refuse(std::string("no CUDA kernels for F16 yet (fp16 plans run on the CPU)"));
    for (const std::vector<Tensor *> *list : {&i.in, &i.out})
      for (const Tensor *t : *list)
        if (t->dtype == plan::BF16)
          return plan::BF16;
    return plan::F32;
  }
  void needs(size_t bytes) const { scratch = std::max(scratch, bytes); }
  void counts() const { counting.push_back(&i); }
};

cpu::Unary unaryOf(const std::string &op) {
  static const std::map<std::string, cpu::Unary> m = {
      {"nn.neg", cpu::Unary::Neg},         {"nn.abs", cpu::Unary::Abs},
      {"nn.exp", cpu::Unary::Exp},         {"nn.log", cpu::Unary::Log},
      {"nn.sqrt", cpu::Unary::Sqrt},       {"nn.rsqrt", cpu::Unary::Rsqrt},
      {"nn.reciprocal", cpu::Unary::Reciprocal}, {"nn.tanh", cpu::Unary::Tanh},
      {"nn.erf", cpu::Unary::Erf},         {"nn.relu", cpu::Unary::Relu},
      {"nn.sigmoid", cpu::Unary::Sigmoid}, {"nn.sin", cpu::Unary::Sin},
      {"nn.cos", cpu::Unary::Cos}};
  return m.at(op);
}
cpu::Binary binaryOf(const std::string &op) {
  static const std::map<std::string, cpu::Binary> m = {
      {"nn.add", cpu::Binary::Add}, {"nn.sub", cpu::Binary::Sub}, {"nn.mul", cpu::Binary::Mul},
      {"nn.div", cpu::Binary::Div}, {"nn.pow", cpu::Binary::Pow}, {"nn.max", cpu::Binary::Max},
      {"nn.min", cpu::Binary::Min}};
  return m.at(op);
}

using BindFn = void (*)(const Binder &);

const std::map<std::string, BindFn> &deviceTable() {
  static const std::map<std::string, BindFn> t = [] {
    std::map<std::string, BindFn> t;
    for (const char *op : {"nn.neg", "nn.abs", "nn.exp", "nn.log", "nn.sqrt", "nn.rsqrt",
                           "nn.reciprocal", "nn.tanh", "nn.erf", "nn.relu", "nn.sigmoid",
                           "nn.sin", "nn.cos"})
      t[op] = [](const Binder &b) {
        b.i.g[3] = int64_t(unaryOf(b.i.op));
        b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            cuda::unary(cpu::Unary(i.g[3]), dev<T>(i.in[0]), dev<T>(i.out[0]), i.out[0]->numel);
          };
        });
      };
    for (const char *op : {"nn.add", "nn.sub", "nn.mul", "nn.div", "nn.pow", "nn.max", "nn.min"})
      t[op] = [](const Binder &b) {
        // The CPU binding keeps nothing in g for binaries: the op goes there.
        b.i.g[3] = int64_t(binaryOf(b.i.op));
        bool same = sameShape(b.i.in[0], b.i.out[0]) && sameShape(b.i.in[1], b.i.out[0]);
        b.i.run = byType(b.floatOrBf16(), [same](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          if (same)
            return [](const Instr &i, Context &) {
              int64_t n = i.out[0]->numel;
              cuda::binary(cpu::Binary(i.g[3]), dev<T>(i.in[0]), dev<T>(i.in[1]), n,
                           dev<T>(i.out[0]), n, n ? n : 1);
            };
          return [](const Instr &i, Context &) {
            cuda::binary(cpu::Binary(i.g[3]), dev<T>(i.in[0]), i.in[0]->shape, dev<T>(i.in[1]),
                         i.in[1]->shape, dev<T>(i.out[0]), i.out[0]->shape);
          };
        });
      };
    t["nn.gelu"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::unary(i.ints[0] ? cpu::Unary::GeluTanh : cpu::Unary::GeluErf, dev<T>(i.in[0]),
                      dev<T>(i.out[0]), i.out[0]->numel);
        };
      });
    };
    t["nn.gelu_grad"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::geluGrad(i.ints[0] != 0, dev<T>(i.in[0]), dev<T>(i.in[1]), dev<T>(i.out[0]),
                         i.out[0]->numel);
        };
      });
    };
    t["nn.gelu_with_derivative"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::geluWithDerivative(i.ints[0] != 0, dev<T>(i.in[0]), dev<T>(i.out[0]),
                                   dev<T>(i.out[1]), i.out[0]->numel);
        };
      });
    };
    t["nn.select"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::select(dev<uint8_t>(i.in[0]), i.in[0]->shape, dev<T>(i.in[1]), i.in[1]->shape,
                       dev<T>(i.in[2]), i.in[2]->shape, dev<T>(i.out[0]), i.out[0]->shape);
        };
      });
    };
    t["nn.matmul"] = [](const Binder &b) {
      if (b.floatOrBf16() == plan::F32) {
        b.i.run = [](const Instr &i, Context &ctx) {
          ctx.gpu->blas->matmul(dev(i.in[0]), i.in[0]->shape, i.ints[0] != 0, dev(i.in[1]),
                                i.in[1]->shape, i.ints[1] != 0, dev(i.out[0]), i.out[0]->shape);
        };
        return;
      }
      // bf16 rows that are not a multiple of 16 bytes are padded in the
      // scratch (a 50257-token vocabulary's logits).
      b.needs(cuda::Blas::scratchBytes(b.i.in[0]->shape, b.i.ints[0] != 0, b.i.in[1]->shape,
                                       b.i.ints[1] != 0, b.i.out[0]->shape));
      b.i.run = [](const Instr &i, Context &ctx) {
        ctx.gpu->blas->matmul(dev<cpu::Bf16>(i.in[0]), i.in[0]->shape, i.ints[0] != 0,
                              dev<cpu::Bf16>(i.in[1]), i.in[1]->shape, i.ints[1] != 0,
                              dev<cpu::Bf16>(i.out[0]), i.out[0]->shape, ctx.gpu->scratch);
      };
    };
    t["nn.cast"] = [](const Binder &b) {
      plan::DType from = b.i.in[0]->dtype, to = b.i.out[0]->dtype;
      if (from == plan::F32 && to == plan::BF16)
        b.i.run = [](const Instr &i, Context &) {
          cuda::cast(dev(i.in[0]), dev<cpu::Bf16>(i.out[0]), i.out[0]->numel);
        };
      else if (from == plan::BF16 && to == plan::F32)
        b.i.run = [](const Instr &i, Context &) {
          cuda::cast(dev<cpu::Bf16>(i.in[0]), dev(i.out[0]), i.out[0]->numel);
        };
      else
        b.refuse(std::string("no CUDA cast from ") + plan::DType_Name(from) + " to " +
                 plan::DType_Name(to) + " yet (float32 <-> bf16 only)");
    };
    t["nn.layer_norm"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::layerNorm(dev<T>(i.in[0]), dev(i.in[1]), i.in.size() == 3 ? dev(i.in[2]) : nullptr,
                          dev<T>(i.out[0]), i.g[0], i.g[1], (float)i.floats[0]);
        };
      });
    };
    t["nn.layer_norm_grad"] = [](const Binder &b) {
      plan::DType d = b.floatOrBf16();
      if (b.i.in[1]->numel == 0) {
        b.i.run = [](const Instr &i, Context &) {
          cuda::fill(dev(i.out[1]), i.out[1]->numel, 0.0f);
          cuda::fill(dev(i.out[2]), i.out[2]->numel, 0.0f);
        };
        return;
      }
      b.needs(cuda::layerNormGradScratchBytes(b.i.g[0], b.i.g[1]));
      b.i.run = byType(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &ctx) {
          cuda::layerNormGrad(dev<T>(i.in[0]), dev<T>(i.in[1]), dev(i.in[2]), dev<T>(i.out[0]),
                              dev(i.out[1]), dev(i.out[2]), i.g[0], i.g[1], (float)i.floats[0],
                              ctx.gpu->scratch);
        };
      });
    };
    t["nn.softmax"] = [](const Binder &b) {
      if (b.i.g[2] != 1)
        b.refuse("the CUDA softmax runs over the last dimension only");
      if (b.i.fused.x) {
        b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            const Instr::Fused &f = i.fused;
            cuda::maskedSoftmax(dev<T>(f.x), f.scale ? dev<T>(f.scale) : nullptr,
                                {f.cond ? dev<uint8_t>(f.cond) : nullptr, f.condRows, f.fillWhen},
                                f.fill ? dev<T>(f.fill) : nullptr, dev<T>(i.out[0]), i.g[0],
                                i.g[1]);
          };
        });
        return;
      }
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::softmax(dev<T>(i.in[0]), dev<T>(i.out[0]), i.g[0], i.g[1]);
        };
      });
    };
    t["nn.softmax_grad"] = [](const Binder &b) {
      if (b.i.g[2] != 1)
        b.refuse("the CUDA softmax gradient runs over the last dimension only");
      if (b.i.fused.out) {
        b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            const Instr::Fused &f = i.fused;
            cuda::maskedSoftmaxGrad(
                dev<T>(i.in[0]), dev<T>(i.in[1]),
                {f.cond ? dev<uint8_t>(f.cond) : nullptr, f.condRows, f.fillWhen},
                f.fill ? dev<T>(f.fill) : nullptr, f.scale ? dev<T>(f.scale) : nullptr,
                dev<T>(f.out), i.g[0], i.g[1]);
          };
        });
        return;
      }
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::softmaxGrad(dev<T>(i.in[0]), dev<T>(i.in[1]), dev<T>(i.out[0]), i.g[0], i.g[1]);
        };
      });
    };
    t["nn.cross_entropy"] = [](const Binder &b) {
      (void)b.floatOrBf16(); // bf16 logits: dsc folded their widening (format 19)
      if (b.i.g[2] != 1)
        b.refuse("the CUDA cross-entropy takes [N, C] logits (no inner dimensions)");
      b.needs(cuda::crossEntropyScratchBytes(b.i.g[0]));
      b.counts();
      if (b.i.in[0]->dtype == plan::BF16) {
        b.i.run = [](const Instr &i, Context &ctx) {
          cuda::crossEntropy(dev<cpu::Bf16>(i.in[0]), dev<int64_t>(i.in[1]), dev(i.out[0]),
                             i.g[0], i.g[1], (int)i.ints[0], i.ints[1] != 0, i.ints[2],
                             ctx.gpu->bad + i.badSlot, ctx.gpu->scratch);
        };
        return;
      }
      if (b.i.fused.x) { // the bf16 logits the fused cast read (FuseCrossEntropy.cpp)
        b.i.run = [](const Instr &i, Context &ctx) {
          cuda::crossEntropy(dev<cpu::Bf16>(i.fused.x), dev<int64_t>(i.in[1]), dev(i.out[0]),
                             i.g[0], i.g[1], (int)i.ints[0], i.ints[1] != 0, i.ints[2],
                             ctx.gpu->bad + i.badSlot, ctx.gpu->scratch);
        };
        return;
      }
      b.i.run = [](const Instr &i, Context &ctx) {
        cuda::crossEntropy(dev(i.in[0]), dev<int64_t>(i.in[1]), dev(i.out[0]), i.g[0], i.g[1],
                           (int)i.ints[0], i.ints[1] != 0, i.ints[2], ctx.gpu->bad + i.badSlot,
                           ctx.gpu->scratch);
      };
    };
    t["nn.cross_entropy_grad"] = [](const Binder &b) {
      (void)b.floatOrBf16();
      if (b.i.g[2] != 1)
        b.refuse("the CUDA cross-entropy takes [N, C] logits (no inner dimensions)");
      b.needs(cuda::crossEntropyGradScratchBytes());
      if (b.i.in[0]->dtype == plan::BF16) { // bf16 logits and gradient (format 19)
        b.i.run = [](const Instr &i, Context &ctx) {
          cuda::crossEntropyGrad(dev<cpu::Bf16>(i.in[0]), dev<int64_t>(i.in[1]), dev(i.in[2]),
                                 dev<cpu::Bf16>(i.out[0]), i.g[0], i.g[1], (int)i.ints[0],
                                 i.ints[1] != 0, i.ints[2], ctx.gpu->scratch);
        };
        return;
      }
      if (b.i.fused.x) { // bf16 logits in, the bf16 gradient the fused cast wrote out
        b.i.run = [](const Instr &i, Context &ctx) {
          cuda::crossEntropyGrad(dev<cpu::Bf16>(i.fused.x), dev<int64_t>(i.in[1]), dev(i.in[2]),
                                 dev<cpu::Bf16>(i.fused.out), i.g[0], i.g[1], (int)i.ints[0],
                                 i.ints[1] != 0, i.ints[2], ctx.gpu->scratch);
        };
        return;
      }
      b.i.run = [](const Instr &i, Context &ctx) {
        cuda::crossEntropyGrad(dev(i.in[0]), dev<int64_t>(i.in[1]), dev(i.in[2]), dev(i.out[0]),
                               i.g[0], i.g[1], (int)i.ints[0], i.ints[1] != 0, i.ints[2],
                               ctx.gpu->scratch);
      };
    };
    t["nn.gather"] = [](const Binder &b) {
      if (b.i.in[0]->dtype == plan::I64) // the CPU moves int64 too
        b.refuse("no CUDA kernel for an I64 nn.gather table yet");
      b.floats();
      if (b.i.ints.size() != 1 || b.i.g[0] != 1 || b.i.g[2] == 0)
        b.refuse("the CUDA gather takes rows of a whole table (axis 0, rows not empty)");
      b.counts();
      b.i.run = [](const Instr &i, Context &ctx) {
        cuda::gather(dev(i.in[0]), dev<int64_t>(i.in[1]), dev(i.out[0]), i.g[1], i.g[2], i.g[3],
                     ctx.gpu->bad + i.badSlot);
      };
    };
    t["nn.gather_grad"] = [](const Binder &b) {
      b.floats();
      if (b.i.ints.size() != 1 || b.i.g[0] != 1)
        b.refuse("the CUDA gather gradient takes rows of a whole table (axis 0)");
      b.i.run = [](const Instr &i, Context &) {
        cuda::gatherGrad(dev(i.in[0]), dev<int64_t>(i.in[1]), dev(i.out[0]), i.g[1], i.g[2],
                         i.g[3]);
      };
    };
    auto reduce = [](const Binder &b) {
      plan::DType d = b.floatOrBf16();
      if (b.i.in[0]->dtype != b.i.out[0]->dtype)
        b.refuse("the CUDA reduction keeps its operand's type");
      b.needs(cuda::reduceScratchBytes(b.i.in[0]->shape, uint32_t(b.i.g[0])));
      b.i.run = byType(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &ctx) {
          cuda::reduce(cpu::Reduce(i.g[1]), dev<T>(i.in[0]), i.in[0]->shape, uint32_t(i.g[0]),
                       dev<T>(i.out[0]), ctx.gpu->scratch);
        };
      });
    };
    t["nn.reduce_sum"] = reduce;
    t["nn.reduce_mean"] = reduce;
    t["nn.reduce_max"] = reduce;
    t["nn.transpose"] = [](const Binder &b) {
      if (b.i.in[0]->dtype == plan::I64) // the CPU moves int64 too
        b.refuse("no CUDA kernel for I64 nn.transpose yet");
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::transpose(dev<T>(i.in[0]), i.in[0]->shape, i.ints.data(), dev<T>(i.out[0]));
        };
      });
    };
    t["nn.slice"] = [](const Binder &b) {
      if (b.i.in[0]->dtype == plan::I64) // the CPU moves int64 too
        b.refuse("no CUDA kernel for I64 nn.slice yet");
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          int r = i.in[0]->shape.rank;
          cuda::slice(dev<T>(i.in[0]), i.in[0]->shape, i.ints.data(), i.ints.data() + r,
                      dev<T>(i.out[0]), i.out[0]->shape);
        };
      });
    };
    t["nn.concat"] = [](const Binder &b) {
      if (b.i.out[0]->dtype == plan::I64) // the CPU moves int64 too
        b.refuse("no CUDA kernel for I64 nn.concat yet");
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          // The inputs' device addresses (the shapes are the binding's).
          std::vector<const T *> xs;
          for (const Tensor *t : i.in)
            xs.push_back(dev<T>(t));
          cuda::concat(xs.data(), i.shapes.data(), int(i.in.size()), int(i.ints[0]),
                       dev<T>(i.out[0]), i.out[0]->shape);
        };
      });
    };
    t["nn.slice_grad"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          int r = i.out[0]->shape.rank;
          cuda::sliceGrad(dev<T>(i.in[0]), i.in[0]->shape, i.ints.data(), i.ints.data() + r,
                          dev<T>(i.out[0]), i.out[0]->shape);
        };
      });
    };
    // Fused attention: the unfused chain's kernels over scratch
    // (Attention.cpp).
    for (const char *op : {"nn.attention", "nn.attention_grad"})
      t[op] = [](const Binder &b) { b.needs(bindCudaAttention(b.i, b.where)); };
    t["train.clip_coef"] = [](const Binder &b) { b.needs(bindCudaClipCoef(b.i, b.where)); };
    t["train.fused_adam"] = [](const Binder &b) { b.needs(bindCudaFusedAdam(b.i, b.where)); };
    t["nn.matmul_epilogue"] = [](const Binder &b) {
      (void)b.floatOrBf16(); // refuses fp16 by name
      b.needs(bindCudaEpilogue(b.i, b.where));
    };
    t["nn.dropout"] = [](const Binder &b) {
      if (b.i.ints.size() != 1)
        b.refuse("no CUDA kernel for dropout on a tensor-parallel part yet");
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &ctx) {
          cuda::dropout(dev<T>(i.in[0]), dev<T>(i.out[0]), dev<uint8_t>(i.out[1]),
                        i.out[0]->numel, ctx.eval ? 0.0f : (float)i.floats[0], ctx.seed,
                        (uint64_t)i.ints[0], ctx.rngCounter);
        };
      });
    };
    t["nn.dropout_grad"] = [](const Binder &b) {
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cuda::dropoutGrad(dev<T>(i.in[0]), dev<uint8_t>(i.in[1]), dev<T>(i.out[0]),
                            i.out[0]->numel, (float)i.floats[0]);
        };
      });
    };
    t["fill"] = [](const Binder &b) {
      b.floats();
      b.i.run = [](const Instr &i, Context &) {
        cuda::fill(dev(i.out[0]), i.out[0]->numel, (float)i.floats[0]);
      };
    };
    t["accumulate"] = [](const Binder &b) {
      if (b.i.in[0]->dtype == plan::BF16 && b.i.out[0]->dtype == plan::F32) {
        // A bf16 value into an f32 sum: widened into the scratch, then added.
        b.needs(size_t(b.i.out[0]->numel) * sizeof(float));
        b.i.run = [](const Instr &i, Context &ctx) {
          int64_t n = i.out[0]->numel;
          float *wide = static_cast<float *>(ctx.gpu->scratch);
          cuda::cast(dev<cpu::Bf16>(i.in[0]), wide, n);
          cuda::binary(cpu::Binary::Add, dev<float>(i.out[0]), wide, n, dev<float>(i.out[0]), n,
                       n ? n : 1);
        };
        return;
      }
      // 16-bit sums (grad_accum_dtype) round every addition, as on the CPU.
      b.i.run = byType(b.floatOrBf16(), [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          int64_t n = i.out[0]->numel;
          cuda::binary(cpu::Binary::Add, dev<T>(i.out[0]), dev<T>(i.in[0]), n, dev<T>(i.out[0]),
                       n, n ? n : 1);
        };
      });
    };
    t["train.lr_schedule"] = [](const Binder &b) {
      // On the host (the STEP buffer's host copy is the executor's), then
      // copied to the device for whatever reads it there.
      b.i.run = [](const Instr &i, Context &ctx) {
        *i.out[0]->f32() = (float)config::learningRate(ctx.settings->scheduler, ctx.settings->lr,
                                                      *i.in[0]->i64() - 1);
        cuda::copyToDevice(i.out[0]->dev, i.out[0]->data, sizeof(float));
      };
    };
    t["train.clip_grad_norm"] = [](const Binder &b) {
      b.floats();
      if (b.i.g[0])
        b.refuse("sharded gradients' norm (ZeRO) needs collectives, not on the device yet");
      b.i.run = [](const Instr &i, Context &ctx) {
        size_t n = i.out.size() - 1;
        DeviceState &g = *ctx.gpu;
        cuda::zero(g.sumSq, sizeof(double));
        for (size_t k = 0; k < n; ++k)
          cuda::sumSquares(dev(i.in[k]), i.in[k]->numel, g.sumSq);
        double sq = 0;
        cuda::copyToHost(&sq, g.sumSq, sizeof sq); // waits for the backward pass
        // The CPU kernel's decision (OpsInternal.h), on the host.
        std::optional<double> coef = clipFactor(i, ctx, sq);
        cuda::copyToDevice(i.out[n]->dev, i.out[n]->data, sizeof(float));
        if (coef && *coef != 1.0)
          for (size_t k = 0; k < n; ++k)
            cuda::scale(dev(i.out[k]), i.out[k]->numel, (float)*coef);
      };
    };
    t["train.adam"] = [](const Binder &b) {
      b.floats();
      b.i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow)
          return;
        // lr and step: their host copies (written by the host each step).
        auto [beta1, beta2] = stepBetas(i, ctx);
        cuda::adam(dev(i.out[0]), dev(i.in[1]), dev(i.out[1]), dev(i.out[2]), i.out[0]->numel,
                   *i.in[4]->f32(), beta1, beta2, (float)i.floats[2],
                   (float)i.floats[3], i.ints[0] != 0, i.ints[1] != 0, *i.in[5]->i64());
      };
    };
    return t;
  }();
  return t;
}

/// The CUDA backend: the device arena, one stream, the kernels bound by
/// deviceTable(); the host copy is brought up to date only when read.
class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
    if (program_)
      program_->ctx.gpu = nullptr;
  }
  const char *name() const override { return "cuda"; }
  std::string deviceName() const override { return cuda::deviceName(); }
  bool onHost() const override { return false; }
  bool timesItsKernels() const override { return true; }

  void bind(ProgramView &program) override {
    const std::string &name = program.name;
    std::string why;
    if (!cuda::deviceAvailable(&why))
      throw DeviceUnsupported(name + ": --device cuda: no usable CUDA device (" + why + ")");
    if (program.worldSize > 1)
      throw DeviceUnsupported(name + ": --device cuda runs plans for one rank so far; this "
                                     "plan runs on " +
                              std::to_string(program.worldSize) +
                              " ranks (collectives over NCCL are not built into dsrt yet)");
    // Bound in place; on a refusal the lists are put back as they were
    // (same elements, same addresses: the executor's pointers into them
    // stay valid), and the program stays on the CPU.
    std::vector<Instr> saved[3];
    for (int l = 0; l < 3; ++l)
      saved[l] = *program.lists[l];
    try {
      bindLists(program);
    } catch (...) {
      for (int l = 0; l < 3; ++l)
        std::copy(saved[l].begin(), saved[l].end(), program.lists[l]->begin());
      throw;
    }
    program_ = &program;
    program.ctx.gpu = state_.get();
  }

  void allocate() override {
    ProgramView &p = *program_;
    DeviceState &g = *state_;
    uint64_t bytes = p.plan.arena_bytes();
    g.arenaBytes = (std::max<uint64_t>(bytes, 64) + 255) / 256 * 256;
    size_t freeBytes = 0, totalBytes = 0;
    cuda::deviceMemory(&freeBytes, &totalBytes);
    uint64_t want = g.arenaBytes + g.scratchBytes + (uint64_t(32) << 20);
    if (want > freeBytes)
      throw PlanError(p.name + ": needs " + std::to_string(want) + " bytes of device memory "
                      "(the arena " + std::to_string(g.arenaBytes) + ", scratch " +
                      std::to_string(g.scratchBytes) + ", the cuBLAS workspace 32 MiB); " +
                      cuda::deviceName() + " has " + std::to_string(freeBytes) + " free of " +
                      std::to_string(totalBytes));
    g.arena = cuda::deviceAlloc(g.arenaBytes);
    g.scratch = cuda::deviceAlloc(std::max<size_t>(g.scratchBytes, 256));
    g.bad = static_cast<int64_t *>(
        cuda::deviceAlloc(std::max<size_t>(g.badHost.size(), 1) * sizeof(int64_t)));
    g.sumSq = static_cast<double *>(cuda::deviceAlloc(sizeof(double)));
    g.blas = std::make_unique<cuda::Blas>();
    for (int k = 0; k < p.plan.buffers_size(); ++k)
      p.tensors[k].dev = static_cast<char *>(g.arena) + p.plan.buffers(k).offset();
    // The whole host arena: constants, the loaded weights, zeros elsewhere.
    cuda::copyToDevice(g.arena, p.hostArena, bytes);
    hostStale_ = false;
    deviceStale_ = false;
  }

  void upload(const std::vector<Tensor *> &ts) override {
    for (const Tensor *t : ts)
      if (t->bytes())
        cuda::copyToDevice(t->dev, t->data, t->bytes());
  }

  void beginStep() override {
    ProgramView &p = *program_;
    std::vector<Tensor *> in;
    if (deviceStale_)
      for (Tensor &t : p.tensors)
        if (t.role == plan::PARAM || t.role == plan::OPT_STATE || t.role == plan::FROZEN ||
            t.role == plan::PARAM_COPY)
          in.push_back(&t);
    in.push_back(&p.tensors[p.plan.step_buffer()]);
    if (p.lossScale)
      in.push_back(p.lossScale);
    upload(in);
    deviceStale_ = false;
    DeviceState &g = *state_;
    if (!g.badHost.empty())
      cuda::zero(g.bad, g.badHost.size() * sizeof(int64_t));
    hostStale_ = true; // from here on the device moves ahead
  }

  void endStep() override {
    ProgramView &p = *program_;
    DeviceState &g = *state_;
    for (uint32_t b : {p.plan.grad_norm_buffer(), p.plan.lr_buffer()})
      cuda::copyToHost(p.tensors[b].data, p.tensors[b].dev, sizeof(float));
    if (p.hasLoss)
      cuda::copyToHost(p.tensors[p.plan.loss_buffer()].data,
                       p.tensors[p.plan.loss_buffer()].dev, sizeof(float));
    if (!g.badHost.empty()) {
      cuda::copyToHost(g.badHost.data(), g.bad, g.badHost.size() * sizeof(int64_t));
      for (size_t k = 0; k < g.badHost.size(); ++k)
        noteBad(p.ctx, g.badHost[k], *g.badInstrs[k]);
    }
  }

  void pull() const override {
    if (!hostStale_ || !program_ || !state_->arena)
      return;
    cuda::copyToHost(program_->hostArena, state_->arena, program_->plan.arena_bytes());
    hostStale_ = false;
  }

  void hostWritten() override { deviceStale_ = true; }

  void synchronize() const override { cuda::synchronize(); }

  void runTimed(const std::vector<Instr> &list, ProfileTimes &times) override {
    DeviceState &g = *state_;
    Context &ctx = program_->ctx;
    if (!g.events || g.events->size() < 2 * list.size())
      g.events = std::make_unique<cuda::Events>(2 * list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      g.events->record(2 * k);
      list[k].run(list[k], ctx);
      g.events->record(2 * k + 1);
      program_->progress();
    }
    cuda::synchronize();
    for (size_t k = 0; k < list.size(); ++k) {
      const Instr &i = list[k];
      double dt = g.events->elapsedMs(2 * k, 2 * k + 1) / 1e3;
      if (k)
        times.idle += std::max(0.0, g.events->elapsedMs(2 * k - 1, 2 * k) / 1e3);
      auto &slot = times.byOp[i.opId];
      ++slot.first;
      slot.second += dt;
      times.byInstr[&i] += dt;
    }
  }

private:
  /// Fuses, then binds every instruction of the program's lists to its
  /// CUDA kernel; throws DeviceUnsupported naming the first it cannot run.
  void bindLists(ProgramView &program) {
    auto state = std::make_unique<DeviceState>();
    std::vector<Instr *> counting;
    size_t scratch = 0;
    std::vector<Instr> *lists[3] = {program.lists[0], program.lists[1], program.lists[2]};
    // Instructions of some optimizer steps only (a 1-bit optimizer's
    // phases, plan formats 5 and 7) are not on the device yet.
    for (std::vector<Instr> *list : lists)
      for (const Instr &i : *list)
        if (i.firstStep || i.lastStep || i.stepClasses)
          throw DeviceUnsupported(program.name + ": " + i.label + " (" + i.op +
                                  "): --device cuda: instructions of some optimizer steps "
                                  "only (a 1-bit optimizer's phases) run on the CPU only");
    // DSRT_CUDA_FUSE=0 turns the fusions off, =softmax or =cross_entropy
    // keeps only that one (to measure each).
    const char *fuseEnv = std::getenv("DSRT_CUDA_FUSE");
    std::string fuse = fuseEnv ? fuseEnv : "";
    if (fuse != "0" && fuse != "cross_entropy")
      for (std::vector<Instr> *list : lists)
        fuseSoftmaxChains(*list);
    if (fuse != "0" && fuse != "softmax")
      fuseCrossEntropyCasts({lists[0], lists[1], lists[2]});
    for (std::vector<Instr> *list : lists)
      for (Instr &i : *list) {
        if (i.fused.absorbed) {
          i.run = [](const Instr &, Context &) {};
          continue;
        }
        std::string where = program.name + ": " + i.label + " (" + i.op + ")";
        auto it = deviceTable().find(i.op);
        if (it == deviceTable().end())
          throw DeviceUnsupported(where + ": no CUDA kernel for " + i.op + " yet");
        it->second(Binder{i, where, scratch, counting});
      }
    for (size_t k = 0; k < counting.size(); ++k) {
      counting[k]->badSlot = int(k);
      state->badInstrs.push_back(counting[k]);
    }
    state->badHost.assign(counting.size(), 0);
    state->scratchBytes = scratch;
    state_ = std::move(state);
  }

  ProgramView *program_ = nullptr;
  std::unique_ptr<DeviceState> state_;
  /// The device arena holds values the host copy lacks (after a step).
  mutable bool hostStale_ = false;
  /// The host copy was written (a restore): the device takes the state
  /// before the next step.
  bool deviceStale_ = false;
};

} // namespace

std::unique_ptr<Backend> makeCudaBackend() { return std::make_unique<CudaBackend>(); }

bool cudaUsable(std::string *why) { return cuda::deviceAvailable(why); }

std::string cudaKernelRefusal(Instr &instr) {
  const std::string where = instr.op;
  auto it = deviceTable().find(instr.op);
  if (it == deviceTable().end())
    return where + ": no CUDA kernel for " + instr.op + " yet";
  size_t scratch = 0;
  std::vector<Instr *> counting;
  try {
    it->second(Binder{instr, where, scratch, counting});
  } catch (const DeviceUnsupported &e) {
    return e.what();
  }
  return std::string();
}

} // namespace dsrt
