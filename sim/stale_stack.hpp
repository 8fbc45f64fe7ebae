// SystemC switches stacks with QuickThreads. SystemC 2.3.4 tells AddressSanitizer of the switch
// a process makes when it waits (sc_cor_pkg_qt::yield calls __sanitizer_start_switch_fiber), but
// not of the one it makes when it finishes (sc_cor_pkg_qt::abort, seen in libsystemc's
// disassembly), so once a process has finished, ASan takes that coroutine's stack for the main
// thread's (google/sanitizers#189). Then the unpoisoning ASan does before unwinding an exception
// is skipped ("ASan is ignoring requested __asan_handle_no_return"), the redzones of the frames an
// exception unwound stay poisoned, and a function later called in that stretch of stack trips
// over them: a false "stack-buffer-overflow".
// - return_asan_to_this_stack() tells ASan again which stack the calling thread runs on; call it
//   when sc_start returns.
// - clear_stale_stack_poison() clears the stretch below its caller (dead stack), as ASan would
//   have, for poison left while ASan did not know the stack.
// Without ASan both do nothing.
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
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
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

// A switch "to" the stack the thread is already on: ASan records its bounds as the current ones.
inline void return_asan_to_this_stack() {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return;
  void* bottom = nullptr;
  size_t size_bytes = 0;
  const bool known = pthread_attr_getstack(&attributes, &bottom, &size_bytes) == 0;
  pthread_attr_destroy(&attributes);
  if (!known) return;
  __sanitizer_start_switch_fiber(nullptr, bottom, size_bytes);
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
}
#else
inline void clear_stale_stack_poison() {}
inline void return_asan_to_this_stack() {}
#endif

}  // namespace tpusim
