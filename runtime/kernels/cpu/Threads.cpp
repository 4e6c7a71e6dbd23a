//===- Threads.cpp - thread count of the dsrt CPU kernels -----------------===//
//
// One knob for OpenMP (our loops and oneDNN, which runs on OpenMP) and for
// OpenBLAS, which has its own pthread pool.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"

#include <cblas.h>
#include <omp.h>
#include <xmmintrin.h>

namespace dsrt::cpu {

// OpenMP's default (OMP_NUM_THREADS or the core count), taken before any
// setNumThreads call changes it.
static const int kDefaultThreads = omp_get_max_threads();

void setNumThreads(int n) {
  int threads = n > 0 ? n : kDefaultThreads;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int numThreads() { return omp_get_max_threads(); }

void flushDenormals() {
  // FTZ (bit 15) and DAZ (bit 6) of MXCSR on every OpenMP thread.
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

} // namespace dsrt::cpu
