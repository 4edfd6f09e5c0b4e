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
