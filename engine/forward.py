"""The transformer over the bounded cache: one function for prefill chunks and decode steps, and
one layer function for every model family (its differences are ModelConfig's static trait
fields: biases, Q/K and post norms, activation, scales, partial rotary, sliding-window layers;
see engine.families). Sliding-window (local) layers attend over their own smaller cache and
ring; the scan picks the kind per layer. Recurrent layers (Qwen3.5's Gated DeltaNet,
engine.deltanet) are a third kind: no K/V, a fixed state read from the cache and replaced by
the step. A hybrid model's layers are scanned a period at a time (3 DeltaNet layers and an
attention one), with the state in the scan's carry.
Weights that only one kind has are stacked over the layers of that kind (attention weights over
the attention layers, DeltaNet weights over the recurrent ones); norms and the FFN over all.

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

Without the kernel the loader holds the weights in the XLA path's int8 form (engine.quant) and
the layers run attention_xla; the path follows the weights' form (layer()).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import deltanet, half, kernels
from .budget import KV_GROUP
from .config import GLOBAL, LOCAL, RECURRENT, ModelConfig
from .kv_cache import KVCache, RecurrentState
from .quant import QLinear, is_xla_form, matmul, take_rows
from .quant import rms_norm_rows as rms_norm

# Speculative drafts are verified in steps of this many rows (the sampled token + 7 drafts).
MATVEC_ROWS = 8


@jax.tree_util.register_dataclass
@dataclass
class Layers:
    """Per-layer weights stacked on a leading layer axis, so one scan runs them all. The optional
    ones are None for families without them (ModelConfig's trait fields say which). La: the
    attention layers (all L but in hybrid models), Lr: the recurrent ones."""

    attn_norm: jax.Array  # [La, d]
    wqkv: QLinear  # [La, (H + 2 * KVH) * hd, d]   q, k, v merged: one read of x (q twice as wide: attn_gate)
    wo: QLinear  # [La, d, H * hd]
    ffn_norm: jax.Array  # [L, d]
    w_gate_up: QLinear  # [L, 2 * F, d]           gate and up merged
    w_down: QLinear  # [L, d, F]
    qkv_bias: jax.Array | None = None  # [La, (H + 2 * KVH) * hd]  qkv_bias
    q_norm: jax.Array | None = None  # [La, hd]                     qk_norm
    k_norm: jax.Array | None = None  # [La, hd]
    post_attn_norm: jax.Array | None = None  # [L, d]              post_norms
    post_ffn_norm: jax.Array | None = None  # [L, d]
    # Gated DeltaNet (recurrent layers), see engine.deltanet
    rec_norm: jax.Array | None = None  # [Lr, d]   the recurrent layers' attn_norm
    w_in: QLinear | None = None  # [Lr, conv_dim + Hv * S + 2 * Hv, d]   attn_qkv, attn_gate, ssm_beta, ssm_alpha
    w_ssm_out: QLinear | None = None  # [Lr, d, Hv * S]
    conv_w: jax.Array | None = None  # [Lr, conv_dim, kernel]
    ssm_a: jax.Array | None = None  # [Lr, Hv]   -exp(A_log)
    dt_bias: jax.Array | None = None  # [Lr, Hv]
    ssm_norm: jax.Array | None = None  # [Lr, S]
    # Gemma 4's per-layer input (per_layer_dim n): gate [1, n, d], projection [1, d, n], its norm [1, d];
    # the layer's output scale [1, 1]
    pl_gate: QLinear | None = None
    pl_proj: QLinear | None = None
    pl_norm: jax.Array | None = None
    out_scale: jax.Array | None = None


@jax.tree_util.register_dataclass
@dataclass
class Params:
    embed: QLinear  # [V, d] (also the head when tied)
    layers: Layers | tuple[Layers, ...]  # stacked; or one per layer (config.per_layer_weights, Gemma 4)
    out_norm: jax.Array  # [d]
    head: QLinear  # [V, d]
    # Gemma 4's per-layer embeddings: a table [V, L * n] and a projection of x [L * n, d], its norm [n]
    pl_embed: QLinear | None = None
    pl_model_proj: QLinear | None = None
    pl_proj_norm: jax.Array | None = None


@jax.tree_util.register_dataclass
@dataclass
class LocalKeys:
    """What the sliding-window layers see (their own ring, rotary base and mask)."""

    cos: jax.Array  # [C, rot/2]
    sin: jax.Array
    mask: jax.Array  # [C, Sl + C] bool
    write_slot: jax.Array  # [C] int32
    order: jax.Array  # [Sl + C] int32


@jax.tree_util.register_dataclass
@dataclass
class Batch:
    """One chunk's inputs, all derived on the host (see kv_cache.Ring.plan_chunk)."""

    tokens: jax.Array  # [C] int32
    cos: jax.Array  # [C, rot/2] rotation at the token's stream index
    sin: jax.Array
    sink_cos: jax.Array  # [C, rot/2] rotation of the query against the sinks
    sink_sin: jax.Array
    mask: jax.Array  # [C, S + C] bool
    key_sink: jax.Array  # [S + C] bool
    write_slot: jax.Array  # [C] int32
    last: jax.Array  # () int32: index of the last real row (rows after it are padding)
    order: jax.Array  # [S + C] int32: keys by stream position (the native attention's order)
    local: LocalKeys | None = None  # models with sliding-window layers


def rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate-half (NEOX) RoPE over the first 2 * cos.shape[-1] dims of each head, the rest
    passed through (partial rotary); x [C, heads, hd], cos/sin [C, rot/2]. Llama's Q/K rows
    were un-permuted at load, so one rotation serves every family."""
    half, hd = cos.shape[-1], x.shape[-1]
    x1, x2, rest = x[..., :half], x[..., half : 2 * half], x[..., 2 * half :]
    c, s = cos[:, None, :], sin[:, None, :]
    parts = [x1 * c - x2 * s, x2 * c + x1 * s] + ([rest] if 2 * half < hd else [])
    return jnp.concatenate(parts, axis=-1)


def quantize_kv(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[C, kv] f32 -> int8 values and one f32 scale per 32 values (Needle's KV format)."""
    g = x.reshape(x.shape[0], -1, KV_GROUP)
    scale = jnp.max(jnp.abs(g), axis=-1) / 127.0
    q = jnp.round(g / jnp.where(scale == 0, 1.0, scale)[..., None])
    return jnp.clip(q, -127, 127).astype(jnp.int8).reshape(x.shape), scale


def dequantize_kv(q: jax.Array, scale: jax.Array | None) -> jax.Array:
    if q.dtype == jnp.uint16:  # a bf16 cache's bits (engine.kv_cache)
        return lax.bitcast_convert_type(q, jnp.bfloat16).astype(jnp.float32)
    if scale is None:
        return q.astype(jnp.float32)
    g = q.astype(jnp.float32).reshape(q.shape[0], -1, KV_GROUP)
    return (g * scale[..., None]).reshape(q.shape)


XLA_KEY_BLOCK = 256  # the XLA attention's smallest span of cache slots (then 2x, 4x ... the capacity)


def key_spans(capacity: int) -> list[int]:
    """The spans of cache slots the XLA attention is compiled for: 256, 512, ... and the capacity."""
    spans, b = [], XLA_KEY_BLOCK
    while b < capacity:
        spans.append(b)
        b *= 2
    return spans + [capacity]


def attention_xla(cfg: ModelConfig, q, k_new, v_new, cache: KVCache, i, cos, sin, sink_cos, sink_sin, mask,
                  key_sink):
    """The XLA path's attention, straight from cache layer i (any dtype) and the chunk's own
    new rows, without concatenating them into one dequantized copy: the cache's scores and the
    new keys' are joined (a few KB) and one softmax spans both. Slots are filled from the front
    until the ring wraps, so only the first `span` slots are read, the smallest of key_spans()
    that holds every slot the mask lets any row see (chosen at run time: lax.switch over the
    spans, one compiled branch each); a 300-token chat in a 4,128-slot cache reads 512 slots,
    not 4,128. The same numbers as the whole layer dequantized and concatenated with the new
    rows, in f32 (tests/engine/reference.py spells that). Both products keep
    the cache's rows whole: the scores with the keys [KVH, span, hd] as a GEMM's rows, the values
    as [KVH, span, hd] on the right (an einsum let XLA pick V^T, a transpose of every value of the
    span: 1 ms a layer at the 1.7B shape). q [C, H, hd] un-rotated; k_new/v_new [C, kv] f32 (keys
    rotated)."""
    C, G, KVH, hd = q.shape[0], cfg.q_per_kv, cfg.n_kv_heads, cfg.head_dim
    S = cache.k.shape[1]
    # both rotations of the query in one operand: [C, KVH, 2G, hd], window then sink
    q2 = jnp.concatenate([rope(q, cos, sin).reshape(C, KVH, G, hd), rope(q, sink_cos, sink_sin).reshape(C, KVH, G, hd)],
                         axis=2)
    kn, vn = k_new.reshape(C, KVH, hd), v_new.reshape(C, KVH, hd)
    s_new = jnp.einsum("tkd,ckgd->ktcg", kn, q2)  # [KVH, C keys, C rows, 2G]

    def over(span):  # layer i's first `span` slots, sliced inside the branch (no copy of the layer)
        cut = lambda a: None if a is None else lax.dynamic_slice(a, (i, 0, 0), (1, span, a.shape[2]))[0]  # noqa: E731
        kc = dequantize_kv(cut(cache.k), cut(cache.k_scale)).reshape(span, KVH, hd)
        s_c = jnp.einsum("skd,ckgd->kscg", kc, q2)  # [KVH, span, C, 2G]: the keys as a GEMM's rows
        sc = jnp.concatenate([s_c, s_new], axis=1)
        sink = jnp.concatenate([key_sink[:span], key_sink[S:]])[None, :, None, None]
        sc = jnp.where(sink, sc[..., G:], sc[..., :G]) * (cfg.head_dim**-0.5)
        seen = jnp.concatenate([mask[:, :span], mask[:, S:]], axis=1).T[None, :, :, None]
        p = jax.nn.softmax(jnp.where(seen, sc, -jnp.inf), axis=1)  # [KVH, span + C, C, G]
        vc = dequantize_kv(cut(cache.v), cut(cache.v_scale)).reshape(span, KVH, hd)
        pc = jnp.moveaxis(p[:, :span], 1, -1).reshape(KVH, C * G, span)  # [KVH, C * G, span]
        vt = jnp.swapaxes(vc, 0, 1)  # [KVH, span, hd]
        pv = lax.dot_general(pc, vt, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
        out = jnp.moveaxis(pv.reshape(KVH, C, G, hd), 1, 0) + jnp.einsum("ktcg,tkd->ckgd", p[:, span:], vn)
        return out.reshape(C, -1)

    spans = key_spans(S)
    if len(spans) == 1:
        return over(S)
    seen_slots = jnp.any(mask[:, :S], axis=0)
    bound = jnp.max(jnp.where(seen_slots, jnp.arange(1, S + 1, dtype=jnp.int32), 0))
    which = jnp.sum(bound > jnp.asarray(spans[:-1], jnp.int32)).astype(jnp.int32)
    return lax.switch(which, [partial(over, b) for b in spans])


def attention_native(cfg: ModelConfig, q, k_new, v_new, cache: KVCache, i, cos, sin, sink_cos, sink_sin, mask,
                     key_sink, order):
    """The same attention in the native kernel, straight from the (int8) cache of every layer:
    no dequantized copy, no concatenation, and sums in stream order (exact speculation)."""
    C, hd = q.shape[0], cfg.head_dim
    qw, qs = rope(q, cos, sin), rope(q, sink_cos, sink_sin)
    kind = {jnp.int8: "int8", jnp.uint16: "bf16", jnp.float32: "f32"}[cache.k.dtype.type]
    ks = cache.k_scale if cache.k_scale is not None else jnp.zeros((1,), jnp.float32)
    vs = cache.v_scale if cache.v_scale is not None else ks
    out = jax.ShapeDtypeStruct((C, cfg.n_heads * hd), jnp.float32)
    return jax.ffi.ffi_call(f"pinwheel_attn_{kind}", out)(
        qw, qs, cache.k, cache.v, ks, vs, k_new, v_new, order, mask, key_sink, jnp.asarray(i, jnp.int32))


def _store(cache: KVCache, k, v):
    """What the cache will hold of the new rows, and the f32 values attention must use (for an
    int8 cache, exactly what will be stored)."""
    if cache.k_scale is not None:
        k_store, ks = quantize_kv(k)
        v_store, vs = quantize_kv(v)
        return (k_store, v_store, ks, vs), dequantize_kv(k_store, ks), dequantize_kv(v_store, vs)
    if cache.k.dtype == jnp.uint16:  # bf16, stored as its bits (engine.kv_cache)
        k16, v16 = k.astype(jnp.bfloat16), v.astype(jnp.bfloat16)
        bits = lambda a: lax.bitcast_convert_type(a, jnp.uint16)  # noqa: E731
        return (bits(k16), bits(v16), None, None), k16.astype(jnp.float32), v16.astype(jnp.float32)
    k_store, v_store = k.astype(cache.k.dtype), v.astype(cache.v.dtype)
    return (k_store, v_store, None, None), k_store.astype(jnp.float32), v_store.astype(jnp.float32)


def _attend(cfg: ModelConfig, q, k, v, cache: KVCache, j, keys, native: bool):
    """Rotate the new keys, attend over cache layer j plus the chunk; keys = (cos, sin,
    sink_cos, sink_sin, mask, key_sink, order) of this layer kind. Returns (out, rows to store).
    native: the kernel's attention, else the XLA path's."""
    cos, sin, scos, ssin, mask, key_sink, order = keys
    C, KVH, hd = q.shape[0], cfg.n_kv_heads, cfg.head_dim
    k = rope(k.reshape(C, KVH, hd), cos, sin).reshape(C, -1)
    rows, k_new, v_new = _store(cache, k, v)
    if native:
        return attention_native(cfg, q, k_new, v_new, cache, j, *keys), rows
    return attention_xla(cfg, q, k_new, v_new, cache, j, cos, sin, scos, ssin, mask, key_sink), rows


def _global_keys(batch: Batch):
    return (batch.cos, batch.sin, batch.sink_cos, batch.sink_sin, batch.mask, batch.key_sink, batch.order)


def _nope(cfg: ModelConfig, i, keys):
    """SmolLM3's NoPE layers: the identity rotation (cos 1, sin 0) for the query, the sinks and
    the new keys of layer i where cfg.nope_layers says so; the keys unchanged elsewhere."""
    if not cfg.nope_layers:
        return keys
    off = jnp.asarray(np.array(cfg.nope_layers))[i]
    cos, sin, scos, ssin, *rest = keys
    one = lambda c: jnp.where(off, jnp.ones_like(c), c)  # noqa: E731
    zero = lambda s: jnp.where(off, jnp.zeros_like(s), s)  # noqa: E731
    return (one(cos), zero(sin), one(scos), zero(ssin), *rest)


def _local_keys(batch: Batch):
    lk = batch.local  # no sink rotation in a sliding window: every key at its own position
    return (lk.cos, lk.sin, lk.cos, lk.sin, lk.mask, jnp.zeros(lk.order.shape, bool), lk.order)


def _kind_index(cfg: ModelConfig):
    """Per layer: is it local, and its row among the layers of its kind: its cache row (a shared
    layer's is its source's), or its state row for a recurrent layer."""
    kinds = np.array(cfg.kinds)
    sub = np.zeros(len(kinds), np.int32)
    for kind in (GLOBAL, LOCAL, RECURRENT):
        sel = kinds == kind
        sub[sel] = np.arange(sel.sum())
    if cfg.shared_kv_layers:
        own = [i for i in range(cfg.n_layers) if cfg.owns_kv(i)]
        row = {i: sum(cfg.kinds[j] == cfg.kinds[i] for j in own if j < i) for i in own}
        sub = np.array([row[cfg.kv_source(i)] if cfg.kinds[i] != RECURRENT else sub[i]
                        for i in range(cfg.n_layers)], np.int32)
    return kinds == LOCAL, sub


def _attn_index(cfg: ModelConfig) -> np.ndarray:
    """Per layer: its index among the attention layers (its row of the attention weights)."""
    att = np.array([k != RECURRENT for k in cfg.kinds])
    return np.cumsum(att).astype(np.int32) - 1


def _act(cfg: ModelConfig, gate):
    if cfg.activation != "gelu_tanh":
        return jax.nn.silu(gate)
    # ggml's CPU GELU, which the published numbers come from: a table over f16 inputs, so the
    # input and the result are both rounded to f16, and |x| >= 10 short-cuts to 0 or x.
    g16 = half.round_f16(gate)  # (x.astype(f16) without the convert a CPU lacking F16C cannot compile)
    y = half.round_f16(jax.nn.gelu(g16, approximate=True))
    return jnp.where(gate <= -10.0, 0.0, jnp.where(gate >= 10.0, gate, y))


def _attention(cfg: ModelConfig, batch: Batch, x, w: Layers, i, cache: KVCache):
    """The attention half of layer i (its row a among the attention layers' weights). Returns
    its output [C, d] and the chunk's K/V rows as they will be stored."""
    C, hd, H, KVH = x.shape[0], cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    a = jnp.asarray(_attn_index(cfg))[i] if cfg.recurrent_layers else i
    # The path follows the weights: the loader holds the XLA path's form only without the kernel.
    native = kernels.available() and not is_xla_form(w.wqkv)
    qkv = matmul(x, w.wqkv, a, norm=w.attn_norm, eps=cfg.rms_eps)
    if cfg.qkv_bias:
        qkv = qkv + w.qkv_bias[a]
    Q = (2 if cfg.attn_gate else 1) * H * hd  # attn_gate: each head's q is followed by its gate
    q = qkv[:, :Q].reshape(C, H, Q // H)
    gate = q[..., hd:].reshape(C, H * hd) if cfg.attn_gate else None
    q = q[..., :hd]
    k = qkv[:, Q : Q + KVH * hd].reshape(C, KVH, hd)
    v = qkv[:, Q + KVH * hd :]
    if cfg.qk_norm:  # each head's own RMS norm, before rotary
        q, k = rms_norm(q, w.q_norm[a], cfg.rms_eps), rms_norm(k, w.k_norm[a], cfg.rms_eps)
    if cfg.attn_scale:  # the kernels scale scores by 1/sqrt(hd): fold the family's scale into q
        q = q * (cfg.scores_scale * hd**0.5)
    if cfg.local_layers:
        local, sub = _kind_index(cfg)
        j = jnp.asarray(sub)[i]
        glob = lambda q, k, v: _attend(cfg, q, k, v, cache, j, _global_keys(batch), native)  # noqa: E731
        loc = lambda q, k, v: _attend(cfg, q, k, v, cache.local, j, _local_keys(batch), native)  # noqa: E731
        att, rows = lax.cond(jnp.asarray(local)[i], loc, glob, q, k, v)
    else:
        j = jnp.asarray(_kind_index(cfg)[1])[i] if cfg.recurrent_layers else i
        att, rows = _attend(cfg, q, k, v, cache, j, _nope(cfg, i, _global_keys(batch)), native)
    if cfg.attn_gate:
        att = att * jax.nn.sigmoid(gate)
    return matmul(att, w.wo, a), rows


def _recurrent(cfg: ModelConfig, batch: Batch, x, w: Layers, i, conv, ssm):
    """The Gated DeltaNet half of layer i, from the recurrent state (conv [Lr, ...], ssm [Lr, ...]):
    its output [C, d] and the state with its row r replaced. With the native kernel every row
    (a decode step's, a verify's, a prefill chunk's) goes through the recurrent step in place
    (deltanet.native_layer); otherwise XLA computes the chunk's new state (deltanet.mix, the
    chunked form for more than one row) and writes it back."""
    r = jnp.asarray(_kind_index(cfg)[1])[i]
    proj = matmul(x, w.w_in, r, norm=w.rec_norm, eps=cfg.rms_eps)
    native = kernels.available() and not is_xla_form(w.w_in)
    if native:
        o, conv, ssm = deltanet.native_layer(cfg, proj, conv, ssm, r, w.conv_w, w.ssm_a, w.dt_bias, w.ssm_norm,
                                             batch.last)
    else:
        o, c, m = deltanet.mix(cfg, proj, conv[r], ssm[r], w.conv_w[r], w.ssm_a[r], w.dt_bias[r], w.ssm_norm[r],
                               batch.last)
        conv, ssm = lax.dynamic_update_index_in_dim(conv, c, r, 0), lax.dynamic_update_index_in_dim(ssm, m, r, 0)
    return matmul(o, w.w_ssm_out, r), (conv, ssm)


def _period(cfg: ModelConfig) -> int:
    """The shortest run of layer kinds that repeats over the whole model (Qwen3.5: 3 DeltaNet
    layers and an attention one; the whole model when the file lists an irregular pattern)."""
    kinds, L = cfg.kinds, cfg.n_layers
    return next(p for p in range(1, L + 1) if L % p == 0 and all(kinds[i] == kinds[i % p] for i in range(L)))


def _layers_hybrid(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Every layer of a hybrid model: a scan over its periods (_period), each period's layers
    written out with their kinds known, so no layer branches on its kind. The recurrent state
    rides in the scan's carry and each layer replaces its own row of it in place (a switch per
    layer returned every layer's state, or zeros for an attention layer, and the step then
    gathered them: ~40 of a 77 ms decode step at the 0.8B shape, measured). Returns the final
    hidden states and (the attention layers' K/V rows, the new state)."""
    p, w = _period(cfg), params.layers
    att = [j for j in range(p) if cfg.kinds[j] != RECURRENT]
    assert not cfg.local_layers, "hybrid models with sliding-window layers are not supported"

    def body(carry, t):
        x, conv, ssm = carry
        rows = []
        for j in range(p):
            i = t * p + j
            if cfg.kinds[j] == RECURRENT:
                a, (conv, ssm) = _recurrent(cfg, batch, x, w, i, conv, ssm)
            else:
                a, row = _attention(cfg, batch, x, w, i, cache)
                rows.append(row)
            x = _ffn(cfg, x + (rms_norm(a, w.post_attn_norm[i], cfg.rms_eps) if cfg.post_norms else a), w, i)
        return (x, conv, ssm), _stack_rows(rows)

    x = embed(params, batch.tokens, cfg)
    st = cache.state
    (x, conv, ssm), rows = lax.scan(body, (x, st.conv, st.ssm), jnp.arange(cfg.n_layers // p, dtype=jnp.int32))
    rows = tuple(None if r is None else r.reshape(-1, *r.shape[2:]) for r in rows)  # [periods, len(att), ...] -> layers
    assert len(att) * (cfg.n_layers // p) == cfg.attention_layers
    return x, (rows, RecurrentState(ssm, conv))


def _as_f32(rows):
    """The f32 values of K/V rows in their stored form (what attention over them uses)."""
    k, v, ks, vs = rows
    if ks is None:
        return k.astype(jnp.float32), v.astype(jnp.float32)
    return dequantize_kv(k, ks), dequantize_kv(v, vs)


def _attention_own(cfg: ModelConfig, batch: Batch, x, w: Layers, i: int, cache: KVCache, chunk_rows: dict):
    """The attention of layer i of a model whose weights are held per layer (Gemma 4; i static,
    w its own one-layer stacks). A layer that owns its K/V computes, norms and stores them; a
    shared one attends over its source layer's cache and that layer's rows of this chunk
    (chunk_rows: layer -> its rows as stored). Returns its output [C, d] and its rows (None when
    shared)."""
    kind = cfg.kinds[i]
    kc = cfg.kind_view(kind)
    C, H, KVH, hd = x.shape[0], cfg.n_heads, cfg.n_kv_heads, kc.head_dim
    native = kernels.available() and not is_xla_form(w.wqkv)
    qkv = matmul(x, w.wqkv, 0, norm=w.attn_norm, eps=cfg.rms_eps)
    q = rms_norm(qkv[:, : H * hd].reshape(C, H, hd), w.q_norm[0], cfg.rms_eps)
    q = q * (cfg.scores_scale * hd**0.5)  # the kernels scale scores by 1/sqrt(hd); Gemma 4 does not scale
    keys = _local_keys(batch) if kind == LOCAL else _global_keys(batch)
    store = cache.local if kind == LOCAL else cache
    j = int(_kind_index(cfg)[1][i])
    if cfg.owns_kv(i):
        k = rms_norm(qkv[:, H * hd : (H + KVH) * hd].reshape(C, KVH, hd), w.k_norm[0], cfg.rms_eps)
        v = qkv[:, (H + KVH) * hd :].reshape(C, KVH, hd)
        if cfg.v_norm:
            v = rms_norm(v, jnp.float32(1.0), cfg.rms_eps)
        att, rows = _attend(kc, q, k.reshape(C, -1), v.reshape(C, -1), store, j, keys, native)
        return matmul(att, w.wo, 0), rows
    k_new, v_new = _as_f32(chunk_rows[cfg.kv_source(i)])
    cos, sin, scos, ssin, mask, key_sink, order = keys
    if native:
        att = attention_native(kc, q, k_new, v_new, store, j, *keys)
    else:
        att = attention_xla(kc, q, k_new, v_new, store, j, cos, sin, scos, ssin, mask, key_sink)
    return matmul(att, w.wo, 0), None


def _per_layer_inputs(params: Params, tokens, x, cfg: ModelConfig):
    """Gemma 4's per-layer inputs [C, L, n]: each token's row of the per-layer table (times
    sqrt(n)) plus the normed projection of its scaled embedding (times 1/sqrt(d)), over sqrt(2)
    (llama.cpp's project_per_layer_inputs)."""
    C, L, n = x.shape[0], cfg.n_layers, cfg.per_layer_dim
    table = take_rows(params.pl_embed, tokens).reshape(C, L, n) * jnp.float32(n**0.5)
    proj = matmul(x, params.pl_model_proj).reshape(C, L, n) * jnp.float32(cfg.d_model**-0.5)
    proj = rms_norm(proj, params.pl_proj_norm, cfg.rms_eps)
    return (proj + table) * jnp.float32(2**-0.5)


def _per_layer_block(cfg: ModelConfig, x, w: Layers, inp):
    """Gemma 4's per-layer input, added after the FFN: gelu(gate(x)) times this layer's input,
    projected back to d and normed."""
    g = _act(cfg, matmul(x, w.pl_gate, 0)) * inp
    return x + rms_norm(matmul(g, w.pl_proj, 0), w.pl_norm[0], cfg.rms_eps)


def _layers_unrolled(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Every layer of a model whose layers differ in shape (Gemma 4), one after the other (each
    with its own weights, kind and cache row known statically). Returns the final hidden states
    and the chunk's K/V rows per kind: (global rows, local rows), each stacked over the layers
    that own a cache of that kind, in order."""
    x = embed(params, batch.tokens, cfg)
    inputs = _per_layer_inputs(params, batch.tokens, x, cfg) if cfg.per_layer_dim else None
    chunk_rows = {}
    for i, w in enumerate(params.layers):
        a, rows = _attention_own(cfg, batch, x, w, i, cache, chunk_rows)
        if rows is not None:
            chunk_rows[i] = rows
        x = _ffn(cfg, x + rms_norm(a, w.post_attn_norm[0], cfg.rms_eps), w, 0)
        if cfg.per_layer_dim:
            x = _per_layer_block(cfg, x, w, inputs[:, i])
        if cfg.layer_scale:
            x = x * w.out_scale[0]

    def of(kind):
        own = [r for i, r in chunk_rows.items() if cfg.kinds[i] == kind]
        return _stack_rows(own) if own else None

    return x, (of(GLOBAL), of(LOCAL))


def _stack_rows(rows: list):
    """Layers' K/V rows (k, v, k scales, v scales; no scales for a float cache), stacked on a new
    leading layer axis."""
    return tuple(None if rows[0][f] is None else jnp.stack([r[f] for r in rows]) for f in range(4))


def _ffn(cfg: ModelConfig, x, w: Layers, i):
    """The FFN half of layer i (its row i of w), with its residual."""
    gate, up = jnp.split(matmul(x, w.w_gate_up, i, norm=w.ffn_norm, eps=cfg.rms_eps), 2, axis=-1)
    f = matmul(_act(cfg, gate) * up, w.w_down, i)
    return x + (rms_norm(f, w.post_ffn_norm[i], cfg.rms_eps) if cfg.post_norms else f)


def layer(cfg: ModelConfig, batch: Batch, x, w: Layers, i, cache: KVCache):
    """Layer i (w holds every layer's weights, stacked; cache every layer's K/V). Returns the
    new x and the chunk's K/V rows as they will be stored."""
    a, rows = _attention(cfg, batch, x, w, i, cache)
    x = x + (rms_norm(a, w.post_attn_norm[i], cfg.rms_eps) if cfg.post_norms else a)
    return _ffn(cfg, x, w, i), rows


def embed(params: Params, tokens: jax.Array, cfg: ModelConfig) -> jax.Array:
    x = take_rows(params.embed, tokens)
    return x * jnp.float32(cfg.embed_scale) if cfg.embed_scale != 1.0 else x


def _layers(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Every layer over the chunk; returns the final hidden states and the chunk's K/V rows."""
    if cfg.per_layer_weights:
        return _layers_unrolled(params, cache, batch, cfg)
    if cfg.recurrent_layers:
        return _layers_hybrid(params, cache, batch, cfg)
    x = embed(params, batch.tokens, cfg)

    def body(x, i):
        return layer(cfg, batch, x, params.layers, i, cache)

    return lax.scan(body, x, jnp.arange(cfg.n_layers, dtype=jnp.int32))


def _put(cache: KVCache, rows, slot: jax.Array) -> KVCache:
    k_new, v_new, ks_new, vs_new = rows
    return KVCache(
        cache.k.at[:, slot].set(k_new, mode="drop"),
        cache.v.at[:, slot].set(v_new, mode="drop"),
        None if ks_new is None else cache.k_scale.at[:, slot].set(ks_new, mode="drop"),
        None if vs_new is None else cache.v_scale.at[:, slot].set(vs_new, mode="drop"),
    )


def _write(cache: KVCache, rows, slot: jax.Array, local_slot: jax.Array | None, cfg: ModelConfig) -> KVCache:
    """Store the chunk's rows (stacked over every layer) at their ring slots; rows whose slot is
    out of range are dropped. With local layers each kind goes to its own cache and ring; a
    hybrid model's recurrent layers replace their state with the one the step computed."""
    if cfg.per_layer_weights:  # rows come per kind already (_layers_unrolled)
        glob, loc = rows
        out = cache if glob is None else _put(cache, glob, slot)
        if loc is not None:
            out.local = _put(cache.local, loc, local_slot)
        return out
    if cfg.recurrent_layers:  # rows over the attention layers, and the new state (_layers_hybrid)
        rows, state = rows
        out = _put(cache, rows, slot)
        out.state = state
        return out
    if not cfg.local_layers:
        return _put(cache, rows, slot)
    kinds = np.array(cfg.kinds)
    pick = lambda idx: tuple(None if r is None else r[idx] for r in rows)  # noqa: E731
    out = _put(cache, pick(np.flatnonzero(kinds == GLOBAL)), slot)
    out.local = _put(cache.local, pick(np.flatnonzero(kinds == LOCAL)), local_slot)
    return out


def _head(params: Params, x: jax.Array, cfg: ModelConfig) -> jax.Array:
    logits = matmul(x, params.head, norm=params.out_norm, eps=cfg.rms_eps)
    if cfg.logit_softcap:  # Gemma 4: cap * tanh(logits / cap)
        cap = jnp.float32(cfg.logit_softcap)
        logits = cap * jnp.tanh(logits / cap)
    return logits


def _slots_after(x, batch: Batch, cfg: ModelConfig):
    """The chunk's write slots, made to depend on the last layer's output x where the layers are
    unrolled (Gemma 4). There the rows come from the layers that own a cache, but the KV-shared
    layers after them still read it; nothing orders those reads before the write, so XLA kept a
    copy of every cache buffer for them (two per step: ~7 ms of E4B's ~175 ms decode step,
    bench.profile_step). An optimization barrier did not survive XLA:CPU's passes; a data
    dependence does. The one XLA cannot fold away is x's finiteness: a step whose hidden states
    are not finite (a broken file) writes nothing (slots past the ring are dropped)."""
    local = None if batch.local is None else batch.local.write_slot
    if not cfg.per_layer_weights:  # scanned layers: the write already follows the scan
        return batch.write_slot, local
    ok = jnp.all(jnp.isfinite(x))
    past = jnp.int32(1 << 30)
    return jnp.where(ok, batch.write_slot, past), None if local is None else jnp.where(ok, local, past)


@partial(jax.jit, static_argnames=("cfg", "all_logits"), donate_argnames=("cache",))
def step(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig, all_logits: bool = False):
    """Run one chunk; returns (logits [C, V] or [1, V] for the last real row, new cache)."""
    x, rows = _layers(params, cache, batch, cfg)
    slot, local_slot = _slots_after(x, batch, cfg)
    cache = _write(cache, rows, slot, local_slot, cfg)
    if not all_logits:
        x = lax.dynamic_slice_in_dim(x, batch.last, 1)
    return _head(params, x, cfg), cache


@partial(jax.jit, static_argnames=("cfg",))
def verify(params: Params, cache: KVCache, batch: Batch, cfg: ModelConfig):
    """Run a draft chunk without touching the cache; returns (logits [C, V], the chunk's K/V rows)."""
    x, rows = _layers(params, cache, batch, cfg)
    return _head(params, x, cfg), rows


@partial(jax.jit, static_argnames=("cfg",), donate_argnames=("cache",))
def write_rows(cache: KVCache, rows, slot: jax.Array, local_slot: jax.Array | None, cfg: ModelConfig) -> KVCache:
    """Store the accepted rows of a verified draft (the others carry slot = capacity: dropped)."""
    return _write(cache, rows, slot, local_slot, cfg)


@partial(jax.jit, donate_argnames=("cache",))
def clear_state(cache: KVCache) -> KVCache:
    """The cache with its recurrent state zeroed, in place (a hybrid's reset: the ring forgets
    by its positions, the state only by being cleared)."""
    st = cache.state
    out = KVCache(cache.k, cache.v, cache.k_scale, cache.v_scale, cache.local,
                  RecurrentState(jnp.zeros_like(st.ssm), jnp.zeros_like(st.conv)))
    return out


def forget_compiled() -> None:
    """Drop every compiled step and JAX's tracing caches (a new cache shape is coming): without
    this each Apply of a new memory setting kept its executables for good, +150 MB after 20
    Applies cycling 6 settings (measured; +35-40 MB with this, flat after the first few). The
    shape in use is compiled again, or loaded from the compiled-step store when it has it."""
    from . import compile_cache

    compile_cache.forget()
    jax.clear_caches()
