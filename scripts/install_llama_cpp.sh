#!/usr/bin/env bash
# Install llama-cpp-python (the reference the agreement tests and the bench compare with; never a
# runtime dependency) into the given Python's environment, building llama.cpp from source.
#
#   scripts/install_llama_cpp.sh [PYTHON]        (default: .venv/bin/python)
#
# llama.cpp's default build is -march=native. On a CPU with AMX (Intel Sapphire Rapids and
# later) that build turns on ggml's AMX matrix path, which crashed here (SIGSEGV in
# ggml_backend_amx_mul_mat on the Llama 3 family test's Q8_0 file). There the build names the
# CPU's own AVX-512/AVX2 features instead of -march=native, and leaves AMX out; elsewhere the
# default build runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${1:-.venv/bin/python}"
VERSION="0.3.36"

# Without the multimodal library (mtmd: CLIP, image and audio encoders): nothing here uses it, and
# llama_cpp imports it only inside its vision chat handlers. It is a tenth of the sources and
# about a fifth of the build's time on 2 cores.
flags="-DLLAVA_BUILD=OFF"
if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
  have() { grep -m1 '^flags' /proc/cpuinfo | grep -qw "$1"; }
  flags="$flags -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx512f:AVX512 avx512_vnni:AVX512_VNNI \
              avx512vbmi:AVX512_VBMI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI; do
    have "${pair%%:*}" && flags="$flags -DGGML_${pair#*:}=ON"
  done
  echo "install_llama_cpp: this CPU has AMX; building llama.cpp without it ($flags)"
fi
CMAKE_ARGS="${CMAKE_ARGS:-} $flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$PY" -m pip install --disable-pip-version-check -q --no-cache-dir --force-reinstall --no-deps \
  "llama-cpp-python==$VERSION"
# its own dependencies (numpy, jinja2, diskcache, typing-extensions), without rebuilding it
"$PY" -m pip install --disable-pip-version-check -q "llama-cpp-python==$VERSION"
