//===- safetensors.cpp - fuzz the safetensors reader -----------------------===//
//
// Input: a whole .safetensors file. SafeTensorsFile::open either throws
// IoError or hands out tensors whose bytes all lie inside the mapped file:
// every tensor's bytes are read, so ASan sees a range past the end.
//
//===----------------------------------------------------------------------===//
#include "io/SafeTensors.h"
#include "test/fuzz/FuzzUtil.h"

using namespace dsrt::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = dsc::fuzz::writeScratch("weights.safetensors", data, size);
  try {
    SafeTensorsFile file = SafeTensorsFile::open(path);
    for (const TensorRef &t : file.tensors()) {
      size_t bytes = t.nbytes();
      if (bytes > size) {
        std::fprintf(stderr, "safetensors: tensor '%s' of %zu bytes in a file of %zu\n",
                     t.name.c_str(), bytes, size);
        std::abort();
      }
      dsc::fuzz::touch(t.data, bytes);
      if (file.find(t.name) == nullptr)
        std::abort();
      (void)file.at(t.name);
    }
    for (const auto &[key, value] : file.metadata())
      dsc::fuzz::touch(value.data(), value.size());
    (void)file.find("");
  } catch (const IoError &e) {
    dsc::fuzz::note(e.what());
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("safetensors", e);
  }
  return 0;
}
