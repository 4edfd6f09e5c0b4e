"""Gated DeltaNet (Qwen3.5's linear-attention layers), as llama.cpp computes it
(src/models/qwen35.cpp build_layer_attn_linear, src/models/delta-net-base.cpp).

A layer keeps no K/V. Per value head it keeps a matrix M (value dim x key dim, S x S) that every
token updates with the gated delta rule:

    M <- exp(g_t) M                                   decay, g_t = softplus(alpha_t + dt_bias) * ssm_a
    M <- M + beta_t (v_t - M k_t) k_t^T               one delta-rule step (beta_t = sigmoid(.))
    o_t = M q_t                                        q_t, k_t L2-normed, q_t / sqrt(S)

plus a causal conv over the projected [q | k | v] that keeps its last kernel - 1 inputs. So the
state is a fixed number of bytes however long the chat runs, and it summarises every token ever
fed (the bounded cache's ring evicts tokens; a DeltaNet state cannot un-see them).

With the native kernel every row (a decode step's, a verify's, a prefill chunk's) goes through
the recurrent step in C++ (`native_layer`): one form, so chunks and single steps give the same
bits. Without it XLA runs two forms of the same recurrence:
- `recurrent`: one token at a time (decode steps), as llama.cpp's autoregressive path;
- `chunked`: a chunk of C rows at once (prefill, C <= 64 as llama.cpp's chunk size): the
  WY/UT form of flash-linear-attention (one triangular solve per head, then products), exact in
  real arithmetic, so it differs from the recurrent form only by float rounding. The bound we
  hold it to is in tests/engine/test_deltanet.py (CHUNKED_VS_RECURRENT).

Padding rows of a chunk (after `last`) get g = 0 and beta = 0: they leave the state as it was.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular


def causal_conv(x: jax.Array, conv_state: jax.Array, w: jax.Array, last: jax.Array):
    """ggml_ssm_conv then silu. x [C, D] new inputs, conv_state [K-1, D] the inputs before them,
    w [D, K] (tap K-1 multiplies the newest input). Returns (silu(conv) [C, D], the conv state
    after row `last`: the last K-1 inputs up to it)."""
    C, K = x.shape[0], w.shape[1]
    xa = jnp.concatenate([conv_state, x], axis=0)  # [K-1+C, D]
    out = xa[0:C] * w[:, 0]
    for k in range(1, K):
        out = out + xa[k : k + C] * w[:, k]
    return jax.nn.silu(out), lax.dynamic_slice_in_dim(xa, last + 1, K - 1, axis=0)


def l2_norm(x: jax.Array, eps: float) -> jax.Array:
    """ggml_l2_norm: x / max(||x||, eps) over the last axis."""
    return x / jnp.maximum(jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True)), eps)


def recurrent(M: jax.Array, q, k, v, g, beta):
    """The delta rule token by token. M [H, S, S] (value x key); q, k [T, H, S] (q already scaled),
    v [T, H, S], g [T, H] log-decay, beta [T, H]. Returns (o [T, H, S], M after the last row)."""

    def one(M, t):
        q, k, v, g, b = t
        M = M * jnp.exp(g)[:, None, None]
        d = (v - jnp.einsum("hvk,hk->hv", M, k)) * b[:, None]
        M = M + d[:, :, None] * k[:, None, :]
        return M, jnp.einsum("hvk,hk->hv", M, q)

    M, o = lax.scan(one, M, (q, k, v, g, beta))
    return o, M


def chunked(M: jax.Array, q, k, v, g, beta):
    """The same rule for a whole chunk at once (shapes as recurrent). With G the running sum of
    g inside the chunk and D[i, j] = exp(G_i - G_j) for j <= i:
        T   = (I + strict_lower(beta_i k_i.k_j D[i, j]))^-1           (a unit-triangular solve)
        u   = T (beta v) - T (beta k exp(G)) M^T                        the rows' corrected values
        o_i = exp(G_i) M q_i + sum_{j<=i} D[i, j] (q_i.k_j) u_j
        M'  = exp(G_C) M + sum_j exp(G_C - G_j) u_j k_j^T
    Every exponent is <= 0 (g <= 0), so nothing overflows."""
    C = q.shape[0]
    q, k, v = (jnp.swapaxes(a, 0, 1) for a in (q, k, v))  # [H, C, S]
    G = jnp.cumsum(g.T, axis=-1)  # [H, C]
    b = beta.T
    i, j = jnp.arange(C)[:, None], jnp.arange(C)[None, :]
    D = jnp.exp(jnp.where(j <= i, G[:, :, None] - G[:, None, :], -jnp.inf))  # [H, C, C]
    kb = k * b[..., None]
    A = jnp.where(j < i, jnp.einsum("hik,hjk->hij", kb, k) * D, 0.0)
    rhs = jnp.concatenate([v * b[..., None], kb * jnp.exp(G)[..., None]], axis=-1)  # [H, C, 2S]
    eye = jnp.eye(C, dtype=q.dtype)
    sol = solve_triangular(A + eye, rhs, lower=True, unit_diagonal=True)
    S = v.shape[-1]
    u = sol[..., :S] - jnp.einsum("hck,hvk->hcv", sol[..., S:], M)
    o = jnp.einsum("hck,hvk->hcv", q * jnp.exp(G)[..., None], M)
    o = o + jnp.einsum("hij,hjv->hiv", jnp.einsum("hik,hjk->hij", q, k) * D, u)
    G_end = G[:, -1]
    M = M * jnp.exp(G_end)[:, None, None] + jnp.einsum("hcv,hck->hvk", u, k * jnp.exp(G_end[:, None] - G)[..., None])
    return jnp.swapaxes(o, 0, 1), M


def mix(cfg, proj: jax.Array, conv_state: jax.Array, M: jax.Array, conv_w, ssm_a, dt_bias, ssm_norm, last,
        form: str | None = None):
    """One DeltaNet layer after its input projection. proj [C, conv_dim + Hv*S + 2*Hv] holds
    [qkv | z | beta | alpha] (the loader merges attn_qkv, attn_gate, ssm_beta, ssm_alpha rows so
    x is read once). Returns (gated-normed output [C, Hv*S] for ssm_out, new conv state, new M).
    form: "recurrent" or "chunked"; None: recurrent for one row (decode), chunked for more.
    (With the native kernel, forward runs native_layer instead, for every row.)"""
    C = proj.shape[0]
    Hk, Hv, S, cd = cfg.ssm_groups, cfg.ssm_heads, cfg.ssm_state, cfg.conv_dim
    qkv, z = proj[:, :cd], proj[:, cd : cd + Hv * S]
    beta_x, alpha_x = proj[:, cd + Hv * S : cd + Hv * S + Hv], proj[:, cd + Hv * S + Hv :]
    mixed, conv_state = causal_conv(qkv, conv_state, conv_w, last)
    q = l2_norm(mixed[:, : Hk * S].reshape(C, Hk, S), cfg.rms_eps)
    k = l2_norm(mixed[:, Hk * S : 2 * Hk * S].reshape(C, Hk, S), cfg.rms_eps)
    v = mixed[:, 2 * Hk * S :].reshape(C, Hv, S)
    # key heads tiled over value heads (ggml_repeat_4d: value head j reads key head j % Hk)
    q, k = jnp.tile(q, (1, Hv // Hk, 1)) * (S**-0.5), jnp.tile(k, (1, Hv // Hk, 1))
    real = (jnp.arange(C) <= last)[:, None]  # padding rows leave the state alone
    g = jnp.where(real, jax.nn.softplus(alpha_x + dt_bias) * ssm_a, 0.0)
    beta = jnp.where(real, jax.nn.sigmoid(beta_x), 0.0)
    form = form or ("recurrent" if C == 1 else "chunked")
    o, M = (recurrent if form == "recurrent" else chunked)(M, q, k, v, g, beta)
    # gated RMS norm per head: rms(o) * w * silu(z)
    o = o * lax.rsqrt(jnp.mean(o * o, axis=-1, keepdims=True) + cfg.rms_eps) * ssm_norm
    o = o * jax.nn.silu(z.reshape(C, Hv, S))
    return o.reshape(C, Hv * S), conv_state, M


def native_layer(cfg, proj: jax.Array, conv: jax.Array, M: jax.Array, layer, conv_w, ssm_a, dt_bias, ssm_norm,
                 last=None):
    """mix's recurrent form in the native kernel (kernels/deltanet_step.inc), row by row for the C
    rows of proj [C, P] (rows after `last`, default C - 1, are padding: they leave the state
    alone), on layer `layer` of the whole stacks: conv [Lr, K-1, conv_dim], M [Lr, Hv, S, S],
    and the weights conv_w [Lr, conv_dim, K], ssm_a, dt_bias [Lr, Hv], ssm_norm [Lr, S]. A decode
    step, a draft verify and a prefill chunk so compute each row alike, bit for bit. The state
    buffers are aliased and updated in place: one pass over the layer's state where XLA made
    four, and no copy of the stacks (which slicing a layer out of the scan's carry and writing it
    back made).
    Returns (output [C, Hv*S], conv, M)."""
    C = proj.shape[0]
    last = C - 1 if last is None else last
    o, conv, M = jax.ffi.ffi_call(
        "pinwheel_deltanet_step",
        (jax.ShapeDtypeStruct((C, cfg.ssm_heads * cfg.ssm_state), jnp.float32),
         jax.ShapeDtypeStruct(conv.shape, jnp.float32), jax.ShapeDtypeStruct(M.shape, jnp.float32)),
        input_output_aliases={2: 1, 3: 2},
    )(proj, jnp.asarray(last, jnp.int32).reshape(1), conv, M, jnp.asarray(layer, jnp.int32).reshape(1), conv_w,
      ssm_a, dt_bias, ssm_norm, key_heads=np.int64(cfg.ssm_groups), eps=np.float32(cfg.rms_eps))
    return o, conv, M
