//===- ConvPoolTest.cpp - convolution (oneDNN) and pooling kernels --------===//
//
// argmax's tie and NaN rules. Against float64 loops written from the definitions: the convolution's
// three passes for 1-D, 2-D and 3-D, strides, asymmetric padding, dilation,
// groups, a size the window does not tile (floor), and a transposed
// convolution's larger input (output_padding); max pooling's tie, NaN and
// padding rules and its gradient; average pooling's two divisors in ceil
// mode.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

namespace dsrt::cpu::test {
namespace {

struct ConvCase {
  Shape x, w, y;
  Window win;
  int64_t groups;
};

Window window(int sp, std::initializer_list<int64_t> stride, std::initializer_list<int64_t> pb,
              std::initializer_list<int64_t> pe, std::initializer_list<int64_t> dil) {
  Window w;
  w.spatial = sp;
  std::copy(stride.begin(), stride.end(), w.stride);
  std::copy(pb.begin(), pb.end(), w.padBegin);
  std::copy(pe.begin(), pe.end(), w.padEnd);
  std::copy(dil.begin(), dil.end(), w.dilation);
  return w;
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  return n;
}

/// Calls f(xIndex, wIndex, yIndex) for every multiply of the convolution.
template <class F> void forTaps(const ConvCase &c, F f) {
  const int sp = c.win.spatial;
  int64_t N = c.x.dims[0], C = c.x.dims[1], O = c.w.dims[0], g = c.groups;
  int64_t cg = C / g, og = O / g;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  for (int i = 0; i < sp; ++i) {
    int j = 3 - sp + i;
    in[j] = c.x.dims[2 + i];
    out[j] = c.y.dims[2 + i];
    k[j] = c.w.dims[2 + i];
    s[j] = c.win.stride[i];
    p[j] = c.win.padBegin[i];
    d[j] = c.win.dilation[i];
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t a = 0; a < out[0]; ++a)
          for (int64_t b = 0; b < out[1]; ++b)
            for (int64_t e = 0; e < out[2]; ++e)
              for (int64_t ka = 0; ka < k[0]; ++ka)
                for (int64_t kb = 0; kb < k[1]; ++kb)
                  for (int64_t ke = 0; ke < k[2]; ++ke) {
                    int64_t i0 = a * s[0] - p[0] + ka * d[0], i1 = b * s[1] - p[1] + kb * d[1],
                            i2 = e * s[2] - p[2] + ke * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                      continue;
                    int64_t c = (o / og) * cg + ci;
                    int64_t xi = (((n * C + c) * in[0] + i0) * in[1] + i1) * in[2] + i2;
                    int64_t wi = (((o * cg + ci) * k[0] + ka) * k[1] + kb) * k[2] + ke;
                    int64_t yi = (((n * O + o) * out[0] + a) * out[1] + b) * out[2] + e;
                    f(xi, wi, yi);
                  }
}

void checkConv(const ConvCase &c) {
  SCOPED_TRACE("x " + str(c.x) + " w " + str(c.w) + " y " + str(c.y));
  auto x = uniform(numel(c.x), 1), w = uniform(numel(c.w), 2), dy = uniform(numel(c.y), 3);
  std::vector<double> y(numel(c.y)), dx(numel(c.x)), dw(numel(c.w));
  forTaps(c, [&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += double(x[xi]) * w[wi];
    dx[xi] += double(dy[yi]) * w[wi];
    dw[wi] += double(dy[yi]) * x[xi];
  });
  std::vector<float> gy(y.size()), gdx(dx.size(), 7.0f), gdw(dw.size(), 7.0f);
  conv(ConvPass::Forward, x.data(), c.x, w.data(), c.w, gy.data(), c.y, c.win, c.groups);
  EXPECT_TRUE(near(gy, y, 1e-5, 1e-5)) << "forward";
  auto dyCopy = dy;
  conv(ConvPass::InputGrad, gdx.data(), c.x, w.data(), c.w, dyCopy.data(), c.y, c.win, c.groups);
  EXPECT_TRUE(near(gdx, dx, 1e-5, 1e-5)) << "input gradient";
  conv(ConvPass::WeightGrad, x.data(), c.x, gdw.data(), c.w, dyCopy.data(), c.y, c.win, c.groups);
  EXPECT_TRUE(near(gdw, dw, 1e-5, 1e-4)) << "weight gradient";
  EXPECT_NE(std::string(convImpl(ConvPass::Forward, c.x, c.w, c.y, c.win, c.groups)), "");
}

TEST(Conv, TwoD) {
  checkConv({shape({2, 3, 8, 8}), shape({4, 3, 3, 3}), shape({2, 4, 8, 8}),
             window(2, {1, 1}, {1, 1}, {1, 1}, {1, 1}), 1});
}
TEST(Conv, StridedGroupedDilatedAsymmetric) {
  // (9 + 2 + 1 - 5) / 2 + 1 = 4 (floor); (7 + 0 + 2 - 3) / 1 + 1 = 7.
  checkConv({shape({2, 4, 9, 7}), shape({6, 2, 3, 3}), shape({2, 6, 4, 7}),
             window(2, {2, 1}, {2, 0}, {1, 2}, {2, 1}), 2});
}
TEST(Conv, Depthwise) {
  checkConv({shape({1, 5, 6, 6}), shape({5, 1, 3, 3}), shape({1, 5, 6, 6}),
             window(2, {1, 1}, {1, 1}, {1, 1}, {1, 1}), 5});
}
TEST(Conv, OneD) {
  checkConv({shape({3, 4, 17}), shape({8, 4, 3}), shape({3, 8, 9}),
             window(1, {2}, {1}, {1}, {1}), 1});
}
TEST(Conv, ThreeD) {
  checkConv({shape({1, 2, 4, 5, 6}), shape({3, 2, 2, 3, 3}), shape({1, 3, 3, 3, 4}),
             window(3, {1, 2, 1}, {0, 1, 0}, {0, 1, 0}, {1, 1, 1}), 1});
}
TEST(Conv, TransposedWithOutputPadding) {
  // ConvTranspose(4 -> 8, k 3, stride 2, pads 1, output_padding 1): the
  // input gradient of a conv of an 8-wide input with a 4-wide output (the
  // last row and column only ever receive the floor's leftovers).
  checkConv({shape({2, 3, 8, 8}), shape({4, 3, 3, 3}), shape({2, 4, 4, 4}),
             window(2, {2, 2}, {1, 1}, {1, 1}, {1, 1}), 1});
}

Window pool(int sp, std::initializer_list<int64_t> k, std::initializer_list<int64_t> s,
            std::initializer_list<int64_t> pb, std::initializer_list<int64_t> pe) {
  Window w = window(sp, s, pb, pe, {1, 1, 1});
  std::copy(k.begin(), k.end(), w.kernel);
  return w;
}

TEST(MaxPool, FirstMaximumPaddingAndNaN) {
  // One 1x5 row, windows of 3 with stride 2 and padding 1 over
  // x = [2, 2, -inf, nan, -5]: [pad, 2, 2] (a tie), [2, -inf, nan] and
  // [nan, -5, pad] (a NaN wins wherever it is).
  Shape xs = shape({1, 1, 1, 5}), ys = shape({1, 1, 1, 3});
  Window w = pool(2, {1, 3}, {1, 2}, {0, 1}, {0, 1});
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x{2.0f, 2.0f, -inf, NAN, -5.0f}, y(3);
  maxPool(x.data(), xs, y.data(), ys, w);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(y[2]));
  std::vector<float> dy{1.0f, 10.0f, 100.0f}, dx(5, 9.0f);
  maxPoolGrad(x.data(), xs, dy.data(), ys, dx.data(), w);
  // Window 0 picks x[0] (the first of the tie); windows 1 and 2 the NaN.
  EXPECT_EQ(dx, (std::vector<float>{1.0f, 0.0f, 0.0f, 110.0f, 0.0f}));
  // A window of only -inf still has its maximum (the first element).
  std::vector<float> m{-inf, -inf, -inf, -inf, -inf}, my(3), mdx(5);
  maxPool(m.data(), xs, my.data(), ys, w);
  maxPoolGrad(m.data(), xs, dy.data(), ys, mdx.data(), w);
  EXPECT_EQ(my, (std::vector<float>{-inf, -inf, -inf}));
  EXPECT_EQ(mdx, (std::vector<float>{1.0f, 10.0f, 0.0f, 100.0f, 0.0f}));
}

TEST(MaxPool, AgainstLoops) {
  Shape xs = shape({2, 3, 7, 6}), ys = shape({2, 3, 4, 3});
  // Kernel 3, stride 2, padding 1, dilation (1, 2), ceil mode: 4 x 3.
  Window w = pool(2, {3, 3}, {2, 2}, {1, 1}, {1, 1});
  w.dilation[1] = 2;
  auto x = uniform(numel(xs), 4), dy = uniform(numel(ys), 5);
  std::vector<double> y(numel(ys)), dx(numel(xs));
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 3; ++b) {
        double m = -INFINITY;
        int64_t at = -1;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j) {
            int64_t r = a * 2 - 1 + i, c = b * 2 - 1 + 2 * j;
            if (r < 0 || r >= 7 || c < 0 || c >= 6)
              continue;
            int64_t xi = (p * 7 + r) * 6 + c;
            if (at < 0 || x[xi] > m) {
              m = x[xi];
              at = xi;
            }
          }
        y[(p * 4 + a) * 3 + b] = m;
        dx[at] += dy[(p * 4 + a) * 3 + b];
      }
  std::vector<float> gy(y.size()), gdx(dx.size());
  maxPool(x.data(), xs, gy.data(), ys, w);
  maxPoolGrad(x.data(), xs, dy.data(), ys, gdx.data(), w);
  EXPECT_TRUE(near(gy, y, 0, 0));
  EXPECT_TRUE(near(gdx, dx, 1e-6, 1e-6));
}

void checkAvg(bool includePad) {
  SCOPED_TRACE(includePad ? "count_include_pad" : "excluding padding");
  // Kernel 3, stride 2, padding 1, ceil mode over 6: windows start at -1,
  // 1, 3 and 5 (the last inside the input), ending at 2, 4, 6 and 7 (the
  // padded input ends at 7, so the last is 2 wide with padding, 1 without).
  Shape xs = shape({1, 2, 6}), ys = shape({1, 2, 4});
  Window w = pool(1, {3}, {2}, {1}, {1});
  auto x = uniform(numel(xs), 6), dy = uniform(numel(ys), 7);
  std::vector<double> y(numel(ys)), dx(numel(xs));
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t o = 0; o < 4; ++o) {
      int64_t start = o * 2 - 1, end = std::min<int64_t>(start + 3, 7);
      int64_t lo = std::max<int64_t>(start, 0), hi = std::min<int64_t>(end, 6);
      double div = includePad ? double(end - start) : double(hi - lo), sum = 0;
      for (int64_t i = lo; i < hi; ++i)
        sum += x[p * 6 + i];
      y[p * 4 + o] = sum / div;
      for (int64_t i = lo; i < hi; ++i)
        dx[p * 6 + i] += dy[p * 4 + o] / div;
    }
  std::vector<float> gy(y.size()), gdx(dx.size(), 3.0f);
  avgPool(x.data(), xs, gy.data(), ys, w, includePad);
  avgPoolGrad(dy.data(), ys, gdx.data(), xs, w, includePad);
  EXPECT_TRUE(near(gy, y, 1e-6, 1e-6));
  EXPECT_TRUE(near(gdx, dx, 1e-6, 1e-6));
}

TEST(AvgPool, CeilModeDivisors) {
  checkAvg(true);
  checkAvg(false);
}


TEST(Conv, TmpOneDLeftover) {
  checkConv({shape({4, 16, 32}), shape({16, 16, 3}), shape({4, 16, 16}),
             window(1, {2}, {1}, {1}, {1}), 1});
  checkConv({shape({4, 8, 32}), shape({16, 8, 3}), shape({4, 16, 32}),
             window(1, {1}, {1}, {1}, {1}), 1});
}
TEST(ArgMax, FirstMaximumNaNAndInnerAxis) {
  // x [2, 3, 2] over axis 1: inner stride 2.
  std::vector<float> x{1, 5, 3, 5, 3, 2,   // o = 0: columns (1,3,3) and (5,5,2)
                       -1, NAN, -1, 0, -2, 7};
  std::vector<int64_t> idx(4, -7);
  argmax(x.data(), 2, 3, 2, idx.data());
  // (1,3,3): first 3 at k 1; (5,5,2): first 5 at k 0; (-1,-1,-2): k 0;
  // (NaN,0,7): the NaN.
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 0, 0, 0}));
  // Against a loop over random values, and bf16 inputs.
  auto r = uniform(5 * 7 * 3, 9);
  std::vector<int64_t> got(5 * 3), want(5 * 3);
  argmax(r.data(), 5, 7, 3, got.data());
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t i = 0; i < 3; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < 7; ++k)
        if (r[(o * 7 + k) * 3 + i] > r[(o * 7 + best) * 3 + i])
          best = k;
      want[o * 3 + i] = best;
    }
  EXPECT_EQ(got, want);
  std::vector<Bf16> h{Bf16{0x3f80}, Bf16{0x4000}, Bf16{0x4000}}; // 1, 2, 2
  int64_t hi = -1;
  argmax(h.data(), 1, 3, 1, &hi);
  EXPECT_EQ(hi, 1);
}

} // namespace
} // namespace dsrt::cpu::test
