"""A plain numpy llama forward over a whole sequence (llama2.c style), with the bounded-cache
rule spelled out as an explicit dense mask and StreamingLLM's in-cache positions computed per
query. It shares nothing with engine/forward.py but the (dequantized) weights: interleaved RoPE
on re-permuted Q/K rows, as llama.cpp runs GGUF weights, so it also checks the un-permutation.

Matrix products quantize their input rows to int8 per 32 values first, as the engine's kernel
and llama.cpp do (`with_kernel=False` skips that, for the engine's XLA fallback path).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from engine import forward, kernels, quant, rope
from engine.gguf_loader import Model
from engine.kv_cache import Ring, allocate


def _deq(w) -> np.ndarray:
    return np.asarray(quant.dequantize(w), np.float64)


def _quantize_rows(x: np.ndarray) -> np.ndarray:
    """x rows rounded to int8 per 32 values, in float64 (llama.cpp's quantize_row_q8_0)."""
    g = x.reshape(*x.shape[:-1], -1, 32)
    d = np.abs(g).max(-1, keepdims=True) / 127.0
    q = np.round(np.divide(g, d, out=np.zeros_like(g), where=d > 0))
    return (q * d).reshape(x.shape)


def _mm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (_quantize_rows(x) if kernels.available() else x) @ w.T


def _permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Back to llama.cpp's row order (the inverse of gguf_loader.unpermute_qk)."""
    out, inp = w.shape
    return w.reshape(n_heads, 2, out // n_heads // 2, inp).swapaxes(1, 2).reshape(out, inp)


def _rope_interleaved(x: np.ndarray, pos: float, theta: np.ndarray) -> np.ndarray:
    """x [..., hd]: rotate adjacent pairs (x0, x1), (x2, x3) ... by pos * theta_i."""
    a = pos * theta
    c, s = np.cos(a), np.sin(a)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def _rope_neox(x: np.ndarray, pos: float, theta: np.ndarray, mscale: float = 1.0) -> np.ndarray:
    """x [..., hd]: rotate pairs (i, i + n_rot/2) of the first n_rot = 2 * len(theta) dims."""
    half = theta.size
    a = pos * theta
    c, s = mscale * np.cos(a), mscale * np.sin(a)
    out = x.copy()
    x0, x1 = x[..., :half], x[..., half : 2 * half]
    out[..., :half] = x0 * c - x1 * s
    out[..., half : 2 * half] = x0 * s + x1 * c
    return out


def _gelu_ggml(x: np.ndarray) -> np.ndarray:
    """llama.cpp's CPU GELU: tanh form over f16-rounded inputs, f16-rounded results."""
    x16 = x.astype(np.float16).astype(np.float64)
    y = 0.5 * x16 * (1 + np.tanh(np.sqrt(2 / np.pi) * x16 * (1 + 0.044715 * x16 * x16)))
    y = y.astype(np.float16).astype(np.float64)
    return np.where(x <= -10, 0.0, np.where(x >= 10, x, y))


def _thetas(model: Model, cfg, S: int):
    """(global theta, local theta) as the family's conventions give them."""
    n_rot = cfg.rotary_dims
    i = np.arange(n_rot // 2) * 2.0 / n_rot
    glob = cfg.rope_base ** (-i) * cfg.rope_scale
    factors = model.freq_factors(S) if hasattr(model, "freq_factors") else None
    if factors is not None:
        glob = glob / np.asarray(factors, np.float64)
    return glob, cfg.rope_local_base ** (-i)


def reference_logprobs(model: Model, ids, n_sink: int, window: int) -> np.ndarray:
    """log p(ids[t+1] | what the bounded cache holds at t), for t in 0..n-2.

    Global layers see the sinks and the last `window` tokens, at StreamingLLM's in-cache
    positions; a sliding-window layer (Gemma 3) sees key j iff t - j < the file's window and its
    own ring (sinks + window slots, at most the capacity) still holds j, at true positions."""
    from engine.budget import local_slots
    from engine.config import LOCAL, RECURRENT

    cfg, P = model.config, model.params
    if cfg.per_layer_weights:
        return gemma4_reference_logprobs(model, ids, n_sink, window)
    L, H, KVH, hd = cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    S = n_sink + window
    theta_g, theta_l = _thetas(model, cfg, S)
    local_win = (local_slots(cfg, S, n_sink) or 0) - n_sink
    llama = cfg.arch in ("llama", "smollm3")  # llama.cpp's interleaved rotary on permuted Q/K rows
    vec = lambda a, i: np.asarray(a[i], np.float64)  # noqa: E731
    ids = np.asarray(ids)
    n = ids.size
    x = _deq(P.embed)[ids] * cfg.embed_scale
    kinds = list(cfg.kinds)
    for layer in range(L):
        if kinds[layer] == RECURRENT:  # Gated DeltaNet: its own weight rows (r), token by token
            r = kinds[:layer].count(RECURRENT)
            h = _rms(x, vec(P.layers.rec_norm, r), cfg.rms_eps)
            lw = P.layers
            o = deltanet_reference(cfg, _mm(h, _deq(jax_index(lw.w_in, r))), *(vec(a, r) for a in (
                lw.conv_w, lw.ssm_a, lw.dt_bias, lw.ssm_norm)))
            x = x + _mm(o, _deq(jax_index(lw.w_ssm_out, r)))
            x = _ffn(cfg, P, layer, x)
            continue
        a_i = layer - kinds[:layer].count(RECURRENT)  # its row among the attention layers' weights
        is_local = cfg.kinds[layer] == LOCAL
        wqkv = _deq(jax_index(P.layers.wqkv, a_i))
        Q = (2 if cfg.attn_gate else 1) * H * hd  # Qwen3.5: [q | gate] per head
        wq, wk, wv = wqkv[:Q], wqkv[Q : Q + KVH * hd], wqkv[Q + KVH * hd :]
        if llama:
            wq, wk = _permute(wq, H), _permute(wk, KVH)
        h = _rms(x, vec(P.layers.attn_norm, a_i), cfg.rms_eps)
        qkv = np.concatenate([_mm(h, wq), _mm(h, wk), _mm(h, wv)], axis=-1)
        if cfg.qkv_bias:
            qkv = qkv + vec(P.layers.qkv_bias, a_i)
        q = qkv[:, :Q].reshape(n, H, Q // H)
        gate = q[..., hd:].reshape(n, H * hd) if cfg.attn_gate else None
        q = q[..., :hd]
        k = qkv[:, Q : Q + KVH * hd].reshape(n, KVH, hd)
        v = qkv[:, Q + KVH * hd :].reshape(n, KVH, hd)
        if cfg.qk_norm:
            q = _rms(q, vec(P.layers.q_norm, a_i), cfg.rms_eps)
            k = _rms(k, vec(P.layers.k_norm, a_i), cfg.rms_eps)
        if cfg.nope_layers and cfg.nope_layers[layer]:  # SmolLM3: no rotation at all
            rot = lambda x, pos: x  # noqa: E731
        elif llama:
            rot = lambda x, pos: _rope_interleaved(x, pos, theta_g)  # noqa: E731
        elif is_local:
            rot = lambda x, pos: _rope_neox(x, pos, theta_l)  # noqa: E731
        else:
            rot = lambda x, pos: _rope_neox(x, pos, theta_g, cfg.rope_attn_factor)  # noqa: E731
        att = np.zeros((n, H, hd))
        for t in range(n):
            if is_local:
                visible = [j for j in range(t + 1)
                           if t - j < cfg.sliding_window and (j < n_sink or t - j < local_win)]
                p_q, kpos = t, visible
            else:
                visible = [j for j in range(t + 1) if j < n_sink or t - j < window]
                p_q = min(t, S - 1)
                # in-cache position: sinks keep their index, window keys sit at p_q - (t - j)
                kpos = [j if j < n_sink else p_q - (t - j) for j in visible]
            qt = rot(q[t], p_q)
            kt = np.stack([rot(k[j], kp) for j, kp in zip(visible, kpos)])
            vt = v[visible]
            for head in range(H):
                g = head // (H // KVH)
                s_ = kt[:, g] @ qt[head] * cfg.scores_scale
                p = np.exp(s_ - s_.max())
                p /= p.sum()
                att[t, head] = p @ vt[:, g]
        att = att.reshape(n, -1)
        if cfg.attn_gate:
            att = att / (1 + np.exp(-gate))
        a = _mm(att, _deq(jax_index(P.layers.wo, a_i)))
        x = x + (_rms(a, vec(P.layers.post_attn_norm, layer), cfg.rms_eps) if cfg.post_norms else a)
        x = _ffn(cfg, P, layer, x)
    x = _rms(x, np.asarray(P.out_norm, np.float64), cfg.rms_eps)
    logits = _mm(x, _deq(P.head))
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return logp[np.arange(n - 1), ids[1:]]


def _visible(cfg, t: int, is_local: bool, n_sink: int, window: int, local_win: int):
    """The keys query t sees and (its position, theirs): a local layer at true positions within
    its reach and ring; a global one the sinks and the window at StreamingLLM's in-cache positions."""
    if is_local:
        vis = [j for j in range(t + 1) if t - j < cfg.sliding_window and (j < n_sink or t - j < local_win)]
        return vis, t, vis
    vis = [j for j in range(t + 1) if j < n_sink or t - j < window]
    p_q = min(t, n_sink + window - 1)
    return vis, p_q, [j if j < n_sink else p_q - (t - j) for j in vis]


def gemma4_reference_logprobs(model: Model, ids, n_sink: int, window: int) -> np.ndarray:
    """reference_logprobs for Gemma 4, spelled from llama.cpp's gemma4-iswa.cpp: per-layer
    weights and head sizes, K/V (normed, V without a weight) only in the layers that own them,
    the shared layers reading their source layer's keys and values, the per-layer inputs after
    each FFN, the layer output scale, and the soft-capped logits. Scores are not scaled."""
    from engine.budget import local_slots
    from engine.config import LOCAL

    cfg, P = model.config, model.params
    H, KVH, L, n_pl = cfg.n_heads, cfg.n_kv_heads, cfg.n_layers, cfg.per_layer_dim
    S = n_sink + window
    theta_g, _ = _thetas(model, cfg, S)
    n_rot = cfg.local_rotary_dims
    theta_l = cfg.rope_local_base ** (-(np.arange(n_rot // 2) * 2.0 / n_rot))
    local_win = (local_slots(cfg, S, n_sink) or 0) - n_sink
    one = lambda a: np.asarray(a[0], np.float64)  # noqa: E731
    ids = np.asarray(ids)
    n = ids.size
    x = _deq(P.embed)[ids] * cfg.embed_scale
    pl_table = _deq(P.pl_embed)[ids].reshape(n, L, n_pl) * np.sqrt(n_pl)
    pl_proj = _mm(x, _deq(P.pl_model_proj)).reshape(n, L, n_pl) / np.sqrt(cfg.d_model)
    pl = (_rms(pl_proj, np.asarray(P.pl_proj_norm, np.float64), cfg.rms_eps) + pl_table) / np.sqrt(2)
    kv = {}  # layer -> its (k, v) [n, KVH, hd], normed, not rotated
    for layer, w in enumerate(P.layers):
        hd, is_local = cfg.head_dim_of(layer), cfg.kinds[layer] == LOCAL
        wqkv = _deq(jax_index(w.wqkv, 0))
        h = _rms(x, one(w.attn_norm), cfg.rms_eps)
        q = _rms(_mm(h, wqkv[: H * hd]).reshape(n, H, hd), one(w.q_norm), cfg.rms_eps)
        if cfg.owns_kv(layer):
            k = _rms(_mm(h, wqkv[H * hd : (H + KVH) * hd]).reshape(n, KVH, hd), one(w.k_norm), cfg.rms_eps)
            v = _rms(_mm(h, wqkv[(H + KVH) * hd :]).reshape(n, KVH, hd), 1.0, cfg.rms_eps)
            kv[layer] = (k, v)
        k, v = kv[cfg.kv_source(layer)]
        theta = theta_l if is_local else theta_g
        att = np.zeros((n, H, hd))
        for t in range(n):
            vis, p_q, kpos = _visible(cfg, t, is_local, n_sink, window, local_win)
            qt = _rope_neox(q[t], p_q, theta)
            kt = np.stack([_rope_neox(k[j], kp, theta) for j, kp in zip(vis, kpos)])
            for head in range(H):
                g = head // (H // KVH)
                s_ = kt[:, g] @ qt[head] * cfg.scores_scale
                p = np.exp(s_ - s_.max())
                att[t, head] = (p / p.sum()) @ v[vis, g]
        a = _mm(att.reshape(n, -1), _deq(jax_index(w.wo, 0)))
        x = x + _rms(a, one(w.post_attn_norm), cfg.rms_eps)
        F = cfg.ffn_width(layer)
        gu = _mm(_rms(x, one(w.ffn_norm), cfg.rms_eps), _deq(jax_index(w.w_gate_up, 0)))
        f = _mm(_gelu_ggml(gu[:, :F]) * gu[:, F:], _deq(jax_index(w.w_down, 0)))
        x = x + _rms(f, one(w.post_ffn_norm), cfg.rms_eps)
        g = _gelu_ggml(_mm(x, _deq(jax_index(w.pl_gate, 0)))) * pl[:, layer]
        x = (x + _rms(_mm(g, _deq(jax_index(w.pl_proj, 0))), one(w.pl_norm), cfg.rms_eps)) * one(w.out_scale)
    x = _rms(x, np.asarray(P.out_norm, np.float64), cfg.rms_eps)
    logits = _mm(x, _deq(P.head))
    logits = cfg.logit_softcap * np.tanh(logits / cfg.logit_softcap)
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return logp[np.arange(n - 1), ids[1:]]


def _ffn(cfg, P, layer: int, x: np.ndarray) -> np.ndarray:
    vec = lambda a: np.asarray(a[layer], np.float64)  # noqa: E731
    h = _rms(x, vec(P.layers.ffn_norm), cfg.rms_eps)
    gu = _mm(h, _deq(jax_index(P.layers.w_gate_up, layer)))
    gate, up = gu[:, : cfg.ffn_dim], gu[:, cfg.ffn_dim :]
    act = _gelu_ggml(gate) if cfg.activation == "gelu_tanh" else gate / (1 + np.exp(-gate))
    f = _mm(act * up, _deq(jax_index(P.layers.w_down, layer)))
    return x + (_rms(f, vec(P.layers.post_ffn_norm), cfg.rms_eps) if cfg.post_norms else f)


def deltanet_reference(cfg, proj, conv_w, ssm_a, dt_bias, ssm_norm, conv_state=None, state=None):
    """A Gated DeltaNet layer in float64, one token at a time, spelled as llama.cpp's graph does
    (qwen35.cpp build_layer_attn_linear, delta-net-base.cpp's autoregressive path), from the
    layer's input projection proj [n, conv_dim + Hv*S + 2*Hv] ([qkv | z | beta | alpha]) to what
    ssm_out reads [n, Hv*S]. conv_state [K-1, conv_dim] and state [Hv, S(value), S(key)] start at
    zero unless given; returns (out, conv_state, state) when they were given, else out."""
    Hk, Hv, S, cd, K = cfg.ssm_groups, cfg.ssm_heads, cfg.ssm_state, cfg.conv_dim, cfg.ssm_conv
    proj = np.asarray(proj, np.float64)
    given = state is not None
    hist = [np.asarray(r, np.float64) for r in (np.zeros((K - 1, cd)) if conv_state is None else conv_state)]
    s = np.zeros((Hv, S, S)) if state is None else np.array(state, np.float64)
    out = np.zeros((proj.shape[0], Hv * S))
    for t, row in enumerate(proj):
        hist.append(row[:cd])
        window = np.stack(hist[-K:])  # [K, cd], oldest first: tap K-1 on the newest input
        c = (window.T * conv_w).sum(-1)
        c = c / (1 + np.exp(-c))  # silu
        hist = hist[-(K - 1):] if K > 1 else []
        q, k, v = c[: Hk * S].reshape(Hk, S), c[Hk * S : 2 * Hk * S].reshape(Hk, S), c[2 * Hk * S :].reshape(Hv, S)
        q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), cfg.rms_eps) / np.sqrt(S)
        k = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), cfg.rms_eps)
        z = row[cd : cd + Hv * S].reshape(Hv, S)
        beta = 1 / (1 + np.exp(-row[cd + Hv * S : cd + Hv * S + Hv]))
        g = np.log1p(np.exp(row[cd + Hv * S + Hv :] + dt_bias)) * ssm_a
        for h in range(Hv):
            kh, qh = k[h % Hk], q[h % Hk]  # ggml_repeat: value head h reads key head h % Hk
            s[h] *= np.exp(g[h])
            d = (v[h] - s[h] @ kh) * beta[h]
            s[h] += np.outer(d, kh)
            o = s[h] @ qh
            o = o / np.sqrt(np.mean(o * o) + cfg.rms_eps) * ssm_norm
            out[t, h * S : (h + 1) * S] = o * z[h] / (1 + np.exp(-z[h]))
    return (out, np.stack(hist) if hist else np.zeros((0, cd)), s) if given else out


def jax_index(w, i):
    return quant.layer_of(w, i)


def assert_logprobs_close(got, want, atol: float = 2e-4, max_flip_frac: float = 0.03, flip_atol: float = 0.1):
    """got == want to atol, but for a few positions: the engine rounds activations to int8 before
    every matrix product (as llama.cpp does), so a one-ulp float difference upstream (another
    summation order, float64 here) can move one rounded value by a step, and that position's
    log-prob by up to a few hundredths. A mask, RoPE or cache bug moves most positions by far
    more than flip_atol."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff = np.abs(got - want)
    off = diff > atol
    assert off.mean() <= max_flip_frac, f"{off.sum()} of {diff.size} positions differ by more than {atol}"
    assert diff.max() < flip_atol, f"max |difference| {diff.max():.4f} at position {int(diff.argmax())}"


def max_diff_per_case(model: Model, ids, cases) -> dict[str, float]:
    """Max |engine - reference| log-prob over `ids` for each (sinks, window) case (f32 cache,
    chunks of 16), keyed "sinks,window"."""
    from engine import plan_memory, score

    out = {}
    for sinks, window in cases:
        plan = plan_memory(model.config, "f32", window=window, sinks=sinks)
        ours = score(model, ids, plan, chunk=16)
        out[f"{sinks},{window}"] = float(np.abs(ours - reference_logprobs(model, ids, sinks, window)).max())
    return out


# --- attention inputs (test_forward, test_xla_path) ----------------------------------------------


def ring_batch(cfg, plan, fills, C):
    """A Batch of C rows (the first min(6, C) real) after chunks of `fills` tokens went into a
    ring of the plan's shape (enough of them wrap it)."""
    ring = Ring(plan.capacity, plan.sinks)
    for n in fills:
        ring.commit(ring.plan_chunk(n, n))
    cp = ring.plan_chunk(min(6, C), C)
    cos, sin = rope.cos_sin(cp.q_pos, rope.inv_freq(cfg))
    scos, ssin = rope.cos_sin(cp.sink_q_pos, rope.inv_freq(cfg))
    return forward.Batch(np.zeros(C, np.int32), cos, sin, scos, ssin, cp.mask, cp.key_sink, cp.write_slot,
                         np.int32(5), cp.order)


def random_cache(cfg, plan, rng):
    """A cache of the plan's shape and KV type full of random values."""
    cache = allocate(cfg, plan)
    shape = cache.k.shape
    if plan.kv_dtype == "int8":
        cache.k = jnp.asarray(rng.integers(-127, 128, shape, dtype=np.int8))
        cache.v = jnp.asarray(rng.integers(-127, 128, shape, dtype=np.int8))
        cache.k_scale = jnp.asarray(rng.random(cache.k_scale.shape, dtype=np.float32) * 0.02)
        cache.v_scale = jnp.asarray(rng.random(cache.v_scale.shape, dtype=np.float32) * 0.02)
    elif plan.kv_dtype == "bf16":  # held as its bits (engine.kv_cache)
        bits = lambda a: jax.lax.bitcast_convert_type(jnp.asarray(a).astype(jnp.bfloat16), jnp.uint16)  # noqa: E731
        cache.k = bits(rng.standard_normal(shape).astype(np.float32))
        cache.v = bits(rng.standard_normal(shape).astype(np.float32))
    else:
        cache.k = jnp.asarray(rng.standard_normal(shape).astype(np.float32)).astype(cache.k.dtype)
        cache.v = jnp.asarray(rng.standard_normal(shape).astype(np.float32)).astype(cache.v.dtype)
    return cache


def concatenated_attention(cfg, q, k_new, v_new, cache, layer, batch):
    """The plain spelling of the engine's attention: dequantize the whole cache layer,
    concatenate the chunk's new rows (keys already rotated), and score every key with both
    rotations of the query (the window's and the sinks'), masked. q [C, H, hd] un-rotated."""
    sc = lambda a: None if a is None else a[layer]  # noqa: E731
    C, G, KVH, hd = q.shape[0], cfg.q_per_kv, cfg.n_kv_heads, cfg.head_dim
    k_all = jnp.concatenate([forward.dequantize_kv(cache.k[layer], sc(cache.k_scale)), k_new]).reshape(-1, KVH, hd)
    v_all = jnp.concatenate([forward.dequantize_kv(cache.v[layer], sc(cache.v_scale)), v_new]).reshape(-1, KVH, hd)
    cos, sin, sink_cos, sink_sin, mask, key_sink = forward._global_keys(batch)[:6]
    qw = forward.rope(q, cos, sin).reshape(C, KVH, G, -1)
    qs = forward.rope(q, sink_cos, sink_sin).reshape(C, KVH, G, -1)
    scores_w = jnp.einsum("ckgd,skd->kgcs", qw, k_all)
    scores_s = jnp.einsum("ckgd,skd->kgcs", qs, k_all)
    scores = jnp.where(key_sink, scores_s, scores_w) * (hd**-0.5)
    probs = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)
    return jnp.einsum("kgcs,skd->kgcd", probs, v_all).transpose(2, 0, 1, 3).reshape(C, -1)


def in_xla_path(module: str, func: str, *args):
    """module.func(*args) (arguments with a Python repr) run in a fresh process on the XLA path
    (PINWHEEL_KERNELS=0: the kernel cannot be unloaded from this one); its JSON-able result."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, PINWHEEL_KERNELS="0", JAX_PLATFORMS="cpu")
    code = f"import json; from {module} import {func} as f; print(json.dumps(f(*{args!r})))"
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
