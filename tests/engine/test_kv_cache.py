"""Ring-buffer invariants: which positions the cache holds, and what each query may see."""
import numpy as np
from hypothesis import given, settings, strategies as st

from engine.kv_cache import Ring


def visible(t, n_sink, window):
    return {p for p in range(t + 1) if p < n_sink or t - p < window}


@settings(max_examples=150, deadline=None)
@given(n_sink=st.integers(0, 6), window=st.integers(1, 20), chunk=st.integers(1, 24),
       steps=st.lists(st.integers(1, 24), min_size=1, max_size=15))
def test_ring_holds_sinks_and_latest_window(n_sink, window, chunk, steps):
    ring = Ring(n_sink + window, n_sink)
    S = ring.capacity
    for n in steps:
        n = min(n, chunk)
        cp = ring.plan_chunk(n, chunk)
        # every real row sees exactly sinks + its window, among cached and chunk keys
        key_pos = np.concatenate([ring.slot_pos, ring.next_pos + np.arange(chunk)])
        for i in range(n):
            t = ring.next_pos + i
            seen = set(key_pos[cp.mask[i]].tolist())
            assert seen == visible(t, n_sink, window)
            assert len(seen) == cp.mask[i].sum()  # no key counted twice
        # padding rows repeat the last real row and are never written
        assert (cp.write_slot[n:] == S).all()
        assert (cp.mask[n:] == cp.mask[n - 1]).all()
        ring.commit(cp)
        held = set(ring.cached_positions().tolist())
        t = ring.next_pos - 1
        assert held == visible(t, n_sink, window)
        assert ring.cache_tokens == len(held) <= S
        assert ring.evicted == ring.next_pos - ring.cache_tokens


def test_sink_query_position_is_capped_in_cache():
    ring = Ring(8, 2)
    ring.commit(ring.plan_chunk(20, 20))
    cp = ring.plan_chunk(1, 1)
    assert cp.q_pos[0] == 20 and cp.sink_q_pos[0] == 7  # StreamingLLM: query at cache length - 1
    assert cp.key_sink[:2].all() and not cp.key_sink[2:].any()
