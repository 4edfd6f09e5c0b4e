"""What a vocabulary costs at run time (issue 22, point 2): the tokenizer's own tables, the model's
metadata, the reader's parse and the file pages of a large embedding while it loads."""
from __future__ import annotations

import gc
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from bench.ladder import Rung, write
from engine.gguf_loader import metadata, read_gguf
from engine.tokenizer import Tokenizer
from tests.engine.test_load_memory import PROBE  # (the same child: base, steady, peak, weights)
from tests.fixtures.tiny_gguf import train_spm_vocab

ROOT = Path(__file__).resolve().parents[2]
N = 60_000


def _spm_md(n: int = N) -> dict:
    """A SentencePiece vocabulary of n tokens: the trained small one, filled with made-up normal
    pieces of real lengths (what the tables cost depends on the count and lengths only)."""
    tokens, scores, types = (list(x) for x in train_spm_vocab(512))
    seen = set(tokens)
    k = 0
    while len(tokens) < n:
        t = ("\u2581" if k % 2 else "") + format(k * 7919 % 10**9, "x") + "ing"[: k % 4]
        k += 1
        if t not in seen:
            seen.add(t)
            tokens.append(t)
            scores.append(-1000.0 - len(tokens))
            types.append(1)
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2}


def test_the_tokenizer_keeps_a_few_bytes_a_token_of_python_objects():
    """Token texts and pieces in one buffer each, flags in a byte a token, no text -> id dict:
    ~25 B a token of Python heap, where lists and dicts of str/bytes took ~250 (SentencePiece's
    own C++ tables are not Python allocations and are not counted here)."""
    md = _spm_md()
    last, first_normal = md["tokenizer.ggml.tokens"][-1], md["tokenizer.ggml.tokens"].index("\u2581the")
    gc.collect()
    tracemalloc.start()
    try:
        tok = Tokenizer.from_metadata(md)
        del md
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tok.vocab_size == N
    assert held / N < 40, f"{held / N:.0f} B a token"
    # and it still says what it said: texts, pieces, specials
    assert tok.token_text(N - 1) == last and tok.token_text(first_normal) == "\u2581the"
    assert tok.token_bytes(first_normal) == b" the" and tok.is_special(1) and not tok.is_special(N - 1)
    assert tok.decode(tok.encode("Hello world")) == "Hello world"


def test_a_loaded_model_keeps_no_big_metadata_arrays(tiny_spm_gguf):
    """Model.metadata keeps every scalar key (the chat template, the names, the shape) and drops
    the vocabulary's arrays: the tokenizer has its own compact copy."""
    from engine import load_model

    m = load_model(tiny_spm_gguf)
    md = m.metadata
    assert "tokenizer.ggml.tokens" not in md and "tokenizer.ggml.scores" not in md
    assert md["general.architecture"] == "llama" and md["tokenizer.ggml.model"] == "llama"
    assert all(not isinstance(v, list) or len(v) <= 256 for v in md.values())
    assert m.tokenizer.token_text(1) == "<s>"


def test_reading_the_metadata_makes_no_object_per_string_until_asked(tmp_path, tiny_bpe_gguf):
    """The reader walks a string array into offsets (8 B a string); the strings are decoded when
    metadata() asks, and equal what the stock gguf reader says."""
    import gguf

    path = write(Rung("strings", 1, 64, 2, 2, 64, vocab=N), "Q8_0", tiny_bpe_gguf, tmp_path / "s.gguf")
    gc.collect()
    tracemalloc.start()
    try:
        reader = read_gguf(path)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / N < 40, f"{held / N:.0f} B a vocabulary string"
    ours = metadata(reader)
    assert ours == metadata(gguf.GGUFReader(path))
    field = reader.fields["tokenizer.ggml.tokens"]
    assert field.contents(5) == ours["tokenizer.ggml.tokens"][5]
    assert field.contents(slice(-3, None)) == ours["tokenizer.ggml.tokens"][-3:]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc peak-RSS reset")
def test_a_large_embedding_loads_without_its_file_pages_at_the_peak(tmp_path, tiny_bpe_gguf):
    """A 131k-token Q8_0 embedding (140 MB, most of the model): each block's file pages are let go
    once it is held, so the peak is not the model plus the whole embedding's pages (+~1.9x)."""
    path = write(Rung("big-embed", 1, 1024, 16, 4, 1024, vocab=131072), "Q8_0", tiny_bpe_gguf, tmp_path / "e.gguf")
    r = subprocess.run([sys.executable, "-c", PROBE.format(path=str(path))], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    base, steady, peak, weights = map(int, r.stdout.split())
    assert steady - base >= weights
    assert peak - base <= 1.15 * (steady - base), (base, steady, peak, weights)


RUNTIME = """
import json, sys, psutil
from engine import load_model
from engine.budget import plan_memory
from engine.session import ChatSession
m = load_model(sys.argv[1])
s = ChatSession(m, plan_memory(m.config))
s.warmup()
for _ in s.stream("Hello there, how are you?", max_tokens=8):
    pass
print(psutil.Process().memory_info().rss - m.weight_bytes - s.plan.kv_bytes)
"""


def test_the_library_runtime_term_is_what_a_vocabulary_token_costs(tmp_path):
    """`pinwheel models` adds RUNTIME_PER_TOKEN per vocabulary token: what the process holds
    beyond weights and cache grows by that between two Gemma-3-270M shapes that differ only in
    their vocabulary (32k and 160k tokens; ~215 B a token, 564 before the tables were compacted)."""
    from bench.big_vocab import write as write_big_vocab
    from engine import library

    sizes = (32_768, 163_840)
    runtime = {}
    for n in sizes:
        path = write_big_vocab(tmp_path / f"v{n}.gguf", n)
        for _ in range(2):  # the first start of a shape compiles and holds ~30 MB more: measure the second
            r = subprocess.run([sys.executable, "-c", RUNTIME, str(path)], cwd=ROOT, capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
        runtime[n] = int(r.stdout.split()[-1])
    per_token = (runtime[sizes[1]] - runtime[sizes[0]]) / (sizes[1] - sizes[0])
    assert per_token <= 300, f"{per_token:.0f} B a vocabulary token"
    assert abs(per_token - library.RUNTIME_PER_TOKEN) <= 0.35 * library.RUNTIME_PER_TOKEN, per_token


def test_the_footprint_bench_runs(tiny_bpe_gguf):
    """bench.footprint's one-shot child and its step-by-step table (llama.cpp aside: the
    comparison is the bench's, run by hand)."""
    r = subprocess.run([sys.executable, "-m", "bench.footprint", "--model", str(tiny_bpe_gguf), "--repeat", "1",
                        "--no-llamacpp", "--tokens", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ours      peak" in r.stdout and "load->first token" in r.stdout
    r = subprocess.run([sys.executable, "-m", "bench.footprint", "--model", str(tiny_bpe_gguf), "--stages",
                        "--tokens", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "load_model" in r.stdout and "one reply" in r.stdout
