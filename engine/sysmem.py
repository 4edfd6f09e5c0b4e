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

# glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MB), after
# which blocks that size come from the heap instead, where freed ones fragment and malloc_trim
# cannot return them: every Apply of a new memory setting (new executables, new XLA buffers)
# left ~2.5 MB more behind, +46 MB after 13 Applies cycling KV types. A fixed threshold keeps
# blocks of 1 MiB and up in their own mappings, given back when freed: flat across Applies
# (measured with the default model), the decode step unchanged.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
if _LIBC is not None and hasattr(_LIBC, "mallopt"):
    _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def trim(collect: bool = True) -> None:
    """Collect garbage (unless told not to: a full collection takes ~50 ms in a big process) and
    return free heap pages to the OS (a no-op off glibc)."""
    if collect:
        gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
