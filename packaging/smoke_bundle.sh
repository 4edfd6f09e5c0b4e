#!/usr/bin/env bash
# Start the built bundle the way a user without Python would, offscreen, and check it works:
#   1. `pinwheel --version` prints the version, and names a native kernel variant;
#   2. `pinwheel chat --prompt "What is the capital of France?"` answers, naming Paris, on the
#      native kernel;
#   3. the window comes up, takes a message in messageInput and shows a reply in chatView.
# Each step runs with an empty environment (no PYTHONPATH, no venv, no compiler: PATH is an
# empty folder), a throw-away HOME and a temporary working folder, so only the bundle's own
# files can be used.
#
#   packaging/smoke_bundle.sh [BUNDLE_DIR]      (default: dist/pinwheel)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(cd "${1:-$root/dist/pinwheel}" && pwd)"
exe="$bundle/pinwheel"
[ -x "$exe" ] || { echo "smoke: no bundle at $exe (build it with packaging/build_bundle)" >&2; exit 2; }
version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$root/engine/version.py")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
mkdir -p "$work/empty-path"  # PATH: nothing on it, so no compiler can be found
timeout_bin="$(command -v timeout)"

run() {  # run NAME TIMEOUT [VAR=value ...] -- ARGS...: the bundle in a clean environment
  local name="$1" limit="$2"
  shift 2
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  mkdir -p "$work/$name/home"
  local start=${EPOCHREALTIME/./}
  (cd "$work/$name" && env -i HOME="$work/$name/home" PATH="$work/empty-path" LANG=C.UTF-8 \
      QT_QPA_PLATFORM=offscreen "${vars[@]}" "$timeout_bin" "$limit" "$exe" "$@") \
      >"$work/$name/out" 2>"$work/$name/err"
  local rc=$? us=$((${EPOCHREALTIME/./} - start))
  printf 'smoke: %-8s exit %s in %d.%02d s\n' "$name" "$rc" $((us / 1000000)) $((us % 1000000 / 10000))
  return $rc
}

check() {  # check NAME CONDITION-DESCRIPTION: count a failure and show the output
  echo "smoke: FAIL: $1: $2" >&2
  sed 's/^/    | /' "$work/$1/out" "$work/$1/err" | tail -25 >&2
  failures=$((failures + 1))
}

echo "smoke: bundle $bundle ($(du -sh "$bundle" | cut -f1))"

if run version 60 -- --version && [ "$(head -1 "$work/version/out")" = "pinwheel $version" ] \
  && grep -q "^kernel: native " "$work/version/out"; then
  sed 's/^/smoke:   /' "$work/version/out"
else
  check version "expected 'pinwheel $version' and 'kernel: native …'"
fi

if run chat 600 -- chat --prompt "What is the capital of France?" --max-tokens 16 --temperature 0 --json \
  && grep -qi paris "$work/chat/out" && grep -q '"kernel": "native ' "$work/chat/out"; then
  echo "smoke:   reply: $(tr '\n' ' ' <"$work/chat/out" | cut -c1-240)"
else
  check chat "expected a reply naming Paris, on the native kernel"
fi

if run window 600 PINWHEEL_SMOKE_QUIT_MS=480000 "PINWHEEL_SMOKE_MESSAGE=What is the capital of France?" -- \
  && grep -q "shown after" "$work/window/err" && grep -q "reply after" "$work/window/err"; then
  grep "pinwheel smoke:" "$work/window/err" | sed 's/^/smoke:   /'
else
  check window "expected the window to show and a reply to appear"
fi

if [ "$failures" -eq 0 ]; then
  echo "smoke: bundle OK"
else
  echo "smoke: $failures check(s) failed" >&2
  exit 1
fi
