/*===- MpiChild.c - an MPI rank that fails on purpose ----------------------===//
//
// The launcher tests run it under mpirun: every rank calls MPI_Init, then
// rank 1 fails as argv[1] says while the others wait in a barrier ("none":
// every rank finishes):
//   abort  MPI_Abort(MPI_COMM_WORLD, 7)
//   exit   exit(3) without MPI_Finalize
//   exit0  exit(0) without MPI_Finalize
//   kill   SIGKILL to itself
// Each failing rank first prints "dsrt: error: rank 1 failed" to stderr.
// With a run folder as argv[2], a rank that finishes records its exit
// status 0 in RUNDIR/ranks/RANK.exit, as dsrt's ranks do.
//
//===----------------------------------------------------------------------===*/
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *mode = argc > 1 ? argv[1] : "";
  if (rank == 1 && strcmp(mode, "none") != 0) {
    fprintf(stderr, "dsrt: error: rank 1 failed\n");
    fflush(stderr);
    if (!strcmp(mode, "abort"))
      MPI_Abort(MPI_COMM_WORLD, 7);
    if (!strcmp(mode, "exit"))
      exit(3);
    if (!strcmp(mode, "exit0"))
      exit(0);
    if (!strcmp(mode, "kill"))
      raise(SIGKILL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (argc > 2) {
    char path[4096];
    snprintf(path, sizeof path, "mkdir -p '%s/ranks' && echo 0 > '%s/ranks/%d.exit'", argv[2],
             argv[2], rank);
    if (system(path) != 0)
      return 1;
  }
  return 0;
}
