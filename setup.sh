#!/usr/bin/env bash
# Installs what tpusim needs from Debian's packages (only what is missing), then configures and
# builds it into build/. Safe to run again: a second run only rebuilds what changed.
#   ./setup.sh           what building and running needs
#   ./setup.sh --tests   also Chromium, in which a test renders the HTML report, and Python for
#                        the validation test (bench/validate.py --check)
set -euo pipefail
cd "$(dirname "$0")"

packages=(g++ cmake make pkg-config libsystemc-dev libfmt-dev nlohmann-json3-dev libboost-test-dev libcli11-dev zlib1g-dev)
if [ "${1:-}" = "--tests" ]; then packages+=(chromium gzip python3); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >&2
