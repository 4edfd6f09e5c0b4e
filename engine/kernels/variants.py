"""The kernel's ISA variants: how each is compiled, and which CPU features it needs.

The package carries one build of qmatmul.cc per variant (like ggml's GGML_CPU_ALL_VARIANTS),
each compiled with its own target flags, and picks at load the fastest one whose features the
CPU has. Separate libraries, not one with several code paths inside: compiled side by side into
one library, the inline functions and templates every variant shares (the FFI headers', the
standard library's) would be merged by the linker into one copy built for one of the ISAs, and
a baseline CPU could end up running an AVX-512 copy of one of them.

Pure data and one pure function, so the choice can be tested with made-up feature sets.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    flags: tuple[str, ...]  # the compiler's target flags (GCC and clang spell them alike)
    needs: frozenset[str]  # CPU features, as Linux's /proc/cpuinfo (x86) or HWCAP (arm64) names them


def _v(name: str, flags: str, needs: str) -> Variant:
    return Variant(name, tuple(flags.split()), frozenset(needs.split()))


# Fastest first. x86-64-v4 is AVX-512 F/BW/CD/DQ/VL; v3 is AVX2, FMA, F16C, BMI1/2, MOVBE.
VARIANTS: dict[str, tuple[Variant, ...]] = {
    "x86_64": (
        _v("avx512vnni", "-march=x86-64-v4 -mavx512vnni -mtune=generic",
           "avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni"),
        _v("avxvnni", "-march=x86-64-v3 -mavxvnni -mtune=generic", "avx2 fma f16c avx_vnni"),
        _v("avx2", "-march=x86-64-v3 -mtune=generic", "avx2 fma f16c"),
        _v("x86-64-v2", "-march=x86-64-v2 -mtune=generic", ""),
    ),
    "aarch64": (
        _v("i8mm", "-march=armv8.2-a+dotprod+i8mm", "asimddp i8mm"),
        _v("dotprod", "-march=armv8.2-a+dotprod", "asimddp"),
        _v("neon", "-march=armv8-a", ""),
    ),
}
MACHINES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}  # platform.machine() spellings


def machine(name: str) -> str:
    """platform.machine()'s name for the CPU family, as VARIANTS keys it."""
    n = name.lower()
    return MACHINES.get(n, n)


def choose(arch: str, features: frozenset[str] | set[str], built: set[str] | None = None) -> tuple[Variant | None, str]:
    """The fastest variant the CPU can run (and, when `built` is given, that was built), and why."""
    options = VARIANTS.get(machine(arch), ())
    if not options:
        return None, f"no native kernel for {arch} CPUs"
    for v in options:
        if built is not None and v.name not in built:
            continue
        missing = v.needs - set(features)
        if not missing:
            faster = [o.name for o in options[: options.index(v)]]
            why = "the fastest this CPU runs" if not faster else f"this CPU lacks what {faster[-1]} needs"
            return v, why
    return None, "no variant this CPU can run was built"


LIB_PREFIX = "libpinwheel_qmatmul-"
SOURCES = ("qmatmul.cc", "relayout.cc", "cpu_features.cc")  # beside this file
PARTS = ("deltanet_step.inc",)  # beside this file, included by qmatmul.cc
INCLUDE = "include"  # the vendored XLA FFI headers, beside this file
BASE_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC")


def library_name(variant: str, platform: str) -> str:
    """The variant's file name: a plain shared library for ctypes (no Python ABI tag)."""
    ext = ".dylib" if platform == "darwin" else ".dll" if platform.startswith("win") else ".so"
    return f"{LIB_PREFIX}{variant}{ext}"


def variant_of(file_name: str) -> str | None:
    """library_name's inverse: the variant a packaged library holds."""
    if not file_name.startswith(LIB_PREFIX):
        return None
    return file_name[len(LIB_PREFIX):].rsplit(".", 1)[0] or None


def compile_command(cxx: str, variant: Variant, folder, out) -> list[str]:
    """The command that builds one variant from the sources in `folder` (GCC or clang). The FFI
    headers are a system include: their own warnings are not ours to fix."""
    from pathlib import Path

    folder = Path(folder)
    return [cxx, *BASE_FLAGS, *variant.flags, "-isystem", str(folder / INCLUDE),
            *(str(folder / s) for s in SOURCES), "-o", str(out)]


STAMP = "sources.sha256"  # beside the built libraries: what they were built from


def sources_digest(folder) -> str:
    """A hash of the kernel's sources (and headers): prebuilt libraries whose stamp differs are
    stale, as after editing qmatmul.cc in an editable install."""
    import hashlib
    from pathlib import Path

    folder = Path(folder)
    h = hashlib.sha256()
    for f in [*(folder / s for s in (*SOURCES, *PARTS)), *sorted((folder / INCLUDE).rglob("*.h"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def built_from(libs, sources) -> bool | None:
    """Whether the libraries in folder `libs` were built from the sources in folder `sources`, by
    their stamp; None when the stamp or the sources cannot be read. The engine compiles its own
    only on False (kernels._stale); setup.py packages prebuilt ones only on True."""
    from pathlib import Path

    try:
        return (Path(libs) / STAMP).read_text().strip() == sources_digest(sources)
    except OSError:
        return None
