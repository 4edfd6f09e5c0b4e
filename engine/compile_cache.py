"""Compiled steps kept in the user's cache folder: the second start of Pinwheel loads each step's
executable instead of tracing, lowering and compiling it again.

Why a store of our own, not JAX's persistent compilation cache (which this module switched on
before): JAX keys its entries by the lowered HLO, so every start still traced and lowered each
step before it could look one up, ~70-80 ms a step shape on the default model and ~0.2 s of a
one-shot reply. This store keys an executable by what decides it without tracing anything: the
jitted function, its static arguments, the tree, shapes and dtypes of its inputs, the device,
and a fingerprint of the rest (the engine's sources, the kernel build, jax, jaxlib and numpy, the
CPU, XLA's flags and Pinwheel's switches). Loading one is ~15 ms. The folder is trusted as the
user's own, like JAX's cache before it: what it holds is native code that this process runs.

JAX's own cache is turned off while this one is on: an executable that JAX loaded from its cache
cannot be serialized again whole (jaxlib 0.10 leaves out its compiled functions, and running the
copy fails with "Function ... not found"), so everything stored here comes from a fresh compile.
The folder is keyed by the kernel build (engine.kernels) as before. `PINWHEEL_COMPILE_CACHE=0`
turns the disk store off (steps are then compiled once per process); a path puts it there. A
process that changes the engine's code at run time (a test's mutation) must turn it off: the
key sees the engine's files, not what a process did to them.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import re
import sys
import threading
from pathlib import Path

_lock = threading.Lock()  # enable()
_compile_lock = threading.Lock()  # the memo, and one compile of a step at a time
_dir: Path | None = None
_jax_off = False
_memo: dict = {}  # (function, static arguments, input signature) -> executable, this process
_fingerprint: str | None = None
_compiling = threading.local()  # .hit: JAX's own cache answered this thread's compile
MAX_FILES = 256  # the oldest executables beyond this many are removed (a few MB on the default model)
_SUFFIX = ".exe"


def enable() -> Path | None:
    """Point the store at the cache folder (once per process, before the first compile)."""
    global _dir
    with _lock:
        where = os.environ.get("PINWHEEL_COMPILE_CACHE", "1")
        if _dir is not None or where == "0":
            return _dir
        import platformdirs

        from . import kernels

        top = platformdirs.user_cache_path("pinwheel", appauthor=False) / "xla" if where in ("", "1") else Path(where)
        path = top / (kernels.build_tag() or "xla")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only or full cache folder: compile every time, as before
            return None
        _drop_jax_entries(path)
        _dir = path
        return path


def _drop_jax_entries(folder: Path) -> None:
    """Once per folder: the entries JAX's own cache left here before this store replaced it
    (thousands of files, ~35 MB a kernel build, never read again)."""
    done = folder / "jax-entries-removed"
    if done.exists():
        return
    try:
        for p in folder.iterdir():
            if p.name.startswith("jit_") and p.name.endswith(("-cache", "-atime")):
                _remove(p)
        done.touch()
    except OSError:
        pass


def _jax_cache_off() -> None:
    global _jax_off
    if not _jax_off:
        import jax

        jax.config.update("jax_enable_compilation_cache", False)
        jax.monitoring.register_event_listener(_on_jax_event)
        _jax_off = True


def _on_jax_event(event: str, **_kw) -> None:
    # A guard, should JAX's cache be on anyway (switched on before enable()): what it loads is
    # not stored here (see the module's docstring).
    if event == "/jax/compilation_cache/cache_hits":
        _compiling.hit = True


def compiled(fn, args: tuple, **static):
    """`fn` (a jax.jit function) compiled for `args` and the static arguments: this process's
    copy, else the cache folder's (no tracing), else a fresh compile, then stored. Call the
    result with `args`' arrays (the static arguments are built in; donation is kept)."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    # (dtype objects, not their names: str() of 33 dtypes took 87 of a lookup's 107 us)
    avals = tuple((x.shape, x.dtype, getattr(x, "weak_type", False)) for x in leaves)
    # Where jit would run it (the app's device setting moves JAX's default device) and what
    # changes its types: jit's own cache is keyed by these too.
    device = jax.config.jax_default_device
    if device is None or isinstance(device, str):
        device = jax.devices(device)[0]
    key = (fn, tuple(sorted(static.items())), tree, avals, device, bool(jax.config.jax_enable_x64))
    exe = _memo.get(key)
    if exe is None:
        with _compile_lock:
            exe = _memo.get(key)
            if exe is None:
                exe = _memo[key] = _load_or_compile(fn, args, static, key)
    return exe


def forget() -> None:
    """Drop this process's executables (a new model or cache shape is coming; the files stay)."""
    with _compile_lock:
        _memo.clear()


def _load_or_compile(fn, args, static, key):
    path = _file(fn, key)
    if path is not None:
        _jax_cache_off()
        exe = _load(path, key[4])
        if exe is not None:
            return exe
    _compiling.hit = False
    exe = fn.lower(*args, **static).compile()
    if path is not None and not _compiling.hit:
        _store(path, exe)
    return exe


def _file(fn, key) -> Path | None:
    if enable() is None:
        return None
    _, statics, tree, avals, device, x64 = key
    text = repr((fingerprint(), fn.__module__, fn.__name__, statics, str(tree),
                 tuple((tuple(shape), str(dtype), bool(weak)) for shape, dtype, weak in avals),
                 (device.platform, device.device_kind, device.id), x64))
    return _dir / f"{fn.__name__}-{hashlib.sha256(text.encode()).hexdigest()[:40]}{_SUFFIX}"


def _load(path: Path, device):
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        from jax.experimental.serialize_executable import deserialize_and_load

        targets, blob = pickle.loads(data)
        if not _ready(targets):  # cannot be loaded safely in this process: compile (and replace)
            return None
        exe = deserialize_and_load(*blob, backend=device.client, execution_devices=[device])
    except Exception:  # a torn or foreign file: compile afresh, and replace it
        _remove(path)
        return None
    try:
        os.utime(path)  # last used: what the size limit keeps
    except OSError:
        pass
    return exe


def _store(path: Path, exe) -> None:
    try:
        from jax.experimental.serialize_executable import serialize

        data = pickle.dumps((_targets(exe), serialize(exe)))
    except Exception:  # a backend that cannot serialize (or constants it cannot): this process keeps its copy
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)  # whole or absent, even with two Pinwheels starting at once
    except OSError:  # a full or read-only disk: the next start compiles again
        _remove(tmp)
        return
    _prune(path.parent)


def _targets(exe) -> tuple[str, ...]:
    """The native functions the executable calls by name (XLA's custom calls)."""
    return tuple(sorted(set(re.findall(r'custom_call_target="([^"]+)"', exe.as_text()))))


def _ready(targets) -> bool:
    """Whether every native function the executable calls is registered and set up in this
    process. Tracing a step sets them up as a side effect; loading one does not, and calling
    a function that is not (LAPACK's, whose pointers jaxlib fills on first use) is a crash, not
    an error: an executable that calls anything else is compiled, never loaded."""
    for t in targets:
        if t.startswith("pinwheel_"):  # engine.kernels registers them all when the library loads
            from . import kernels

            if not kernels.available():
                return False
        elif t.startswith("lapack_"):  # the DeltaNet layers' triangular solve on the XLA path
            try:
                from jax._src.lax.linalg import initialize_lapack
            except ImportError:
                return False
            initialize_lapack()
        else:
            return False
    return True


def _prune(folder: Path) -> None:
    try:
        files = [(p.stat().st_mtime, p) for p in folder.glob(f"*{_SUFFIX}")]
    except OSError:
        return
    if len(files) > MAX_FILES:
        for _, p in sorted(files)[: len(files) - MAX_FILES]:
            _remove(p)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def fingerprint() -> str:
    """Everything besides the inputs that decides a step's executable (once per process)."""
    global _fingerprint
    if _fingerprint is None:
        import platform

        import jax
        import jaxlib
        import numpy

        from . import kernels

        switches = sorted((k, v) for k, v in os.environ.items() if k.startswith(("PINWHEEL_", "XLA_", "JAX_")))
        parts = (jax.__version__, jaxlib.__version__, numpy.__version__, platform.machine(), _cpu_flags(),
                 kernels.build_tag(), switches, _code_digest())
        _fingerprint = hashlib.sha256(repr(parts).encode()).hexdigest()
    return _fingerprint


def _code_digest() -> str:
    """The engine's Python sources (every step is traced from them); in a frozen bundle, which
    has none, the bundle's executable stands for them."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    files = sorted(root.rglob("*.py"))
    for f in files:
        try:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
        except OSError:
            h.update(f.name.encode())
    if not files:
        from .version import __version__

        st = os.stat(sys.executable)
        h.update(repr((__version__, sys.executable, st.st_size, st.st_mtime_ns)).encode())
    return h.hexdigest()


def _cpu_flags() -> str:
    """XLA compiles for this CPU's instruction sets: an executable must not follow a cache
    folder to a machine without them."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.encode()).hexdigest()[:16]
    except OSError:
        pass
    import platform

    return platform.processor()


def _marker(key: str) -> Path | None:
    if _dir is None:
        return None
    text = key + fingerprint()  # after an upgrade, the stored steps are not this engine's
    return _dir / f"warm-{hashlib.sha256(text.encode()).hexdigest()[:20]}"


def is_warm(key: str) -> bool:
    """True when an earlier run compiled (and so stored) the steps named by key: this start
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
