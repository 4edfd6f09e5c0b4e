"""A plain numpy llama forward over a whole sequence (llama2.c style), with the bounded-cache
rule spelled out as an explicit dense mask and StreamingLLM's in-cache positions computed per
query. It shares nothing with engine/forward.py but the (dequantized) weights: interleaved RoPE
on re-permuted Q/K rows, as llama.cpp runs GGUF weights, so it also checks the un-permutation.

Matrix products quantize their input rows to int8 per 32 values first, as the engine's kernel
and llama.cpp do (`with_kernel=False` skips that, for the engine's XLA fallback path).
"""
from __future__ import annotations

import numpy as np

from engine import kernels, quant
from engine.gguf_loader import Model


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


def reference_logprobs(model: Model, ids, n_sink: int, window: int) -> np.ndarray:
    """log p(ids[t+1] | what the bounded cache holds at t), for t in 0..n-2."""
    cfg, P = model.config, model.params
    L, H, KVH, hd = cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    theta = cfg.rope_base ** (-np.arange(hd // 2) * 2.0 / hd)
    S = n_sink + window
    ids = np.asarray(ids)
    n = ids.size
    x = _deq(P.embed)[ids]
    for layer in range(L):
        wqkv = _deq(jax_index(P.layers.wqkv, layer))
        wq = _permute(wqkv[: H * hd], H)
        wk = _permute(wqkv[H * hd : (H + KVH) * hd], KVH)
        wv = wqkv[(H + KVH) * hd :]
        h = _rms(x, np.asarray(P.layers.attn_norm[layer], np.float64), cfg.rms_eps)
        q = _mm(h, wq).reshape(n, H, hd)
        k = _mm(h, wk).reshape(n, KVH, hd)
        v = _mm(h, wv).reshape(n, KVH, hd)
        att = np.zeros((n, H, hd))
        for t in range(n):
            visible = [j for j in range(t + 1) if j < n_sink or t - j < window]
            p_q = min(t, S - 1)
            qt = _rope_interleaved(q[t], p_q, theta)
            # in-cache position: sinks keep their index, window keys sit at p_q - (t - j)
            kpos = [j if j < n_sink else p_q - (t - j) for j in visible]
            kt = np.stack([_rope_interleaved(k[j], kp, theta) for j, kp in zip(visible, kpos)])
            vt = v[visible]
            for head in range(H):
                g = head // (H // KVH)
                s = kt[:, g] @ qt[head] / np.sqrt(hd)
                p = np.exp(s - s.max())
                p /= p.sum()
                att[t, head] = p @ vt[:, g]
        x = x + _mm(att.reshape(n, -1), _deq(jax_index(P.layers.wo, layer)))
        h = _rms(x, np.asarray(P.layers.ffn_norm[layer], np.float64), cfg.rms_eps)
        gu = _mm(h, _deq(jax_index(P.layers.w_gate_up, layer)))
        gate, up = gu[:, : cfg.ffn_dim], gu[:, cfg.ffn_dim :]
        x = x + _mm(gate / (1 + np.exp(-gate)) * up, _deq(jax_index(P.layers.w_down, layer)))
    x = _rms(x, np.asarray(P.out_norm, np.float64), cfg.rms_eps)
    logits = _mm(x, _deq(P.head))
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return logp[np.arange(n - 1), ids[1:]]


def jax_index(w, i):
    return quant.QLinear(w.q[i], w.d[i], None if w.m is None else w.m[i], w.fmt, w.rows)


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
