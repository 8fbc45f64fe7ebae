// The two ways a run can fail, mapped to exit codes by the command line.
#pragma once

#include <stdexcept>
#include <string>

namespace tpusim {

// Bad input: usage, configuration, workload. Exit code 2. The message names the JSON path.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The simulation itself failed (a stuck collective, a broken invariant). Exit code 1.
struct SimError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tpusim
