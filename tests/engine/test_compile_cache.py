"""The compiled-step store: a start says "first run" only when these exact steps were never
compiled here before, and a later process loads each step's executable (no tracing, no
compile) and computes the same logits; a torn file, a full disk or a crowded folder cost a
compile, never a wrong answer or a crash."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import compile_cache, forward, load_model, plan_memory
from engine.decoder import Decoder

ROOT = Path(__file__).resolve().parents[2]

# One process's work: load, feed a prompt (8-row steps), decode a token (the 1-row step). Prints
# the compiles JAX logged, then the logits.
SCRIPT = """
import logging, sys
import numpy as np
import jax
compiles = []
class Seen(logging.Handler):
    def emit(self, r):
        if r.getMessage().startswith("Compiling"):
            compiles.append(r.getMessage().split(" with ")[0])
jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Seen())
from engine import load_model, plan_memory
from engine.decoder import Decoder
model = load_model(sys.argv[1])
d = Decoder(model, plan_memory(model.config, "int8", window=40, sinks=4))
a = d.feed(np.arange(3, 15, dtype=np.int32))
b = d.feed(np.array([7], np.int32))
print(compiles)
print(repr(np.concatenate([a, b]).tolist()))
"""


def run(gguf, folder):
    env = dict(os.environ, PINWHEEL_COMPILE_CACHE=str(folder))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(gguf)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    compiles, logits = r.stdout.strip().splitlines()[-2:]
    return eval(compiles), np.array(eval(logits), np.float32)


def executables(folder):
    return sorted(folder.rglob("*.exe"))


def test_a_later_process_loads_the_steps_without_compiling_and_agrees(tiny_bpe_gguf, tmp_path):
    first, logits = run(tiny_bpe_gguf, tmp_path)
    assert any("jit(step)" in c for c in first) and any("jit(verify)" in c for c in first), first
    files = executables(tmp_path)
    assert {f.name.split("-")[0] for f in files} == {"_fresh", "step", "verify", "write_rows"}
    again, logits2 = run(tiny_bpe_gguf, tmp_path)
    assert again == []  # nothing traced, lowered or compiled: every step came from the folder
    np.testing.assert_array_equal(logits2, logits)
    assert executables(tmp_path) == files

    # torn files (a crash mid-write by another tool, a full disk): compiled afresh, replaced
    for f in files:
        f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    torn, logits3 = run(tiny_bpe_gguf, tmp_path)
    assert any("jit(step)" in c for c in torn)
    np.testing.assert_array_equal(logits3, logits)
    assert run(tiny_bpe_gguf, tmp_path)[0] == []


def test_steps_are_kept_apart_by_shape_and_setting(tiny_bpe_gguf, tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_dir", tmp_path)
    compile_cache.forget()
    model = load_model(tiny_bpe_gguf)
    outs = {}
    for kv, window in (("int8", 40), ("int8", 72), ("bf16", 40)):
        d = Decoder(model, plan_memory(model.config, kv, window=window, sinks=4))
        outs[kv, window] = d.feed(np.array([5], np.int32))
    names = [f.name for f in executables(tmp_path)]
    assert sum(n.startswith("step-") for n in names) == 3 and sum(n.startswith("_fresh-") for n in names) == 3
    # each computes what a fresh jit of the same step does (not another shape's program)
    for (kv, window), got in outs.items():
        d = Decoder(model, plan_memory(model.config, kv, window=window, sinks=4))
        _, batch = d._batch(np.array([5], np.int32), 1)
        want, _ = forward.step(model.params, d.cache, batch, model.config, False)
        np.testing.assert_allclose(got, np.asarray(want)[0], rtol=1e-6, atol=1e-6)


def test_a_full_disk_or_a_crowded_folder_costs_only_a_compile(tiny_bpe_gguf, tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_dir", tmp_path)
    compile_cache.forget()
    model = load_model(tiny_bpe_gguf)
    plan = plan_memory(model.config, "int8", window=40, sinks=4)

    def full(self, data):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", full)
        want = Decoder(model, plan).feed(np.array([5, 6], np.int32))
    assert executables(tmp_path) == [] and not list(tmp_path.glob("*.tmp"))
    compile_cache.forget()
    np.testing.assert_array_equal(Decoder(model, plan).feed(np.array([5, 6], np.int32)), want)
    assert executables(tmp_path)

    monkeypatch.setattr(compile_cache, "MAX_FILES", 3)
    for window in (44, 48, 52):
        Decoder(model, plan_memory(model.config, "int8", window=window, sinks=4)).feed(np.array([5], np.int32))
    assert len(executables(tmp_path)) == 3


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


@pytest.fixture(autouse=True)
def _fresh_memo():
    compile_cache.forget()  # executables other tests compiled stay out of these counts
    yield
    compile_cache.forget()


@pytest.fixture(scope="module")
def three_families(tmp_path_factory):
    """A plain model, one with sliding-window layers (a second ring), a hybrid (no verify)."""
    from tests.fixtures.family_gguf import write_family_gguf

    d = tmp_path_factory.mktemp("families")
    return {f: load_model(write_family_gguf(d / f"{f}.gguf", f)) for f in ("llama3", "gemma3", "qwen35")}


def test_a_warm_up_compiles_or_loads_every_step_a_reply_uses_and_runs_none(three_families, tmp_path, monkeypatch):
    """warmup() makes ready every executable the first reply uses (prefill chunk, decode token,
    a short piece's verify and write, a hybrid's 8-row step and state reset), compiling them on
    a first start and loading them on the next, without running one: the cache and rings are
    untouched (so it can come mid-chat, after a new memory setting), and the reply then neither
    loads nor compiles."""
    from engine import decoder as decoder_module

    monkeypatch.setattr(compile_cache, "_dir", tmp_path)
    for family in ("llama3", "gemma3", "qwen35"):
        model = three_families[family]
        plan = plan_memory(model.config, "int8", window=72, sinks=4)
        for start in ("first", "next"):
            compile_cache.forget()
            d = Decoder(model, plan)
            assert d.compiled_before() == (start == "next")
            d.feed(np.arange(3, 8, dtype=np.int32))  # mid-chat
            ran = []
            with monkeypatch.context() as m:
                m.setattr(decoder_module.Decoder, "feed", lambda *a, **k: ran.append(a))
                d.warmup()
            assert ran == [] and d.ring.next_pos == 5 and d.compiled_before()
            misses = []
            real = compile_cache._load_or_compile
            with monkeypatch.context() as m:
                m.setattr(compile_cache, "_load_or_compile", lambda *a: misses.append(a[0].__name__) or real(*a))
                d.feed(np.arange(3, 3 + 70, dtype=np.int32) % model.config.vocab_size)  # a chunk, a short piece
                d.feed(np.array([5], np.int32))
                d.reset(4)
            assert misses == [], (family, start, misses)


def test_what_jaxs_own_cache_left_in_the_folder_goes_once(tmp_path):
    """Before this store, JAX's cache wrote thousands of entries into the same folder; they are
    never read again, and are removed the first time the folder is used (nothing else is)."""
    dead = [tmp_path / "jit_step-0123abcd-cache", tmp_path / "jit_step-0123abcd-atime"]
    kept = [tmp_path / "step-89ab.exe", tmp_path / "warm-0123", tmp_path / "jit_notes.txt"]
    for p in dead + kept:
        p.write_bytes(b"x")
    compile_cache._drop_jax_entries(tmp_path)
    assert not any(p.exists() for p in dead) and all(p.exists() for p in kept)
    (tmp_path / "jit_late-77-cache").write_bytes(b"x")  # a later JAX (a user's own) is left alone
    compile_cache._drop_jax_entries(tmp_path)
    assert (tmp_path / "jit_late-77-cache").exists()
