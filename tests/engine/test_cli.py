"""`pinwheel chat|plan|score` as a user runs them: JSON keys, one-line errors, exit codes."""
import json
import subprocess
import sys

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_plan_json(tiny_bpe_gguf):
    r = cli("plan", "--model", tiny_bpe_gguf, "--json", "--window", "50", "--sinks", "3")
    d = json.loads(r.stdout)
    assert {"bytes_per_position", "slots", "sinks", "window", "kv_bytes", "kv_dtype", "budget_bytes"} <= d.keys()
    assert (d["window"], d["sinks"], d["kv_bytes"]) == (50, 3, 53 * d["bytes_per_position"])


def test_chat_prompt_json_and_repl(tiny_bpe_gguf):
    r = cli("chat", "--model", tiny_bpe_gguf, "--prompt", "hi", "--max-tokens", "12", "--ignore-eos",
            "--json", "--seed", "1", "--window", "20")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for k in ("reply", "prompt_tokens", "generated_tokens", "prefill_tok_s", "decode_tok_s", "kv_bytes",
              "cache_tokens", "evicted_tokens", "rss_bytes"):
        assert k in d
    assert d["generated_tokens"] == 12 and d["evicted_tokens"] > 0
    r = cli("chat", "--model", tiny_bpe_gguf, "--max-tokens", "5", "--json", stdin="hello\nagain\n")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 2


def test_score_json(tiny_bpe_gguf, tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("The quick brown fox jumps over the lazy dog. " * 20)
    d = json.loads(cli("score", f, "--model", tiny_bpe_gguf, "--json", "--window", "32").stdout)
    assert d["tokens"] > 100 and d["ppl"] > 1 and abs(d["nll"] - __import__("math").log(d["ppl"])) < 1e-9


@pytest.mark.parametrize("content, words", [
    (None, "not found"),
    (b"", "empty"),
    (b"GGU", "not a GGUF"),
    (b"GGUF\x03\x00\x00\x00", "truncated"),
    (b"PK\x03\x04" + b"\x00" * 100, "not a GGUF"),
    (b"GGUF\x03\x00\x00\x00" + (2**60).to_bytes(8, "little") + (1).to_bytes(8, "little"), "claims"),
])
def test_bad_model_files_give_one_line(tmp_path, content, words):
    p = tmp_path / "m.gguf"
    if content is not None:
        p.write_bytes(content)
    r = cli("chat", "--model", p, "--prompt", "hi")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr


def test_truncated_real_file(tiny_bpe_gguf, tmp_path):
    data = tiny_bpe_gguf.read_bytes()
    for cut in (len(data) // 3, len(data) - 100):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        r = cli("plan", "--model", p) if cut < len(data) // 2 else cli("chat", "--model", p, "--prompt", "x")
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_impossible_settings(tiny_bpe_gguf):
    r = cli("plan", "--model", tiny_bpe_gguf, "--sinks", "100000")
    assert r.returncode == 2 and "at most" in r.stderr
    r = cli("plan", "--model", tiny_bpe_gguf, "--window", "-3")
    assert r.returncode == 2 and "positive" in r.stderr


def _shape_only_gguf(path, arch, layers, d, heads, kv_heads, head_dim, ffn, ctx):
    """A GGUF with a real model's shape in its metadata and no weights: all `pinwheel plan` reads."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(layers)
    w.add_embedding_length(d)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_feed_forward_length(ffn)
    w.add_context_length(ctx)
    w.add_vocab_size(151_936)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("shape", [
    ("llama", 24, 2048, 32, 32, 64, 8192, 8192),     # SmolLM2-1.7B
    ("qwen3", 28, 2048, 16, 8, 128, 6144, 40_960),   # Qwen3-1.7B
    ("llama", 28, 3072, 24, 8, 128, 8192, 131_072),  # Llama-3.2-3B
    ("qwen3", 36, 2560, 32, 8, 128, 9728, 40_960),   # Qwen3-4B
])
def test_plan_without_memory_options_fits_the_model(tmp_path, shape):
    """Issue 21: no memory option gives a 4,096-token window at 1.7B-4B, within 10% of RAM, and
    says which rule chose it; a short window says so on stderr."""
    import psutil

    f = _shape_only_gguf(tmp_path / "m.gguf", *shape)
    r = cli("plan", "--model", f, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["window"] >= 4096 and d["kv_bytes"] <= psutil.virtual_memory().total // 10
    assert d["budget_rule"] == "auto: 4,096 tokens" and r.stderr == ""
    r = cli("plan", "--model", f, "--json", "--kv-budget-mib", "11.5")
    d = json.loads(r.stdout)
    assert d["slots"] == 160 and d["budget_rule"] == "11.5 MiB (Needle 2)"
    assert "only the last 156 tokens" in r.stderr and "forget" in r.stderr


def test_needle_preset_gives_the_needle_plan_on_the_default_model():
    from engine.model_locator import default_model_path

    if default_model_path() is None:
        pytest.skip("the default model is not installed")
    d = json.loads(cli("plan", "--json", "--kv-budget-mib", "11.5").stdout)
    assert (d["slots"], d["kv_dtype"], d["budget_bytes"]) == (928, "int8", 12_058_624)
    auto = json.loads(cli("plan", "--json").stdout)
    assert auto["slots"] == 4128 and auto["window"] == 4124 and auto["budget_rule"] == "auto: 4,096 tokens"
    assert json.loads(cli("plan", "--json", "--kv-budget-mib", "auto").stdout) == auto


def test_a_one_shot_prompt_warms_up_only_steps_never_compiled(tiny_bpe_gguf, tmp_path, monkeypatch, capsys):
    """`chat --prompt` on steps an earlier run compiled skips the warm-up (it traced and ran every
    step shape: ~0.5 s of a one-shot start) and answers the same; a first run still compiles all
    up front, so the speeds it reports are not the compiler's."""
    from engine import cli as pinwheel, compile_cache
    from engine.decoder import Decoder

    monkeypatch.setattr(compile_cache, "_dir", tmp_path)
    calls, warmup = [], Decoder.warmup
    monkeypatch.setattr(Decoder, "warmup", lambda self: (calls.append(1), warmup(self))[1])
    args = ["chat", "--model", str(tiny_bpe_gguf), "--prompt", "hi", "--max-tokens", "6", "--ignore-eos",
            "--window", "20", "--json"]
    assert pinwheel.main(args) == 0 and calls == [1]
    first = json.loads(capsys.readouterr().out)
    assert pinwheel.main(args) == 0 and calls == [1]
    again = json.loads(capsys.readouterr().out)
    assert again["reply"] == first["reply"] and again["generated_tokens"] == first["generated_tokens"] == 6
