//===- AioBench.cpp - the NVMe tier's disk bandwidth, as dsrt reaches it --===//
//
// Writes, then reads back, one file of --mib MiB through AioFile (O_DIRECT
// through io_uring where the machine allows it) in requests of --request
// bytes, each split at --block bytes with --depth chunks in flight, and
// prints the sequential write and read bandwidth. This is the disk's side
// of the I/O lower bound of an NVMe-offloaded step (issue 24: the bytes a
// step moves divided by these rates).
//
//   dsrt_aio_bench [--dir D] [--mib N] [--request BYTES] [--block BYTES]
//                  [--depth Q] [--engine auto|io_uring|sync]
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Aio.h"
#include "io/FileUtil.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include <unistd.h>

using dsrt::io::AioFile;

int main(int argc, char **argv) {
  std::string dir = "/tmp", engine = "auto";
  uint64_t mib = 1024, request = 8 << 20, block = 1 << 20;
  int depth = 8;
  for (int k = 1; k + 1 < argc; k += 2) {
    std::string a = argv[k], v = argv[k + 1];
    if (a == "--dir")
      dir = v;
    else if (a == "--mib")
      mib = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--request")
      request = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--block")
      block = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--depth")
      depth = std::atoi(v.c_str());
    else if (a == "--engine")
      engine = v;
    else {
      std::fprintf(stderr, "dsrt_aio_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    dsrt::io::AioOptions o;
    o.blockSize = block;
    o.queueDepth = depth;
    o.engine = engine;
    const uint64_t bytes = mib << 20;
    auto f = AioFile::create(dir, "dsrt-aio-bench-" + std::to_string(::getpid()) + ".swp", bytes, o);
    // Two request buffers alternate, as a tiled optimizer step's staging.
    char *buf[2];
    for (char *&b : buf) {
      b = static_cast<char *>(std::aligned_alloc(AioFile::kAlign, request));
      std::memset(b, 0x5a, request);
    }
    auto pass = [&](bool write) {
      auto t0 = std::chrono::steady_clock::now();
      std::deque<AioFile::Ticket> inFlight;
      int k = 0;
      for (uint64_t off = 0; off < bytes; off += request, ++k) {
        uint64_t n = std::min(request, bytes - off);
        if (inFlight.size() == 2) {
          f->wait(inFlight.front());
          inFlight.pop_front();
        }
        inFlight.push_back(write ? f->write(buf[k % 2], off, n) : f->read(buf[k % 2], off, n));
      }
      f->drain();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double w = pass(true), r = pass(false);
    std::printf("%s: %llu MiB, requests of %llu bytes in chunks of %llu, %d in flight (%s)\n",
                dir.c_str(), (unsigned long long)mib, (unsigned long long)request,
                (unsigned long long)block, depth, dsrt::io::aioModeName(f->mode()));
    std::printf("write %.0f MB/s (%.2f s), read %.0f MB/s (%.2f s)\n", bytes / w / 1e6, w,
                bytes / r / 1e6, r);
    for (char *b : buf)
      std::free(b);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dsrt_aio_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
