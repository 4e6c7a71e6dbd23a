//===- Process.cpp - this process's memory, for run reports ---------------===//
#include "runtime/io/Process.h"

#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

namespace dsrt::io {

int64_t peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

double currentRssMiB() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  long long size = 0, resident = 0;
  int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return got == 2 ? double(resident) * double(sysconf(_SC_PAGESIZE)) / 1048576.0 : 0;
}

} // namespace dsrt::io
