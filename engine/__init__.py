"""Pinwheel's inference engine: GGUF chat models on a physically bounded KV cache.

Pure Python + JAX; nothing here imports Qt. The public surface is small:
`load_model`, `plan_memory`, `ChatSession`, `score`.
"""
from .budget import DEFAULT_BUDGET, MemoryPlan, plan_memory
from .errors import ModelFileError, PinwheelError, SettingsError, TemplateError
from .gguf_loader import Model, load_model
from .sampler import SamplingParams
from .scoring import score
from .session import ChatSession
from .version import __version__

__all__ = [
    "ChatSession", "DEFAULT_BUDGET", "MemoryPlan", "Model", "ModelFileError", "PinwheelError",
    "SamplingParams", "SettingsError", "TemplateError", "load_model", "plan_memory", "score",
    "__version__",
]
