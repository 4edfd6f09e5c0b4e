"""The memory plan follows Needle's rule, and the cache allocates exactly what it plans; the
default (auto) budget is sized to the model."""
import pytest
from hypothesis import given, settings, strategies as st

from engine.budget import NEEDLE_BUDGET as NEEDLE, MIB, plan_memory
from engine.config import GLOBAL, LOCAL, ModelConfig
from engine.errors import SettingsError
from engine.kv_cache import allocate

SMOL = ModelConfig("llama", 30, 576, 9, 3, 64, 1536, 49152, 8192, 100000.0)


def test_smollm2_numbers_from_the_issue():
    p = plan_memory(SMOL, "int8", NEEDLE)
    assert (p.bytes_per_position, p.slots, p.window, p.sinks) == (12_960, 928, 924, 4)
    assert p.kv_bytes == 928 * 12_960 <= NEEDLE
    assert p.budget_rule == "11.5 MiB (Needle 2)"
    b = plan_memory(SMOL, "bf16", NEEDLE)
    assert (b.bytes_per_position, b.slots) == (23_040, 512)
    f = plan_memory(SMOL, "f32", NEEDLE)
    assert (f.bytes_per_position, f.slots) == (46_080, 256)


def test_user_window_only_shrinks():
    assert plan_memory(SMOL, budget_bytes=NEEDLE, window=100).window == 100
    assert plan_memory(SMOL, budget_bytes=NEEDLE, window=100).kv_bytes == 104 * 12_960
    assert plan_memory(SMOL, budget_bytes=NEEDLE, window=100_000).window == 924
    assert plan_memory(SMOL, window=100).window == 100  # under the auto budget too


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
        plan_memory(SMOL, **{"budget_bytes": NEEDLE, **kw})


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
    for plan in (plan_memory(SMOL, dtype), plan_memory(SMOL, dtype, NEEDLE),
                 plan_memory(SMOL, dtype, window=77, sinks=9)):
        assert allocate(SMOL, plan).nbytes == plan.kv_bytes


# --- the auto budget: sized to the model ------------------------------------------------------

def _gemma3(n_layers, d, heads, kv, ffn, window, ctx):
    kinds = tuple(GLOBAL if (i + 1) % 6 == 0 else LOCAL for i in range(n_layers))
    return ModelConfig("gemma3", n_layers, d, heads, kv, 256, ffn, 262_144, ctx, layer_kinds=kinds,
                       sliding_window=window)


# Real layer / head counts (the models' published configs); only the KV shape matters to a plan.
SHAPES = {
    "SmolLM2-1.7B": ModelConfig("llama", 24, 2048, 32, 32, 64, 8192, 49_152, 8192),
    "Qwen3-1.7B": ModelConfig("qwen3", 28, 2048, 16, 8, 128, 6144, 151_936, 40_960),
    "Gemma-3-1B": _gemma3(26, 1152, 4, 1, 6912, 512, 32_768),
    "Llama-3.2-3B": ModelConfig("llama", 28, 3072, 24, 8, 128, 8192, 128_256, 131_072),
    "Qwen3-4B": ModelConfig("qwen3", 36, 2560, 32, 8, 128, 9728, 151_936, 40_960),
    "Phi-4-mini": ModelConfig("phi3", 32, 3072, 24, 8, 128, 8192, 200_064, 131_072),
    "Gemma-3-4B": _gemma3(34, 2560, 8, 4, 10_240, 1024, 131_072),
    "Phi-3-mini-4k": ModelConfig("phi3", 32, 3072, 32, 32, 96, 8192, 32_064, 4096),
    "Llama-3.1-8B": ModelConfig("llama", 32, 4096, 32, 8, 128, 14_336, 128_256, 131_072),
    "Qwen2.5-7B": ModelConfig("qwen2", 28, 3584, 28, 4, 128, 18_944, 152_064, 32_768),
}
GIB = 1024 * MIB


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("dtype", ["int8", "bf16", "f32"])
def test_auto_budget_gives_a_4096_token_window_or_the_trained_context(name, dtype):
    cfg = SHAPES[name]
    for sinks in (4, 37):
        p = plan_memory(cfg, dtype, sinks=sinks, ram_bytes=64 * GIB)
        if cfg.context_length >= 4096 + sinks:
            assert p.window >= 4096 and p.window < 4096 + 32, (name, p)
            assert p.budget_rule == "auto: 4,096 tokens"
        else:  # Phi-3-mini-4k: the whole trained context, sinks included
            assert p.capacity == cfg.context_length and p.budget_rule == "auto: the trained context, 4,096 tokens"
        assert p.kv_bytes <= p.budget_bytes <= 0.10 * 64 * GIB  # the auto budget is what is allocated
        assert p.kv_bytes == p.budget_bytes


@pytest.mark.parametrize("name", SHAPES)
def test_auto_budget_stays_within_a_tenth_of_ram_and_says_when_it_binds(name):
    cfg = SHAPES[name]
    roomy = plan_memory(cfg, "f32", ram_bytes=64 * GIB)
    ram = int(roomy.kv_bytes * 10 * 0.6)  # a machine where 10% holds only 60% of that window
    p = plan_memory(cfg, "f32", ram_bytes=ram)
    assert p.kv_bytes <= ram // 10 and p.window < roomy.window
    assert p.budget_rule.startswith("auto: capped at 10% of RAM")
    # int8 on the same machine still reaches the full window where it fits
    q = plan_memory(cfg, "int8", ram_bytes=ram)
    assert q.kv_bytes <= ram // 10


def test_auto_budget_on_this_machine_is_at_most_a_tenth_of_its_ram():
    from engine.budget import machine_ram

    for cfg in SHAPES.values():
        assert plan_memory(cfg, "int8").kv_bytes <= machine_ram() // 10


def test_the_1_7b_shapes_no_longer_sit_on_the_floor():
    """Issue 21's table: Needle's 11.5 MiB gave SmolLM2-1.7B and Qwen3-1.7B 160 slots."""
    for name in ("SmolLM2-1.7B", "Qwen3-1.7B"):
        assert plan_memory(SHAPES[name], budget_bytes=NEEDLE).slots == 160
        assert plan_memory(SHAPES[name], ram_bytes=16 * GIB).window >= 4096


def test_gemma_local_layers_hold_their_reach_under_the_auto_budget():
    cfg = SHAPES["Gemma-3-4B"]
    p = plan_memory(cfg, "int8", sinks=4, ram_bytes=64 * GIB)
    assert p.local_slots == 1024 + 4 and p.capacity == 4128
    from engine.budget import layer_bytes_per_position
    per = layer_bytes_per_position(cfg, "int8")
    assert p.kv_bytes == (cfg.global_layers * 4128 + cfg.local_layers * 1028) * per


def test_a_context_that_is_not_a_multiple_of_32_fits_whole():
    cfg = ModelConfig("llama", 2, 64, 4, 2, 16, 128, 500, 1000)
    p = plan_memory(cfg, ram_bytes=64 * GIB)
    assert p.capacity == 1000 and p.budget_rule == "auto: the trained context, 1,000 tokens"


def test_short_window_warning_in_plain_words():
    from engine.budget import short_window_warning

    needle = plan_memory(SHAPES["SmolLM2-1.7B"], budget_bytes=NEEDLE)
    text = short_window_warning(needle, 8192)
    assert text and "156 tokens" in text and "forget" in text
    assert short_window_warning(plan_memory(SHAPES["SmolLM2-1.7B"], ram_bytes=16 * GIB), 8192) is None
    tiny_ctx = ModelConfig("llama", 2, 64, 4, 2, 16, 128, 500, 512)
    assert short_window_warning(plan_memory(tiny_ctx, ram_bytes=GIB), 512) is None  # all it was trained on
    one = plan_memory(SHAPES["SmolLM2-1.7B"], budget_bytes=NEEDLE, window=1)  # (a user's window of 1)
    assert "the last 1 token (about 1 word) of" in short_window_warning(one, 8192)  # not "1 tokens", "1 words"
