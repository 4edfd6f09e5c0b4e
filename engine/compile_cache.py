"""JAX's persistent compilation cache in the user's cache folder: the second start of Pinwheel
loads its compiled steps from disk instead of compiling them again (seconds saved per start).

JAX keys each entry by the computation (its HLO, so every shape and static setting), jax and
jaxlib's versions, the XLA flags and the device. The HLO names the native kernel only by its
target name, so the folder is also keyed by the kernel build (engine.kernels): a rebuilt
kernel never runs under an executable compiled for another. `PINWHEEL_COMPILE_CACHE=0` turns
it off.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

_lock = threading.Lock()
_dir: Path | None = None


def enable() -> Path | None:
    """Point JAX at the cache folder (once per process, before the first compile)."""
    global _dir
    with _lock:
        if _dir is not None or os.environ.get("PINWHEEL_COMPILE_CACHE", "1") == "0":
            return _dir
        import jax
        import platformdirs

        from . import kernels

        tag = kernels.build_tag() or "xla"
        path = platformdirs.user_cache_path("pinwheel", appauthor=False) / "xla" / tag
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only or full cache folder: compile every time, as before
            return None
        jax.config.update("jax_compilation_cache_dir", str(path))
        # Cache every step, even those that compile in under the default 1 s threshold.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        _dir = path
        return path


def _marker(key: str) -> Path | None:
    import hashlib

    return None if _dir is None else _dir / f"warm-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def is_warm(key: str) -> bool:
    """True when an earlier run compiled (and so cached) the steps named by key: this start
    loads them instead of compiling."""
    m = _marker(key)
    return m is not None and m.exists()


def mark_warm(key: str) -> None:
    m = _marker(key)
    if m is not None:
        try:
            m.touch()
        except OSError:  # a full or read-only cache folder: the next start says "first run" again
            pass
