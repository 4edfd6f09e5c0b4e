"""Which of the packaged kernel variants a CPU gets (issue 24): chosen from the features the CPU
reports, the fastest it can run; tested with made-up feature sets, and against this machine."""
import platform
import sys

import pytest

from engine import kernels
from engine.kernels import variants

SKYLAKE_X = "sse4_2 popcnt avx fma f16c avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl"
CASCADE_LAKE = SKYLAKE_X + " avx512_vnni"
ALDER_LAKE = "sse4_2 popcnt avx fma f16c avx2 bmi2 avx_vnni"
HASWELL = "sse4_2 popcnt avx fma f16c avx2 bmi2"
SANDY_BRIDGE = "sse4_2 popcnt avx"  # AVX without AVX2: the baseline
ALL_X86 = {v.name for v in variants.VARIANTS["x86_64"]}


@pytest.mark.parametrize("features, built, want", [
    (CASCADE_LAKE, ALL_X86, "avx512vnni"),
    (CASCADE_LAKE + " avx_vnni", ALL_X86, "avx512vnni"),  # Zen 4 / Sapphire Rapids have both
    (ALDER_LAKE, ALL_X86, "avxvnni"),
    (SKYLAKE_X, ALL_X86, "avx2"),  # AVX-512 without VNNI: the AVX2 build
    (HASWELL, ALL_X86, "avx2"),
    (SANDY_BRIDGE, ALL_X86, "x86-64-v2"),
    ("", ALL_X86, "x86-64-v2"),
    (CASCADE_LAKE, ALL_X86 - {"avx512vnni", "avxvnni"}, "avx2"),  # an old compiler left two out
])
def test_x86_variant_choice(features, built, want):
    v, why = variants.choose("x86_64", frozenset(features.split()), built)
    assert v.name == want, why


@pytest.mark.parametrize("arch", ["aarch64", "arm64", "ARM64"])
@pytest.mark.parametrize("features, want", [
    ("asimd asimddp i8mm", "i8mm"),  # Apple M2+, Graviton 3, Snapdragon X
    ("asimd asimddp", "dotprod"),  # Apple M1, Graviton 2, Cortex-A76
    ("asimd", "neon"),  # Cortex-A53/A72 (a Raspberry Pi 3/4)
])
def test_arm64_variant_choice(arch, features, want):
    assert variants.choose(arch, frozenset(features.split()))[0].name == want


def test_the_reason_says_why_a_faster_variant_was_passed_over():
    assert variants.choose("x86_64", frozenset(CASCADE_LAKE.split()))[1] == "the fastest this CPU runs"
    v, why = variants.choose("x86_64", frozenset(HASWELL.split()))
    assert v.name == "avx2" and "avx512vnni" in why or "avxvnni" in why


def test_no_variant_for_other_cpus_says_so():
    v, why = variants.choose("riscv64", frozenset())
    assert v is None and "riscv64" in why
    v, why = variants.choose("x86_64", frozenset(), built={"avx2"})  # only variants this CPU cannot run
    assert v is None and why


def test_library_names_round_trip():
    for plat, ext in (("linux", ".so"), ("darwin", ".dylib"), ("win32", ".dll")):
        name = variants.library_name("x86-64-v2", plat)
        assert name.endswith(ext) and variants.variant_of(name) == "x86-64-v2"
    assert variants.variant_of("libsomething-else.so") is None


def test_libraries_count_as_built_from_these_sources_only_with_their_stamp(tmp_path):
    """setup.py packages the libraries of PINWHEEL_PREBUILT_KERNELS instead of compiling again
    only where their stamp is these sources' digest: a missing or other stamp means compile. (The
    engine's own check, kernels._stale, compiles only on another stamp.)"""
    from pathlib import Path

    sources = Path(variants.__file__).parent
    assert variants.built_from(tmp_path, sources) is None  # no stamp
    (tmp_path / variants.STAMP).write_text("0" * 64 + "\n")
    assert variants.built_from(tmp_path, sources) is False  # built from other sources
    (tmp_path / variants.STAMP).write_text(variants.sources_digest(sources) + "\n")
    assert variants.built_from(tmp_path, sources) is True


@pytest.mark.skipif(not kernels.packaged(), reason="no prebuilt kernel in this checkout (pip install -e . builds it)")
def test_this_cpu_reports_the_features_linux_sees_and_gets_its_fastest_variant():
    built = kernels.packaged()
    family = variants.VARIANTS[variants.machine(platform.machine())]
    baseline = next(v for v in reversed(family) if not v.needs)
    import ctypes

    said = kernels.cpu_features(ctypes.CDLL(str(built[baseline.name])))
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        flags = set(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":")[1].split())
        needed = set().union(*(v.needs for v in family))
        assert said & needed == flags & needed  # cpuid + xgetbv agree with the kernel's view of the CPU
    chosen, why = variants.choose(platform.machine(), said, set(built))
    assert chosen is not None and chosen.name in built
    if kernels.available():
        assert kernels.status().startswith(f"native {chosen.name} (")
    assert kernels.describe().startswith(("native ", "XLA path"))


@pytest.mark.skipif(not kernels.packaged(), reason="no prebuilt kernel in this checkout (pip install -e . builds it)")
def test_every_packaged_variant_this_cpu_runs_holds_every_format_as_stored():
    """Each vector variant (x86-64-v2's SSE tiles included) multiplies all of engine.quant's
    formats at speed, so the loader holds a Q6_K, Q5_x or IQ4_x file as stored there instead of
    re-quantizing it to q8_0. (The ARM variants' lists are checked by scripts/test_arm64.sh's harness.)"""
    import ctypes

    from engine import quant

    built = kernels.packaged()
    family = variants.VARIANTS.get(variants.machine(platform.machine()), ())
    baseline = next((v for v in reversed(family) if not v.needs and v.name in built), None)
    assert baseline is not None
    have = kernels.cpu_features(ctypes.CDLL(str(built[baseline.name])))
    for v in family:
        if v.name in built and not v.needs - have:
            lib = ctypes.CDLL(str(built[v.name]))
            lib.pinwheel_kernel_formats.restype = ctypes.c_char_p
            assert set(lib.pinwheel_kernel_formats().decode().split()) == set(quant.FORMATS), v.name
