#!/usr/bin/env bash
# Installs what tpusim needs from Debian's packages (only what is missing), then configures and
# builds it into build/. Safe to run again: a second run only rebuilds what changed.
#   ./setup.sh             what building and running needs; builds build/tpusim only
#   ./setup.sh --tests     also Chromium, in which a test renders the HTML report, and Python for
#                          the validation test (bench/validate.py --check); builds the tests too
#   ./setup.sh --verbose   show the package manager's and the compiler's output (by default it
#                          goes to build/setup.log, and only its end is shown if a step fails)
# The long steps (installing, building) show their percentage: one updating line on a terminal,
# otherwise a line at each tenth and at least every 45 seconds, so that a log shows it is alive.
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
if [ -t 2 ]; then terminal=1; else terminal=0; fi

fail() {
  [ "$terminal" -eq 1 ] && printf '\n' >&2
  echo "setup: failed: $1; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
}

# Runs a step quietly unless --verbose; on failure shows the end of its output.
step() {
  local what="$1"; shift
  echo "setup: $what" >&2
  if [ "$verbose" -eq 1 ]; then "$@" >&2; return; fi
  "$@" >>"$log" 2>&1 || fail "$what"
}

minutes() { local s=$1; if [ "$s" -ge 60 ]; then echo "$((s / 60)) min $((s % 60)) s"; else echo "$s s"; fi; }

# Reads a step's output and shows its percentage. `kind` says where it comes from: make's
# "[ 45%]" lines, or apt's own lines counted against the packages it announces ("Get:" 40%,
# "Unpacking" 30%, "Setting up" 30%). (apt's status file descriptor would say it directly,
# but apt makes that descriptor non-blocking, and a package script writing to the same pipe
# then fails: fontconfig's did.)
show_progress() {
  local what="$1" kind="$2" start=$SECONDS shown_at=$SECONDS percent=0 shown=-1 line status
  local packages=0 fetched=0 unpacked=0 set_up=0
  while :; do
    status=0
    IFS= read -r -t 15 line || status=$?
    if [ "$status" -le 128 ]; then  # a line, or the end (perhaps after a last line without its newline)
      if [ "$kind" = make ] && [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
        percent=${BASH_REMATCH[1]}
      elif [ "$kind" = apt ]; then
        if [[ $line =~ ^([0-9]+)\ upgraded,\ ([0-9]+)\ newly\ installed ]]; then
          packages=$(( BASH_REMATCH[1] + BASH_REMATCH[2] ))
        elif [[ $line =~ ^Get:[0-9]+\  ]]; then fetched=$(( fetched + 1 ))
        elif [[ $line =~ ^Unpacking\  ]]; then unpacked=$(( unpacked + 1 ))
        elif [[ $line =~ ^Setting\ up\  ]]; then set_up=$(( set_up + 1 ))
        fi
        if [ "$packages" -gt 0 ]; then
          percent=$(( (40 * fetched + 30 * unpacked + 30 * set_up) / packages ))
          [ "$percent" -le 100 ] || percent=100
        fi
      fi
      [ "$status" -eq 0 ] || break
    fi
    local elapsed=$(( SECONDS - start ))
    if [ "$terminal" -eq 1 ]; then
      printf '\r\033[Ksetup: %s: %d%% (%s)' "$what" "$percent" "$(minutes "$elapsed")" >&2
    elif [ $(( percent / 10 )) -gt $(( shown / 10 )) ] || [ $(( SECONDS - shown_at )) -ge 45 ]; then
      echo "setup: $what: $percent% ($(minutes "$elapsed"))" >&2
      shown=$percent shown_at=$SECONDS
    fi
  done
  [ "$terminal" -eq 1 ] && printf '\r\033[Ksetup: %s: done (%s)\n' "$what" "$(minutes $(( SECONDS - start )))" >&2
  return 0
}

# A long step: its output to the log and its percentage to the screen, the progress lines
# under `label` (the step's first line, `what`, may be long: the packages it installs).
long_step() {
  local what="$1" label="$2" kind="$3"; shift 3
  echo "setup: $what" >&2
  if [ "$verbose" -eq 1 ]; then "$@" >&2; return; fi
  "$@" 2>&1 | tee -a "$log" | show_progress "$label" "$kind" || fail "$what"
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
  long_step "installing ${missing[*]}" "installing ${#missing[@]} packages" apt $sudo env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

step "configuring build/" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
if [ "$tests" -eq 1 ]; then
  long_step "building build/tpusim and the tests" "building" make cmake --build build -j"$(nproc)"
else
  long_step "building build/tpusim" "building" make cmake --build build -j"$(nproc)" --target tpusim
fi
