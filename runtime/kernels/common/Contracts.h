//===- Contracts.h - what the CPU and CUDA kernels share --------*- C++ -*-===//
//
// The types in the kernels' signatures that both backends take: shapes
// (no heap), the 16-bit storage types, and the op enums of the elementwise
// and reduction kernels. cpu/Kernels.h brings them into dsrt::cpu; the CUDA
// kernels (cuda/Kernels.h) include this header, not the CPU kernels'.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_COMMON_CONTRACTS_H
#define DSRT_KERNELS_COMMON_CONTRACTS_H

#include <cstdint>

namespace dsrt::kernels {

constexpr int kMaxRank = 8;

struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= dims[i];
    return n;
  }
};

/// The bits of a bfloat16 and of an IEEE half: storage types only (the
/// kernels compute in float), distinct so that the kernels overload on
/// them. A plan's BF16 / F16 tensor (Tensor::u16()) is reinterpreted as such.
struct Bf16 {
  uint16_t bits;
};
struct Fp16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2 && sizeof(Fp16) == 2, "16-bit storage");

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min };
enum class Unary {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Reciprocal, Tanh, Erf, Relu, Sigmoid, Sin, Cos,
  GeluErf,  // x * 0.5 * (1 + erf(x / sqrt(2)))
  GeluTanh, // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
};

enum class Reduce { Sum, Mean, Max };

} // namespace dsrt::kernels

#endif // DSRT_KERNELS_COMMON_CONTRACTS_H
