//===- HostTensor.cpp - decoding and folding of compile-time tensors -----===//
#include "frontends/onnx/HostTensor.h"

#include "frontends/onnx/Einsum.h"
#include "frontends/onnx/OnnxAttrs.h"

#include "dialects/nn/NNDialect.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

using onnx::TensorProto;

namespace dsc::onnx_import {

std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  }
  return n;
}

std::string describeBadShape(const std::vector<int64_t> &shape) {
  std::string dims = nn::formatShape(shape);
  for (int64_t d : shape)
    if (d < 0)
      return "shape " + dims + " has a negative dimension " + std::to_string(d);
  return "shape " + dims + " overflows a 64-bit element count";
}

bool isFloatDType(int32_t dtype) {
  return dtype == TensorProto::FLOAT || dtype == TensorProto::DOUBLE ||
         dtype == TensorProto::FLOAT16 || dtype == TensorProto::BFLOAT16;
}

int64_t dtypeBytes(int32_t dtype) {
  switch (dtype) {
  case TensorProto::BOOL:
  case TensorProto::INT8:
  case TensorProto::UINT8:
    return 1;
  case TensorProto::INT16:
  case TensorProto::UINT16:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return 2;
  case TensorProto::INT32:
  case TensorProto::UINT32:
  case TensorProto::FLOAT:
    return 4;
  case TensorProto::INT64:
  case TensorProto::UINT64:
  case TensorProto::DOUBLE:
    return 8;
  default:
    return 0;
  }
}

std::string dtypeName(int32_t dtype) {
  if (TensorProto::DataType_IsValid(dtype)) {
    std::string s = TensorProto::DataType_Name((TensorProto::DataType)dtype);
    for (char &c : s)
      c = std::tolower(c);
    return s;
  }
  return "dtype " + std::to_string(dtype);
}

bool HostTensor::isFloat() const { return isFloatDType(dtype); }

std::vector<int64_t> HostTensor::ints() const {
  if (!isFloat())
    return i;
  std::vector<int64_t> out(f.size());
  // Saturate rather than convert out of range (undefined behaviour): a NaN
  // or huge float used as a shape or index becomes a value the callers'
  // range checks reject.
  constexpr double kLimit = 9223372036854775808.0; // 2^63
  for (size_t k = 0; k < f.size(); ++k)
    out[k] = f[k] >= -kLimit && f[k] < kLimit ? (int64_t)f[k]
             : f[k] > 0                       ? std::numeric_limits<int64_t>::max()
                                              : std::numeric_limits<int64_t>::min();
  return out;
}

HostTensor HostTensor::ofInts(std::vector<int64_t> values,
                              std::vector<int64_t> shape, int32_t dtype) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.i = std::move(values);
  return t;
}

static double halfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

static double bf16ToDouble(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Decodes `count` little-endian elements of `dtype` from `bytes`.
static void decodeRaw(const char *bytes, int64_t count, int32_t dtype,
                      HostTensor &out) {
  auto load = [&](auto tag, int64_t k) {
    decltype(tag) v;
    std::memcpy(&v, bytes + k * sizeof(v), sizeof(v));
    return v;
  };
  bool fl = isFloatDType(dtype);
  (fl ? out.f.resize(count) : out.i.resize(count));
  for (int64_t k = 0; k < count; ++k) {
    switch (dtype) {
    case TensorProto::FLOAT: out.f[k] = load(float{}, k); break;
    case TensorProto::DOUBLE: out.f[k] = load(double{}, k); break;
    case TensorProto::FLOAT16: out.f[k] = halfToDouble(load(uint16_t{}, k)); break;
    case TensorProto::BFLOAT16: out.f[k] = bf16ToDouble(load(uint16_t{}, k)); break;
    case TensorProto::BOOL:
    case TensorProto::UINT8: out.i[k] = load(uint8_t{}, k); break;
    case TensorProto::INT8: out.i[k] = load(int8_t{}, k); break;
    case TensorProto::INT16: out.i[k] = load(int16_t{}, k); break;
    case TensorProto::UINT16: out.i[k] = load(uint16_t{}, k); break;
    case TensorProto::INT32: out.i[k] = load(int32_t{}, k); break;
    case TensorProto::UINT32: out.i[k] = load(uint32_t{}, k); break;
    case TensorProto::INT64: out.i[k] = load(int64_t{}, k); break;
    case TensorProto::UINT64: out.i[k] = (int64_t)load(uint64_t{}, k); break;
    }
  }
}

std::optional<std::string> decodeTensor(const TensorProto &p,
                                        const std::string *externalBytes,
                                        HostTensor &out) {
  out.dtype = p.data_type();
  out.shape.assign(p.dims().begin(), p.dims().end());
  int64_t elemBytes = dtypeBytes(out.dtype);
  if (elemBytes == 0)
    return "unsupported element type " + dtypeName(out.dtype);
  auto count = checkedNumElements(out.shape);
  if (!count)
    return describeBadShape(out.shape);
  if (__builtin_mul_overflow(*count, elemBytes, &elemBytes))
    return std::string("its size in bytes overflows 64 bits");
  int64_t n = *count;
  const std::string *raw = externalBytes ? externalBytes
                           : p.has_raw_data() ? &p.raw_data()
                                              : nullptr;
  if (raw) {
    if ((int64_t)raw->size() != elemBytes)
      return "holds " + std::to_string(raw->size()) + " bytes but its shape needs " +
             std::to_string(elemBytes);
    decodeRaw(raw->data(), n, out.dtype, out);
    return std::nullopt;
  }
  auto sizeMismatch = [&](int64_t have) -> std::optional<std::string> {
    if (have == n)
      return std::nullopt;
    return "holds " + std::to_string(have) + " values but its shape needs " +
           std::to_string(n);
  };
  switch (out.dtype) {
  case TensorProto::FLOAT:
    if (auto e = sizeMismatch(p.float_data_size())) return e;
    out.f.assign(p.float_data().begin(), p.float_data().end());
    return std::nullopt;
  case TensorProto::DOUBLE:
    if (auto e = sizeMismatch(p.double_data_size())) return e;
    out.f.assign(p.double_data().begin(), p.double_data().end());
    return std::nullopt;
  case TensorProto::INT64:
    if (auto e = sizeMismatch(p.int64_data_size())) return e;
    out.i.assign(p.int64_data().begin(), p.int64_data().end());
    return std::nullopt;
  case TensorProto::UINT32:
  case TensorProto::UINT64:
    if (auto e = sizeMismatch(p.uint64_data_size())) return e;
    out.i.assign(p.uint64_data().begin(), p.uint64_data().end());
    return std::nullopt;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    if (auto e = sizeMismatch(p.int32_data_size())) return e;
    for (int32_t bits : p.int32_data())
      out.f.push_back(out.dtype == TensorProto::FLOAT16 ? halfToDouble(bits)
                                                        : bf16ToDouble(bits));
    return std::nullopt;
  default: // int32, int16, int8, uint16, uint8, bool share int32_data.
    if (auto e = sizeMismatch(p.int32_data_size())) return e;
    out.i.assign(p.int32_data().begin(), p.int32_data().end());
    return std::nullopt;
  }
}

//===----------------------------------------------------------------------===//
// Folding
//===----------------------------------------------------------------------===//

namespace {
// Folded tensors stay small: shape vectors, masks and index tables. Larger
// constant expressions are left to the IR.
constexpr int64_t kMaxFoldElements = int64_t(1) << 22;

std::vector<int64_t> strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int k = (int)shape.size() - 2; k >= 0; --k)
    s[k] = s[k + 1] * shape[k + 1];
  return s;
}

/// Broadcast shape of several tensors (NumPy rules).
bool broadcast(const std::vector<const HostTensor *> &ts,
               std::vector<int64_t> &out) {
  size_t rank = 0;
  for (auto *t : ts)
    rank = std::max(rank, t->shape.size());
  out.assign(rank, 1);
  for (auto *t : ts)
    for (size_t k = 0; k < t->shape.size(); ++k) {
      int64_t &o = out[rank - t->shape.size() + k];
      int64_t d = t->shape[k];
      if (d != o && d != 1 && o != 1)
        return false;
      if (d != 1)
        o = d;
    }
  return true;
}

/// Flat index into `t` of the element at multi-index of `outShape`.
int64_t sourceIndex(const HostTensor &t, const std::vector<int64_t> &outShape,
                    int64_t flat) {
  auto ts = strides(t.shape);
  int64_t idx = 0;
  size_t off = outShape.size() - t.shape.size();
  for (int k = (int)outShape.size() - 1; k >= 0; --k) {
    int64_t coord = flat % outShape[k];
    flat /= outShape[k];
    if (k >= (int)off && t.shape[k - off] != 1)
      idx += coord * ts[k - off];
  }
  return idx;
}

HostTensor like(int32_t dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

/// Appends `v`, converted to `t`'s element type. A value an integer tensor
/// cannot hold (NaN, infinity, beyond int64: e.g. 1/0 folded in floats and
/// cast back) sets `error` instead of being converted, which would be
/// undefined behaviour and silently wrong shapes.
void push(HostTensor &t, double v, std::string &error) {
  if (t.isFloat()) {
    // A float32 result is rounded as PyTorch's float32 op rounds it (a
    // T5 relative-position bucket then truncates what float32 computed).
    t.f.push_back(t.dtype == onnx::TensorProto::FLOAT ? double(float(v)) : v);
    return;
  }
  // 2^63 is exactly representable; every double below it fits in int64.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(v >= -kLimit && v < kLimit)) {
    if (error.empty())
      error = "integer result " + std::to_string(v) + " is not representable in int64";
    t.i.push_back(0);
    return;
  }
  t.i.push_back((int64_t)v);
}

int64_t normAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

bool elementwise(const std::string &op, const std::vector<const HostTensor *> &in,
                 std::vector<HostTensor> &out, std::string &error) {
  using Fn = std::function<double(double, double)>;
  static const std::map<std::string, std::pair<Fn, bool>> binary = {
      {"Add", {[](double a, double b) { return a + b; }, false}},
      {"Sub", {[](double a, double b) { return a - b; }, false}},
      {"Mul", {[](double a, double b) { return a * b; }, false}},
      {"Div", {[](double a, double b) { return a / b; }, false}},
      {"Pow", {[](double a, double b) { return std::pow(a, b); }, false}},
      {"Max", {[](double a, double b) { return std::max(a, b); }, false}},
      {"Min", {[](double a, double b) { return std::min(a, b); }, false}},
      {"Equal", {[](double a, double b) { return double(a == b); }, true}},
      {"Less", {[](double a, double b) { return double(a < b); }, true}},
      {"LessOrEqual", {[](double a, double b) { return double(a <= b); }, true}},
      {"Greater", {[](double a, double b) { return double(a > b); }, true}},
      {"GreaterOrEqual", {[](double a, double b) { return double(a >= b); }, true}},
      {"And", {[](double a, double b) { return double(a && b); }, true}},
      {"Or", {[](double a, double b) { return double(a || b); }, true}},
  };
  static const std::map<std::string, std::function<double(double)>> unary = {
      {"Neg", [](double a) { return -a; }},
      {"Not", [](double a) { return double(!a); }},
      {"Sqrt", [](double a) { return std::sqrt(a); }},
      {"Reciprocal", [](double a) { return 1.0 / a; }},
      {"Abs", [](double a) { return std::fabs(a); }},
      {"Floor", [](double a) { return std::floor(a); }},
      {"Ceil", [](double a) { return std::ceil(a); }},
      // Rotary tables computed in forward (older Hugging Face code):
      // dsc evaluates them on constants.
      {"Cos", [](double a) { return std::cos(a); }},
      {"Sin", [](double a) { return std::sin(a); }},
      {"Identity", [](double a) { return a; }},
      // T5's relative-position buckets (log-spaced) on constants.
      {"Log", [](double a) { return std::log(a); }},
      {"Exp", [](double a) { return std::exp(a); }},
  };
  if (auto u = unary.find(op); u != unary.end() && in.size() == 1) {
    HostTensor r = like(in[0]->dtype, in[0]->shape);
    for (int64_t k = 0; k < in[0]->size(); ++k)
      push(r, u->second(in[0]->asDouble(k)), error);
    out.push_back(std::move(r));
    return true;
  }
  auto b = binary.find(op);
  if (b == binary.end())
    return false;
  if ((op == "Max" || op == "Min") && in.size() != 2) {
    // Variadic Max/Min: fold pairwise from the left.
    HostTensor acc = *in[0];
    for (size_t k = 1; k < in.size() && error.empty(); ++k) {
      std::vector<HostTensor> next;
      elementwise(op, {&acc, in[k]}, next, error);
      if (!next.empty())
        acc = std::move(next[0]);
    }
    out.push_back(std::move(acc));
    return true;
  }
  if (in.size() != 2)
    return false;
  std::vector<int64_t> shape;
  if (!broadcast(in, shape)) {
    error = "operand shapes do not broadcast";
    return true;
  }
  bool integerDiv = op == "Div" && !in[0]->isFloat();
  HostTensor r = like(b->second.second ? (int32_t)TensorProto::BOOL : in[0]->dtype, shape);
  int64_t n = *checkedNumElements(shape);
  for (int64_t k = 0; k < n; ++k) {
    double x = in[0]->asDouble(sourceIndex(*in[0], shape, k));
    double y = in[1]->asDouble(sourceIndex(*in[1], shape, k));
    if (integerDiv) {
      if (y == 0) {
        error = "integer division by zero";
        return true;
      }
      if (x == -9223372036854775808.0 && y == -1) { // INT64_MIN / -1
        error = "integer division overflows int64";
        return true;
      }
      push(r, (double)((int64_t)x / (int64_t)y), error);
    } else {
      push(r, b->second.first(x, y), error);
    }
  }
  out.push_back(std::move(r));
  return true;
}
} // namespace

std::optional<std::vector<HostTensor>>
foldNode(const onnx::NodeProto &node, const std::vector<const HostTensor *> &in,
         std::string &error) {
  const std::string &op = node.op_type();
  std::vector<HostTensor> out;
  auto fail = [&](std::string msg) {
    error = std::move(msg);
    return std::optional<std::vector<HostTensor>>(std::vector<HostTensor>{});
  };
  // The importer passes null for absent optional inputs; only Slice and
  // Split have optional inputs among the ops folded here.
  auto present = [&](size_t k) { return k < in.size() && in[k] != nullptr; };
  if (op != "Slice" && op != "Split")
    for (auto *t : in)
      if (!t)
        return std::nullopt;
  if (!present(0))
    return std::nullopt;

  if (elementwise(op, in, out, error))
    return out;

  if (op == "Einsum") {
    // Every output element a sum of products over the summed labels, in
    // double, rounded once to the operands' type.
    std::vector<std::vector<int64_t>> shapes;
    for (const HostTensor *t : in) {
      if (!t->isFloat() || t->dtype != in[0]->dtype)
        return fail("dsc evaluates Einsum on float operands of one type");
      shapes.push_back(t->shape);
    }
    std::string why;
    std::optional<EinsumSpec> spec = parseEinsum(attrString(node, "equation", ""), shapes, why);
    if (!spec)
      return fail(why);
    Labels all = spec->output; // the output's labels, then the summed ones
    for (const Labels &ls : spec->operands)
      for (int l : ls)
        if (std::find(all.begin(), all.end(), l) == all.end())
          all.push_back(l);
    double work = 1;
    std::vector<int64_t> outShape;
    for (int l : all)
      work *= double(spec->size[l]);
    for (int l : spec->output)
      outShape.push_back(spec->size[l]);
    if (work > 1e8)
      return fail("dsc evaluates an Einsum of constants at compile time, up to 1e8 "
                  "multiply-adds; this one takes " + std::to_string(work));
    HostTensor r = like(in[0]->dtype, outShape);
    std::vector<int64_t> index(all.size(), 0);
    std::vector<std::vector<size_t>> position(in.size()); // operand dim -> index slot
    for (size_t k = 0; k < in.size(); ++k)
      for (int l : spec->operands[k])
        position[k].push_back(size_t(std::find(all.begin(), all.end(), l) - all.begin()));
    const size_t kept = spec->output.size();
    int64_t outCount = 1;
    for (int64_t d : outShape)
      outCount *= d;
    int64_t summedCount = 1;
    for (size_t j = kept; j < all.size(); ++j)
      summedCount *= spec->size[all[j]];
    for (int64_t o = 0; o < outCount; ++o) {
      for (int64_t rem = o, j = int64_t(kept) - 1; j >= 0; --j) {
        index[size_t(j)] = rem % outShape[size_t(j)];
        rem /= outShape[size_t(j)];
      }
      double sum = 0;
      for (int64_t q = 0; q < summedCount; ++q) {
        for (int64_t rem = q, j = int64_t(all.size()) - 1; j >= int64_t(kept); --j) {
          int64_t n = spec->size[all[size_t(j)]];
          index[size_t(j)] = rem % n;
          rem /= n;
        }
        double prod = 1;
        for (size_t k = 0; k < in.size(); ++k) {
          int64_t flat = 0;
          for (size_t d = 0; d < position[k].size(); ++d)
            flat = flat * in[k]->shape[d] + index[position[k][d]];
          prod *= in[k]->asDouble(flat);
        }
        sum += prod;
      }
      push(r, sum, error);
    }
    out.push_back(std::move(r));
    return out;
  }

  if (op == "Cast") {
    int32_t to = (int32_t)attrInt(node, "to", 0);
    if (dtypeBytes(to) == 0)
      return fail("cannot cast to " + dtypeName(to));
    HostTensor r = like(to, in[0]->shape);
    for (int64_t k = 0; k < in[0]->size(); ++k) {
      double v = in[0]->asDouble(k);
      if (to == TensorProto::BOOL) {
        push(r, double(v != 0), error);
      } else if (!r.isFloat() && !(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
        // PyTorch's CPU cast of inf, NaN or an out-of-range float to int64
        // gives x86's "integer indefinite", INT64_MIN (T5's buckets cast
        // log(0) = -inf and then discard it with Where).
        r.i.push_back(std::numeric_limits<int64_t>::min());
      } else {
        push(r, v, error);
      }
    }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Where" && in.size() == 3) {
    std::vector<int64_t> shape;
    if (!broadcast(in, shape))
      return fail("operand shapes do not broadcast");
    HostTensor r = like(in[1]->dtype, shape);
    int64_t n = *checkedNumElements(shape);
    for (int64_t k = 0; k < n; ++k) {
      bool c = in[0]->asInt(sourceIndex(*in[0], shape, k));
      const HostTensor *src = c ? in[1] : in[2];
      push(r, src->asDouble(sourceIndex(*src, shape, k)), error);
    }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Gather") {
    const HostTensor &data = *in[0], &idx = *in[1];
    int64_t rank = data.shape.size();
    int64_t axis = normAxis(attrInt(node, "axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return fail("axis out of range");
    std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
    shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
    shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    int64_t outer = 1, inner = 1, dim = data.shape[axis];
    for (int64_t k = 0; k < axis; ++k) outer *= data.shape[k];
    for (int64_t k = axis + 1; k < rank; ++k) inner *= data.shape[k];
    HostTensor r = like(data.dtype, shape);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < idx.size(); ++j) {
        int64_t g = idx.asInt(j);
        if (g < -dim || g >= dim)
          return fail("index " + std::to_string(g) + " is out of range for a dimension of size " +
                      std::to_string(dim));
        g = g < 0 ? g + dim : g;
        for (int64_t q = 0; q < inner; ++q)
          push(r, data.asDouble((o * dim + g) * inner + q), error);
      }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Concat") {
    int64_t rank = in[0]->shape.size();
    int64_t axis = normAxis(attrInt(node, "axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return fail("axis out of range");
    std::vector<int64_t> shape = in[0]->shape;
    shape[axis] = 0;
    for (auto *t : in) {
      if ((int64_t)t->shape.size() != rank)
        return fail("inputs have different ranks");
      shape[axis] += t->shape[axis];
    }
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
    HostTensor r = like(in[0]->dtype, shape);
    for (int64_t o = 0; o < outer; ++o)
      for (auto *t : in) {
        int64_t chunk = t->size() / std::max<int64_t>(outer, 1);
        for (int64_t q = 0; q < chunk; ++q)
          push(r, t->asDouble(o * chunk + q), error);
      }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Range") {
    double start = in[0]->asDouble(0), limit = in[1]->asDouble(0), delta = in[2]->asDouble(0);
    if (delta == 0)
      return fail("delta is zero");
    double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (!(count <= kMaxFoldElements)) { // also NaN (infinite start or limit)
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.0f", count);
      return fail(std::string("produces ") + buf +
                  " elements; dsc evaluates Range at compile time, up to " +
                  std::to_string(kMaxFoldElements));
    }
    HostTensor r = like(in[0]->dtype, {(int64_t)count});
    for (int64_t k = 0; k < (int64_t)count; ++k)
      push(r, start + k * delta, error);
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Slice") {
    const HostTensor &data = *in[0];
    int64_t rank = data.shape.size();
    if (!present(1) || !present(2))
      return std::nullopt;
    std::vector<int64_t> starts = in[1]->ints(), ends = in[2]->ints();
    std::vector<int64_t> axes, steps;
    if (present(3)) axes = in[3]->ints();
    if (present(4)) steps = in[4]->ints();
    if (axes.empty())
      for (size_t k = 0; k < starts.size(); ++k) axes.push_back(k);
    if (steps.empty()) steps.assign(starts.size(), 1);
    std::vector<int64_t> lo(rank, 0), hi(data.shape), st(rank, 1);
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normAxis(axes[k], rank), d = data.shape[a];
      if (steps[k] <= 0)
        return std::nullopt; // negative steps are left to the importer's error
      auto clampIdx = [&](int64_t v) {
        v = v < 0 ? v + d : v;
        return std::clamp<int64_t>(v, 0, d);
      };
      lo[a] = clampIdx(starts[k]);
      hi[a] = std::max(lo[a], clampIdx(ends[k]));
      st[a] = steps[k];
    }
    std::vector<int64_t> shape(rank);
    for (int64_t k = 0; k < rank; ++k)
      shape[k] = (hi[k] - lo[k] + st[k] - 1) / st[k];
    HostTensor r = like(data.dtype, shape);
    int64_t n = *checkedNumElements(shape);
    auto ds = strides(data.shape);
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rem = flat, src = 0;
      for (int64_t k = rank - 1; k >= 0; --k) {
        int64_t c = rem % shape[k];
        rem /= shape[k];
        src += (lo[k] + c * st[k]) * ds[k];
      }
      push(r, data.asDouble(src), error);
    }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Transpose") {
    const HostTensor &data = *in[0];
    int64_t rank = data.shape.size();
    std::vector<int64_t> perm;
    if (auto p = attrInts(node, "perm"))
      perm = *p;
    else
      for (int64_t k = rank - 1; k >= 0; --k)
        perm.push_back(k);
    std::vector<bool> seen(rank, false);
    if ((int64_t)perm.size() != rank)
      return fail("perm has the wrong length");
    for (int64_t p : perm) {
      if (p < 0 || p >= rank || seen[p])
        return fail("perm is not a permutation");
      seen[p] = true;
    }
    std::vector<int64_t> shape(rank);
    for (int64_t k = 0; k < rank; ++k)
      shape[k] = data.shape[perm[k]];
    HostTensor r = like(data.dtype, shape);
    auto ds = strides(data.shape);
    int64_t n = data.size();
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rem = flat, src = 0;
      for (int64_t k = rank - 1; k >= 0; --k) {
        src += (rem % shape[k]) * ds[perm[k]];
        rem /= shape[k];
      }
      push(r, data.asDouble(src), error);
    }
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Expand") {
    for (int64_t d : in[1]->ints())
      if (d < 0)
        return fail("target " + describeBadShape(in[1]->ints()));
    HostTensor target = HostTensor::ofInts({}, in[1]->ints(), TensorProto::INT64);
    std::vector<int64_t> shape;
    if (!broadcast({in[0], &target}, shape))
      return fail("cannot expand to the requested shape");
    auto n = checkedNumElements(shape);
    if (!n)
      return fail("expanded " + describeBadShape(shape));
    if (*n > kMaxFoldElements)
      return std::nullopt;
    HostTensor r = like(in[0]->dtype, shape);
    for (int64_t k = 0; k < *n; ++k)
      push(r, in[0]->asDouble(sourceIndex(*in[0], shape, k)), error);
    out.push_back(std::move(r));
    return out;
  }
  if (op == "Split") {
    const HostTensor &data = *in[0];
    int64_t rank = data.shape.size();
    int64_t axis = normAxis(attrInt(node, "axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return fail("axis out of range");
    std::vector<int64_t> sizes;
    if (present(1))
      sizes = in[1]->ints();
    else {
      int64_t parts = node.output_size(), d = data.shape[axis];
      if (d % parts)
        return fail("dimension does not split evenly");
      sizes.assign(parts, d / parts);
    }
    int64_t begin = 0;
    for (int64_t s : sizes) {
      HostTensor start = HostTensor::ofInts({begin}, {1}, TensorProto::INT64);
      HostTensor end = HostTensor::ofInts({begin + s}, {1}, TensorProto::INT64);
      HostTensor ax = HostTensor::ofInts({axis}, {1}, TensorProto::INT64);
      onnx::NodeProto slice;
      slice.set_op_type("Slice");
      auto part = foldNode(slice, {&data, &start, &end, &ax}, error);
      if (!part || part->empty())
        return part;
      out.push_back(std::move((*part)[0]));
      begin += s;
    }
    return out;
  }
  return std::nullopt;
}

} // namespace dsc::onnx_import
