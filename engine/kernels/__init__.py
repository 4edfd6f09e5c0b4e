"""The native block-quantized matmul (qmatmul.cc), built on first use and called through JAX's FFI.

XLA:CPU has no fast path for int8 or 4-bit weights, so the engine's matrix products run in a
small C++ kernel that reads GGUF's block layouts directly (see qmatmul.cc). It is compiled once
per machine with the C++ compiler every supported system has (`c++`/`g++`, `-O3 -march=native`)
into the user's cache folder, keyed by the source, jaxlib's version and the compiler, so an
upgrade of either never loads a stale library. Where no compiler works the engine falls back to
pure-XLA dequantize-and-dot (correct, slower) and says so once; `PINWHEEL_KERNELS=0` forces that
fallback (the tests compare both paths).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("qmatmul.cc")
TARGETS = {"q8_0": "PinwheelQ8_0", "q4_0": "PinwheelQ4_0", "q4_1": "PinwheelQ4_1",
           "attn_int8": "PinwheelAttnI8", "attn_bf16": "PinwheelAttnBF16", "attn_f32": "PinwheelAttnF32"}
_FLAGS = ["-O3", "-march=native", "-std=c++17", "-shared", "-fPIC"]

_lock = threading.Lock()
_state: dict = {}  # "lib": ctypes.CDLL | None, "error": str | None (why not), "path"


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def _cache_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("pinwheel", appauthor=False) / "kernels"


def library_path(cxx: str) -> Path:
    """Where the build for this source, jaxlib and compiler lives."""
    import jaxlib

    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    h.update(jaxlib.__version__.encode())
    h.update(cxx.encode())
    h.update(" ".join(_FLAGS).encode())
    try:  # -march=native depends on the CPU: key by its flags too (a home folder moved to another machine)
        h.update(next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).encode())
    except (OSError, StopIteration):
        pass
    return _cache_dir() / f"libpinwheel_qmatmul-{h.hexdigest()[:16]}.so"


def build(cxx: str | None = None) -> Path:
    """Compile the kernel (a few seconds) unless this exact build exists; returns its path."""
    import jax

    cxx = cxx or _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (install g++)")
    out = library_path(cxx)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: two processes building at once never see half a file.
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".so.tmp")
    os.close(fd)
    try:
        cmd = [cxx, *_FLAGS, "-I", jax.ffi.include_dir(), str(SOURCE), "-o", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"compiling the kernel failed: {r.stderr.strip()[-400:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _load():
    """(library, why not, whether that is worth a warning)."""
    if os.environ.get("PINWHEEL_KERNELS", "1") == "0":
        return None, "disabled by PINWHEEL_KERNELS=0", False
    try:
        import jax

        if jax.default_backend() != "cpu":
            return None, f"the {jax.default_backend()} backend runs the XLA path", False
        path = build()
        lib = ctypes.CDLL(str(path))
        _state["path"] = str(path)
        for name, symbol in TARGETS.items():
            jax.ffi.register_ffi_target(f"pinwheel_{name}", jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
        lib.pinwheel_kernel_isa.restype = ctypes.c_char_p
        return lib, None, False
    except Exception as e:  # no compiler, a failed build, an old jaxlib: the XLA path still works
        return None, str(e), True


def build_tag() -> str | None:
    """The loaded kernel build's name (its cache key), or None on the XLA path."""
    return Path(_state["path"]).stem if available() else None


def available() -> bool:
    """True when the native kernel is built and registered (once per process)."""
    with _lock:
        if "lib" not in _state:
            _state["lib"], _state["error"], warn = _load()
            if warn:
                log.warning("pinwheel: native kernels unavailable, using the slower XLA path: %s", _state["error"])
    return _state["lib"] is not None


def status() -> str:
    """One line for the bench and `pinwheel --version`-style reports."""
    if available():
        return f"native ({_state['lib'].pinwheel_kernel_isa().decode()})"
    return f"XLA fallback ({_state['error']})"
