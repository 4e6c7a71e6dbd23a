//===- AioTest.cpp - the NVMe tier's file ---------------------------------===//
//
// Extents written and read back through io_uring (and the synchronous
// engine), with requests split at the block size and more chunks than the
// queue holds; alignment, bounds and folder errors named; the file gone
// from the folder once created; a failed request thrown at wait after the
// others finished.
//
//===----------------------------------------------------------------------===//
#include "TestDir.h"
#include "runtime/io/Aio.h"
#include "io/FileUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <sys/stat.h>

namespace dsrt::io::test {
namespace {

/// An aligned buffer of `bytes`.
struct Buffer {
  char *p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t bytes) : n(bytes) {
    p = static_cast<char *>(std::aligned_alloc(AioFile::kAlign, bytes));
  }
  ~Buffer() { std::free(p); }
};

void fillPattern(Buffer &b, unsigned seed) {
  for (size_t k = 0; k < b.n; ++k)
    b.p[k] = char((k * 131 + seed * 7) % 251);
}

size_t entries(const std::string &dir) {
  size_t n = 0;
  for ([[maybe_unused]] auto &e : std::filesystem::directory_iterator(dir))
    ++n;
  return n;
}

class AioEngines : public ::testing::TestWithParam<const char *> {};

TEST_P(AioEngines, WritesAndReadsBackInFlight) {
  TestDir dir;
  AioOptions o;
  o.blockSize = 64 * 1024; // 1 MiB extents become 16 chunks each
  o.queueDepth = 3;        // fewer than the chunks of one request
  o.engine = GetParam();
  auto f = AioFile::create(dir.path(), "tier.swp", 5 << 20, o);
  EXPECT_EQ(0u, entries(dir.path())) << "the name is unlinked at once";
  EXPECT_EQ(uint64_t(5) << 20, f->size());
  Buffer a(1 << 20), b(3 * 4096), c(1 << 20);
  fillPattern(a, 1);
  fillPattern(b, 2);
  fillPattern(c, 3);
  // Three writes in flight together, then three reads.
  auto ta = f->write(a.p, 0, a.n), tb = f->write(b.p, 2 << 20, b.n),
       tc = f->write(c.p, 4 << 20, c.n);
  f->wait(tb);
  f->wait(ta);
  f->wait(tc);
  Buffer ra(a.n), rb(b.n), rc(c.n);
  auto rta = f->read(ra.p, 0, ra.n), rtb = f->read(rb.p, 2 << 20, rb.n),
       rtc = f->read(rc.p, 4 << 20, rc.n);
  f->drain();
  (void)rta, (void)rtb, (void)rtc;
  EXPECT_EQ(0, std::memcmp(a.p, ra.p, a.n));
  EXPECT_EQ(0, std::memcmp(b.p, rb.p, b.n));
  EXPECT_EQ(0, std::memcmp(c.p, rc.p, c.n));
  EXPECT_EQ(a.n + b.n + c.n, f->bytesWritten());
  EXPECT_EQ(a.n + b.n + c.n, f->bytesRead());
  EXPECT_EQ(2u * (16 + 1 + 16), f->chunksSubmitted());
  if (std::string(GetParam()) == "sync") {
    EXPECT_TRUE(f->mode() == AioMode::Sync || f->mode() == AioMode::SyncBuffered);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, AioEngines, ::testing::Values("auto", "sync"));

TEST(Aio, AutoUsesIoUringWhereTheKernelAllows) {
  TestDir dir;
  auto f = AioFile::create(dir.path(), "t.swp", 4096);
  // Either is correct; the mode says which, for the run's notes.
  std::string mode = aioModeName(f->mode());
  EXPECT_FALSE(mode.empty());
  std::printf("this machine: %s\n", mode.c_str());
}

TEST(Aio, RefusesUnalignedAndOutOfBoundsRequests) {
  TestDir dir;
  auto f = AioFile::create(dir.path(), "t.swp", 16384);
  Buffer b(8192);
  try {
    f->write(b.p + 512, 0, 4096);
    FAIL() << "an unaligned buffer was accepted";
  } catch (const IoError &e) {
    EXPECT_NE(std::string(e.what()).find("not aligned to 4096"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->write(b.p, 100, 4096), IoError);
  EXPECT_THROW(f->read(b.p, 0, 1000), IoError);
  try {
    f->read(b.p, 16384, 4096);
    FAIL() << "a read past the end was accepted";
  } catch (const IoError &e) {
    EXPECT_NE(std::string(e.what()).find("runs past the tier's 16384 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(Aio, FolderErrorsNameThePath) {
  TestDir dir;
  try {
    AioFile::create(dir.file("missing"), "t.swp", 4096);
    FAIL();
  } catch (const IoError &e) {
    EXPECT_NE(std::string(e.what()).find("missing: the nvme_path folder does not exist"),
              std::string::npos)
        << e.what();
  }
  // A name already there is never written over.
  { std::ofstream(dir.file("taken.swp")) << "not dsrt's"; }
  try {
    AioFile::create(dir.path(), "taken.swp", 4096);
    FAIL();
  } catch (const IoError &e) {
    EXPECT_NE(std::string(e.what()).find("never writes over a file it did not create"),
              std::string::npos)
        << e.what();
  }
  std::ifstream in(dir.file("taken.swp"));
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ("not dsrt's", kept);
  // More room than the file system has.
  try {
    AioFile::create(dir.path(), "huge.swp", uint64_t(1) << 62);
    FAIL();
  } catch (const IoError &e) {
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("huge.swp")));
  // Options out of range.
  AioOptions o;
  o.blockSize = 1000;
  EXPECT_THROW(AioFile::create(dir.path(), "t.swp", 4096, o), IoError);
  o = {};
  o.queueDepth = 0;
  EXPECT_THROW(AioFile::create(dir.path(), "t.swp", 4096, o), IoError);
  o = {};
  o.engine = "libaio";
  EXPECT_THROW(AioFile::create(dir.path(), "t.swp", 4096, o), IoError);
}

TEST(Aio, ManyRequestsKeepTheirOrderPerExtent) {
  // Writes to the same extent complete in any order on the disk; dsrt
  // waits for one before it issues the next to the same bytes, as here.
  TestDir dir;
  AioOptions o;
  o.blockSize = 8192;
  o.queueDepth = 2;
  auto f = AioFile::create(dir.path(), "t.swp", 64 * 4096, o);
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<AioFile::Ticket> tickets;
  for (int k = 0; k < 16; ++k) {
    bufs.push_back(std::make_unique<Buffer>(4 * 4096));
    fillPattern(*bufs.back(), unsigned(k + 10));
    tickets.push_back(f->write(bufs.back()->p, uint64_t(k) * 4 * 4096, 4 * 4096));
  }
  for (auto t : tickets)
    f->wait(t);
  for (int k = 0; k < 16; ++k) {
    Buffer r(4 * 4096);
    f->wait(f->read(r.p, uint64_t(k) * 4 * 4096, r.n));
    EXPECT_EQ(0, std::memcmp(r.p, bufs[size_t(k)]->p, r.n)) << "extent " << k;
  }
}

} // namespace
} // namespace dsrt::io::test
