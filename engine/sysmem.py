"""Process memory: what the gauge reports, and giving freed heap back to the system.

Loading dequantizes every tensor through temporary float32 arrays and XLA's compiler allocates
freely; glibc keeps those freed pages in its heap, so RSS would stay ~120 MB above what the
process uses. `trim()` after loading and after compiling hands them back (malloc_trim)."""
from __future__ import annotations

import ctypes
import ctypes.util
import gc

import psutil

_PROCESS = psutil.Process()


def rss_bytes() -> int:
    return _PROCESS.memory_info().rss


def _libc():
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "malloc_trim") else None


_LIBC = _libc()


def trim() -> None:
    """Collect garbage and return free heap pages to the OS (a no-op off glibc)."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
