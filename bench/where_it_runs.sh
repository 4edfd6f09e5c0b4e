#!/usr/bin/env bash
# Decode speed of one model each way Pinwheel can be installed and run, in turn, round by round
# (issue 24's table): the editable install; a wheel from `pip wheel .` in a fresh venv with no
# C++ compiler on PATH and an empty HOME (no cache folder); the bundle (dist/pinwheel, when
# built) likewise; the XLA path (PINWHEEL_KERNELS=0); the x86-64-v2 baseline variant.
#
#   bench/where_it_runs.sh [MODEL.gguf] [ROUNDS]
#       default: the SmolLM2-360M Q4_0 ladder rung (pinwheel bench --ladder writes it), 3 rounds
#
# Each run is `pinwheel chat --prompt … --max-tokens 64 --temperature 0 --no-speculative --json`;
# it prints each run's decode and prefill tok/s, then each way's median and its ratio to the
# editable install's. Needs .venv (./run.sh) and network-free pip (the wheel's dependencies
# come from pip's cache or index as for any install).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL="${1:-$HOME/.cache/pinwheel/ladder/smollm2-360m-Q4_0.gguf}"
ROUNDS="${2:-3}"
[ -f "$MODEL" ] || { echo "where_it_runs: no model at $MODEL (pinwheel bench --ladder --rungs smollm2-360m writes it)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "where_it_runs: building the wheel and a fresh venv for it" >&2
.venv/bin/python -m pip wheel -q --no-deps -w "$work/wheel" . >/dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/wheel/*.whl >/dev/null
mkdir -p "$work/no-compiler-bin" "$work/empty"
for f in /usr/bin/* /bin/*; do  # the system's tools, less every compiler
  case "$(basename "$f")" in cc|c++|g++*|gcc*|clang*|*-g++*|*-gcc*|cpp*|c89*|c99*|x86_64-linux-gnu-*|aarch64-linux-gnu-*) ;;
    *) ln -sf "$f" "$work/no-compiler-bin/$(basename "$f")" 2>/dev/null || true ;; esac
done

ARGS=(chat --model "$MODEL" --prompt "Tell me a story about a dragon." --max-tokens 64 --temperature 0
      --no-speculative --json)
run() {  # name command...: one line "name decode prefill kernel"
  local name=$1 out
  shift
  out="$("$@" "${ARGS[@]}" 2>/dev/null | tail -1)" || true
  python3 -c 'import json, sys
d = json.loads(sys.argv[2]); print(sys.argv[1], d["decode_tok_s"], d["prefill_tok_s"], d["kernel"])' "$name" "$out" \
    || echo "$name failed"
}
fresh() { rm -rf "$work/home"; mkdir -p "$work/home"; }
for _ in $(seq "$ROUNDS"); do
  run normal .venv/bin/pinwheel
  fresh; run wheel-no-compiler env -i HOME="$work/home" PATH="$work/venv/bin:$work/no-compiler-bin" LANG=C.UTF-8 \
    "$work/venv/bin/pinwheel"
  if [ -x dist/pinwheel/pinwheel ]; then
    fresh; run bundle-no-compiler env -i HOME="$work/home" PATH="$work/empty" LANG=C.UTF-8 dist/pinwheel/pinwheel
  fi
  run xla-path env PINWHEEL_KERNELS=0 .venv/bin/pinwheel
  [ "$(uname -m)" = x86_64 ] && run baseline-x86-64-v2 env PINWHEEL_KERNEL_VARIANT=x86-64-v2 .venv/bin/pinwheel
done | tee "$work/runs"
python3 - "$work/runs" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split(maxsplit=3)
    if len(parts) == 4:
        runs[parts[0]].append(float(parts[1]))
base = statistics.median(runs["normal"])
print(f"{'way':<22} {'decode tok/s (median)':>22} {'vs normal':>10}")
for name, v in runs.items():
    print(f"{name:<22} {statistics.median(v):>22.1f} {statistics.median(v) / base:>9.2f}x")
PY
