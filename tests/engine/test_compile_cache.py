"""The persistent compilation cache: a start says "first run" only when these exact steps were
never compiled here before."""
from engine import compile_cache, load_model, plan_memory
from engine.decoder import Decoder


def test_compiled_before_only_for_the_same_steps(tiny_bpe_gguf, tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_dir", tmp_path)
    model = load_model(tiny_bpe_gguf)
    a = Decoder(model, plan_memory(model.config, "int8", window=40, sinks=4))
    assert not a.compiled_before()
    a.warmup()
    assert a.compiled_before()
    assert Decoder(model, plan_memory(model.config, "int8", window=40, sinks=4)).compiled_before()
    assert not Decoder(model, plan_memory(model.config, "int8", window=72, sinks=4)).compiled_before()
    assert not Decoder(model, plan_memory(model.config, "bf16", window=40, sinks=4)).compiled_before()
