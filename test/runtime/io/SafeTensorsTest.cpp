//===- SafeTensorsTest.cpp - safetensors reader and writer tests ----------===//
//
// Round trips, a file laid out byte for byte as the reference writer lays it
// out, the atomic replace, and one hand-made file per validation error.
//
//===----------------------------------------------------------------------===//
#include "io/SafeTensors.h"

#include "TestDir.h"

#include <cstring>
#include <filesystem>
#include <vector>

using namespace dsrt::io;
using dsrt::io::test::TestDir;

namespace {

/// 8-byte little-endian length, the header text, then the data.
std::string fileBytes(const std::string &header, const std::string &data,
                      uint64_t length) {
  std::string b;
  for (int i = 0; i < 8; ++i)
    b.push_back(char((length >> (8 * i)) & 0xff));
  return b + header + data;
}
std::string fileBytes(const std::string &header, const std::string &data) {
  return fileBytes(header, data, header.size());
}

std::string errorOf(const std::string &path) {
  return DSRT_ERROR_OF(IoError, SafeTensorsFile::open(path));
}

} // namespace

TEST(SafeTensors, RoundTrip) {
  TestDir dir;
  std::vector<float> w = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  std::vector<int64_t> ids = {7, -1};
  std::vector<uint16_t> half = {0x3c00, 0xc000, 0x7bff}; // 1, -2, 65504
  uint8_t flag = 1;
  std::string path = dir.file("model.safetensors");
  writeSafeTensors(path,
                   {{"w", DType::F32, {2, 3}, w.data()},
                    {"ids", DType::I64, {2}, ids.data()},
                    {"empty", DType::F32, {0, 4}, nullptr},
                    {"h", DType::BF16, {3}, half.data()},
                    {"flag", DType::Bool, {}, &flag}},
                   {{"format", "pt"}, {"step", "12"}});
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));

  std::string bytes = test::readBytes(path);
  uint64_t headerSize = 0;
  std::memcpy(&headerSize, bytes.data(), 8);
  EXPECT_EQ(headerSize % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + headerSize + 24 + 16 + 6 + 1);

  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"},
                                                              {"step", "12"}}));
  ASSERT_EQ(f.tensors().size(), 5u);
  // File order is data order; the empty tensor sits between ids and h.
  const char *order[] = {"w", "ids", "empty", "h", "flag"};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(f.tensors()[i].name, order[i]);
  const TensorRef &t = f.at("w");
  EXPECT_EQ(t.dtype, DType::F32);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(std::memcmp(t.data, w.data(), 24), 0);
  EXPECT_EQ(std::memcmp(f.at("ids").data, ids.data(), 16), 0);
  EXPECT_EQ(f.at("empty").nbytes(), 0u);
  EXPECT_EQ(f.at("h").dtype, DType::BF16);
  EXPECT_EQ(std::memcmp(f.at("h").data, half.data(), 6), 0);
  EXPECT_TRUE(f.at("flag").shape.empty());
  EXPECT_EQ(*static_cast<const uint8_t *>(f.at("flag").data), 1);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.at("nope")),
            path + ": no tensor named 'nope'");
}

TEST(SafeTensors, ReadsTheReferenceLayout) {
  // As safetensors' serializer writes it: compact JSON, metadata first,
  // tensors in data order, spaces up to a multiple of 8.
  TestDir dir;
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<int64_t> b = {42};
  std::vector<float> a = {0.5f, -1.0f};
  std::string data(reinterpret_cast<const char *>(b.data()), 8);
  data.append(reinterpret_cast<const char *>(a.data()), 8);
  std::string path = dir.file("ref.safetensors");
  test::writeBytes(path, fileBytes(header, data));
  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.tensors()[0].name, "b");
  EXPECT_EQ(*static_cast<const int64_t *>(f.at("b").data), 42);
  EXPECT_EQ(static_cast<const float *>(f.at("a").data)[1], -1.0f);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(SafeTensors, ReplacesAnExistingFileWhole) {
  TestDir dir;
  std::string path = dir.file("ckpt.safetensors");
  float one = 1, two = 2;
  writeSafeTensors(path, {{"x", DType::F32, {1}, &one}});
  writeSafeTensors(path, {{"x", DType::F32, {1}, &two}});
  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(*static_cast<const float *>(f.at("x").data), 2.0f);

  // A write that fails leaves the previous file as it was and no temporary.
  std::string before = test::readBytes(path);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeSafeTensors(
                                       path, {{"x", DType::F32, {1}, &one},
                                              {"x", DType::F32, {1}, &two}})),
            path + ": tensor 'x' is given twice");
  EXPECT_EQ(test::readBytes(path), before);
  std::string target = dir.file("a_directory");
  std::filesystem::create_directory(target);
  std::string message = DSRT_ERROR_OF(
      IoError, writeSafeTensors(target, {{"x", DType::F32, {1}, &one}}));
  EXPECT_EQ(
      message.rfind(target + ": cannot rename its temporary to it: ", 0),
      0u)
      << message;
  EXPECT_FALSE(std::filesystem::exists(target + ".tmp." + std::to_string(::getpid())));
}

TEST(SafeTensors, WriteErrors) {
  TestDir dir;
  std::string path = dir.file("w.safetensors");
  float x = 0;
  EXPECT_EQ(DSRT_ERROR_OF(IoError,
                          writeSafeTensors(
                              path, {{"__metadata__", DType::F32, {1}, &x}})),
            path + ": tensor '__metadata__': the name is reserved for "
                   "metadata");
  EXPECT_EQ(
      DSRT_ERROR_OF(IoError,
                    writeSafeTensors(path, {{"x", DType::F32, {2}, nullptr}})),
      path + ": tensor 'x' has no data");
  EXPECT_EQ(DSRT_ERROR_OF(
                IoError, writeSafeTensors(path, {{"x", DType::F32, {-2}, &x}})),
            path + ": tensor 'x': negative dimension in shape [-2]");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafeTensors, ValidationErrorsNameFileAndTensor) {
  TestDir dir;
  std::string path = dir.file("bad.safetensors");
  auto check = [&](const std::string &bytes, const std::string &expected) {
    test::writeBytes(path, bytes);
    EXPECT_EQ(errorOf(path), path + ": " + expected);
  };
  auto tensor = [](const std::string &name, const std::string &dtype,
                   const std::string &shape, const std::string &offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  std::string eight(8, '\0');

  check("abc", "too short for a safetensors file (3 bytes)");
  check(fileBytes("{}", "", 200'000'000),
        "header length 200000000 exceeds the 100 MB limit (not a safetensors "
        "file?)");
  check(fileBytes("{}", "", 50),
        "truncated: the header needs 50 bytes, the file has 2 after the "
        "length");
  test::writeBytes(path, fileBytes("{\"a\":", ""));
  EXPECT_EQ(errorOf(path).rfind(path + ": header is not valid JSON: ", 0), 0u);
  check(fileBytes("[1]", ""), "header must be a JSON object");
  check(fileBytes("{" + tensor("a", "F32", "[2]", "[0,8]") + "," +
                      tensor("a", "F32", "[2]", "[8,16]") + "}",
                  eight + eight),
        "tensor 'a' appears twice");
  check(fileBytes(R"({"__metadata__":[1]})", ""),
        "__metadata__ must be an object");
  check(fileBytes(R"({"__metadata__":{"step":12}})", ""),
        "__metadata__ value of 'step' must be a string");
  check(fileBytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
        "tensor 'a' must be an object with exactly dtype, shape and "
        "data_offsets");
  check(fileBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],)"
                  R"("x":1}})",
                  eight),
        "tensor 'a' must be an object with exactly dtype, shape and "
        "data_offsets");
  check(fileBytes("{" + tensor("a", "I8", "[8]", "[0,8]") + "}", eight),
        "tensor 'a': unsupported dtype \"I8\" (supported: F32 F64 F16 BF16 "
        "I64 I32 U16 U32 U8 BOOL)");
  check(fileBytes("{" + tensor("a", "F32", "[-2]", "[0,8]") + "}", eight),
        "tensor 'a': shape must hold non-negative integers");
  check(fileBytes("{" + tensor("a", "F32", "2", "[0,8]") + "}", eight),
        "tensor 'a': shape must be an array");
  check(fileBytes("{" + tensor("a", "F32", "[2]", "[0]") + "}", eight),
        "tensor 'a': data_offsets must be [begin, end]");
  check(fileBytes("{" + tensor("a", "F32", "[2]", "[0,-8]") + "}", eight),
        "tensor 'a': data_offsets must be non-negative integers");
  check(fileBytes("{" + tensor("a", "F32", "[0]", "[8,0]") + "}", eight),
        "tensor 'a': data_offsets end 0 is before begin 8");
  check(fileBytes("{" + tensor("a", "F32", "[4]", "[0,16]") + "}", eight),
        "tensor 'a': data_offsets end 16 is past the end of the data (8 "
        "bytes)");
  check(fileBytes("{" + tensor("a", "F32", "[3]", "[0,8]") + "}", eight),
        "tensor 'a': shape [3] of F32 needs 3 x 4 bytes but data_offsets span "
        "8");
  check(fileBytes("{" + tensor("a", "F32", "[2]", "[0,8]") + "," +
                      tensor("b", "F32", "[1]", "[4,8]") + "}",
                  eight),
        "tensors 'a' and 'b' overlap");
  check(fileBytes("{" + tensor("a", "F32", "[1]", "[4,8]") + "}", eight),
        "4 unused bytes before tensor 'a'");
  check(fileBytes("{" + tensor("a", "F32", "[1]", "[0,4]") + "}", eight),
        "4 unused bytes after the last tensor");
  check(fileBytes("{}", eight), "8 unused bytes after the last tensor");

  std::string missing = dir.file("missing.safetensors");
  EXPECT_EQ(errorOf(missing),
            missing + ": cannot open: No such file or directory");
}

TEST(SafeTensors, EmptyFileHasNoTensors) {
  TestDir dir;
  std::string path = dir.file("none.safetensors");
  writeSafeTensors(path, {});
  EXPECT_EQ(test::readBytes(path), fileBytes("{}      ", ""));
  EXPECT_TRUE(SafeTensorsFile::open(path).tensors().empty());
}

/// A header nested 100,000 levels deep overflowed the stack inside the JSON
/// library; the nesting is bounded before parsing, closed or not.
TEST(SafeTensors, DeepNestingIsRefusedBeforeParsing) {
  TestDir dir;
  std::string path = dir.file("deep.safetensors");
  const size_t levels = 100'000;
  std::string prefix = R"({"__metadata__":{"a":"b"},"x":)";
  std::string deepDtype = R"({"a":{"shape":[1],"data_offsets":[0,4],"dtype":)" +
                          std::string(levels, '[') + std::string(levels, ']') +
                          "}}";
  for (const std::string &header :
       {deepDtype, // its error message printed the dtype: a recursive dump
        prefix + std::string(levels, '[') + std::string(levels, ']') + "}",
        prefix + std::string(levels, '['),
        std::string(levels / 2, '{') + "\"a\":" +
            std::string(levels / 2, '{')}) {
    test::writeBytes(path, fileBytes(header, ""));
    std::string error = errorOf(path);
    EXPECT_EQ(error.rfind(path + ": header nests arrays and objects deeper "
                                 "than 64 levels at byte ",
                          0),
              0u)
        << error;
  }
  // The level past the limit is named by its byte: the first '[', at offset
  // prefix.size(), opens level 2, so the 64th opens level 65.
  test::writeBytes(path, fileBytes(prefix + std::string(levels, '['), ""));
  EXPECT_EQ(errorOf(path),
            path + ": header nests arrays and objects deeper than 64 levels "
                   "at byte " +
                std::to_string(prefix.size() + 63) +
                " of the header (a valid one nests 3)");
  // Brackets inside strings, escaped quotes included, do not nest.
  std::string quoted = "\\\"" + std::string(levels, '[');
  test::writeBytes(path,
                   fileBytes(R"({"__metadata__":{"a":")" + quoted + "\"}}", ""));
  EXPECT_EQ(SafeTensorsFile::open(path).metadata().at("a"),
            "\"" + std::string(levels, '['));
}

/// A number beyond double's range escaped as a raw JSON-library exception.
TEST(SafeTensors, NumberOutOfRangeIsAnIoError) {
  TestDir dir;
  std::string path = dir.file("huge.safetensors");
  test::writeBytes(
      path,
      fileBytes(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})",
                std::string(4, '\0')));
  std::string error = errorOf(path);
  EXPECT_EQ(error.rfind(path + ": header is not valid JSON: ", 0), 0u) << error;
  EXPECT_NE(error.find("1e400"), std::string::npos) << error;
}
