"""Micro-benchmark of the native attention (engine/kernels) on an int8 cache, alone.

    python -m bench.micro_attention                         # the default model: 928 slots, 9/3 heads
    python -m bench.micro_attention --rows 8                # an 8-row speculative verify
    python -m bench.micro_attention --layers 24 --slots 160 --heads 32 --kv-heads 32   # SmolLM2-1.7B
    python -m bench.micro_attention --slots 4128 --visible 128 --rows 64   # a prefill chunk early in a chat

Every layer's call runs in one jitted `lax.scan`, as in the engine; the cache is random int8,
every slot visible, the chunk's rows causal among themselves and 4 sink keys. Prints the best
time a layer over 8 rounds. The cache stays in the CPU's caches when it is small: inside a
decode step the weights stream through in between, so in-step times run higher.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from engine import kernels

    ap = argparse.ArgumentParser(prog="python -m bench.micro_attention", description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--slots", type=int, default=928)
    ap.add_argument("--heads", type=int, default=9)
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--visible", type=int, default=None,
                    help="cache slots the rows see (default all; the rest are empty slots, as early in a chat)")
    a = ap.parse_args(argv)
    if not kernels.available():
        print(f"kernel: {kernels.status()}")
        return 1
    L, S, H, C, hd = a.layers, a.slots, a.heads, a.rows, a.head_dim
    kv = a.kv_heads * hd
    rng = np.random.default_rng(0)
    kc = jnp.asarray(rng.integers(-127, 127, (L, S, kv), dtype=np.int8))
    ks = jnp.asarray(rng.random((L, S, kv // 32), dtype=np.float32) * 0.02)
    vc = jnp.asarray(rng.integers(-127, 127, (L, S, kv), dtype=np.int8))
    vs = jnp.asarray(rng.random((L, S, kv // 32), dtype=np.float32) * 0.02)
    q = jnp.asarray(rng.standard_normal((C, H, hd), dtype=np.float32))
    new = jnp.asarray(rng.standard_normal((C, kv), dtype=np.float32))
    order = jnp.arange(S + C, dtype=jnp.int32)
    mask = np.ones((C, S + C), bool)
    for c in range(C):
        mask[c, S + c + 1 :] = False
    if a.visible is not None:
        mask[:, a.visible : S] = False
    sink = np.zeros(S + C, bool)
    sink[:4] = True
    mask, sink = jnp.asarray(mask), jnp.asarray(sink)
    out = jax.ShapeDtypeStruct((C, H * hd), jnp.float32)

    @jax.jit
    def run(q):
        def body(carry, layer):
            o = jax.ffi.ffi_call("pinwheel_attn_int8", out)(q + carry[0, 0], q, kc, vc, ks, vs, new, new, order,
                                                            mask, sink, layer)
            return carry + o.reshape(C, H, hd) * 1e-9, None

        return jax.lax.scan(body, jnp.zeros_like(q), jnp.arange(L, dtype=jnp.int32))[0]

    run(q).block_until_ready()
    best = float("inf")
    for _ in range(8):
        t = time.perf_counter()
        for _ in range(20):
            r = run(q)
        r.block_until_ready()
        best = min(best, (time.perf_counter() - t) / 20)
    print(f"kernel: {kernels.status()}; {L} layers, {S} slots, {H}/{a.kv_heads} heads of {hd}, {C} row(s): "
          f"{'' if a.visible is None else f'{a.visible} visible, '}{best / L * 1e6:.1f} us a layer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
