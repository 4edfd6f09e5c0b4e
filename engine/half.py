"""f16 <-> f32 inside jitted code, with integer operations only.

XLA:CPU compiles an f16 convert into a call to a runtime helper (__extendhfsf2, __truncsfhf2)
on an x86-64 CPU without F16C (before Ivy Bridge; Atom, and Pentium/Celeron Silver laptops to
2020), and this jaxlib's JIT does not provide it: the step fails to compile ("Symbols not found:
[ __extendhfsf2 ]", reproduced here with XLA_FLAGS=--xla_cpu_max_isa=SSE4_2). Weight scales are
f16 as GGUF stores them, so every model hit it in the embedding lookup. These spell the same
conversions exactly with shifts, masks and selects, which every CPU runs.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def to_f32(h: jax.Array) -> jax.Array:
    """f16 -> f32, exactly (finite values: the loader refuses files whose scales are not)."""
    u = lax.bitcast_convert_type(h, jnp.uint16).astype(jnp.int32)
    sign = (u & 0x8000) << 16
    e, f = (u >> 10) & 0x1F, u & 0x3FF
    normal = lax.bitcast_convert_type(sign | ((e + 112) << 23) | (f << 13), jnp.float32)
    tiny = jnp.where(sign != 0, -1.0, 1.0).astype(jnp.float32) * f.astype(jnp.float32) * jnp.float32(2.0**-24)
    return jnp.where(e == 0, tiny, normal)  # (subnormals and zero: f * 2^-24, exact)


def round_f16(x: jax.Array) -> jax.Array:
    """f32 rounded to the nearest f16 (ties to even) and back to f32: x.astype(f16).astype(f32)."""
    u = lax.bitcast_convert_type(x, jnp.int32)
    # normal range: round the mantissa to 10 bits, ties to even; a carry moves into the exponent
    r = (u + 0xFFF + ((u >> 13) & 1)) & ~0x1FFF
    normal = lax.bitcast_convert_type(r, jnp.float32)
    a = jnp.abs(x)
    tiny = jnp.round(x * jnp.float32(2.0**24)) * jnp.float32(2.0**-24)  # f16 subnormals: multiples of 2^-24
    out = jnp.where(a < jnp.float32(2.0**-14), tiny, normal)
    return jnp.where(jnp.abs(out) > jnp.float32(65504.0), jnp.copysign(jnp.float32(jnp.inf), x), out)
