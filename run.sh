#!/usr/bin/env bash
# Install whatever is missing (.venv, Pinwheel, the default model), then start Pinwheel.
#   ./run.sh                      the chat window
#   ./run.sh chat --prompt hi     any pinwheel command line: the terminal chat, plan, score ...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/ensure_env.sh"
pinwheel_ensure_env

case "${1:-}" in
  chat | plan | score | bench | install-desktop | uninstall-desktop | -V | --version | -h | --help) ;;
  *)
    missing="$(pinwheel_missing_qt_packages)"
    if [ -n "$missing" ]; then
      {
        echo "pinwheel: the chat window needs system libraries this machine lacks. Install them with:"
        echo "    sudo apt-get install $missing"
        echo "  (the terminal chat works without them: ./run.sh chat)"
      } >&2
    fi
    ;;
esac
exec "$PINWHEEL_VENV/bin/pinwheel" "$@"
