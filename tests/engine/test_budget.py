"""The memory plan follows Needle's rule, and the cache allocates exactly what it plans."""
import pytest
from hypothesis import given, settings, strategies as st

from engine.budget import DEFAULT_BUDGET, MIB, plan_memory
from engine.config import ModelConfig
from engine.errors import SettingsError
from engine.kv_cache import allocate

SMOL = ModelConfig("llama", 30, 576, 9, 3, 64, 1536, 49152, 8192, 100000.0)


def test_smollm2_numbers_from_the_issue():
    p = plan_memory(SMOL, "int8")
    assert (p.bytes_per_position, p.slots, p.window, p.sinks) == (12_960, 928, 924, 4)
    assert p.kv_bytes == 928 * 12_960 <= DEFAULT_BUDGET
    b = plan_memory(SMOL, "bf16")
    assert (b.bytes_per_position, b.slots) == (23_040, 512)
    f = plan_memory(SMOL, "f32")
    assert (f.bytes_per_position, f.slots) == (46_080, 256)


def test_user_window_only_shrinks():
    assert plan_memory(SMOL, window=100).window == 100
    assert plan_memory(SMOL, window=100).kv_bytes == 104 * 12_960
    assert plan_memory(SMOL, window=100_000).window == 924


def test_minimum_and_context_clamps():
    assert plan_memory(SMOL, budget_bytes=1024).slots == 160
    small_ctx = ModelConfig("llama", 2, 64, 4, 2, 16, 128, 500, 256)
    assert plan_memory(small_ctx, budget_bytes=10 * MIB).slots == 256


@pytest.mark.parametrize("kw, words", [
    (dict(sinks=928), "at most 927 sinks"),
    (dict(sinks=-1), "0 or more"),
    (dict(window=-5), "up to"),
    (dict(budget_bytes=0), "positive"),
    (dict(kv_dtype="q3"), "int8, bf16, f32"),
])
def test_impossible_settings_say_what_fits(kw, words):
    with pytest.raises(SettingsError, match=words):
        plan_memory(SMOL, **kw)


@settings(max_examples=200, deadline=None)
@given(
    layers=st.integers(1, 64), kvh=st.integers(1, 16), hd=st.sampled_from([32, 64, 128]),
    budget=st.integers(1, 512 * MIB), dtype=st.sampled_from(["int8", "bf16", "f32"]),
    window=st.one_of(st.none(), st.integers(1, 10_000)), sinks=st.integers(0, 159),
)
def test_plan_invariants(layers, kvh, hd, budget, dtype, window, sinks):
    cfg = ModelConfig("llama", layers, kvh * hd, kvh, kvh, hd, 4 * hd, 1000, 32768)
    p = plan_memory(cfg, dtype, budget, window, sinks)
    assert p.slots % 32 == 0 and 160 <= p.slots <= 32768
    assert p.capacity <= p.slots and p.window >= 1
    assert p.kv_bytes == p.capacity * p.bytes_per_position
    if p.slots > 160:  # not clamped up to the minimum: the budget holds
        assert p.slots * p.bytes_per_position <= budget
    if window is None:
        assert p.capacity == p.slots


@pytest.mark.parametrize("dtype", ["int8", "bf16", "f32"])
def test_allocated_bytes_equal_the_plan(dtype):
    for plan in (plan_memory(SMOL, dtype), plan_memory(SMOL, dtype, window=77, sinks=9)):
        assert allocate(SMOL, plan).nbytes == plan.kv_bytes
