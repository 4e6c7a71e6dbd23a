//===- NpyTest.cpp - .npy reader and writer tests -------------------------===//
//
// Round trips for every dtype, the exact bytes np.save writes, hand-made
// files for each error, and (when /usr/bin/python3 has numpy) files written
// by numpy read here and files written here read by numpy.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Npy.h"

#include "TestDir.h"

#include <cmath>
#include <cstring>
#include <vector>

using namespace dsrt::io;
using dsrt::io::test::TestDir;

namespace {

/// A .npy file with format `major`.0 and the given header text and data.
std::string npyBytes(int major, const std::string &header,
                     const std::string &data = "") {
  std::string b("\x93NUMPY", 6);
  b.push_back(char(major));
  b.push_back(0);
  size_t lenBytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lenBytes; ++i)
    b.push_back(char((header.size() >> (8 * i)) & 0xff));
  return b + header + data;
}

std::string header(const std::string &descr, const std::string &shape,
                   const std::string &order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order +
         ", 'shape': " + shape + ", }\n";
}

std::string errorOf(const std::string &path) {
  return DSRT_ERROR_OF(IoError, readNpy(path));
}

template <typename T> std::string bytesOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(T));
}

} // namespace

TEST(Npy, RoundTripsEveryDtype) {
  TestDir dir;
  std::vector<uint8_t> raw(48);
  for (size_t i = 0; i < raw.size(); ++i)
    raw[i] = uint8_t(i * 7 % 2); // 0/1 so the bytes are valid bools too
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32,
                  DType::U16, DType::U32, DType::U8, DType::Bool}) {
    std::vector<int64_t> shape = {int64_t(raw.size() / dtypeSize(t))};
    std::string path = dir.file(std::string(dtypeName(t)) + ".npy");
    writeNpy(path, t, shape, raw.data());
    NpyArray a = readNpy(path);
    EXPECT_EQ(a.dtype, t) << dtypeName(t);
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.dataOffset % 64, 0u);
    ASSERT_EQ(a.nbytes(), raw.size());
    EXPECT_EQ(std::memcmp(a.data(), raw.data(), raw.size()), 0);
  }
}

TEST(Npy, RoundTripsScalarsEmptyAndHigherRank) {
  TestDir dir;
  float scalar = 2.5f;
  writeNpy(dir.file("s.npy"), DType::F32, {}, &scalar);
  NpyArray s = readNpy(dir.file("s.npy"));
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(*static_cast<const float *>(s.data()), 2.5f);

  writeNpy(dir.file("e.npy"), DType::I64, {0, 3}, nullptr);
  NpyArray e = readNpy(dir.file("e.npy"));
  EXPECT_EQ(e.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(e.nbytes(), 0u);

  std::vector<int64_t> v(24);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = int64_t(i) - 5;
  writeNpy(dir.file("r.npy"), DType::I64, {2, 3, 4}, v.data());
  NpyArray r = readNpy(dir.file("r.npy"));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(std::memcmp(r.data(), v.data(), 24 * 8), 0);
}

TEST(Npy, WritesTheBytesNpSaveWrites) {
  TestDir dir;
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  writeNpy(dir.file("a.npy"), DType::F32, {2, 3}, v.data());
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  h.append(128 - 10 - h.size() - 1, ' ');
  h.push_back('\n');
  EXPECT_EQ(test::readBytes(dir.file("a.npy")), npyBytes(1, h, bytesOf(v)));

  writeNpy(dir.file("b.npy"), DType::U8, {3}, "abc");
  std::string b = test::readBytes(dir.file("b.npy"));
  EXPECT_NE(b.find("'shape': (3,), }"), std::string::npos);
  writeNpy(dir.file("c.npy"), DType::Bool, {}, "\1");
  std::string c = test::readBytes(dir.file("c.npy"));
  EXPECT_NE(c.find("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"),
            std::string::npos);
}

TEST(Npy, ReadsVersion2And3Headers) {
  TestDir dir;
  std::vector<int32_t> v = {7, -8};
  for (int major : {2, 3}) {
    std::string path = dir.file("v" + std::to_string(major) + ".npy");
    test::writeBytes(path, npyBytes(major, header("<i4", "(2,)"), bytesOf(v)));
    NpyArray a = readNpy(path);
    EXPECT_EQ(a.dtype, DType::I32);
    EXPECT_EQ(a.dataOffset, 12 + header("<i4", "(2,)").size());
    // Version 2/3 headers need not leave the data aligned: read with memcpy.
    int32_t second;
    std::memcpy(&second, static_cast<const char *>(a.data()) + 4, 4);
    EXPECT_EQ(second, -8);
  }
  // Double quotes and no trailing comma are the same literal to Python.
  std::string path = dir.file("q.npy");
  test::writeBytes(path, npyBytes(1,
                                  R"({"shape": (2,), "descr": "<i4", )"
                                  R"("fortran_order": False})",
                                  bytesOf(v)));
  EXPECT_EQ(readNpy(path).shape, (std::vector<int64_t>{2}));
}

TEST(Npy, ErrorsNameTheFileAndTheProblem) {
  TestDir dir;
  auto check = [&](const std::string &bytes, const std::string &expected) {
    std::string path = dir.file("bad.npy");
    test::writeBytes(path, bytes);
    EXPECT_EQ(errorOf(path), path + ": " + expected);
  };
  check("PK\3\4 not numpy", "not a .npy file (no \\x93NUMPY magic)");
  check(npyBytes(4, header("<f4", "(1,)"), "abcd"),
        "unsupported .npy format version 4.0");
  check(std::string("\x93NUMPY\x02\x00\x10", 9), "truncated .npy header");
  check(npyBytes(1, header("<f4", "(1,)")).substr(0, 30),
        "truncated .npy header (it claims 58 bytes, the file has 20)");
  check(npyBytes(1, header("<f4", "(2, 2)", "True"), std::string(16, '\0')),
        "Fortran-ordered arrays are not supported (save "
        "np.ascontiguousarray(a) instead)");
  check(npyBytes(1, header(">f4", "(1,)"), "abcd"),
        "big-endian dtype '>f4' is not supported (convert with "
        "a.astype(a.dtype.newbyteorder('<')))");
  check(npyBytes(1, header("<c8", "(1,)"), "abcdabcd"),
        "unsupported dtype '<c8' (supported: <f4 <f8 <f2 <i8 <i4 <u2 <u4 |b1 "
        "|u1)");
  check(npyBytes(1, "{'descr': [('a', '<f4')], 'fortran_order': False, "
                    "'shape': (1,), }"),
        "structured dtypes are not supported");
  check(npyBytes(1, header("<f4", "(2, 3)"), std::string(20, '\0')),
        "truncated data: shape [2, 3] of float32 needs 6 x 4 bytes, the file "
        "has 20 after the header");
  check(npyBytes(1, header("<f4", "(1,)"), std::string(6, '\0')),
        "2 unexpected bytes after the array data");
  std::string noShape = "{'descr': '<f4', 'fortran_order': False}";
  check(npyBytes(1, noShape),
        "malformed .npy header (needs the keys 'descr', 'fortran_order' and "
        "'shape'): " +
            noShape);
  std::string extraKey =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}";
  check(npyBytes(1, extraKey),
        "malformed .npy header (unexpected key 'x'): " + extraKey);
  std::string badShape = "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, -1), }";
  check(npyBytes(1, badShape),
        "malformed .npy header (expected a dimension): " + badShape);
  std::string badOrder = "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}";
  check(npyBytes(1, badOrder),
        "malformed .npy header (fortran_order must be True or False): " +
            badOrder);
  std::string trailing = "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': ()} x";
  check(npyBytes(1, trailing),
        "malformed .npy header (text after the dict): " + trailing);

  std::string missing = dir.file("missing.npy");
  EXPECT_EQ(errorOf(missing),
            missing + ": cannot open: No such file or directory");
}

TEST(Npy, WriteErrors) {
  TestDir dir;
  std::string path = dir.file("w.npy");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeNpy(path, DType::BF16, {1}, "\0\0")),
            path + ": .npy cannot hold bfloat16");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeNpy(path, DType::F32, {2, -1}, "")),
            path + ": negative dimension in shape [2, -1]");
  std::vector<int64_t> manyDims(30000, 1);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeNpy(path, DType::U8, manyDims, "x")),
            path + ": shape with 30000 dimensions does not fit a .npy header");
  std::string noDir = dir.file("no/such/dir.npy");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeNpy(noDir, DType::U8, {1}, "x")),
            noDir + ": cannot create: No such file or directory");
}

TEST(Npy, ReadsWhatNumpyWrites) {
  if (!test::haveNumpy())
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  TestDir dir;
  std::string out;
  int status = test::runPython(dir.path(), R"(
import numpy as np
from numpy.lib import format as fmt
x = np.arange(-6, 6).reshape(3, 4)
for name in ['f4', 'f8', 'f2', 'i8', 'i4']:
    np.save(name + '.npy', x.astype(name))
for name in ['u2', 'u4', 'u1']:
    np.save(name + '.npy', (x + 6).astype(name))
np.save('b1.npy', x % 3 == 0)
np.save('scalar.npy', np.float32(1.5))
np.save('empty.npy', np.zeros((0, 5), np.float32))
with open('v2.npy', 'wb') as f:
    fmt.write_array(f, x.astype('i8'), version=(2, 0))
with open('v3.npy', 'wb') as f:
    fmt.write_array(f, x.astype('i8'), version=(3, 0))
np.save('fortran.npy', np.asfortranarray(x.astype('f4')))
np.save('big.npy', x.astype('>f4'))
)",
                               out);
  ASSERT_EQ(status, 0) << out;

  auto values = [](const NpyArray &a) {
    std::vector<double> v;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const uint8_t *p = static_cast<const uint8_t *>(a.data());
      switch (a.dtype) {
      case DType::F32:
        v.push_back(reinterpret_cast<const float *>(p)[i]);
        break;
      case DType::F64:
        v.push_back(reinterpret_cast<const double *>(p)[i]);
        break;
      case DType::F16: {
        // Small integers are exact in float16: decode sign/exponent/mantissa.
        uint16_t h = reinterpret_cast<const uint16_t *>(p)[i];
        int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
        double mag = exp == 0 ? 0.0 : std::ldexp(1.0 + mant / 1024.0, exp - 15);
        v.push_back(h & 0x8000 ? -mag : mag);
        break;
      }
      case DType::I64:
        v.push_back(double(reinterpret_cast<const int64_t *>(p)[i]));
        break;
      case DType::I32:
        v.push_back(reinterpret_cast<const int32_t *>(p)[i]);
        break;
      case DType::U16:
        v.push_back(reinterpret_cast<const uint16_t *>(p)[i]);
        break;
      case DType::U32:
        v.push_back(reinterpret_cast<const uint32_t *>(p)[i]);
        break;
      case DType::U8:
      case DType::Bool:
        v.push_back(p[i]);
        break;
      case DType::BF16:
        ADD_FAILURE() << "numpy has no bfloat16";
        break;
      }
    }
    return v;
  };
  struct Expect {
    const char *file;
    DType dtype;
    int64_t offset; // value of element i is i + offset
  };
  for (Expect e :
       {Expect{"f4", DType::F32, -6}, Expect{"f8", DType::F64, -6},
        Expect{"f2", DType::F16, -6}, Expect{"i8", DType::I64, -6},
        Expect{"i4", DType::I32, -6}, Expect{"u2", DType::U16, 0},
        Expect{"u4", DType::U32, 0}, Expect{"u1", DType::U8, 0},
        Expect{"v2", DType::I64, -6}, Expect{"v3", DType::I64, -6}}) {
    NpyArray a = readNpy(dir.file(std::string(e.file) + ".npy"));
    EXPECT_EQ(a.dtype, e.dtype) << e.file;
    EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 4})) << e.file;
    std::vector<double> v = values(a);
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(v[i], double(int64_t(i) + e.offset)) << e.file << " " << i;
  }
  NpyArray b = readNpy(dir.file("b1.npy"));
  EXPECT_EQ(b.dtype, DType::Bool);
  std::vector<double> bv = values(b);
  for (size_t i = 0; i < bv.size(); ++i)
    EXPECT_EQ(bv[i], (int64_t(i) - 6) % 3 == 0 ? 1 : 0) << i;
  NpyArray s = readNpy(dir.file("scalar.npy"));
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(values(s), std::vector<double>{1.5});
  EXPECT_EQ(readNpy(dir.file("empty.npy")).shape, (std::vector<int64_t>{0, 5}));
  EXPECT_NE(errorOf(dir.file("fortran.npy")).find("Fortran-ordered"),
            std::string::npos);
  EXPECT_NE(errorOf(dir.file("big.npy")).find("big-endian dtype '>f4'"),
            std::string::npos);
}

TEST(Npy, NumpyReadsWhatWeWrite) {
  if (!test::haveNumpy())
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  TestDir dir;
  std::vector<float> f(12);
  std::vector<int64_t> i(12);
  for (size_t k = 0; k < 12; ++k) {
    f[k] = float(k) * 0.5f - 1.0f;
    i[k] = int64_t(k) * 1000000007LL - 3;
  }
  writeNpy(dir.file("f.npy"), DType::F32, {3, 4}, f.data());
  writeNpy(dir.file("i.npy"), DType::I64, {2, 6}, i.data());
  float scalar = -0.25f;
  writeNpy(dir.file("s.npy"), DType::F32, {}, &scalar);
  writeNpy(dir.file("e.npy"), DType::I64, {0}, nullptr);
  std::string out;
  int status = test::runPython(dir.path(), R"(
import numpy as np
f = np.load('f.npy')
assert f.dtype == np.float32 and f.shape == (3, 4), (f.dtype, f.shape)
assert (f == np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1).all()
i = np.load('i.npy', mmap_mode='r')
assert i.dtype == np.int64 and i.shape == (2, 6)
assert (i == (np.arange(12) * 1000000007 - 3).reshape(2, 6)).all()
s = np.load('s.npy')
assert s.shape == () and s == np.float32(-0.25)
e = np.load('e.npy')
assert e.shape == (0,) and e.dtype == np.int64
print('ok')
)",
                               out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(Npy, ReadsBoolMasks) {
  TestDir dir;
  std::string path = dir.file("mask.npy");
  test::writeBytes(path, npyBytes(1, header("|b1", "(2, 3)"), std::string("\1\0\0\1\1\0", 6)));
  NpyArray a = readNpy(path);
  EXPECT_EQ(a.dtype, DType::Bool);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::string(static_cast<const char *>(a.data()), 6), std::string("\1\0\0\1\1\0", 6));
  // Kernels read a mask byte as 0 or 1; numpy never writes anything else.
  test::writeBytes(path, npyBytes(1, header("|b1", "(3,)"), std::string("\1\0\2", 3)));
  EXPECT_EQ(errorOf(path), path + ": bool element 2 is 2, not 0 or 1");
}

// The message names the file's dtype and the one the input needs, whatever
// the input's type (a bool input once read "needs int64" for an int64 file).
TEST(Npy, InputDTypeErrorsNameTheDtypeNeeded) {
  TestDir dir;
  auto array = [&](const char *descr, const std::string &data) {
    std::string path = dir.file(std::string(descr + 1) + ".npy");
    test::writeBytes(path, npyBytes(1, header(descr, "(2,)"), data));
    return readNpy(path);
  };
  NpyArray b1 = array("|b1", std::string("\1\0", 2)), i8 = array("<i8", std::string(16, '\0')),
           i4 = array("<i4", std::string(8, '\0')), f4 = array("<f4", std::string(8, '\0'));
  auto error = [](const NpyArray &a, DType need) {
    return DSRT_ERROR_OF(IoError, checkInputDType(a, "d/x.npy", need, "x"));
  };
  EXPECT_EQ(error(i8, DType::Bool),
            "d/x.npy: dtype int64, the input 'x' needs bool (save it with a.astype(bool))");
  EXPECT_EQ(error(f4, DType::Bool),
            "d/x.npy: dtype float32, the input 'x' needs bool (save it with a.astype(bool))");
  EXPECT_EQ(error(b1, DType::F32), "d/x.npy: dtype bool, the input 'x' needs float32");
  EXPECT_EQ(error(f4, DType::I64), "d/x.npy: dtype float32, the input 'x' needs int64 (or int32)");
  EXPECT_EQ(error(b1, DType::I64), "d/x.npy: dtype bool, the input 'x' needs int64 (or int32)");
  EXPECT_EQ(error(i8, DType::I32), "d/x.npy: dtype int64, the input 'x' needs int32");
  EXPECT_FALSE(checkInputDType(b1, "b.npy", DType::Bool, "x"));
  EXPECT_FALSE(checkInputDType(i8, "i.npy", DType::I64, "x"));
  EXPECT_TRUE(checkInputDType(i4, "i.npy", DType::I64, "x")); // widened
  EXPECT_FALSE(checkInputDType(f4, "f.npy", DType::F32, "x"));
}
