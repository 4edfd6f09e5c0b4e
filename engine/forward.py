"""The llama transformer over the bounded cache: one function for prefill chunks and decode steps.

`step(params, cache, batch)` runs C new tokens (C = 1 for decode, the chunk size for prefill)
through every layer. Each layer attends over [cached slots, the chunk's own keys] with a mask
the host derived from slot positions, so the result is exact whatever the chunking. The new
K/V are written into the ring after the layer scan, in place (the cache is donated).

`verify(params, cache, batch)` runs the same layers for a speculative draft (a few rows) but
writes nothing: it returns the rows' K/V, and `write_rows` stores only the accepted prefix, so
a rejected draft never overwrites a window token that is still needed.

Weights stay in GGUF's block formats (engine.quant) and every matrix product is one call of
the native kernel (engine.kernels), which computes each row the same way whatever the number of
rows: a 1-row decode step, an 8-row verify and a 64-row prefill chunk agree bit for bit on the
linear layers. The per-layer weights are stacked; the scan passes the layer index to the kernel
instead of slicing the weights (a slice would be copied for the call).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from . import kernels
from .budget import KV_GROUP
from .config import ModelConfig
from .kv_cache import KVCache
from .quant import QLinear, matmul, take_rows

# Speculative drafts are verified in steps of this many rows (the sampled token + 7 drafts).
MATVEC_ROWS = 8


@jax.tree_util.register_dataclass
@dataclass
class Layers:
    """Per-layer weights stacked on a leading layer axis, so one scan runs them all."""

    attn_norm: jax.Array  # [L, d]
    wqkv: QLinear  # [L, (H + 2 * KVH) * hd, d]   q, k, v merged: one read of x
    wo: QLinear  # [L, d, H * hd]
    ffn_norm: jax.Array  # [L, d]
    w_gate_up: QLinear  # [L, 2 * F, d]           gate and up merged
    w_down: QLinear  # [L, d, F]


@jax.tree_util.register_dataclass
@dataclass
class Params:
    embed: QLinear  # [V, d] (also the head when tied)
    layers: Layers
    out_norm: jax.Array  # [d]
    head: QLinear  # [V, d]


@jax.tree_util.register_dataclass
@dataclass
class Batch:
    """One chunk's inputs, all derived on the host (see kv_cache.Ring.plan_chunk)."""

    tokens: jax.Array  # [C] int32
    cos: jax.Array  # [C, hd/2] rotation at the token's stream index
    sin: jax.Array
    sink_cos: jax.Array  # [C, hd/2] rotation of the query against the sinks
    sink_sin: jax.Array
    mask: jax.Array  # [C, S + C] bool
    key_sink: jax.Array  # [S + C] bool
    write_slot: jax.Array  # [C] int32
    last: jax.Array  # () int32: index of the last real row (rows after it are padding)
    order: jax.Array  # [S + C] int32: keys by stream position (the native attention's order)


def rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate-half RoPE; x [C, heads, hd], cos/sin [C, hd/2] (weights were un-permuted at load)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def quantize_kv(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[C, kv] f32 -> int8 values and one f32 scale per 32 values (Needle's KV format)."""
    g = x.reshape(x.shape[0], -1, KV_GROUP)
    scale = jnp.max(jnp.abs(g), axis=-1) / 127.0
    q = jnp.round(g / jnp.where(scale == 0, 1.0, scale)[..., None])
    return jnp.clip(q, -127, 127).astype(jnp.int8).reshape(x.shape), scale


def dequantize_kv(q: jax.Array, scale: jax.Array | None) -> jax.Array:
    if scale is None:
        return q.astype(jnp.float32)
    g = q.astype(jnp.float32).reshape(q.shape[0], -1, KV_GROUP)
    return (g * scale[..., None]).reshape(q.shape)


def attention(cfg: ModelConfig, q, k_all, v_all, batch: Batch):
    """q [C, H, hd] un-rotated; k_all/v_all [S + C, KVH, hd] (keys already rotated)."""
    C, G, KVH = q.shape[0], cfg.q_per_kv, cfg.n_kv_heads
    qw = rope(q, batch.cos, batch.sin).reshape(C, KVH, G, -1)
    qs = rope(q, batch.sink_cos, batch.sink_sin).reshape(C, KVH, G, -1)
    scores_w = jnp.einsum("ckgd,skd->kgcs", qw, k_all)
    scores_s = jnp.einsum("ckgd,skd->kgcs", qs, k_all)
    scores = jnp.where(batch.key_sink, scores_s, scores_w) * (cfg.head_dim**-0.5)
    scores = jnp.where(batch.mask, scores, -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1)
    # Head-major output, the layout XLA's batched dot produces: for C = 1 the transpose below is
    # a bitcast, so the output projection reads a contiguous vector (bench: -7% per decode step).
    out = jnp.einsum("kgcs,skd->kgcd", probs, v_all)
    return out.transpose(2, 0, 1, 3).reshape(C, -1)


def attention_native(cfg: ModelConfig, q, k_new, v_new, cache: KVCache, i, batch: Batch):
    """The same attention in the native kernel, straight from the (int8) cache of every layer:
    no dequantized copy, no concatenation, and sums in stream order (exact speculation)."""
    C, hd = q.shape[0], cfg.head_dim
    qw, qs = rope(q, batch.cos, batch.sin), rope(q, batch.sink_cos, batch.sink_sin)
    kind = {jnp.int8: "int8", jnp.bfloat16: "bf16", jnp.float32: "f32"}[cache.k.dtype.type]
    ks = cache.k_scale if cache.k_scale is not None else jnp.zeros((1,), jnp.float32)
    vs = cache.v_scale if cache.v_scale is not None else ks
    out = jax.ShapeDtypeStruct((C, cfg.n_heads * hd), jnp.float32)
    return jax.ffi.ffi_call(f"pinwheel_attn_{kind}", out)(
        qw, qs, cache.k, cache.v, ks, vs, k_new, v_new, batch.order, batch.mask, batch.key_sink,
        jnp.asarray(i, jnp.int32))


def layer(cfg: ModelConfig, batch: Batch, x, w: Layers, i, cache: KVCache):
    """Layer i (w holds every layer's weights, stacked; cache every layer's K/V)."""
    C, hd, H, KVH = x.shape[0], cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    qkv = matmul(x, w.wqkv, i, norm=w.attn_norm, eps=cfg.rms_eps)
    q = qkv[:, : H * hd].reshape(C, H, hd)
    k = rope(qkv[:, H * hd : (H + KVH) * hd].reshape(C, KVH, hd), batch.cos, batch.sin).reshape(C, -1)
    v = qkv[:, (H + KVH) * hd :]
    if cache.k_scale is not None:  # int8 cache: attend to exactly what will be stored
        k_store, ks = quantize_kv(k)
        v_store, vs = quantize_kv(v)
        k_new, v_new = dequantize_kv(k_store, ks), dequantize_kv(v_store, vs)
    else:
        k_store, v_store, ks, vs = k.astype(cache.k.dtype), v.astype(cache.v.dtype), None, None
        k_new, v_new = k_store.astype(jnp.float32), v_store.astype(jnp.float32)
    if kernels.available():
        att = attention_native(cfg, q, k_new, v_new, cache, i, batch)
    else:
        at = lambda a: None if a is None else lax.dynamic_index_in_dim(a, i, keepdims=False)  # noqa: E731
        k_all = jnp.concatenate([dequantize_kv(at(cache.k), at(cache.k_scale)), k_new]).reshape(-1, KVH, hd)
        v_all = jnp.concatenate([dequantize_kv(at(cache.v), at(cache.v_scale)), v_new]).reshape(-1, KVH, hd)
        att = attention(cfg, q, k_all, v_all, batch)
    x = x + matmul(att, w.wo, i)
    gate, up = jnp.split(matmul(x, w.w_gate_up, i, norm=w.ffn_norm, eps=cfg.rms_eps), 2, axis=-1)
    x = x + matmul(jax.nn.silu(gate) * up, w.w_down, i)
    return x, (k_store, v_store, ks, vs)


def embed(params: Params, tokens: jax.Array) -> jax.Array:
    return take_rows(params.embed, tokens)


def _layers(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Every layer over the chunk; returns the final hidden states and the chunk's K/V rows."""
    x = embed(params, batch.tokens)

    def body(x, i):
        return layer(cfg, batch, x, params.layers, i, cache)

    return lax.scan(body, x, jnp.arange(cfg.n_layers, dtype=jnp.int32))


def _write(cache: KVCache, rows, slot: jax.Array) -> KVCache:
    """Store the chunk's rows at their ring slots; rows whose slot is out of range are dropped."""
    k_new, v_new, ks_new, vs_new = rows
    return KVCache(
        cache.k.at[:, slot].set(k_new, mode="drop"),
        cache.v.at[:, slot].set(v_new, mode="drop"),
        None if ks_new is None else cache.k_scale.at[:, slot].set(ks_new, mode="drop"),
        None if vs_new is None else cache.v_scale.at[:, slot].set(vs_new, mode="drop"),
    )


def _head(params: Params, x: jax.Array, cfg: ModelConfig) -> jax.Array:
    return matmul(x, params.head, norm=params.out_norm, eps=cfg.rms_eps)


@partial(jax.jit, static_argnames=("cfg", "all_logits"), donate_argnames=("cache",))
def step(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig, all_logits: bool = False):
    """Run one chunk; returns (logits [C, V] or [1, V] for the last real row, new cache)."""
    x, rows = _layers(params, cache, batch, cfg)
    cache = _write(cache, rows, batch.write_slot)
    if not all_logits:
        x = lax.dynamic_slice_in_dim(x, batch.last, 1)
    return _head(params, x, cfg), cache


@partial(jax.jit, static_argnames=("cfg",))
def verify(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Run a draft chunk without touching the cache; returns (logits [C, V], the chunk's K/V rows)."""
    x, rows = _layers(params, cache, batch, cfg)
    return _head(params, x, cfg), rows


@partial(jax.jit, donate_argnames=("cache",))
def write_rows(cache: KVCache, rows, slot: jax.Array) -> KVCache:
    """Store the accepted rows of a verified draft (the others carry slot = capacity: dropped)."""
    return _write(cache, rows, slot)


def forget_compiled() -> None:
    """Drop every compiled step and JAX's tracing caches (a new cache shape is coming): without
    this each Apply of a new memory setting kept its executables for good, +150 MB after 20
    Applies cycling 6 settings (measured; +35-40 MB with this, flat after the first few). The
    shape in use is compiled again, from the persistent cache when it has it."""
    jax.clear_caches()
