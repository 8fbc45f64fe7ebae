#!/usr/bin/env bash
# Runs every test (CTest, in parallel on every core) with its output on failure, and says which
# tests are still running whenever CTest has printed nothing for 30 seconds: CTest itself prints
# a line only as a test starts or ends, and the slowest validation points run for minutes.
#   tests/run.sh [CTEST OPTIONS]...   e.g. tests/run.sh -R validation
set -uo pipefail
cd "$(dirname "$0")/.."

heartbeat_s=${TPUSIM_TESTS_HEARTBEAT_S:-30}  # a test of this script sets it shorter
declare -A running=()  # test name -> when it started (seconds since this script started)
show_running() {
  local now=$SECONDS list="" name
  for name in "${!running[@]}"; do
    list+="${list:+, }$name ($(( now - running[$name] )) s)"
  done
  [ -n "$list" ] && echo "tests: still running after $(( now / 60 )) min $(( now % 60 )) s: $list"
}

# Each training point of the validation set is a test of its own, registered from the data file
# when the build is configured: configure again (seconds, nothing built) so that a point added
# since runs, and `validation` does not miss its figure.
if [ -f build/CMakeCache.txt ]; then cmake -S . -B build > /dev/null || exit 1; fi

ctest --test-dir build --output-on-failure -j"$(nproc)" "$@" 2>&1 | {
  while :; do
    status=0
    IFS= read -r -t "$heartbeat_s" line || status=$?
    if [ "$status" -gt 128 ]; then show_running; continue; fi  # silence: say what is running
    [ "$status" -eq 0 ] || [ -n "$line" ] || break            # the end
    printf '%s\n' "$line"
    if [[ $line =~ ^\ *Start\ +[0-9]+:\ (.+)$ ]]; then
      running[${BASH_REMATCH[1]}]=$SECONDS
    elif [[ $line =~ Test\ +#[0-9]+:\ ([^ ]+)\ \.* ]]; then
      unset "running[${BASH_REMATCH[1]}]"
    fi
    [ "$status" -eq 0 ] || break
  done
}
