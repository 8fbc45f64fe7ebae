// SystemC switches stacks with QuickThreads, which AddressSanitizer cannot follow
// (google/sanitizers#189; tests/CMakeLists.txt): once its coroutines have run, ASan no longer
// knows the main thread's stack, so the unpoisoning it does before unwinding an exception is
// skipped, and the redzones of the frames an exception unwound stay poisoned. A function later
// called in that stretch of stack then trips over them: a false "stack-buffer-overflow".
// clear_stale_stack_poison() clears the stretch below its caller (dead stack), as ASan would
// have; without ASan it does nothing.
#pragma once

// TPUSIM_ASAN: built under AddressSanitizer (gcc says so with __SANITIZE_ADDRESS__, clang with
// __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define TPUSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPUSIM_ASAN 1
#endif
#endif

#ifdef TPUSIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tpusim {

#ifdef TPUSIM_ASAN
// Not instrumented itself, so that its own frame, in the stale stretch, is never checked.
__attribute__((no_sanitize_address, noinline)) inline void clear_stale_stack_poison() {
  constexpr unsigned long kStretchBytes = 4ul << 20;  // far deeper than a simulation's calls reach on this stack
  char here = 0;
  char* const top = &here - 64;                     // this frame keeps its own
  __asan_unpoison_memory_region(top - kStretchBytes, kStretchBytes);
}
#else
inline void clear_stale_stack_poison() {}
#endif

}  // namespace tpusim
