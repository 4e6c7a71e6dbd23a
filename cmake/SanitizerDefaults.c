/*===- SanitizerDefaults.c - sanitizer options built into every binary ----===*
 *
 * Linked into every executable of a DSC_SANITIZE build (CMakeLists.txt), so
 * a test, a fuzz harness or a tool run by hand behaves the same as under
 * scripts/sanitize.sh. ASAN_OPTIONS / LSAN_OPTIONS / UBSAN_OPTIONS given at
 * run time still override these.
 *
 *===----------------------------------------------------------------------===*/

/* Only the binaries that link MPI define it (weak: null elsewhere). */
extern int MPI_Init(int *argc, char ***argv) __attribute__((weak));

#define DSC_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "coverage")))

/* allow_user_poisoning=0: LLVM's headers poison the unused part of a
 * BumpPtrAllocator slab when the includer is built with ASan, but Debian's
 * libLLVM/libMLIR are not, and their (inlined) allocations never unpoison:
 * every MLIR tool would stop at a false use-after-poison.
 * allocator_may_return_null=1: malloc of more than there is returns NULL, as
 * without ASan, so a plan asking for a huge arena gets dsrt's error.
 * fast_unwind_on_malloc=0 where MPI is linked: OpenMPI is built without frame
 * pointers, so the fast unwinder leaves its allocations without a stack and
 * the suppressions below could not match them. */
DSC_NO_SANITIZE const char *__asan_default_options(void) {
  if (MPI_Init)
    return "allow_user_poisoning=0:allocator_may_return_null=1:fast_unwind_on_malloc=0";
  return "allow_user_poisoning=0:allocator_may_return_null=1";
}

DSC_NO_SANITIZE const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

/* Tests read stderr: a run that leaks nothing of its own prints nothing. */
DSC_NO_SANITIZE const char *__lsan_default_options(void) { return "print_suppressions=0"; }

/* What OpenMPI and its dependencies keep until exit; a leak in dsc's or
 * dsrt's own code is still reported. scripts/sanitize.sh keeps MPI's plugins
 * loaded (OMPI_MCA_mca_base_component_disable_dlclose=1) so that their
 * frames have names to match. libtorch 1.13's archive reader leaks its zip
 * state when a corrupt archive makes its constructor throw (inside
 * libtorch_cpu, which dsc cannot free; the TorchScript reader's own
 * allocations are still checked). LLVM's OpenMP runtime keeps its thread
 * pool's state until exit, and a forked child (the launcher's tests) exits
 * without the pool's threads, so LeakSanitizer sees that state unowned. */
DSC_NO_SANITIZE const char *__lsan_default_suppressions(void) {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libhwloc.so\n"
         "leak:libpmix.so\n"
         "leak:libevent\n"
         "leak:mca_\n"
         "leak:libtorch_cpu.so\n"
         "leak:libomp.so\n";
}
