"""Pinwheel's inference engine: GGUF chat models on a physically bounded KV cache.

Pure Python + JAX; nothing here imports Qt. The public surface is small:
`load_model`, `plan_memory`, `ChatSession`, `score`.

Names are imported lazily, so `engine.errors` or `engine.budget` can be used (by the store,
the settings panel, the launcher) without paying for importing JAX.
"""
from importlib import import_module

from . import xla_flags
from .version import __version__

xla_flags.apply()  # before anything creates JAX's backend (XLA reads its flags once)

_EXPORTS = {
    "NEEDLE_BUDGET": "budget", "auto_budget": "budget", "MemoryPlan": "budget", "plan_memory": "budget",
    "ModelFileError": "errors", "PinwheelError": "errors", "SettingsError": "errors",
    "TemplateError": "errors", "Model": "gguf_loader", "load_model": "gguf_loader",
    "SamplingParams": "sampler", "score": "scoring", "ChatSession": "session",
}
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
