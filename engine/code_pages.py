"""Letting go of jaxlib's start-up code: its shared library is 350 MB, and starting JAX's CPU
backend runs initializers spread across it, leaving ~97 MB of its code resident. Little of that is
run again: after loading a model, compiling and answering, ~50 MB is back. The rest is clean
file pages the OS would reclaim only under memory pressure, counted in the process's RSS until
then (issue 22: a 270M model's RSS against llama.cpp's, whose library is ~40 MB).

release_library_code() advises the kernel that the library's read-only, unmodified mappings are
not needed (madvise MADV_DONTNEED): their pages leave the process and come back from the page
cache, a minor fault each, when code on them runs. Mappings that are writable or hold modified
pages (relocated data) are never touched, so nothing is lost. Linux only; elsewhere a no-op.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re

MADV_DONTNEED = 4
_RANGE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ")


def _madvise():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def _clean_readonly_mappings(smaps: str, part: str) -> list[tuple[int, int]]:
    """(start, end) of the mappings of files whose path contains `part` that are not writable
    and hold no modified page, from /proc/self/smaps text."""
    out, cur = [], None
    for line in smaps.splitlines():
        m = _RANGE.match(line)
        if m:
            if cur is not None and cur[3]:
                out.append(cur[:2])
            fields = line.split(maxsplit=5)
            path = fields[5] if len(fields) > 5 else ""
            ok = part in path and "w" not in m.group(3)
            cur = [int(m.group(1), 16), int(m.group(2), 16), path, ok]
        elif cur is not None and cur[3] and line.startswith(("Private_Dirty:", "Shared_Dirty:")):
            if int(line.split()[1]) != 0:
                cur[3] = False
    if cur is not None and cur[3]:
        out.append(cur[:2])
    return [(a, b) for a, b in out]


def release_library_code(part: str = "jaxlib") -> int:
    """Drop the resident pages of the read-only, unmodified mappings of files whose path contains
    `part` (default: jaxlib's libraries); returns the bytes of the mappings so advised."""
    try:
        with open("/proc/self/smaps") as f:
            smaps = f.read()
    except OSError:  # not Linux
        return 0
    madvise = _madvise()
    if madvise is None:
        return 0
    done = 0
    for start, end in _clean_readonly_mappings(smaps, part):
        if madvise(start, end - start, MADV_DONTNEED) == 0:
            done += end - start
    return done
