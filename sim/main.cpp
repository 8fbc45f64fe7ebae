// The tpusim executable: the command line (sim/cli.cpp) with the built-in models.
#include "sim/cli.hpp"

int main(int argc, char** argv) { return tpusim::cli_main(argc, argv); }
