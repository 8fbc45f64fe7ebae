// libsystemc's own main() refers to sc_main. tpusim and its tests bring their own main() and
// elaborate through sim/run, so this definition only satisfies the linker; it is never called.
#include <cstdio>

extern "C" int sc_main(int, char*[]) {
  std::fputs("tpusim: sc_main is not an entry point\n", stderr);
  return 1;
}
