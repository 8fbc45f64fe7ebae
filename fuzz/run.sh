#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan, UBSan) into build-fuzz/ and runs each on its seed
# corpus, new inputs going to a scratch directory. Any crash, hang (10 s), sanitizer report or
# escaping exception stops with a non-zero exit and leaves the input as build-fuzz/crash-*.
#   fuzz/run.sh                   20 seconds per target (CI)
#   fuzz/run.sh -runs=1000000     a million executions per target (docs/reliability.md)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=("${@:--max_total_time=20}")
CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPUSIM_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" >&2
# Seeds: the corpus's hostile cases, and the repository's own presets and workloads as they are
# today (copies kept in the corpus drifted from the schema and stopped at validation). Workloads
# above 40 KB (the largest language models) are left out: they would raise libFuzzer's input size.
living=$(mktemp -d)
trap 'rm -rf "$living"' EXIT
mkdir -p "$living/fuzz_hardware" "$living/fuzz_workload" "$living/fuzz_trace_check" "$living/fuzz_onnx" "$living/fuzz_hlo"
cp hw/presets/*.json "$living/fuzz_hardware/"
find workloads/examples -name '*.json' -size -40k -exec cp {} "$living/fuzz_workload/" \;
cp tests/data/import/hlo/*.hlo "$living/fuzz_hlo/"
for target in fuzz_workload fuzz_hardware fuzz_trace_check fuzz_onnx fuzz_hlo; do
  scratch=$(mktemp -d)
  echo "fuzz: $target ${limit[*]}" >&2
  log="$scratch.log"
  status=0
  (cd build-fuzz && "fuzz/$target" "${limit[@]}" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      "$scratch" "../fuzz/corpus/$target" "$living/$target") >"$log" 2>&1 || status=$?
  rm -rf "$scratch"
  if [ "$status" -ne 0 ]; then
    # The whole report: the cause (an escaping exception's what(), a sanitizer's stack) is above the summary.
    grep -v -E "^#[0-9]+\s" "$log" | tail -n 60 >&2
    rm -f "$log"
    exit "$status"
  fi
  grep -E "^(Done|stat::number_of_executed_units)" "$log" >&2
  rm -f "$log"
done
