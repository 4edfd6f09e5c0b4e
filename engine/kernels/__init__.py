"""The native block-quantized matmul and attention (qmatmul.cc), called through JAX's FFI.

XLA:CPU has no fast path for int8 or 4-bit weights, so the engine's matrix products run in a
small C++ kernel that reads GGUF's block layouts directly (see qmatmul.cc). The package carries
it prebuilt, one library per ISA variant (variants.py; built by setup.py into lib/), and the
fastest variant this CPU runs is chosen at load from what the CPU itself reports
(cpu_features.cc): the user's machine needs no compiler.

A source checkout without the prebuilt libraries (or `PINWHEEL_KERNELS=build`, for kernel
development) compiles the kernel once with `-march=native` into the user's cache folder, keyed
by the source, jaxlib's version and the compiler. Where neither works, the engine falls back to
pure-XLA dequantize-and-dot (correct, slower) and says so once, in words; `PINWHEEL_KERNELS=0`
forces that fallback (the tests compare both paths).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from . import variants

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("qmatmul.cc")
PACKAGED = Path(__file__).with_name("lib")
TARGETS = {"q8_0": "PinwheelQ8_0", "q4_0": "PinwheelQ4_0", "q4_1": "PinwheelQ4_1", "q4_k": "PinwheelQ4_K",
           "q6_k": "PinwheelQ6_K", "q5_0": "PinwheelQ5_0", "q5_1": "PinwheelQ5_1", "q5_k": "PinwheelQ5_K",
           "iq4_nl": "PinwheelIQ4_NL", "iq4_xs": "PinwheelIQ4_XS", "q3_k": "PinwheelQ3_K", "q2_k": "PinwheelQ2_K",
           "iq3_xxs": "PinwheelIQ3_XXS", "iq3_s": "PinwheelIQ3_S", "f16": "PinwheelF16", "bf16": "PinwheelBF16",
           "iq2_xxs": "PinwheelIQ2_XXS", "iq2_xs": "PinwheelIQ2_XS", "iq2_s": "PinwheelIQ2_S", "iq1_s": "PinwheelIQ1_S",
           "iq1_m": "PinwheelIQ1_M",
           "attn_int8": "PinwheelAttnI8", "attn_bf16": "PinwheelAttnBF16", "attn_f32": "PinwheelAttnF32",
           "deltanet_step": "PinwheelDeltaNetStep"}
_FLAGS = ["-O3", "-march=native", "-std=c++17", "-shared", "-fPIC"]

_lock = threading.Lock()
_state: dict = {}  # "lib": ctypes.CDLL | None, "error": str | None (why not), "path", "variant", "why"


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
    for name in (*variants.SOURCES, *variants.PARTS):
        h.update(SOURCE.with_name(name).read_bytes())
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
        cmd = [cxx, *_FLAGS, "-isystem", jax.ffi.include_dir(), *(str(SOURCE.with_name(s)) for s in variants.SOURCES),
               "-o", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"compiling the kernel failed: {r.stderr.strip()[-400:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def packaged() -> dict[str, Path]:
    """The prebuilt variants the package carries: name -> library."""
    if not PACKAGED.is_dir():
        return {}
    found = {variants.variant_of(p.name): p for p in PACKAGED.iterdir() if p.suffix in (".so", ".dylib", ".dll")}
    return {k: v for k, v in found.items() if k}


def _stale() -> bool:
    """Prebuilt libraries built from other sources than these (an editable install whose
    qmatmul.cc was edited since): the source wins, compiled here. No stamp, or sources not
    shipped (None): trust the libraries."""
    return variants.built_from(PACKAGED, SOURCE.parent) is False


def cpu_features(lib) -> frozenset[str]:
    lib.pinwheel_cpu_features.restype = ctypes.c_char_p
    return frozenset(lib.pinwheel_cpu_features().decode().split())


def _choose_packaged(built: dict[str, Path]) -> tuple[Path, str, str]:
    """(library, variant, why) among the packaged variants. The CPU is asked through the
    baseline variant: loading a wider one on a CPU without its ISA could already fault."""
    arch = platform.machine()
    family = variants.VARIANTS.get(variants.machine(arch), ())
    baseline = next((v for v in reversed(family) if v.name in built and not v.needs), None)
    if baseline is None:
        raise RuntimeError(f"the package has no baseline kernel for {arch} (it has: {', '.join(sorted(built))})")
    features = cpu_features(ctypes.CDLL(str(built[baseline.name])))
    forced = os.environ.get("PINWHEEL_KERNEL_VARIANT")  # to test each variant on one machine
    if forced:
        v = next((v for v in family if v.name == forced and v.name in built), None)
        if v is None:
            raise RuntimeError(f"PINWHEEL_KERNEL_VARIANT={forced} is not a built variant ({', '.join(sorted(built))})")
        if v.needs - features:
            raise RuntimeError(f"PINWHEEL_KERNEL_VARIANT={forced}: this CPU lacks {', '.join(sorted(v.needs - features))}")
        return built[forced], forced, "chosen by PINWHEEL_KERNEL_VARIANT"
    chosen, why = variants.choose(arch, features, set(built))
    if chosen is None:
        raise RuntimeError(why)
    return built[chosen.name], chosen.name, why


def _load():
    """(library, why not, whether that is worth a warning)."""
    mode = os.environ.get("PINWHEEL_KERNELS", "1")
    if mode == "0":
        return None, "disabled by PINWHEEL_KERNELS=0", False
    try:
        import jax

        if jax.default_backend() != "cpu":
            return None, f"the {jax.default_backend()} backend runs the XLA path", False
        built = packaged()
        if built and mode != "build" and not _stale():
            path, _state["variant"], _state["why"] = _choose_packaged(built)
        else:  # a source checkout (or kernel development): compile for this very CPU
            path = build()
            _state["variant"] = "native build"
            _state["why"] = ("PINWHEEL_KERNELS=build" if mode == "build" else
                             "the prebuilt kernel is older than its source" if built else
                             "no prebuilt kernel in this checkout") + ": compiled here with -march=native"
        lib = ctypes.CDLL(str(path))
        _state["path"] = str(path)
        for name, symbol in TARGETS.items():
            jax.ffi.register_ffi_target(f"pinwheel_{name}", jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
        lib.pinwheel_kernel_isa.restype = ctypes.c_char_p
        return lib, None, False
    except Exception as e:  # no compiler, a failed build, an old jaxlib: the XLA path still works
        return None, str(e), True


def build_tag() -> str | None:
    """The loaded kernel build's name and a hash of its bytes (a compile-cache key), or None on
    the XLA path."""
    if not available():
        return None
    if "tag" not in _state:
        path = Path(_state["path"])
        _state["tag"] = f"{path.stem}-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"
    return _state["tag"]


def available() -> bool:
    """True when the native kernel is built and registered (once per process)."""
    with _lock:
        if "lib" not in _state:
            _state["lib"], _state["error"], warn = _load()
            if warn:
                log.warning("pinwheel: native kernels unavailable, using the slower XLA path: %s", _state["error"])
    return _state["lib"] is not None


def formats() -> tuple[str, ...]:
    """The weight formats (engine.quant's names) the loaded kernel multiplies at speed: every
    build computes each of TARGETS correctly, but some formats have a vector tile only on some
    ISAs (the loader holds the others as q8_0 there). Empty without a kernel."""
    if not available():
        return ()
    with _lock:
        if "formats" not in _state:
            f = getattr(_state["lib"], "pinwheel_kernel_formats", None)  # (a build before the symbol: the four)
            if f is None:
                _state["formats"] = ("q8_0", "q4_0", "q4_1", "q4_k")
            else:
                f.restype = ctypes.c_char_p
                _state["formats"] = tuple(f().decode().split())
    return _state["formats"]


def relayout():
    """The library's re-layout of GGUF blocks into the kernel's layout (relayout.cc's
    pinwheel_relayout, a ctypes function: it releases the GIL), or None on the XLA path or with
    a library built before it (engine.quant then re-lays the blocks in numpy)."""
    if not available():
        return None
    with _lock:
        if "relayout" not in _state:
            f = getattr(_state["lib"], "pinwheel_relayout", None)
            if f is not None:
                p, i64 = ctypes.c_void_p, ctypes.c_int64
                f.restype = i64
                f.argtypes = [ctypes.c_char_p, p, i64, i64, p, i64, p, p, p, i64, i64, ctypes.c_int]
            _state["relayout"] = f
    return _state["relayout"]


def status() -> str:
    """One line for the bench and `pinwheel --version`: the variant in use and why."""
    if available():
        return f"native {_state['variant']} ({_state['lib'].pinwheel_kernel_isa().decode()}; {_state['why']})"
    return f"XLA path (the native kernel is not in use: {_state['error']})"


def describe() -> str:
    """What the next load will run, without importing JAX (for `pinwheel --version` and the
    bench header): the loaded kernel's status once there is one, else the variant the CPU
    would get and why, or why there is none. (A GPU backend, which runs the XLA path, is known
    only once JAX has started.)"""
    if "lib" in _state:
        return status()
    mode = os.environ.get("PINWHEEL_KERNELS", "1")
    if mode == "0":
        return "XLA path (disabled by PINWHEEL_KERNELS=0)"
    built = packaged()
    if built and mode != "build" and not _stale():
        try:
            _, variant, why = _choose_packaged(built)
        except (OSError, RuntimeError) as e:
            return f"XLA path (the prebuilt kernel does not load: {e})"
        return f"native {variant} ({why})"
    if _compiler() is None:
        return "XLA path (no prebuilt kernel for this CPU, and no C++ compiler to build one)"
    return "native build, compiled on first use with -march=native (no prebuilt kernel)"
