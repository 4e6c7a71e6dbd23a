//===- OnnxExportTest.cpp - trained weights back into ONNX ----------------===//
//
// Skeletons built by hand: float32 weights written inline and as external
// data, the conversions to DOUBLE, FLOAT16 and BFLOAT16 against a float64
// nearest-value reference, and one case per error, after which nothing is
// written.
//
//===----------------------------------------------------------------------===//
#include "runtime/onnx/OnnxExport.h"

#include "TestDir.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

using namespace dsrt;
using dsrt::io::test::TestDir;
using dsrt::io::test::readBytes;
using dsrt::io::test::writeBytes;
using TP = ::onnx::TensorProto;

namespace {

/// A model with one MatMul and the given initializers (no data unless
/// `withData`).
::onnx::ModelProto skeleton(const std::vector<std::pair<std::string, std::vector<int64_t>>> &ts,
                            int32_t type = TP::FLOAT, bool withData = false) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto *g = m.mutable_graph();
  g->set_name("g");
  auto *n = g->add_node();
  n->set_op_type("Identity");
  n->add_input(ts.at(0).first);
  n->add_output("y");
  for (auto &[name, dims] : ts) {
    TP *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims)
      t->add_dims(d);
    if (withData)
      t->add_float_data(1.0f);
  }
  return m;
}

std::string save(const TestDir &dir, const ::onnx::ModelProto &m,
                 const std::string &name = "model.onnx") {
  std::string path = dir.file(name);
  writeBytes(path, m.SerializeAsString());
  return path;
}

::onnx::ModelProto load(const std::string &path) {
  ::onnx::ModelProto m;
  std::string bytes = readBytes(path);
  EXPECT_TRUE(m.ParseFromString(bytes)) << path;
  return m;
}

std::string errorOf(const std::string &skel, const std::vector<io::TensorRef> &w,
                    const std::string &out) {
  return DSRT_ERROR_OF(io::IoError, onnx_export::exportOnnx(skel, w, out));
}

double halfToDouble(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24)
             : exp == 31 ? (mant ? NAN : INFINITY)
                         : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -v : v;
}

double bf16ToDouble(uint16_t b) {
  uint32_t x = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

/// The encoding of `x` that float64 arithmetic says is nearest, ties to the
/// even encoding, with values beyond the largest finite one (plus half an
/// ulp) going to infinity: a brute-force search over all 65536 encodings.
uint16_t nearestReference(double x, double (*decode)(uint16_t), double maxFinite,
                          double halfUlpAtMax) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= maxFinite + halfUlpAtMax)
    return decode == halfToDouble ? (sign | 0x7c00) : (sign | 0x7f80);
  uint16_t best = 0;
  double bestErr = INFINITY;
  for (uint32_t h = 0; h < 0x8000; ++h) {
    double v = decode(uint16_t(h));
    if (!std::isfinite(v))
      continue;
    double err = std::fabs(v - a);
    if (err < bestErr || (err == bestErr && (h & 1) == 0)) {
      best = uint16_t(h);
      bestErr = err;
    }
  }
  return sign | best;
}

std::vector<float> testValues() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1e9f,
                          -1e9f, 6.1035156e-5f, 5.9604645e-8f, 2.9802322e-8f, 2.98e-8f,
                          1e-10f, 1.00048828125f, 1.00146484375f, 3.3895314e38f,
                          1.0039062f, 1.0117188f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 20);
  for (int i = 0; i < 400; ++i)
    v.push_back(std::ldexp(mant(rng), exp(rng)));
  return v;
}

} // namespace

TEST(OnnxExport, InlineFloat) {
  TestDir dir;
  std::string skel = save(dir, skeleton({{"w", {2, 3}}, {"b", {3}}}));
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {-1, 0.5f, 7};
  onnx_export::exportOnnx(skel, {{"w", io::DType::F32, {2, 3}, w.data()},
                          {"b", io::DType::F32, {3}, b.data()}},
                   dir.file("out.onnx"));
  ::onnx::ModelProto m = load(dir.file("out.onnx"));
  ASSERT_EQ(m.graph().initializer_size(), 2);
  const TP &tw = m.graph().initializer(0);
  EXPECT_EQ(tw.name(), "w");
  EXPECT_EQ(tw.data_type(), TP::FLOAT);
  ASSERT_EQ(tw.raw_data().size(), 24u);
  EXPECT_EQ(std::memcmp(tw.raw_data().data(), w.data(), 24), 0);
  EXPECT_EQ(std::memcmp(m.graph().initializer(1).raw_data().data(), b.data(), 12), 0);
  EXPECT_EQ(m.graph().node(0).op_type(), "Identity");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.onnx.data")));
}

TEST(OnnxExport, ExternalDataAligned) {
  TestDir dir;
  std::string skel = save(dir, skeleton({{"a", {3}}, {"b", {5}}}));
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6, 7, 8};
  onnx_export::exportOnnx(skel, {{"a", io::DType::F32, {3}, a.data()},
                          {"b", io::DType::F32, {5}, b.data()}},
                   dir.file("out.onnx"), /*inlineLimit=*/0);
  ::onnx::ModelProto m = load(dir.file("out.onnx"));
  std::string data = readBytes(dir.file("out.onnx.data"));
  ASSERT_EQ(data.size(), 64u + 20u);
  const std::vector<float> *expect[] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    const TP &t = m.graph().initializer(i);
    EXPECT_EQ(t.data_location(), TP::EXTERNAL);
    EXPECT_TRUE(t.raw_data().empty());
    std::map<std::string, std::string> kv;
    for (auto &e : t.external_data())
      kv[e.key()] = e.value();
    EXPECT_EQ(kv["location"], "out.onnx.data");
    int64_t offset = std::stoll(kv["offset"]), length = std::stoll(kv["length"]);
    EXPECT_EQ(offset % 64, 0);
    EXPECT_EQ(offset, i * 64);
    ASSERT_EQ(length, int64_t(expect[i]->size() * 4));
    EXPECT_EQ(std::memcmp(data.data() + offset, expect[i]->data(), length), 0);
  }
}

TEST(OnnxExport, Double) {
  TestDir dir;
  std::vector<float> v = testValues();
  int64_t n = int64_t(v.size());
  std::string skel = save(dir, skeleton({{"w", {n}}}, TP::DOUBLE));
  onnx_export::exportOnnx(skel, {{"w", io::DType::F32, {n}, v.data()}}, dir.file("out.onnx"));
  ::onnx::ModelProto m = load(dir.file("out.onnx"));
  const TP &t = m.graph().initializer(0);
  ASSERT_EQ(t.raw_data().size(), v.size() * 8);
  for (size_t i = 0; i < v.size(); ++i) {
    double d;
    std::memcpy(&d, t.raw_data().data() + 8 * i, 8);
    EXPECT_EQ(d, double(v[i])) << i;
  }
}

TEST(OnnxExport, HalfAndBFloat16RoundToNearestEven) {
  std::vector<float> v = testValues();
  v.push_back(NAN);
  // Float denormals: bf16 flushes them to a signed zero (dsrt's one
  // rounding, runtime/half/HalfBits.h, the kernels' own); fp16 has nothing
  // that small and rounds them to zero anyway.
  for (float d : {1e-39f, -1e-39f, 1.1e-38f, -5e-45f})
    v.push_back(d);
  int64_t n = int64_t(v.size());
  for (int32_t type : {TP::FLOAT16, TP::BFLOAT16}) {
    TestDir dir;
    std::string skel = save(dir, skeleton({{"w", {n}}}, type));
    onnx_export::exportOnnx(skel, {{"w", io::DType::F32, {n}, v.data()}}, dir.file("out.onnx"));
    ::onnx::ModelProto m = load(dir.file("out.onnx"));
  const TP &t = m.graph().initializer(0);
    ASSERT_EQ(t.raw_data().size(), v.size() * 2);
    bool half = type == TP::FLOAT16;
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, t.raw_data().data() + 2 * i, 2);
      if (std::isnan(v[i])) {
        EXPECT_TRUE(std::isnan(half ? halfToDouble(got) : bf16ToDouble(got)));
        continue;
      }
      uint16_t want = half ? nearestReference(v[i], halfToDouble, 65504.0, 16.0)
                           : nearestReference(v[i], bf16ToDouble, 3.3895313892515355e38,
                                              std::ldexp(1.0, 127 - 8));
      if (!half && std::fabs(v[i]) < 1.17549435e-38f)
        want = std::signbit(v[i]) ? 0x8000 : 0;
      EXPECT_EQ(got, want) << (half ? "float16 " : "bfloat16 ") << v[i];
    }
  }
}

TEST(OnnxExport, Errors) {
  TestDir dir;
  std::vector<float> w(6, 1.0f);
  std::string out = dir.file("out.onnx");
  std::string skel = save(dir, skeleton({{"w", {2, 3}}}));

  EXPECT_EQ(errorOf(skel, {{"w", io::DType::F32, {3, 2}, w.data()}}, out),
            skel + ": initializer 'w' has shape [2, 3] but the trained weight has [3, 2]");
  EXPECT_EQ(errorOf(skel, {{"w", io::DType::F32, {2, 3}, w.data()},
                           {"v", io::DType::F32, {6}, w.data()}},
                    out),
            skel + ": the plan's weight 'v' is not an initializer of the model");
  EXPECT_EQ(errorOf(skel, {}, out),
            skel + ": initializer 'w' has no data and the run has no weight of that name");

  std::string full = save(dir, skeleton({{"w", {2, 3}}}, TP::FLOAT, true), "full.onnx");
  EXPECT_EQ(errorOf(full, {{"w", io::DType::F32, {2, 3}, w.data()}}, out),
            full + ": initializer 'w' already has data; the plan and its model.onnx disagree "
                   "(recompile the model)");
  std::string ints = save(dir, skeleton({{"w", {2, 3}}}, TP::INT64), "ints.onnx");
  EXPECT_EQ(errorOf(ints, {{"w", io::DType::F32, {2, 3}, w.data()}}, out),
            ints + ": initializer 'w' has ONNX type INT64; dsrt writes FLOAT, DOUBLE, FLOAT16 "
                   "and BFLOAT16 weights");
  writeBytes(dir.file("junk.onnx"), "\xff\xff\xff junk");
  EXPECT_EQ(errorOf(dir.file("junk.onnx"), {}, out),
            dir.file("junk.onnx") + ": not an ONNX model (truncated or corrupt)");
  EXPECT_EQ(errorOf(dir.file("none.onnx"), {}, out),
            dir.file("none.onnx") +
                ": missing: the plan has no ONNX model to export into (it was compiled from a "
                ".pt2, or by an older dsc): recompile the model from ONNX");
  EXPECT_FALSE(std::filesystem::exists(out));

  // checkSkeleton applies the same checks before training.
  EXPECT_EQ(DSRT_ERROR_OF(io::IoError, onnx_export::checkSkeleton(full, {"w"})),
            full + ": initializer 'w' already has data; the plan and its model.onnx disagree "
                   "(recompile the model)");
  onnx_export::checkSkeleton(skel, {"w"});
}
