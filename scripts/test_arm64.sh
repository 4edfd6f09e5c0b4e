#!/usr/bin/env bash
# The native kernel's ARM64 paths, tested here by emulation (no ARM machine needed).
#
# Cross-builds engine/kernels/qmatmul.cc, inside the C++ harness tests/kernels/kernel_check.cc
# (which includes the kernel's source and calls its product and attention entry points), once per
# aarch64 variant with engine/kernels/variants.py's flags, and runs each under qemu-aarch64:
#   neon     -march=armv8-a                   on -cpu cortex-a53 (no dotprod: the baseline path)
#   dotprod  -march=armv8.2-a+dotprod         on -cpu max
#   i8mm     -march=armv8.2-a+dotprod+i8mm    on -cpu max
# and builds and runs the same harness natively (-march=native, and -march=x86-64-v2 for the
# SSE4.2 tile), which checks the harness against the x86 paths. Every build is -Wall -Wextra -Werror; with clang++ on PATH the source is also
# checked warning-free with clang for x86-64 and aarch64. Installs what it lacks (root + apt-get:
# g++-aarch64-linux-gnu, qemu-user-static, clang). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

INC=engine/kernels/include  # the vendored XLA FFI headers (header-only), as setup.py builds with

qemu() { command -v qemu-aarch64-static || command -v qemu-aarch64 || true; }
missing=""
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || missing="$missing g++-aarch64-linux-gnu"
[ -n "$(qemu)" ] || missing="$missing qemu-user-static"
command -v clang++ >/dev/null 2>&1 || missing="$missing clang"  # the second compiler the source must satisfy
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test_arm64: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086  # one word per package
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "test_arm64: FAILED: missing$missing (and no root apt-get to install them)" >&2
    exit 1
  fi
fi
QEMU="$(qemu)"

work="$(mktemp -d "${TMPDIR:-/tmp}/pinwheel-arm64.XXXXXX")"
trap 'rm -rf "$work"' EXIT
src=tests/kernels/kernel_check.cc
common=(-O3 -std=c++17 -Wall -Wextra -Werror -isystem "$INC" -I engine/kernels -pthread)

# Two builds at a time (the kernel is one large translation unit, ~15 s each).
build() {  # name compiler flags...
  local name=$1 cxx=$2
  shift 2
  if ! "$cxx" "${common[@]}" "$@" "$src" -o "$work/$name" >"$work/$name.log" 2>&1; then
    echo "test_arm64: FAILED: the $name build:" >&2
    tail -30 "$work/$name.log" >&2
    return 1
  fi
}
failed=0
build x86 g++ -march=native &
p1=$!
build neon aarch64-linux-gnu-g++ -march=armv8-a -static &
p2=$!
wait "$p1" || failed=1
wait "$p2" || failed=1
build dotprod aarch64-linux-gnu-g++ -march=armv8.2-a+dotprod -static &
p1=$!
build i8mm aarch64-linux-gnu-g++ -march=armv8.2-a+dotprod+i8mm -static &
p2=$!
wait "$p1" || failed=1
wait "$p2" || failed=1
build x86-64-v2 g++ -march=x86-64-v2 || failed=1  # the SSE4.2 tile (no AVX2, no FMA, no F16C)
[ "$failed" = 0 ] || exit 1
echo "test_arm64: built the x86 (native and x86-64-v2) and three aarch64 variants in $((SECONDS - started)) s"

status=0
run() {  # name command...: the harness prints "<name>: N checks passed (...)"
  local name=$1
  shift
  if ! "$@" "$name" >"$work/$name.out" 2>&1; then
    cat "$work/$name.out" >&2
    echo "test_arm64: FAILED: $name" >&2
    status=1
    return
  fi
  grep "checks passed" "$work/$name.out"
}
run x86 "$work/x86"
run x86-64-v2 "$work/x86-64-v2"
run neon "$QEMU" -cpu cortex-a53 "$work/neon"
run dotprod "$QEMU" -cpu max "$work/dotprod"
run i8mm "$QEMU" -cpu max "$work/i8mm"

# The baseline run means something only if its CPU model really lacks dotprod: the dotprod
# build must fault there (SIGILL) rather than pass.
if ("$QEMU" -cpu cortex-a53 "$work/dotprod" probe; exit $?) >/dev/null 2>&1; then
  echo "test_arm64: FAILED: the dotprod build ran on -cpu cortex-a53; the baseline run is not dotprod-free" >&2
  status=1
fi

# The three ARM variants differ only in how they form exact integer sums, so their outputs must
# be the same bits; the x86 build is compared for information (the scalar fallback for head
# sizes that are not a multiple of 8 rounds differently there).
digests() { sed -n 's/.*output digests: \(.*\))$/\1/p' "$work/$1.out" 2>/dev/null; }
if [ "$status" = 0 ]; then
  if [ "$(digests neon)" != "$(digests dotprod)" ] || [ "$(digests neon)" != "$(digests i8mm)" ]; then
    echo "test_arm64: FAILED: the ARM variants' outputs differ (they must be bit-identical)" >&2
    status=1
  else
    x86p="$(digests x86 | cut -d, -f1)" armp="$(digests neon | cut -d, -f1)"
    [ "$x86p" = "$armp" ] && same="the same bits as" || same="different bits from"
    echo "test_arm64: the three ARM variants agree bit for bit; their products give $same the x86 build"
  fi
fi

# Warning-free with clang too (x86-64 and aarch64), where clang++ is installed.
if command -v clang++ >/dev/null 2>&1; then
  for target in "-march=x86-64-v3" "-march=x86-64-v2" "--target=aarch64-linux-gnu -march=armv8-a" \
                "--target=aarch64-linux-gnu -march=armv8.2-a+dotprod" "--target=aarch64-linux-gnu -march=armv8.2-a+dotprod+i8mm"; do
    # shellcheck disable=SC2086  # the target is several flags
    if ! clang++ $target -std=c++17 -O3 -Wall -Wextra -Werror -isystem "$INC" -fsyntax-only engine/kernels/qmatmul.cc \
        >"$work/clang.log" 2>&1; then
      cat "$work/clang.log" >&2
      echo "test_arm64: FAILED: clang++ $target" >&2
      status=1
    fi
  done
  [ "$status" = 0 ] && echo "test_arm64: clang++ $(clang++ -dumpversion): warning-free for x86-64 and aarch64"
else
  echo "test_arm64: clang++ not installed: the clang warning check skipped"
fi

echo "test_arm64: $([ "$status" = 0 ] && echo passed || echo FAILED) in $((SECONDS - started)) s"
exit "$status"
