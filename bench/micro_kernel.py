"""Micro-benchmark of the native block-quantized matmul (engine/kernels) at real model shapes.

    python -m bench.micro_kernel                  # the default model's and SmolLM2-1.7B's matrices
    python -m bench.micro_kernel --rows 1,8,64    # decode, a draft verify, a prefill chunk

Each case runs the weight of every layer through one `lax.scan` (as engine/forward.py does),
jitted, and prints ms per matrix, multiply-adds per second and the weight bytes read per second
(the bound of a 1-row decode step is memory bandwidth).
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SHAPES = {  # name: (out, in, layers)
    "135M gate_up 3072x576": (3072, 576, 30),
    "135M down 576x1536": (576, 1536, 30),
    "360M qkv 1600x960": (1600, 960, 32),
    "360M o 960x960": (960, 960, 32),
    "360M gate_up 5120x960": (5120, 960, 32),
    "360M down 960x2560": (960, 2560, 32),
    "hot (L2) 1024x960": (1024, 960, 1),
    "hot (L2) 4096x960": (4096, 960, 1),
    "tiny 32x32": (32, 32, 32),
    "1.7B gate_up 16384x2048": (16384, 2048, 4),
    "1.7B down 2048x8192": (2048, 8192, 4),
}


def bench(fmt: str, out: int, inp: int, layers: int, rows: int) -> tuple[float, float, float]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from engine import quant

    rng = np.random.default_rng(0)
    arrays = quant.empty(fmt, (layers,), out, inp)  # random bytes and small f16 scales
    for a in arrays:
        if a is not None:
            a[...] = (rng.random(a.shape) * 0.01).astype(a.dtype) if a.dtype == np.float16 else rng.integers(0, 256, a.shape)
    w = quant.QLinear(*(None if a is None else jnp.asarray(quant.to_chunks(a)) for a in arrays), fmt, out)

    @jax.jit
    def run(x, w):
        return jax.lax.scan(lambda x, i: (x, quant.matmul(x, w, i)), x, jnp.arange(layers, dtype=jnp.int32))[1]

    x = jnp.asarray(rng.standard_normal((rows, inp)).astype(np.float32))
    run(x, w).block_until_ready()
    n = max(3, int(1e9 / (out * inp * layers * rows)))
    t = time.perf_counter()
    for _ in range(n):
        run(x, w).block_until_ready()
    dt = (time.perf_counter() - t) / n / layers
    return dt * 1e3, rows * out * inp / dt / 1e9, w.nbytes / layers / dt / 1e9


def main(argv=None) -> int:
    from engine import kernels

    ap = argparse.ArgumentParser(prog="python -m bench.micro_kernel", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1,8")
    ap.add_argument("--formats", default="q4_0,q4_1,q4_k,q8_0")
    ap.add_argument("--shapes", default="", help="only the shapes whose name contains this")
    args = ap.parse_args(argv)
    print(f"kernel: {kernels.status()}")
    for fmt in args.formats.split(","):
        for name, (o, i, L) in SHAPES.items():
            if args.shapes not in name:
                continue
            for rows in map(int, args.rows.split(",")):
                ms, gmac, gbs = bench(fmt, o, i, L, rows)
                print(f"{fmt:5} {name:24} rows {rows:3}: {ms:7.3f} ms  {gmac:6.1f} G MAC/s  {gbs:5.1f} GB/s of weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
