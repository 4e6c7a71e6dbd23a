//===- Conv.cpp - convolution forward and gradients on oneDNN ------------===//
//
// The tensors stay in the plan's plain layouts (ncw / nchw / ncdhw, the
// weight oi.. or goi.. for groups), so nothing is reordered: oneDNN picks
// an implementation for plain formats (gemm-based im2col on x86). Making a
// primitive costs far more than running a small one, so each (pass, shapes,
// window) keeps its primitive, with its three memory objects and the
// argument array made once: the step loop only binds pointers and runs it
// through the C API (a fixed-size key, no allocation).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace dsrt::cpu {
using namespace detail;

namespace {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine &engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Dims dimsOf(const Shape &s) { return Dims(s.dims, s.dims + s.rank); }

memory::format_tag activationTag(int spatial) {
  return spatial == 1 ? memory::format_tag::ncw
                      : spatial == 2 ? memory::format_tag::nchw : memory::format_tag::ncdhw;
}

/// The weight's descriptor: [O, C/g, K...] as is, or split [g, O/g, C/g, K...].
memory::desc weightDesc(const Shape &ws, int spatial, int64_t groups) {
  Dims d = dimsOf(ws);
  if (groups == 1)
    return memory::desc(d, memory::data_type::f32,
                        spatial == 1 ? memory::format_tag::oiw
                                     : spatial == 2 ? memory::format_tag::oihw
                                                    : memory::format_tag::oidhw);
  d[0] /= groups;
  d.insert(d.begin(), groups);
  return memory::desc(d, memory::data_type::f32,
                      spatial == 1 ? memory::format_tag::goiw
                                   : spatial == 2 ? memory::format_tag::goihw
                                                  : memory::format_tag::goidhw);
}

struct Entry {
  dnnl::primitive prim;
  std::string impl;
  memory x, w, y;                     // handles bound per call
  std::array<dnnl_exec_arg_t, 3> args; // in the pass's roles
};

/// Everything a primitive depends on, zero-padded: a fixed size, so the
/// lookup in the step loop allocates nothing.
using Key = std::array<int64_t, 3 + 3 * kMaxRank + 4 * 3>;

Key keyOf(ConvPass pass, const Shape &xs, const Shape &ws, const Shape &ys, const Window &w,
          int64_t groups) {
  Key k{};
  size_t n = 0;
  k[n++] = int64_t(pass);
  k[n++] = groups;
  k[n++] = w.spatial;
  for (const Shape *s : {&xs, &ws, &ys}) {
    std::copy(s->dims, s->dims + s->rank, k.begin() + n);
    n += kMaxRank;
  }
  for (int i = 0; i < w.spatial; ++i)
    for (int64_t v : {w.stride[i], w.padBegin[i], w.padEnd[i], w.dilation[i]})
      k[n++] = v;
  return k;
}

Entry make(ConvPass pass, const Shape &xs, const Shape &ws, const Shape &ys, const Window &w,
           int64_t groups) {
  const int sp = w.spatial;
  memory::desc x(dimsOf(xs), memory::data_type::f32, activationTag(sp));
  memory::desc y(dimsOf(ys), memory::data_type::f32, activationTag(sp));
  memory::desc wt = weightDesc(ws, sp, groups);
  Dims strides, dilates, pl, pr;
  for (int i = 0; i < sp; ++i) {
    strides.push_back(w.stride[i]);
    dilates.push_back(w.dilation[i] - 1); // oneDNN counts the holes
    pl.push_back(w.padBegin[i]);
    pr.push_back(w.padEnd[i]);
  }
  using namespace dnnl;
  convolution_forward::desc fd(prop_kind::forward_training, algorithm::convolution_direct, x, wt,
                               y, strides, dilates, pl, pr);
  convolution_forward::primitive_desc fpd(fd, engine());
  Entry e;
  e.x = memory(x, engine(), DNNL_MEMORY_NONE);
  e.w = memory(wt, engine(), DNNL_MEMORY_NONE);
  e.y = memory(y, engine(), DNNL_MEMORY_NONE);
  auto arg = [](int role, const memory &m) { return dnnl_exec_arg_t{role, m.get()}; };
  switch (pass) {
  case ConvPass::Forward:
    e.prim = convolution_forward(fpd);
    e.impl = fpd.impl_info_str();
    e.args = {arg(DNNL_ARG_SRC, e.x), arg(DNNL_ARG_WEIGHTS, e.w), arg(DNNL_ARG_DST, e.y)};
    break;
  case ConvPass::InputGrad: {
    convolution_backward_data::desc bd(algorithm::convolution_direct, x, wt, y, strides, dilates,
                                       pl, pr);
    convolution_backward_data::primitive_desc bpd(bd, engine(), fpd);
    e.prim = convolution_backward_data(bpd);
    e.impl = bpd.impl_info_str();
    e.args = {arg(DNNL_ARG_DIFF_SRC, e.x), arg(DNNL_ARG_WEIGHTS, e.w),
              arg(DNNL_ARG_DIFF_DST, e.y)};
    break;
  }
  case ConvPass::WeightGrad: {
    convolution_backward_weights::desc bd(algorithm::convolution_direct, x, wt, y, strides,
                                          dilates, pl, pr);
    convolution_backward_weights::primitive_desc bpd(bd, engine(), fpd);
    e.prim = convolution_backward_weights(bpd);
    e.impl = bpd.impl_info_str();
    e.args = {arg(DNNL_ARG_SRC, e.x), arg(DNNL_ARG_DIFF_WEIGHTS, e.w),
              arg(DNNL_ARG_DIFF_DST, e.y)};
    break;
  }
  }
  return e;
}

std::mutex &cacheMutex() {
  static std::mutex m;
  return m;
}

std::mutex &runMutex() {
  static std::mutex m;
  return m;
}

Entry &cached(ConvPass pass, const Shape &xs, const Shape &ws, const Shape &ys,
                    const Window &w, int64_t groups) {
  static std::map<Key, std::unique_ptr<Entry>> cache;
  Key k = keyOf(pass, xs, ws, ys, w, groups);
  std::lock_guard<std::mutex> lock(cacheMutex());
  auto &slot = cache[k];
  if (!slot)
    slot = std::make_unique<Entry>(make(pass, xs, ws, ys, w, groups));
  return *slot;
}

} // namespace

const char *convImpl(ConvPass pass, const Shape &xs, const Shape &ws, const Shape &ys,
                     const Window &win, int64_t groups) {
  return cached(pass, xs, ws, ys, win, groups).impl.c_str();
}

void conv(ConvPass pass, float *x, const Shape &xs, float *w, const Shape &ws, float *y,
          const Shape &ys, const Window &win, int64_t groups) {
  auto numel = [](const Shape &s) {
    int64_t n = 1;
    for (int d = 0; d < s.rank; ++d)
      n *= s.dims[d];
    return n;
  };
  if (numel(xs) == 0 || numel(ws) == 0 || numel(ys) == 0) {
    // Empty sums: the written tensor is zeros.
    float *out = pass == ConvPass::Forward ? y : pass == ConvPass::InputGrad ? x : w;
    const Shape &os = pass == ConvPass::Forward ? ys : pass == ConvPass::InputGrad ? xs : ws;
    fill(out, numel(os), 0.0f);
    return;
  }
  // The entry's memory objects are shared: one conv runs at a time (the
  // executor runs instructions in order; the lock makes it so anyway).
  std::lock_guard<std::mutex> lock(runMutex());
  Entry &e = cached(pass, xs, ws, ys, win, groups);
  e.x.set_data_handle(x);
  e.w.set_data_handle(w);
  e.y.set_data_handle(y);
  thread_local dnnl::stream stream(engine());
  (void)dnnl_primitive_execute(e.prim.get(), stream.get(), int(e.args.size()), e.args.data());
  stream.wait();
}

} // namespace dsrt::cpu
