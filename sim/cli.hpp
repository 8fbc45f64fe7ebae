// The tpusim command line as a function, so a program of one's own can register its models
// (hw/memory.hpp) and then be tpusim: `int main(int argc, char** argv) { register...; return
// tpusim::cli_main(argc, argv); }` (tests/custom_memory_main.cpp).
#pragma once

namespace tpusim {

// Parses the command line, runs the subcommand and returns the exit code: 0 done, 1 the machine
// or tpusim failed, 2 bad input; a run interrupted by a signal exits with 128 + the signal.
int cli_main(int argc, char** argv);

}  // namespace tpusim
