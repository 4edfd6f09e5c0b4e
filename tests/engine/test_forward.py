"""The bounded-cache forward against a plain dense reference, across chunkings and offsets.

The native kernels round activations to int8 before each matrix product (as llama.cpp does),
which turns a one-ulp float difference into a visible step now and then; a float64 reference
can therefore check the masks, RoPE and StreamingLLM positions exactly only on the XLA path
(PINWHEEL_KERNELS=0, in a subprocess). The kernel path is checked against that path piece by
piece (tests/engine/test_quant.py, and the attention below), and is bit-exact across chunkings.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from engine import forward, kernels, load_model, plan_memory, score
from engine.decoder import Decoder
from engine.scoring import log_softmax
from tests.engine import reference
from tests.engine.reference import assert_logprobs_close, max_diff_per_case

needs_kernel = pytest.mark.skipif(not kernels.available(), reason=f"native kernel: {kernels.status()}")


@pytest.fixture(scope="module")
def tiny(tiny_bpe_gguf):
    return load_model(tiny_bpe_gguf)


def _wide(tmp_path_factory, name, **shape):
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path_factory.mktemp(name) / f"{name}.gguf", d_model=1024, ffn_dim=256,
                           tensor_type="Q8_0", **shape)
    return load_model(path)


# Long cache rows, whose scores a decode step takes by ranges of keys over whole rows and whose
# values by runs of heads with the keys outer (run_scores, run_values);
# the tiny model's 32-value rows take the one-head-a-task path.
@pytest.fixture(scope="module")
def wide_mha(tmp_path_factory):
    """16 KV heads of 64, one query head each: 1 KB int8 rows (SmolLM2-1.7B's layout)."""
    return _wide(tmp_path_factory, "wide-mha", n_heads=16, n_kv_heads=16)


@pytest.fixture(scope="module")
def wide_gqa(tmp_path_factory):
    """16 KV heads of 32, two query heads each: 512 B int8 rows (one head a task), 1 KB bf16."""
    return _wide(tmp_path_factory, "wide-gqa", n_heads=32, n_kv_heads=16)


def ids_for(model, n, seed=0):
    return np.random.default_rng(seed).integers(3, model.config.vocab_size, n)


CASES = [(4, 24), (0, 16), (2, 40), (0, 200)]


def dense_reference_max_diff(path: str) -> dict:
    """Max |ours - reference| per (sinks, window) case, in this process's path."""
    model = load_model(path)
    return max_diff_per_case(model, ids_for(model, 90), CASES)


def test_matches_dense_reference_with_explicit_mask(tiny_bpe_gguf):
    diffs = reference.in_xla_path("tests.engine.test_forward", "dense_reference_max_diff", str(tiny_bpe_gguf))
    assert set(diffs) == {f"{s},{w}" for s, w in CASES}
    assert all(d < 2e-4 for d in diffs.values()), diffs


@needs_kernel
@pytest.mark.parametrize("model", ["tiny", "wide_mha", "wide_gqa"])
@pytest.mark.parametrize("C", [8, 1])
@pytest.mark.parametrize("kv_dtype", ["int8", "bf16", "f32"])
def test_native_attention_matches_xla_attention(request, model, kv_dtype, C):
    """The kernel's attention (straight from the cache, keys in stream order) against the XLA
    spelling (dequantize, concatenate, einsum), on a wrapped ring with sinks, for a chunk (rows
    share a dequantized copy) and a lone decode row (read from the cache in place: one head a
    task for short rows, runs of heads for long ones)."""
    cfg = request.getfixturevalue(model).config
    plan = plan_memory(cfg, kv_dtype, window=20, sinks=3)
    rng = np.random.default_rng(5)
    cache = reference.random_cache(cfg, plan, rng)
    batch = reference.ring_batch(cfg, plan, (23, 9, 5), C)  # wrap the ring so slot order is not stream order
    q = jnp.asarray(rng.standard_normal((C, cfg.n_heads, cfg.head_dim)).astype(np.float32))
    k_new = jnp.asarray(rng.standard_normal((C, cfg.kv_dim)).astype(np.float32))
    v_new = jnp.asarray(rng.standard_normal((C, cfg.kv_dim)).astype(np.float32))
    layer = 1
    got = jax.jit(lambda q, k, v, c, b: forward.attention_native(cfg, q, k, v, c, layer, *forward._global_keys(b)))(
        q, k_new, v_new, cache, batch)

    def xla(q, k_new, v_new, cache, batch):
        return reference.concatenated_attention(cfg, q, k_new, v_new, cache, layer, batch)

    want = jax.jit(xla)(q, k_new, v_new, cache, batch)
    n = min(6, C)
    np.testing.assert_allclose(np.asarray(got)[:n], np.asarray(want)[:n], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("model", ["tiny", "wide_mha", "wide_gqa"])
@pytest.mark.parametrize("dtype", ["f32", "bf16", "int8"])
def test_chunk_1_equals_chunk_64(request, model, dtype):
    """With the native kernels a token's log-prob is bit-identical whatever the chunking (the
    property that makes speculation exact); on the XLA path, equal to float noise."""
    tiny = request.getfixturevalue(model)
    ids = ids_for(tiny, 150, seed=1)
    plan = plan_memory(tiny.config, dtype, window=40, sinks=4)
    a = score(tiny, ids, plan, chunk=1)
    b = score(tiny, ids, plan, chunk=64)
    c = score(tiny, ids, plan, chunk=7)
    if kernels.available():
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    else:
        assert_logprobs_close(a, b)
        assert_logprobs_close(a, c)


def test_low_precision_kv_stays_close_to_f32(tiny):
    ids = ids_for(tiny, 120, seed=2)
    ref = score(tiny, ids, plan_memory(tiny.config, "f32", window=48, sinks=4))
    for dtype, tol in (("bf16", 0.05), ("int8", 0.05)):
        got = score(tiny, ids, plan_memory(tiny.config, dtype, window=48, sinks=4))
        assert np.abs(got - ref).mean() < tol, dtype


@pytest.mark.parametrize("offset", [10**7, 2**31 + 12345])
def test_positions_stay_exact_ten_million_tokens_in(tiny, offset):
    """Only relative positions matter: a window deep into a huge conversation scores exactly
    like the same tokens at the start (no float32 angle blow-up)."""
    ids = ids_for(tiny, 60, seed=3)
    plan = plan_memory(tiny.config, "f32", window=32, sinks=0)
    outs = []
    for start in (0, offset):
        dec = Decoder(tiny, plan, n_sink=0)
        dec.reset(0, start_pos=start)
        outs.append(log_softmax(dec.feed(ids, all_logits=True, chunk=16)))
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-4)


def test_cache_is_never_reallocated(tiny):
    plan = plan_memory(tiny.config, "int8", window=20, sinks=2)
    dec = Decoder(tiny, plan)
    first = dec.kv_bytes
    dec.feed(ids_for(tiny, 300))
    for t in ids_for(tiny, 10):
        dec.feed([t])
    assert dec.kv_bytes == first == plan.kv_bytes
    assert dec.ring.cache_tokens == plan.capacity and dec.ring.evicted == 310 - plan.capacity
