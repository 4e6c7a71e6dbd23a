//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed here by a small scanner that accepts exactly what np.save writes
// (and the same literal with double quotes or other spacing).
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Npy.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>

namespace dsrt::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct Descr {
  const char *text;
  DType dtype;
};
/// np.save's spelling of each supported type on a little-endian machine.
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64},  {"<f2", DType::F16},
    {"<i8", DType::I64}, {"<i4", DType::I32},  {"<u2", DType::U16},
    {"<u4", DType::U32}, {"|b1", DType::Bool}, {"|u1", DType::U8},
};

/// Scanner over the header dict literal; errors name the file.
class HeaderScanner {
public:
  HeaderScanner(const std::string &path, const std::string &text)
      : path_(path), text_(text) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw IoError(path_ + ": malformed .npy header (" + what + "): " + text_);
  }

  void skipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  bool accept(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c))
      fail(std::string("expected '") + c + "'");
  }
  bool atEnd() {
    skipSpace();
    return pos_ == text_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  std::string quoted() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("expected a string");
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string::npos)
      fail("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  std::string word() {
    skipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() &&
           std::isalpha(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
    return text_.substr(start, pos_ - start);
  }

  int64_t integer() {
    skipSpace();
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int digit = text_[pos_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10)
        fail("dimension too large");
      v = v * 10 + digit;
    }
    if (pos_ == start)
      fail("expected a dimension");
    return v;
  }

private:
  const std::string &path_;
  const std::string &text_;
  size_t pos_ = 0;
};

struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

Header parseHeader(const std::string &path, const std::string &text) {
  HeaderScanner s(path, text);
  Header h;
  bool seenDescr = false, seenOrder = false, seenShape = false;
  s.expect('{');
  while (!s.accept('}')) {
    std::string key = s.quoted();
    s.expect(':');
    if (key == "descr" && !seenDescr) {
      if (s.peek() == '[')
        throw IoError(path + ": structured dtypes are not supported");
      h.descr = s.quoted();
      seenDescr = true;
    } else if (key == "fortran_order" && !seenOrder) {
      std::string w = s.word();
      if (w != "True" && w != "False")
        s.fail("fortran_order must be True or False");
      h.fortranOrder = w == "True";
      seenOrder = true;
    } else if (key == "shape" && !seenShape) {
      s.expect('(');
      while (!s.accept(')')) {
        h.shape.push_back(s.integer());
        if (!s.accept(',')) {
          s.expect(')');
          break;
        }
      }
      seenShape = true;
    } else {
      s.fail("unexpected key '" + key + "'");
    }
    if (!s.accept(',')) {
      s.expect('}');
      break;
    }
  }
  if (!s.atEnd())
    s.fail("text after the dict");
  if (!seenDescr || !seenOrder || !seenShape)
    s.fail("needs the keys 'descr', 'fortran_order' and 'shape'");
  return h;
}

uint32_t readLE(const uint8_t *p, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < bytes; ++i)
    v |= uint32_t(p[i]) << (8 * i);
  return v;
}

DType dtypeOfDescr(const std::string &path, const std::string &descr) {
  for (const Descr &d : kDescrs)
    if (descr == d.text)
      return d.dtype;
  if (!descr.empty() && descr[0] == '>')
    throw IoError(path + ": big-endian dtype '" + descr +
                  "' is not supported (convert with "
                  "a.astype(a.dtype.newbyteorder('<')))");
  throw IoError(path + ": unsupported dtype '" + descr +
                "' (supported: <f4 <f8 <f2 <i8 <i4 <u2 <u4 |b1 |u1)");
}

const char *descrOf(DType dtype) {
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype)
      return d.text;
  return nullptr;
}

} // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

NpyArray readNpy(const std::string &path) {
  MappedFile file = MappedFile::open(path);
  const uint8_t *p = file.data();
  size_t size = file.size();
  if (size < kMagicSize + 2 || std::memcmp(p, kMagic, kMagicSize) != 0)
    throw IoError(path + ": not a .npy file (no \\x93NUMPY magic)");
  int major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    throw IoError(path + ": unsupported .npy format version " +
                  std::to_string(major) + "." + std::to_string(minor));
  // Version 1.0 stores the header length in 2 bytes, later versions in 4.
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t prefix = kMagicSize + 2 + lenBytes;
  if (size < prefix)
    throw IoError(path + ": truncated .npy header");
  size_t headerLen = readLE(p + kMagicSize + 2, lenBytes);
  if (size - prefix < headerLen)
    throw IoError(path + ": truncated .npy header (it claims " +
                  std::to_string(headerLen) + " bytes, the file has " +
                  std::to_string(size - prefix) + ")");
  std::string text(reinterpret_cast<const char *>(p + prefix), headerLen);
  Header h = parseHeader(path, text);
  if (h.fortranOrder)
    throw IoError(path + ": Fortran-ordered arrays are not supported (save "
                         "np.ascontiguousarray(a) instead)");
  DType dtype = dtypeOfDescr(path, h.descr);
  int64_t numel = numElements(h.shape, path);

  size_t offset = prefix + headerLen;
  size_t available = size - offset;
  size_t itemSize = dtypeSize(dtype);
  if (uint64_t(numel) > available / itemSize)
    throw IoError(path + ": truncated data: shape " + formatShape(h.shape) +
                  " of " + dtypeName(dtype) + " needs " +
                  std::to_string(uint64_t(numel)) + " x " +
                  std::to_string(itemSize) + " bytes, the file has " +
                  std::to_string(available) + " after the header");
  size_t nbytes = size_t(numel) * itemSize;
  if (available != nbytes)
    throw IoError(path + ": " + std::to_string(available - nbytes) +
                  " unexpected bytes after the array data");
  // Kernels read a mask byte as 0 or 1 (a cast to float would turn 2 into
  // 2.0), and numpy itself never writes anything else.
  if (dtype == DType::Bool)
    for (size_t k = 0; k < nbytes; ++k)
      if (p[offset + k] > 1)
        throw IoError(path + ": bool element " + std::to_string(k) + " is " +
                      std::to_string(p[offset + k]) + ", not 0 or 1");
  return NpyArray{dtype, h.shape, offset, std::move(file)};
}

bool checkInputDType(const NpyArray &a, const std::string &path, DType need,
                     const std::string &input) {
  bool widen = need == DType::I64 && a.dtype == DType::I32;
  if (a.dtype != need && !widen)
    throw IoError(path + ": dtype " + dtypeName(a.dtype) + ", the input '" + input +
                  "' needs " + dtypeName(need) + (need == DType::I64 ? " (or int32)" : "") +
                  (need == DType::Bool ? " (save it with a.astype(bool))" : ""));
  return widen;
}

void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data) {
  const char *descr = descrOf(dtype);
  if (!descr)
    throw IoError(path + ": .npy cannot hold " + std::string(dtypeName(dtype)));
  int64_t numel = numElements(shape, path);
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 2); // "(2, 3)"; a 1-d tuple keeps "(3,)"
  else if (shape.size() == 1)
    dims.pop_back();
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces and a final newline so the data starts 64-aligned.
  constexpr size_t prefix = kMagicSize + 2 + 2;
  size_t end = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(end - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  // Version 1.0 has a 2-byte header length; only a shape with thousands of
  // dimensions (which NumPy cannot create) would need more.
  if (header.size() > 0xffff)
    throw IoError(path + ": shape with " + std::to_string(shape.size()) +
                  " dimensions does not fit a .npy header");
  std::string head(kMagic, kMagicSize);
  head.push_back(1); // version 1.0
  head.push_back(0);
  head.push_back(char(header.size() & 0xff));
  head.push_back(char(header.size() >> 8));
  head += header;
  writeFileAtomically(path, {{head.data(), head.size()},
                             {data, size_t(numel) * dtypeSize(dtype)}});
}

} // namespace dsrt::io
