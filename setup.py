"""Builds the native kernel's ISA variants into the package (pyproject.toml has the rest).

`pip wheel .` (and `pip install .`, and the editable install ./run.sh makes) compiles
engine/kernels/qmatmul.cc once per variant of engine/kernels/variants.py for this machine's CPU
family, into engine/kernels/lib/, and tags the wheel for the platform (py3-none-<platform>: the
libraries do not use Python's ABI). The user's machine then needs no compiler: the engine picks
the fastest variant its CPU runs at load (engine/kernels/__init__.py).

A variant that does not compile (an old compiler without -mavxvnni, say) is left out with a
warning, and a machine with no C++ compiler at all still installs: the engine then runs its
slower XLA path and says so. PINWHEEL_REQUIRE_KERNELS=1 (release builds, cibuildwheel) turns
both into errors.

PINWHEEL_PREBUILT_KERNELS=DIR takes the variants from DIR instead of compiling them again, where
DIR's stamp (sources.sha256) says they were built from these same sources: the engine trusts a
library on the same condition at load. The wheel test (tests/test_packaging.py) packages what the
editable install compiled minutes before, which saves CI a second build of every variant (~75 s
on 2 cores); a stale or missing library is compiled as usual.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "engine" / "kernels"
_spec = importlib.util.spec_from_file_location("_pinwheel_variants", KERNELS / "variants.py")
variants = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = variants  # (dataclasses look their module up)
_spec.loader.exec_module(variants)
REQUIRED = os.environ.get("PINWHEEL_REQUIRE_KERNELS") == "1"
PREBUILT = os.environ.get("PINWHEEL_PREBUILT_KERNELS")


def prebuilt(file_name: str) -> Path | None:
    """The library PINWHEEL_PREBUILT_KERNELS holds for this variant, if built from these sources."""
    if not PREBUILT:
        return None
    lib = Path(PREBUILT) / file_name
    return lib if lib.is_file() and variants.built_from(lib.parent, KERNELS) is True else None


class KernelLibrary(Extension):
    """One ISA variant of the kernel: a plain shared library, loaded with ctypes."""

    def __init__(self, variant):
        # optional: a variant that did not build is not copied into an editable install's tree
        super().__init__(f"engine.kernels.lib.{variants.LIB_PREFIX}{variant.name}", sources=[], optional=True)
        self.variant = variant
        self.file_name = variants.library_name(variant.name, sys.platform)


class BuildKernels(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # the variants compile independently: one per core
            self.parallel = os.cpu_count() or 1

    def get_ext_filename(self, fullname):
        # (called with the full dotted name, or with its last part alone by get_ext_fullpath)
        last = fullname.split(".")[-1]
        ext = next((e for e in self.extensions if isinstance(e, KernelLibrary) and e.name.split(".")[-1] == last), None)
        if ext is not None:
            return os.path.join(*fullname.split(".")[:-1], ext.file_name)
        return super().get_ext_filename(fullname)

    def build_extension(self, ext):
        if not isinstance(ext, KernelLibrary):
            return super().build_extension(ext)
        cxx = next((shutil.which(c) for c in (os.environ.get("CXX"), "c++", "g++", "clang++") if c and shutil.which(c)),
                   None)
        out = Path(self.get_ext_fullpath(ext.name))
        lib = prebuilt(ext.file_name)
        if lib is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, out)
            print(f"pinwheel: took the {ext.variant.name} kernel from {lib.parent} (built from these sources)")
            return
        if cxx is None:
            return self._skip(ext, "no C++ compiler found")
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = variants.compile_command(cxx, ext.variant, KERNELS, out)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return self._skip(ext, f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        print(f"pinwheel: built the {ext.variant.name} kernel ({out.stat().st_size // 1024} KiB)")

    def run(self):
        super().run()
        for ext in self.extensions:  # the stamp the loader checks (variants.sources_digest)
            if isinstance(ext, KernelLibrary):
                lib = Path(self.get_ext_fullpath(ext.name)).parent
                if lib.is_dir():
                    (lib / variants.STAMP).write_text(variants.sources_digest(KERNELS) + "\n")
                break

    def copy_extensions_to_source(self):  # (an editable install: the libraries go beside the source)
        (KERNELS / "lib").mkdir(exist_ok=True)
        super().copy_extensions_to_source()

    def _skip(self, ext, why):
        if REQUIRED:
            raise RuntimeError(f"the {ext.variant.name} kernel did not build: {why}")
        print(f"pinwheel: WARNING: the {ext.variant.name} kernel is left out: {why}", file=sys.stderr)


class PlatformWheel(bdist_wheel):
    def get_tag(self):  # any Python 3, this platform: the libraries never touch Python's ABI
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(
    ext_modules=[KernelLibrary(v) for v in variants.VARIANTS.get(variants.machine(platform.machine()), ())],
    cmdclass={"build_ext": BuildKernels, "bdist_wheel": PlatformWheel},
)
