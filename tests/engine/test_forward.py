"""The bounded-cache forward against a plain dense reference, across chunkings and offsets."""
import numpy as np
import pytest

from engine import load_model, plan_memory, score
from engine.decoder import Decoder
from engine.scoring import log_softmax
from tests.engine.reference import assert_logprobs_close, reference_logprobs


@pytest.fixture(scope="module")
def tiny(tiny_bpe_gguf):
    return load_model(tiny_bpe_gguf)


def ids_for(model, n, seed=0):
    return np.random.default_rng(seed).integers(3, model.config.vocab_size, n)


@pytest.mark.parametrize("sinks, window", [(4, 24), (0, 16), (2, 40), (0, 200)])
def test_matches_dense_reference_with_explicit_mask(tiny, sinks, window):
    ids = ids_for(tiny, 90)
    plan = plan_memory(tiny.config, "f32", window=window, sinks=sinks)
    ours = score(tiny, ids, plan, chunk=16)
    ref = reference_logprobs(tiny, ids, sinks, window)
    assert_logprobs_close(ours, ref)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "int8"])
def test_chunk_1_equals_chunk_64(tiny, dtype):
    ids = ids_for(tiny, 150, seed=1)
    plan = plan_memory(tiny.config, dtype, window=40, sinks=4)
    a = score(tiny, ids, plan, chunk=1)
    b = score(tiny, ids, plan, chunk=64)
    c = score(tiny, ids, plan, chunk=7)
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
