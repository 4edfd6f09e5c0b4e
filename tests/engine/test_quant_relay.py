"""The kernel library's re-layout at load (engine/kernels/relayout.cc, quant.relay) writes the
very bytes the numpy reference does (quant.convert, interleave and to_chunks), for every format
held as stored, from random GGUF blocks: every bit pattern a file may hold, padding rows, chunk
widths 1, 2 and 4, groups written at an offset into a layer. And a loaded model's weights are
byte-identical with and without it."""
from __future__ import annotations

import numpy as np
import pytest

from engine import kernels, quant

pytestmark = pytest.mark.skipif(kernels.relayout() is None, reason="no kernel library (the XLA path)")

# GGUF type -> (bytes, values) of its block, and where its f16 scales lie in the block
BLOCKS = {"Q8_0": (34, 32, (0,)), "Q4_0": (18, 32, (0,)), "Q4_1": (20, 32, (0, 2)), "Q4_K": (144, 256, (0, 2)),
          "Q6_K": (210, 256, (208,)), "Q5_0": (22, 32, (0,)), "Q5_1": (24, 32, (0, 2)), "Q5_K": (176, 256, (0, 2)),
          "IQ4_NL": (18, 32, (0,)), "IQ4_XS": (136, 256, (0,)), "Q3_K": (110, 256, (108,)), "Q2_K": (84, 256, (80, 82)),
          "IQ3_XXS": (98, 256, (0,)), "IQ3_S": (110, 256, (0,)), "F16": (64, 32, ()), "BF16": (64, 32, ()),
          "IQ2_XXS": (66, 256, (0,)), "IQ2_XS": (74, 256, (0,)), "IQ2_S": (82, 256, (0,)), "IQ1_S": (50, 256, (0,)),
          "IQ1_M": (56, 256, ())}  # (IQ1_M's d: the top nibbles of its scale words, random_blocks keeps it finite)


def random_blocks(rng, type_name: str, rows: int, inp: int) -> np.ndarray:
    """Random bytes in GGUF's blocks of type_name [rows, row bytes], their f16 scales finite."""
    size, values, scales = BLOCKS[type_name]
    raw = rng.integers(0, 256, (rows, inp // values, size), dtype=np.uint8)
    for at in scales:
        raw[..., at : at + 2] = rng.standard_normal((rows, inp // values)).astype(np.float16)[..., None].view(np.uint8)
    if type_name == "IQ1_M":  # d's exponent below all ones: bit 14 of d is bit 6 of byte 55
        raw[..., 55] &= 0xBF
    return raw.reshape(rows, -1)


def reference(type_name: str, raw: np.ndarray, fmt: str, out: int):
    """The numpy path: rows in format fmt, interleaved, in chunks; `out` rows in all (padded)."""
    rows = quant.convert(type_name, raw, None, fmt)
    return quant.pack(*rows, fmt)


def test_every_native_format_is_covered():
    assert {fmt for fmt, _ in quant.NATIVE.values()} == set(quant.FORMATS)


@pytest.mark.parametrize("type_name", list(quant.NATIVE))
@pytest.mark.parametrize("rows", [8, 13, 16, 40, 256 + 5])  # chunk widths 1, 2 (padded), 2, 1, 1 (padded); 4 below
def test_relay_matches_the_numpy_layout(type_name, rows):
    fmt = quant.NATIVE[type_name][0]
    inp = 512
    raw = random_blocks(np.random.default_rng(rows), type_name, rows, inp)
    want = reference(type_name, raw, fmt, rows)
    got = quant.empty_chunked(fmt, (), rows, inp)
    assert quant.relay(raw, fmt, got, 0) == 0
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            assert w.shape == g.shape and w.dtype == g.dtype
            np.testing.assert_array_equal(w.view(np.uint8), g.view(np.uint8))


@pytest.mark.parametrize("type_name", list(quant.NATIVE))
def test_relay_and_put_groups_fill_a_layer_in_parts(type_name):
    """Members written into one layer at their group offsets, some by relay and some by
    put_groups (the numpy path's), give what packing the merged rows at once gives; 4 groups a
    chunk, members not aligned to chunks."""
    fmt = quant.NATIVE[type_name][0]
    inp, sizes = 256, [24, 48, 8, 48]  # 128 rows: 16 groups, chunks of 4; members start at groups 0, 3, 9, 10
    rng = np.random.default_rng(7)
    parts = [random_blocks(rng, type_name, n, inp) for n in sizes]
    want = reference(type_name, np.concatenate(parts), fmt, sum(sizes))
    got = quant.empty_chunked(fmt, (), sum(sizes), inp)
    g0 = 0
    for k, raw in enumerate(parts):
        if k % 2:
            for dst, a in zip(got, quant.interleave(*quant.convert(type_name, raw, None, fmt), fmt)):
                if dst is not None:
                    quant.put_groups(dst, g0, a)
        else:
            assert quant.relay(raw, fmt, got, g0) == 0
        g0 += len(raw) // quant.GROUP
    for w, g in zip(want, got):
        if w is not None:
            np.testing.assert_array_equal(w.view(np.uint8), g.view(np.uint8))


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_1", "Q4_K", "Q6_K", "Q3_K", "Q2_K", "IQ3_XXS", "IQ3_S", "IQ2_XXS",
                                       "IQ2_XS", "IQ2_S", "IQ1_S"])
def test_relay_counts_non_finite_scales(type_name):
    fmt = quant.NATIVE[type_name][0]
    raw = random_blocks(np.random.default_rng(1), type_name, 16, 256)
    at = BLOCKS[type_name][2][-1]
    raw[3, at : at + 2] = np.array([np.inf], np.float16).view(np.uint8)
    raw[9, at : at + 2] = np.array([np.nan], np.float16).view(np.uint8)
    assert quant.relay(raw, fmt, quant.empty_chunked(fmt, (), 16, 256), 0) == 2


def test_relay_refuses_bytes_that_do_not_fit():
    raw = random_blocks(np.random.default_rng(1), "Q4_0", 8, 256)
    with pytest.raises(ValueError):
        quant.relay(raw[:, :-1], "q4_0", quant.empty_chunked("q4_0", (), 8, 256), 0)
    with pytest.raises(ValueError):  # groups past the layer's end
        quant.relay(raw, "q4_0", quant.empty_chunked("q4_0", (), 8, 256), 1)


def _leaves(params):
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(params)]


def _same_weights(path, monkeypatch):
    from engine import load_model

    calls = []
    with monkeypatch.context() as mp:
        relay = quant.relay
        mp.setattr(quant, "relay", lambda *a: calls.append(a[1]) or relay(*a))
        fast = _leaves(load_model(path).params)
    assert calls  # (the fast path did run)
    with monkeypatch.context() as mp:
        mp.setattr(quant, "relayable", lambda type_name, fmt: False)
        slow = _leaves(load_model(path).params)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("tensor_type", ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q5_0", "Q5_1", "Q5_K"])
def test_loaded_weights_are_byte_identical_with_and_without_relay(tmp_path, monkeypatch, tensor_type):
    """A whole file through the loader (un-permuted q and k, merged q/k/v and gate/up, the
    embedding), once re-laid by the kernel library and once by the numpy path."""
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", d_model=256, n_heads=4, n_kv_heads=2, ffn_dim=512, n_layers=2,
                           tensor_type=tensor_type, tied=False)
    _same_weights(path, monkeypatch)


@pytest.mark.llamacpp
@pytest.mark.parametrize("ftype", ["Q4_K_M", "IQ4_XS", "IQ4_NL", "Q3_K_M", "Q2_K", "IQ3_S", "IQ3_XXS", "IQ2_XXS", "IQ2_XS",
                                   "IQ2_S", "IQ1_S", "IQ1_M"])
def test_llama_cpp_files_are_byte_identical_with_and_without_relay(tmp_path, monkeypatch, ftype):
    """Files made by llama.cpp's quantizer: a Q4_K_M mix (Q6_K attn_v and ffn_down in some
    layers: mixed and split stacks), and the IQ4, Q3_K and Q2_K types the fixture writer cannot
    make (their mixes bring Q4_K/Q5_K/Q6_K beside them)."""
    from tests.engine.test_quant_types import quantize
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    src = write_tiny_gguf(tmp_path / "f16.gguf", d_model=256, n_heads=4, n_kv_heads=2, ffn_dim=512, n_layers=4,
                          tensor_type="F16", tied=False)
    _same_weights(quantize(src, tmp_path / f"{ftype}.gguf", ftype), monkeypatch)
