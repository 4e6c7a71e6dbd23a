//===- npy.cpp - fuzz the .npy reader --------------------------------------===//
//
// Input: a whole .npy file. readNpy either throws IoError or returns an
// array whose bytes lie inside the file (every byte is read).
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Npy.h"
#include "test/fuzz/FuzzUtil.h"

using namespace dsrt::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = dsc::fuzz::writeScratch("array.npy", data, size);
  try {
    NpyArray a = readNpy(path);
    size_t bytes = a.nbytes();
    if (a.dataOffset > size || bytes > size - a.dataOffset) {
      std::fprintf(stderr, "npy: array of %zu bytes at %zu in a file of %zu\n", bytes, a.dataOffset,
                   size);
      std::abort();
    }
    dsc::fuzz::touch(a.data(), bytes);
  } catch (const IoError &e) {
    dsc::fuzz::note(e.what());
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("npy", e);
  }
  return 0;
}
