"""The XLA path (no native kernel: PINWHEEL_KERNELS=0, a GPU, a CPU no variant covers): its own
weight form (int8 values and f16 scales per 32, made at load, engine.quant.XLA_FORMS), its
products and its attention against exact references and against the native path, and the weight
bytes it reports being the bytes it holds. Timings are in bench/xla_path.py, not here."""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from engine import forward, kernels, load_model, plan_memory, quant
from engine.gguf_loader import params_nbytes, read_gguf, weight_bytes
from tests.engine import reference
from tests.engine.test_quant import _dense, _inputs, _qlinear, _random_rows

ROOT = Path(__file__).resolve().parents[2]
needs_kernel = pytest.mark.skipif(not kernels.available(), reason=f"native kernel: {kernels.status()}")


def _xla_linear(fmt, rows, layers=1):
    """Row-layout blocks (one per layer) in the XLA form, as the loader builds it (stacked)."""
    packed = fmt in ("q4_0", "q4_1", "q4_k", *quant.IQ4)  # (q: nibbles, or one value a byte)
    out, inp = rows[0][0].shape[0], rows[0][0].shape[1] * (2 if packed else 1)
    form, pieces = quant.XLA_FORMS[fmt], quant.xla_pieces(inp)
    q, d, m = quant.empty_xla(form, (layers,), out, inp)
    for i, r in enumerate(rows):
        for dst, a in zip((q, d, m), quant.xla_rows(*r, fmt)):
            if dst is not None:
                for r0 in range(0, out, 16):  # row blocks, as the loader fills them
                    quant.put_xla_rows(dst[i], r0, a[r0 : r0 + 16], pieces)
    return quant.QLinear(*(None if a is None else jnp.asarray(a) for a in (q, d, m)), form, out, pieces)


def _unstack(w):
    return reference.jax_index(w, 0)


SHAPES = [(40, 64), (13, 96), (256, 512), (24, 8192), (16, 4128)]  # the last two: in column blocks


def test_pieces_divide_the_blocks_and_fit_the_fused_width():
    assert quant.xla_pieces(960) == 1 and quant.xla_pieces(4064) == 1
    assert quant.xla_pieces(8192) == 4 and quant.xla_pieces(4128) == 3
    for inp in (4096, 5120, 8960, 13824, 32 * 131):
        p = quant.xla_pieces(inp)
        assert (inp // 32) % p == 0 and inp // p <= quant.XLA_MATVEC_WIDTH, inp


@pytest.mark.parametrize("fmt", list(quant.XLA_FORMS))  # (the formats the XLA path holds)
@pytest.mark.parametrize("out, inp", SHAPES)
def test_xla_form_decodes_to_the_blocks_exactly(fmt, out, inp):
    """Same numbers as GGUF's definitions (and so as the kernel's layout): no rounding at load."""
    inp = _inputs(fmt, inp)
    rows = _random_rows(np.random.default_rng(0), fmt, out, inp)
    w = _unstack(_xla_linear(fmt, [rows]))
    want = _dense(fmt, *rows)
    np.testing.assert_array_equal(np.asarray(quant.dequantize(w)), want)
    pick = jnp.array([0, out - 1, out // 2, 7, 8])
    np.testing.assert_array_equal(np.asarray(quant.take_rows(w, pick)), want[np.asarray(pick)])
    assert w.nbytes == quant.nbytes(quant.XLA_FORMS[fmt], out, inp)


@pytest.mark.parametrize("fmt", list(quant.XLA_FORMS))  # (the formats the XLA path holds)
@pytest.mark.parametrize("out, inp", SHAPES)
def test_xla_product_is_the_f32_product(fmt, out, inp):
    """One row (the fused matrix-vector path, in column blocks when wide) and several (the GEMM
    on a dequantized copy), with the stacked layer index and the fused norm, against float64."""
    rng = np.random.default_rng(1)
    inp = _inputs(fmt, inp)
    layers = [_random_rows(rng, fmt, out, inp) for _ in range(2)]
    w = _xla_linear(fmt, layers, layers=2)
    g = rng.random((2, inp)).astype(np.float32) + 0.5
    mm = jax.jit(lambda x, w, i, g: quant.matmul(x, w, i, norm=g, eps=1e-5))
    for C in (1, 3, 16):
        x = rng.standard_normal((C, inp)).astype(np.float32)
        for i in (0, 1):
            h = x.astype(np.float64)
            h = h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-5) * g[i]
            want = h @ _dense(fmt, *layers[i]).astype(np.float64).T
            got = np.asarray(mm(jnp.asarray(x), w, jnp.int32(i), jnp.asarray(g)))
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("out, inp", [(512, 960), (256, 8192)])
def test_decode_product_makes_no_f32_copy_of_the_weight(out, inp):
    """The point of the form: XLA streams the int8 bytes; the step's temp buffers stay far below
    even one f32 row block of the weight (a dequantized copy would be 4 x out x in bytes)."""
    rows = _random_rows(np.random.default_rng(2), "q4_0", out, inp)
    w = _xla_linear("q4_0", [rows, rows], layers=2)
    c = jax.jit(lambda x, w, i: quant.matmul(x, w, i)).lower(
        jax.ShapeDtypeStruct((1, inp), jnp.float32), w, jnp.int32(0)).compile()
    assert c.memory_analysis().temp_size_in_bytes < out * inp // 8, c.memory_analysis()


@needs_kernel
@pytest.mark.parametrize("fmt", list(quant.XLA_FORMS))  # (the formats the XLA path holds)
@pytest.mark.parametrize("out, inp", [(40, 64), (1000, 320), (48, 8192)])
def test_xla_product_agrees_with_the_kernel(fmt, out, inp):
    """At the kernel's own tolerance (it rounds x to int8 per 32 values, as llama.cpp does)."""
    rng = np.random.default_rng(3)
    inp = _inputs(fmt, inp)
    rows = _random_rows(rng, fmt, out, inp)
    native, xla = _qlinear(fmt, rows, stacked=True), _xla_linear(fmt, [rows])
    mm = jax.jit(lambda x, w: quant.matmul(x, w, jnp.int32(0)))
    for C in (1, 8):
        x = jnp.asarray(rng.standard_normal((C, inp)).astype(np.float32))
        a, b = np.asarray(mm(x, native)), np.asarray(mm(x, xla))
        assert np.abs(a - b).max() <= 0.02 * np.abs(b).max(), (fmt, C)


# --- attention -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_xla(tmp_path_factory):
    """The tiny test model with room for a cache of several spans, in the XLA form."""
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    return load_model(write_tiny_gguf(tmp_path_factory.mktemp("xla") / "long.gguf", context_length=2048), xla=True)


# (fills before the chunk): inside the first span, the second, the third, and a wrapped ring
FILLS = {"256": (100, 60), "512": (200, 150, 90), "capacity": (400, 250), "wrapped": (500, 400, 300)}


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("C", [1, 8])
@pytest.mark.parametrize("kv_dtype", ["int8", "bf16", "f32"])
def test_xla_attention_reads_the_span_it_needs_and_matches_the_concatenation(tiny_xla, kv_dtype, C, fill):
    """attention_xla (cache slots up to the span the mask needs, the new rows apart) against the
    whole-layer concatenation, for every span of a 704-slot cache and a wrapped ring."""
    cfg = tiny_xla.config
    plan = plan_memory(cfg, kv_dtype, window=700, sinks=4)
    assert forward.key_spans(plan.capacity) == [256, 512, plan.capacity]
    rng = np.random.default_rng(7)
    cache = reference.random_cache(cfg, plan, rng)
    batch = reference.ring_batch(cfg, plan, FILLS[fill], C)
    q = jnp.asarray(rng.standard_normal((C, cfg.n_heads, cfg.head_dim)).astype(np.float32))
    k_new = jnp.asarray(rng.standard_normal((C, cfg.kv_dim)).astype(np.float32))
    v_new = jnp.asarray(rng.standard_normal((C, cfg.kv_dim)).astype(np.float32))
    keys = forward._global_keys(batch)[:6]
    xla = jax.jit(lambda q, k, v, c: forward.attention_xla(cfg, q, k, v, c, jnp.int32(1), *keys))
    got = xla(q, k_new, v_new, cache)
    want = jax.jit(lambda q, k, v, c: reference.concatenated_attention(cfg, q, k, v, c, 1, batch))(q, k_new, v_new, cache)
    n = min(6, C)
    np.testing.assert_allclose(np.asarray(got)[:n], np.asarray(want)[:n], rtol=2e-5, atol=2e-5)


@needs_kernel
@pytest.mark.parametrize("fill", ["512", "wrapped"])
@pytest.mark.parametrize("kv_dtype", ["int8", "bf16"])
def test_xla_attention_agrees_with_the_native_attention(tiny_xla, kv_dtype, fill):
    cfg = tiny_xla.config
    plan = plan_memory(cfg, kv_dtype, window=700, sinks=4)
    rng = np.random.default_rng(8)
    cache = reference.random_cache(cfg, plan, rng)
    batch = reference.ring_batch(cfg, plan, FILLS[fill], 1)
    q = jnp.asarray(rng.standard_normal((1, cfg.n_heads, cfg.head_dim)).astype(np.float32))
    k_new = jnp.asarray(rng.standard_normal((1, cfg.kv_dim)).astype(np.float32))
    v_new = jnp.asarray(rng.standard_normal((1, cfg.kv_dim)).astype(np.float32))
    keys = forward._global_keys(batch)
    got = jax.jit(lambda q, k, v, c: forward.attention_xla(cfg, q, k, v, c, jnp.int32(1), *keys[:6]))(
        q, k_new, v_new, cache)
    want = jax.jit(lambda q, k, v, c: forward.attention_native(cfg, q, k, v, c, 1, *keys))(q, k_new, v_new, cache)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)


# --- whole models --------------------------------------------------------------------------------


def test_xla_form_model_matches_the_dense_reference(tiny_xla, monkeypatch):
    """The XLA form end to end (its products, its span-bounded attention over a cache of more
    than one span) against the float64 reference without int8 activations, at the dense
    reference's tolerance (tests/engine/test_forward.py)."""
    from engine import score

    assert all(quant.is_xla_form(w) for w in (tiny_xla.params.embed, tiny_xla.params.layers.wqkv,
                                              tiny_xla.params.layers.w_down))
    monkeypatch.setattr(reference, "_mm", lambda x, w: x @ w.T)  # the XLA path keeps x in f32
    ids = np.random.default_rng(0).integers(3, tiny_xla.config.vocab_size, 300)
    for sinks, window in ((4, 600), (2, 100)):
        plan = plan_memory(tiny_xla.config, "f32", window=window, sinks=sinks)
        ours = score(tiny_xla, ids, plan, chunk=16)
        want = reference.reference_logprobs(tiny_xla, ids, sinks, window)
        assert np.abs(ours - want).max() < 2e-4, (sinks, window)


@pytest.mark.parametrize("tensor_type", ["Q4_0", "Q4_K", "F32"])
def test_both_forms_hold_the_same_weights_and_report_what_they_hold(tmp_path, tensor_type):
    """Loading a file in the XLA form and in the kernel's gives the same numbers for every
    matrix, exactly (the load-time transform loses nothing; ffn 4,352 wide: the down projection
    in column blocks); and each form's predicted bytes (what `pinwheel models` and the load
    check use) are the arrays it holds (what the gauge shows). A 4-bit file's XLA form is its
    int8 size."""
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", d_model=256, ffn_dim=4352, tensor_type=tensor_type, n_layers=2)
    types = {t.name: t.tensor_type.name for t in read_gguf(path).tensors}
    models = {xla: load_model(path, xla=xla) for xla in (True, False)}
    for xla, model in models.items():
        assert weight_bytes(model.config, types.get, xla) == params_nbytes(model.params) == model.weight_bytes
    names = ("wqkv", "wo", "w_gate_up", "w_down")
    for name in names:
        a, b = (getattr(models[x].params.layers, name) for x in (True, False))
        assert quant.is_xla_form(a) and not quant.is_xla_form(b)
        np.testing.assert_array_equal(np.asarray(quant.dequantize(a)), np.asarray(quant.dequantize(b)), name)
    assert models[True].params.layers.w_down.pieces == 2
    np.testing.assert_array_equal(np.asarray(quant.dequantize(models[True].params.embed)),
                                  np.asarray(quant.dequantize(models[False].params.embed)))
    if tensor_type == "Q4_0":
        assert weight_bytes(models[True].config, types.get, True) > 1.8 * weight_bytes(models[True].config, types.get,
                                                                                        False)


def _held_in_xla_path(path: str) -> dict:
    """In a PINWHEEL_KERNELS=0 process: what loading holds and what is reported for it."""
    from engine import library

    model = load_model(path)
    types = {t.name: t.tensor_type.name for t in read_gguf(path).tensors}
    entry = library.describe(path)  # a row of `pinwheel models`
    return {"xla": quant.is_xla_form(model.params.layers.wqkv), "held": params_nbytes(model.params),
            "gauge": model.weight_bytes, "predicted": weight_bytes(model.config, types.get),
            "models": entry.weight_bytes, "kernel": kernels.status()}


def test_without_the_kernel_the_loader_holds_the_xla_form_and_reports_it(tmp_path):
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", d_model=128, ffn_dim=256, tensor_type="Q4_0", n_layers=2)
    got = reference.in_xla_path("tests.engine.test_xla_path", "_held_in_xla_path", str(path))
    assert got["xla"] and got["kernel"].startswith("XLA"), got
    assert got["held"] == got["gauge"] == got["predicted"], got
    assert got["models"] == got["held"], got


# --- the process's XLA options (engine.xla_flags) ------------------------------------------------


def test_xla_flags_add_the_vector_width_on_x86_and_keep_the_users_own():
    from engine import xla_flags

    env = {}
    xla_flags.apply(env, "x86_64")
    assert env["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=512"
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/d"}
    xla_flags.apply(env, "AMD64")
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_cpu_prefer_vector_width=512"
    env = {"XLA_FLAGS": "--xla_cpu_prefer_vector_width=256"}  # the user's choice stands
    xla_flags.apply(env, "x86_64")
    assert env["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=256"
    env = {}
    xla_flags.apply(env, "aarch64")
    assert "XLA_FLAGS" not in env


def test_importing_the_engine_sets_the_xla_flags_before_jax_starts():
    code = "import os, engine, platform; print(os.environ.get('XLA_FLAGS', ''))"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import platform

    from engine import xla_flags

    m = platform.machine().lower()
    assert r.stdout.strip() == " ".join(xla_flags.FLAGS.get(xla_flags.MACHINES.get(m, m), ()))


# --- a CPU without F16C (engine.half) --------------------------------------------------------------


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="an x86-64 ISA cap")
@pytest.mark.parametrize("path", ["baseline-kernel", "xla-path"])
def test_a_cpu_without_f16c_still_runs_a_model(tmp_path, path):
    """XLA capped at SSE4.2 compiles f16 converts into a helper this jaxlib's JIT lacks
    ("Symbols not found: [ __extendhfsf2 ]"): the embedding lookup and the XLA form's products
    failed on such CPUs (Pentium/Celeron Silver, pre-2012). A Gemma file covers the f16-rounded
    GELU too. Both ways a CPU without F16C runs: the x86-64-v2 variant, and the XLA path."""
    from tests.fixtures.family_gguf import write_family_gguf

    model = write_family_gguf(tmp_path / "gemma.gguf", "gemma3", tensor_type="Q4_0")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=SSE4_2", JAX_PLATFORMS="cpu")
    if path == "xla-path":
        env["PINWHEEL_KERNELS"] = "0"
    elif "x86-64-v2" in kernels.packaged():
        env["PINWHEEL_KERNEL_VARIANT"] = "x86-64-v2"
    else:
        pytest.skip("no prebuilt x86-64-v2 variant in this checkout")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "chat", "--model", str(model), "--prompt", "Hello",
                        "--max-tokens", "4", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["generated_tokens"] >= 1
