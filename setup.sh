#!/usr/bin/env bash
# Installs what tpusim needs from Debian's packages (only what is missing), then configures and
# builds it into build/. Safe to run again: a second run only rebuilds what changed.
#   ./setup.sh             what building and running needs; builds build/tpusim only
#   ./setup.sh --tests     also Chromium, in which a test renders the HTML report, and Python for
#                          the validation test (bench/validate.py --check); builds the tests too
#   ./setup.sh --verbose   show the package manager's and the compiler's output (by default it
#                          goes to build/setup.log, and only its end is shown if a step fails)
set -euo pipefail
cd "$(dirname "$0")"

tests=0 verbose=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --verbose) verbose=1 ;;
    *) echo "setup: unknown option $arg (expected --tests, --verbose)" >&2; exit 2 ;;
  esac
done

mkdir -p build
log=build/setup.log
: > "$log"
# Runs a step quietly unless --verbose; on failure shows the end of its output.
step() {
  local what="$1"; shift
  echo "setup: $what" >&2
  if [ "$verbose" -eq 1 ]; then "$@" >&2; return; fi
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: failed: $what; the last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}

packages=(g++ cmake make pkg-config libsystemc-dev libfmt-dev nlohmann-json3-dev libboost-test-dev libcli11-dev zlib1g-dev
          libprotobuf-dev protobuf-compiler libonnx-dev)
if [ "$tests" -eq 1 ]; then packages+=(chromium gzip python3); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  step "updating the package lists" $sudo apt-get update -qq
  step "installing ${missing[*]}" $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

step "configuring build/" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
if [ "$tests" -eq 1 ]; then
  step "building build/tpusim and the tests" cmake --build build -j"$(nproc)"
else
  step "building build/tpusim" cmake --build build -j"$(nproc)" --target tpusim
fi
