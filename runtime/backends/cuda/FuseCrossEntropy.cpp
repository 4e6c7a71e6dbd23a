//===- FuseCrossEntropy.cpp - the casts around a bf16 cross-entropy -------===//
//
// A bf16 plan computes its loss in float32, as PyTorch's autocast does:
// cast(logits bf16 -> f32), nn.cross_entropy and nn.cross_entropy_grad on
// the float copy, then cast(gradient f32 -> bf16). For a language model's
// head that is four passes over [tokens, vocabulary] floats (GPT-2 small
// at 8 x 1024 tokens: 1.6 GB each) that move no information: a bf16 value
// widens to float exactly, and the gradient kernel can round its float
// result to bf16 itself. The device executor (OpsCuda.cpp) therefore lets
// the two cross-entropy kernels read the bf16 logits and write the bf16
// gradient, and the two casts do nothing. The losses and gradients are the
// same bits (CudaKernelsTest checks it).
//
// When it applies, on the arena's bytes (a reshape is a second buffer
// over the same bytes), within one list:
//  * the float logits L are written by a cast from bf16 X and read by the
//    cross-entropy and its gradient only, until an instruction overwrites
//    them;
//  * nothing writes X's bytes from the cast up to the gradient, which now
//    reads X;
//  * the instruction right after the gradient casts its result G to bf16
//    D, and D shares no bytes with X or the labels (the fused gradient
//    writes D where it wrote G);
//  * nothing reads G's bytes afterwards, nor L's once the gradient read
//    them, before overwriting them: in the rest of the list, or, where it
//    ends first, from the start of any list (the next micro-batch, the
//    epilogue, the next step), since fused they keep older values.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/Fusions.h"

namespace dsrt::ops {
namespace {

bool isCast(const Instr &i, plan::DType from, plan::DType to) {
  return i.op == "nn.cast" && i.in.size() == 1 && i.out.size() == 1 && !i.fused.absorbed &&
         i.in[0]->dtype == from && i.out[0]->dtype == to && i.in[0]->numel == i.out[0]->numel;
}

bool writes(const Instr &i, const Tensor *t) {
  for (const Tensor *o : i.out)
    if (bytesOverlap(o, t))
      return true;
  return false;
}
bool reads(const Instr &i, const Tensor *t) {
  for (const Tensor *o : i.in)
    if (bytesOverlap(o, t))
      return true;
  return false;
}

enum class Touch { Read, Written, Untouched };
/// Whether, from `k` on, `l` first reads or first writes `t`'s bytes.
Touch firstTouch(const std::vector<Instr> &l, size_t k, const Tensor *t) {
  for (; k < l.size(); ++k) {
    if (reads(l[k], t))
      return Touch::Read;
    if (writes(l[k], t))
      return Touch::Written;
  }
  return Touch::Untouched;
}

/// Whether no instruction reads `t`'s bytes before overwriting them from
/// index `from` of lists[which] on, nor, where that list ends first, from
/// the start of any list (the next micro-batch, the epilogue, the next
/// step). Fused, the bytes keep older values; unfused, a reader found
/// here would see the result the fusion leaves unwritten.
bool unobserved(const std::vector<std::vector<Instr> *> &lists, size_t which, size_t from,
                const Tensor *t) {
  Touch first = firstTouch(*lists[which], from, t);
  if (first != Touch::Untouched)
    return first == Touch::Written;
  for (const std::vector<Instr> *l : lists)
    if (firstTouch(*l, 0, t) == Touch::Read)
      return false;
  return true;
}

/// The index of the cross-entropy gradient that, with the forward at
/// `fwd`, is the only reader of `logits` from `from` until they are
/// overwritten (or the list ends); 0 where there is none or another
/// reader. `end`: where the bytes are overwritten, or the list's size.
size_t onlyGradReader(const std::vector<Instr> &list, size_t from, size_t fwd,
                      const Tensor *logits, size_t &end) {
  size_t grad = 0;
  for (size_t j = from; j < list.size(); ++j) {
    const Instr &i = list[j];
    if (j != fwd && reads(i, logits)) {
      bool isGrad = i.op == "nn.cross_entropy_grad" && i.in.size() == 3 && i.out.size() == 1 &&
                    i.in[0] == logits && i.g[2] == 1 && !grad && j > fwd;
      if (!isGrad)
        return 0;
      grad = j;
    }
    if (writes(i, logits)) {
      end = j;
      return grad;
    }
  }
  end = list.size();
  return grad;
}

} // namespace

int fuseCrossEntropyCasts(const std::vector<std::vector<Instr> *> &lists) {
  int absorbed = 0;
  for (size_t which = 0; which < lists.size(); ++which) {
    std::vector<Instr> &list = *lists[which];
    for (size_t a = 1; a < list.size(); ++a) {
      Instr &ce = list[a];
      if (ce.op != "nn.cross_entropy" || ce.in.size() != 2 || ce.g[2] != 1 || ce.fused.x ||
          ce.in[0]->dtype != plan::F32)
        continue;
      Tensor *logits = ce.in[0];
      // The instruction that last wrote the float logits.
      size_t c1 = a;
      while (c1 > 0 && !writes(list[c1 - 1], logits))
        --c1;
      if (c1 == 0 || !isCast(list[c1 - 1], plan::BF16, plan::F32) ||
          list[c1 - 1].out[0] != logits)
        continue;
      --c1;
      Tensor *x = list[c1].in[0];
      size_t end = 0;
      size_t b = onlyGradReader(list, c1 + 1, a, logits, end);
      if (!b || b + 1 >= list.size())
        continue;
      Instr &grad = list[b];
      Instr &c2 = list[b + 1];
      if (!isCast(c2, plan::F32, plan::BF16) || c2.in[0] != grad.out[0])
        continue;
      Tensor *d = c2.out[0];
      bool ok = !bytesOverlap(d, x) && !bytesOverlap(d, ce.in[1]) &&
                unobserved(lists, which, b + 2, grad.out[0]) &&
                (end < list.size() || unobserved(lists, which, end, logits));
      for (size_t j = c1 + 1; ok && j < b; ++j)
        ok = !writes(list[j], x);
      if (!ok)
        continue;
      list[c1].fused.absorbed = true;
      c2.fused.absorbed = true;
      ce.fused.x = x;
      grad.fused.x = x;
      grad.fused.out = d;
      absorbed += 2;
    }
  }
  return absorbed;
}

} // namespace dsrt::ops
