//===- Process.h - this process's memory, for run reports -------*- C++ -*-===//
#ifndef DSRT_IO_PROCESS_H
#define DSRT_IO_PROCESS_H

#include <cstdint>

namespace dsrt::io {

/// The peak resident set of this process so far, in MiB.
int64_t peakRssMiB();

/// The resident set now, in MiB (0 where /proc is not readable).
double currentRssMiB();

} // namespace dsrt::io

#endif // DSRT_IO_PROCESS_H
