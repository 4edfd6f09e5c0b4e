#!/usr/bin/env bash
# Install whatever is missing (as ./run.sh does), then run the test suite headless.
#   ./test.sh                     every test
#   ./test.sh tests/app -k gauge  any pytest arguments
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/ensure_env.sh"
pinwheel_ensure_env
cd "$PINWHEEL_ROOT"
export QT_QPA_PLATFORM=offscreen
exec "$PINWHEEL_PY" -m pytest -q "$@"
