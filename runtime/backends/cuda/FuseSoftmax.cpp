//===- FuseSoftmax.cpp - the attention softmax's scale and mask, fused ---===//
//
// Attention computes softmax(select(mask, -inf, scores * scale)) forward
// and select(mask, 0, softmax_grad(y, dy)) * scale backward: three passes
// over [B, H, T, T] each way, where one does. The device executor
// (OpsCuda.cpp) runs such a chain as one kernel (cuda::maskedSoftmax and
// its gradient) when the instructions are next to each other in one list
// and the intermediate results feed only the next one: the softmax (or its
// gradient) takes over the chain's operands and the others do nothing.
// The kernel rounds each step as the unfused ops do, so the result is bit
// for bit the same. An intermediate's bytes may also be read through a
// view (a reshape is a second buffer over the same bytes), so "feeds only
// the next one" is checked on the arena: no instruction after the chain
// reads those bytes before one overwrites them, within the list.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/Fusions.h"

namespace dsrt::ops {
namespace {

/// An elementwise nn.mul of a tensor by a scalar of its type: its
/// operands {scalar, tensor}, or nulls.
std::pair<Tensor *, Tensor *> scalarProduct(const Instr &mul) {
  if (mul.op != "nn.mul" || mul.in.size() != 2 || mul.out.size() != 1)
    return {nullptr, nullptr};
  const Tensor *out = mul.out[0];
  for (int s = 0; s < 2; ++s) {
    Tensor *scalar = mul.in[s], *data = mul.in[1 - s];
    if (scalar->numel == 1 && scalar->dtype == out->dtype && data->dtype == out->dtype &&
        sameShape(data, out) && data != scalar)
      return {scalar, data};
  }
  return {nullptr, nullptr};
}

/// An nn.select of `data` and a scalar fill under a boolean mask that
/// broadcasts over `data`'s leading dims only (its trailing dims are
/// data's, the others 1): fills `f` and returns true.
bool maskOf(const Instr &sel, const Tensor *data, Instr::Fused &f) {
  if (sel.op != "nn.select" || sel.in.size() != 3 || !sameShape(sel.out[0], data) ||
      sel.out[0]->dtype != data->dtype)
    return false;
  const Tensor *cond = sel.in[0];
  Tensor *fill = nullptr;
  if (sel.in[2] == data && sel.in[1]->numel == 1)
    fill = sel.in[1], f.fillWhen = true;
  else if (sel.in[1] == data && sel.in[2]->numel == 1)
    fill = sel.in[2], f.fillWhen = false;
  if (!fill || fill->dtype != data->dtype || cond->dtype != plan::BOOL)
    return false;
  const kernels::Shape &cs = cond->shape, &ds = data->shape;
  if (cs.rank < 1 || cs.rank > ds.rank || cs.dims[cs.rank - 1] != ds.dims[ds.rank - 1] ||
      cond->numel == 0)
    return false;
  int k = 1; // trailing dims equal to data's, then only 1s
  while (k < cs.rank && cs.dims[cs.rank - 1 - k] == ds.dims[ds.rank - 1 - k])
    ++k;
  for (int d = 0; d < cs.rank - k; ++d)
    if (cs.dims[d] != 1)
      return false;
  f.cond = const_cast<Tensor *>(cond);
  f.fill = fill;
  f.condRows = cond->numel / ds.dims[ds.rank - 1];
  return true;
}

/// Whether the bytes of `t`, an intermediate result of a chain ending at
/// index `end` whose result is `result`, hold nothing anyone reads: they
/// lie within the result's (which the fused kernel writes as the chain
/// would), or no instruction after the chain reads them before one
/// overwrites them.
bool unread(const std::vector<Instr> &list, size_t end, const Tensor *t, const Tensor *result) {
  Region r(t), o(result);
  if (o.tier == r.tier && o.begin <= r.begin && r.end <= o.end)
    return true;
  return deadAfter(list, end + 1, t);
}

/// The select `sel` over `x` (its result) with a mask and a scalar fill:
/// fills `f` and returns the select's data operand, or null.
Tensor *maskedOperand(const Instr &sel, Instr::Fused &f) {
  if (sel.op != "nn.select" || sel.in.size() != 3 || sel.out.size() != 1)
    return nullptr;
  for (Tensor *data : {sel.in[2], sel.in[1]}) {
    Instr::Fused g;
    if (maskOf(sel, data, g)) {
      f.cond = g.cond, f.fill = g.fill, f.condRows = g.condRows, f.fillWhen = g.fillWhen;
      return data;
    }
  }
  return nullptr;
}

/// The chain's result may coincide with an operand the kernel reads
/// (in place, element for element), not overlap it otherwise.
bool disjointOrSame(const Tensor *result, const std::vector<Tensor *> &operands) {
  Region o(result);
  for (const Tensor *t : operands)
    if (t && o.overlaps(t) && !o.same(t))
      return false;
  return true;
}

} // namespace

int fuseSoftmaxChains(std::vector<Instr> &list) {
  int absorbed = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    Instr &s = list[k];
    if ((s.op != "nn.softmax" && s.op != "nn.softmax_grad") || s.g[2] != 1 ||
        s.out.size() != 1 || s.fused.absorbed ||
        (s.out[0]->dtype != plan::F32 && s.out[0]->dtype != plan::BF16))
      continue;
    Instr::Fused f;
    const Tensor *y = s.out[0];
    if (s.op == "nn.softmax") {
      // Backwards from the softmax: [mul] [select] softmax.
      Tensor *x = s.in[0];
      size_t first = k;
      if (first >= 1 && list[first - 1].out.size() == 1 && list[first - 1].out[0] == x) {
        Instr::Fused m;
        if (Tensor *data = maskedOperand(list[first - 1], m); data && unread(list, k, x, y)) {
          f = m;
          x = data;
          --first;
        }
      }
      if (first >= 1 && list[first - 1].out.size() == 1 && list[first - 1].out[0] == x &&
          unread(list, k, x, y))
        if (auto [sc, data] = scalarProduct(list[first - 1]); sc) {
          f.scale = sc;
          x = data;
          --first;
        }
      if (first == k || !disjointOrSame(y, {x}))
        continue;
      f.x = x;
      for (size_t j = first; j < k; ++j)
        list[j].fused.absorbed = true;
      absorbed += int(k - first);
    } else {
      // Forwards from the gradient: softmax_grad [select] [mul]; the
      // intermediates are checked once the chain's end is known.
      std::vector<Tensor *> inter;
      Tensor *d = s.out[0];
      size_t last = k;
      if (last + 1 < list.size()) {
        Instr::Fused m;
        if (maskedOperand(list[last + 1], m) == d) {
          f = m;
          inter.push_back(d);
          d = list[last + 1].out[0];
          ++last;
        }
      }
      if (last + 1 < list.size())
        if (auto [sc, data] = scalarProduct(list[last + 1]); sc && data == d) {
          f.scale = sc;
          inter.push_back(d);
          d = list[last + 1].out[0];
          ++last;
        }
      bool ok = last > k && disjointOrSame(d, s.in);
      for (const Tensor *t : inter)
        ok = ok && unread(list, last, t, d);
      if (!ok)
        continue;
      f.out = d;
      for (size_t j = k + 1; j <= last; ++j)
        list[j].fused.absorbed = true;
      absorbed += int(last - k);
      k = last;
    }
    s.fused = f;
  }
  return absorbed;
}

} // namespace dsrt::ops
