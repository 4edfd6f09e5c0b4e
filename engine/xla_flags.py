"""XLA options the engine sets for its process, before JAX creates its CPU backend.

XLA reads XLA_FLAGS once, when the first backend is made, so this runs at `import engine`
(engine/__init__.py), before anything touches JAX. It only adds to what the user set, never
overrides a flag they gave.

- `--xla_cpu_prefer_vector_width=512` (x86-64): the XLA path's products (engine.quant's int8
  form, dequantized inside the dot's loop) are compiled with 256-bit vectors by default; with
  512-bit ones on an AVX-512 CPU the int8 -> f32 convert, scale and fma run on half the
  instructions. Measured (a 32-layer scan of 5120x960 int8 matrix-vector products, 2 threads):
  7.3 -> 10.8 GB/s of weights; a whole SmolLM2-360M-shape decode step 48.6 -> 44.4 ms
  (`python -m bench.xla_path`). LLVM keeps to the vectors the CPU has, so on a CPU without
  AVX-512 the flag changes nothing, and the native kernel's own code is not compiled by XLA.
"""
from __future__ import annotations

import os
import platform

FLAGS = {"x86_64": ("--xla_cpu_prefer_vector_width=512",)}
# platform.machine()'s other spellings, as engine/kernels/variants.py's MACHINES: not imported
# from there, which would load engine.kernels (~45 ms) at every `import engine`
MACHINES = {"amd64": "x86_64", "x64": "x86_64"}


def apply(environ=os.environ, machine: str | None = None) -> None:
    """Add this machine's flags to XLA_FLAGS, each unless the user already set that flag."""
    name = (machine or platform.machine()).lower()
    wanted = FLAGS.get(MACHINES.get(name, name), ())
    have = environ.get("XLA_FLAGS", "").split()
    names = {f.split("=")[0] for f in have}
    add = [f for f in wanted if f.split("=")[0] not in names]
    if add:
        environ["XLA_FLAGS"] = " ".join(have + add)
