"""The block formats and the native matmul kernel: exact layouts, the XLA path as reference,
and results that do not depend on how many rows a call carries."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

from engine import kernels, quant

needs_kernel = pytest.mark.skipif(not kernels.available(), reason=f"native kernel: {kernels.status()}")


def _inputs(fmt, inp):
    """inp, rounded up to whole super-blocks of 256 for q4_k."""
    return -(-inp // 256) * 256 if fmt in ("q4_k", "q6_k", "q5_k", "iq4_xs", "q3_k", "q2_k", *quant.IQ3, *quant.IQ12) else inp


def _random_rows(rng, fmt, out, inp):
    nb = inp // 32
    if fmt == "q4_k":  # nibbles; d and dmin per super-block; 6-bit scales and mins per 32
        q = rng.integers(0, 256, (out, inp // 2), dtype=np.uint8)
        d = (rng.random((out, inp // 256, 2)) * 0.002).astype(np.float16)
        return q, d, rng.integers(0, 64, (out, inp // 256, 16), dtype=np.uint8)
    if fmt == "iq4_xs":  # index nibbles; d per super-block; a 6-bit scale per 32
        q = rng.integers(0, 256, (out, inp // 2), dtype=np.uint8)
        d = (rng.random((out, inp // 256)) * 0.001).astype(np.float16)
        return q, d, rng.integers(0, 64, (out, inp // 256, 8), dtype=np.uint8)
    if fmt in quant.FIVE_BIT:  # values 0..31, and the base format's scales
        u = rng.integers(0, 32, (out, inp), dtype=np.uint8)
        return (u, *_random_rows(rng, quant.FIVE_BIT[fmt], out, inp)[1:])
    if fmt == "q6_k":  # values 0..63; d per super-block; an int8 scale per 16
        q = rng.integers(0, 64, (out, inp), dtype=np.uint8)
        d = (rng.random((out, inp // 256)) * 0.0005).astype(np.float16)
        return q, d, rng.integers(-127, 128, (out, inp // 256, 16), dtype=np.int8)
    if fmt == "q3_k":  # values 0..7; d per super-block; a 6-bit ls per 16
        q = rng.integers(0, 8, (out, inp), dtype=np.uint8)
        d = (rng.random((out, inp // 256)) * 0.002).astype(np.float16)
        return q, d, rng.integers(0, 64, (out, inp // 256, 16), dtype=np.uint8)
    if fmt == "q2_k":  # values 0..3; d and dmin per super-block; a byte sc | mn << 4 per 16
        q = rng.integers(0, 4, (out, inp), dtype=np.uint8)
        d = (rng.random((out, inp // 256, 2)) * 0.002).astype(np.float16)
        return q, d, rng.integers(0, 256, (out, inp // 256, 16), dtype=np.uint8)
    if fmt in quant.FLOAT:  # 16-bit floats as uint16, no scales
        v = (rng.standard_normal((out, inp)) * 0.05).astype(np.float32)
        h = v.astype(np.float16).view(np.uint16) if fmt == "f16" else (v.view(np.uint32) >> 16).astype(np.uint16)
        return h, np.zeros((out, nb, 0), np.float16), None
    if fmt in quant.IQ3:  # a block's 8 indices, (iq3_s: their 9th bits,) 4 sign bytes, (iq3_s: its ls); d per super-block
        q = rng.integers(0, 256, (out, nb, 12 if fmt == "iq3_xxs" else 14), dtype=np.uint8)
        if fmt == "iq3_s":
            q[..., 13] &= 15
        return q, (rng.standard_normal((out, inp // 256)) * 0.002).astype(np.float16), None
    if fmt in quant.IQ12:  # a block's 4 index bytes, then its fields (blocks_iq2_* / blocks_iq1_*'s rows); d per super-block
        q = rng.integers(0, 256, (out, nb, {"iq2_xxs": 8, "iq2_xs": 9, "iq2_s": 10, "iq1_s": 6, "iq1_m": 7}[fmt]), dtype=np.uint8)
        if fmt == "iq1_m":
            q[..., 6] &= 63
        return q, (rng.standard_normal((out, inp // 256)) * 0.002).astype(np.float16), None
    if fmt == "q8_0":
        q = rng.integers(-127, 128, (out, inp), dtype=np.int8)
    else:
        q = rng.integers(0, 256, (out, inp // 2), dtype=np.uint8)
    d = (rng.random((out, nb)) * 0.02).astype(np.float16)
    m = (-rng.random((out, nb)) * 0.1).astype(np.float16) if fmt == "q4_1" else None
    return q, d, m


def _dense(fmt, q, d, m):
    """What the row-layout blocks mean, written out in numpy from GGUF's definitions."""
    if fmt == "q6_k":  # each 16 values: d * scale * (q - 32)
        s = (d.astype(np.float32)[..., None] * m).reshape(d.shape[0], -1)
        return ((q.astype(np.float32) - 32).reshape(d.shape[0], -1, 16) * s[..., None]).reshape(d.shape[0], -1)
    if fmt == "q3_k":  # each 16 values: d * (ls - 32) * (q - 4)
        s = (d.astype(np.float32)[..., None] * (m.astype(np.float32) - 32)).reshape(d.shape[0], -1)
        return ((q.astype(np.float32) - 4).reshape(d.shape[0], -1, 16) * s[..., None]).reshape(d.shape[0], -1)
    if fmt == "q2_k":  # each 16 values: d * sc * q - dmin * mn
        dd = d.astype(np.float32)
        dw = (dd[..., :1] * (m & 15).astype(np.float32)).reshape(d.shape[0], -1)
        cf = (dd[..., 1:] * -(m >> 4).astype(np.float32)).reshape(d.shape[0], -1)
        v = q.astype(np.float32).reshape(d.shape[0], -1, 16)
        return (v * dw[..., None] + cf[..., None]).reshape(d.shape[0], -1)
    if fmt in quant.FLOAT:  # the 16-bit floats themselves
        return (q.view(np.float16).astype(np.float32) if fmt == "f16"
                else (q.astype(np.uint32) << 16).view(np.float32))
    if fmt in quant.IQ3:  # llama.cpp's grid values by index, each with its sign, times d (2 ls + 1) (/ 4)
        out, nb, _ = q.shape
        idx = q[..., :8].astype(np.int32)
        if fmt == "iq3_s":
            idx |= ((q[..., 8:9].astype(np.int32) >> np.arange(8)) & 1) << 8
            signs, ls = q[..., 9:13].astype(np.int32), q[..., 13].astype(np.int32)
        else:  # 7 stored signs a byte, the 8th their parity; ls's bit l at bit 7 of byte l
            b = q[..., 8:12].astype(np.int32)
            ls = (((b >> 7) & 1) << np.arange(4)).sum(-1)
            b &= 0x7F
            signs = b | (np.vectorize(lambda v: bin(v).count("1") & 1)(b) << 7)
        v = quant._iq3_grid(fmt)[idx].astype(np.float32).reshape(out, nb, 32)
        neg = ((signs[..., None] >> np.arange(8)) & 1).reshape(out, nb, 32)
        db = np.repeat(d.astype(np.float32), 8, axis=-1) * (2 * ls + 1).astype(np.float32)
        if fmt == "iq3_xxs":
            db = db * np.float32(0.25)
        return (np.where(neg == 1, -v, v) * db[..., None]).reshape(out, -1)
    if fmt in quant.IQ12:  # llama.cpp's grid entries by index: iq2 d (0.5 + ls) / 4 with each value's sign, iq1 d (2 ls + 1) (g +- 1/8)
        out, nb, _ = q.shape
        b = q.astype(np.int32)
        idx = b[..., :4].copy()  # [out, nb, entry l]
        parity = np.vectorize(lambda v: bin(v).count("1") & 1)
        if fmt in ("iq1_s", "iq1_m"):
            qh = b[..., 4] | b[..., 5] << 8
            if fmt == "iq1_s":
                idx |= ((qh[..., None] >> (3 * np.arange(4))) & 7) << 8
                neg = np.broadcast_to(qh[..., None] >> 15, idx.shape)
                ls = np.stack([(qh >> 12) & 7] * 2, axis=-1)
            else:
                idx |= ((qh[..., None] >> (4 * np.arange(4))) & 7) << 8
                neg = (qh[..., None] >> (4 * np.arange(4) + 3)) & 1
                ls = np.stack([b[..., 6] & 7, b[..., 6] >> 3], axis=-1)
            v = quant._iq12_grid(fmt)[idx].astype(np.float32) + np.where(neg == 1, np.float32(-0.125), np.float32(0.125))[..., None]
            s = np.repeat(d.astype(np.float32), 8, axis=-1)[..., None] * (2 * ls + 1).astype(np.float32)
        else:
            if fmt == "iq2_s":
                idx |= ((b[..., 8:9] >> (2 * np.arange(4))) & 3) << 8
                signs, ls = b[..., 4:8], np.stack([b[..., 9] & 15, b[..., 9] >> 4], axis=-1)
            else:  # 7 stored signs a byte, the 8th their parity; bit 7: iq2_xxs's ls bit l, iq2_xs's index bit 8
                hi = b[..., 4:8] >> 7
                if fmt == "iq2_xxs":
                    ls = np.stack([(hi << np.arange(4)).sum(-1)] * 2, axis=-1)
                else:
                    idx |= hi << 8
                    ls = np.stack([b[..., 8] & 15, b[..., 8] >> 4], axis=-1)
                signs = (b[..., 4:8] & 0x7F) | parity(b[..., 4:8] & 0x7F) << 7
            g = quant._iq12_grid(fmt)[idx].astype(np.float32)  # [out, nb, 4, 8]
            v = np.where(((signs[..., None] >> np.arange(8)) & 1) == 1, -g, g)
            s = np.repeat(d.astype(np.float32), 8, axis=-1)[..., None] * (np.float32(0.5) + ls.astype(np.float32)) * np.float32(0.25)
        return (v.reshape(out, nb, 2, 16) * s[..., None]).reshape(out, -1)
    if fmt in quant.IQ4:  # llama.cpp's 16 values, looked up by index, times the block's scale
        out = q.shape[0]
        if fmt == "iq4_xs":
            d = (d.astype(np.float32)[..., None] * (m.astype(np.float32) - 32)).reshape(out, -1)
        b = q.reshape(out, -1, 16)
        v = quant.IQ4_VALUES[np.concatenate([b & 0x0F, b >> 4], -1)].astype(np.float32)
        return (v * d.astype(np.float32)[..., None]).reshape(out, -1)
    if fmt in quant.FIVE_BIT:  # values 0..31 (q5_0's offset 16) with the base format's scales
        out = q.shape[0]
        if fmt == "q5_k":
            dd = d.astype(np.float32)
            d, m = (dd[..., :1] * m[..., :8]).reshape(out, -1), (dd[..., 1:] * -m[..., 8:].astype(np.float32)).reshape(out, -1)
        v = q.astype(np.float32).reshape(out, -1, 32) - (16 if fmt == "q5_0" else 0)
        w = v * d.astype(np.float32)[..., None] + (0 if m is None else m.astype(np.float32)[..., None])
        return w.reshape(out, -1)
    if fmt == "q4_k":  # block j of a super-block: d * scale[j] * q - dmin * min[j]
        out = d.shape[0]
        dd = d.astype(np.float32)
        d = (dd[..., :1] * m[..., :8]).reshape(out, -1)
        m = (dd[..., 1:] * -m[..., 8:].astype(np.float32)).reshape(out, -1)
        fmt = "q4_1"
    out, nb = d.shape
    df = d.astype(np.float32)[..., None]
    if fmt == "q8_0":
        return (q.astype(np.float32).reshape(out, nb, 32) * df).reshape(out, -1)
    b = q.reshape(out, nb, 16)
    v = np.concatenate([b & 0x0F, b >> 4], -1).astype(np.float32)  # low nibbles 0-15, high 16-31
    w = (v - 8) * df if fmt == "q4_0" else v * df + m.astype(np.float32)[..., None]
    return w.reshape(out, -1)


def _qlinear(fmt, rows, stacked=False):
    qi, di, mi = quant.pack(*rows, fmt)
    lift = (lambda a: None if a is None else jnp.asarray(a[None])) if stacked else (
        lambda a: None if a is None else jnp.asarray(a))
    return quant.QLinear(lift(qi), lift(di), lift(mi), fmt, rows[1].shape[0])


@pytest.mark.parametrize("fmt", quant.FORMATS)
@pytest.mark.parametrize("out, inp", [(40, 64), (13, 96), (256, 512)])
def test_layout_round_trips_through_dequantize_and_take_rows(fmt, out, inp):
    inp = _inputs(fmt, inp)
    rows = _random_rows(np.random.default_rng(0), fmt, out, inp)
    want = _dense(fmt, *rows)
    w = _qlinear(fmt, rows)
    np.testing.assert_array_equal(np.asarray(quant.dequantize(w)), want)
    pick = jnp.array([0, out - 1, out // 2, 7, 8])
    np.testing.assert_array_equal(np.asarray(quant.take_rows(w, pick)), want[np.asarray(pick)])


def test_q4_k_converts_exactly():
    """Q4_K super-blocks become q4_1 blocks of 32 that decode to gguf's own dequantization."""
    import gguf

    from tests.fixtures.tiny_gguf import _quantize_q4_k

    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 512)).astype(np.float32) * 0.05
    raw = _quantize_q4_k(w.reshape(-1, 256)).reshape(16, -1)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_K).reshape(16, 512)
    q, d, m = quant.blocks_q4_k(raw)
    got = _dense("q4_1", q, d, m)
    # exact but for the f16 rounding of d * scale and dmin * min (a 1e-3 relative step)
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-3 * np.abs(ref).max())


def test_q4_k_is_held_as_stored():
    """Q4_K super-blocks read natively (q4_k) decode to gguf's own dequantization exactly, through
    the kernel's layout, and take the file's bytes: 144 a row and super-block."""
    import gguf

    from tests.fixtures.tiny_gguf import _quantize_q4_k

    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 768)).astype(np.float32) * 0.05
    raw = _quantize_q4_k(w.reshape(-1, 256)).reshape(16, -1)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_K).reshape(16, 768)
    rows = quant.blocks_q4_k_native(raw)
    np.testing.assert_array_equal(_dense("q4_k", *rows), ref)
    np.testing.assert_array_equal(np.asarray(quant.dequantize(_qlinear("q4_k", rows))), ref)
    assert quant.nbytes("q4_k", 16, 768) == raw.nbytes
    assert sum(a.nbytes for a in quant.pack(*rows, "q4_k")) == raw.nbytes


@pytest.mark.parametrize("ftype, type_name, fmt", [("Q6_K", "Q6_K", "q6_k"), ("Q5_K_M", "Q5_K", "q5_k"),
                                                    ("Q5_0", "Q5_0", "q5_0"), ("Q5_1", "Q5_1", "q5_1"),
                                                    ("IQ4_NL", "IQ4_NL", "iq4_nl"), ("IQ4_XS", "IQ4_XS", "iq4_xs"),
                                                    ("Q3_K_M", "Q3_K", "q3_k"), ("Q2_K", "Q2_K", "q2_k"),
                                                    ("IQ3_S", "IQ3_S", "iq3_s"), ("IQ3_XXS", "IQ3_XXS", "iq3_xxs"),
                                                    ("IQ2_XXS", "IQ2_XXS", "iq2_xxs"), ("IQ2_XS", "IQ2_XS", "iq2_xs"),
                                                    ("IQ2_S", "IQ2_S", "iq2_s"), ("IQ1_S", "IQ1_S", "iq1_s"),
                                                    ("IQ1_M", "IQ1_M", "iq1_m")])
def test_type_is_held_as_stored(ftype, type_name, fmt):
    """Blocks made by llama.cpp's quantizer, read in their own format, decode to gguf's own
    dequantization exactly through the kernel's layout, in the file's bytes; and where the
    kernel has the format, its product agrees with that dense matrix."""
    import gguf

    raw = _llama_quantized_rows(ftype, type_name, 24, 768)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name]).reshape(24, 768)
    assert quant.NATIVE[type_name][0] == fmt
    rows = quant.NATIVE[type_name][1](raw)
    np.testing.assert_array_equal(_dense(fmt, *rows), ref)
    w = _qlinear(fmt, rows, stacked=True)
    np.testing.assert_array_equal(np.asarray(quant.dequantize(w))[0], ref)
    assert quant.nbytes(fmt, 24, 768) == raw.nbytes == sum(a.nbytes for a in quant.pack(*rows, fmt) if a is not None)
    if fmt in kernels.formats():
        x = np.random.default_rng(5).standard_normal((3, 768)).astype(np.float32)
        got = np.asarray(quant.matmul(jnp.asarray(x), w, jnp.int32(0)))
        want = x @ ref.T
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()


def test_kernel_grids_are_gguf_pys():
    """qmatmul.cc's copies of llama.cpp's grids (ggml-common.h's iq3xxs_grid, iq3s_grid: 4 values an
    entry; iq2xxs_grid, iq2xs_grid, iq2s_grid, iq1s_grid: 8, the first in the low byte) are gguf-py's,
    entry for entry (iq1s_grid's -1 as the byte 0xff)."""
    import re
    from pathlib import Path

    import gguf.quants as gq

    src = (Path(quant.__file__).parent / "kernels" / "qmatmul.cc").read_text()
    for name, cls, width in [("IQ3XXS_GRID", gq.IQ3_XXS, 4), ("IQ3S_GRID", gq.IQ3_S, 4), ("IQ2XXS_GRID", gq.IQ2_XXS, 8),
                             ("IQ2XS_GRID", gq.IQ2_XS, 8), ("IQ2S_GRID", gq.IQ2_S, 8), ("IQ1S_GRID", gq.IQ1_S, 8)]:
        table = re.search(name + r"\[(\d+)\] = \{(.*?)\};", src, re.S)
        assert table, name
        entries = np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]+", table.group(2))], np.uint64)
        assert len(entries) == int(table.group(1)), name
        cls.init_grid()
        want = np.asarray(cls.grid).reshape(len(entries), width).astype(np.int64) & 0xFF
        got = (entries[:, None] >> (np.uint64(8) * np.arange(width, dtype=np.uint64))) & np.uint64(0xFF)
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=name)


def _llama_quantized_rows(ftype, type_name, out, inp):
    """A random [out, inp] matrix quantized by llama.cpp's own quantizer (through a one-tensor
    F32 GGUF and llama_model_quantize's pure mode), as raw block rows."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    import tempfile
    from pathlib import Path

    from engine.gguf_loader import read_gguf
    from tests.engine.test_quant_types import quantize
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    with tempfile.TemporaryDirectory() as tmp:
        src = write_tiny_gguf(Path(tmp) / "f16.gguf", d_model=inp, n_heads=4, n_kv_heads=2, ffn_dim=out * 4,
                              n_layers=1, tensor_type="F16", tied=False, context_length=256)
        dst = quantize(src, Path(tmp) / "q.gguf", ftype)
        t = next(t for t in read_gguf(dst).tensors if t.name == "blk.0.ffn_up.weight")
        assert t.tensor_type.name == type_name, t.tensor_type.name
        return np.array(t.data).reshape(out * 4, -1)[:out]


def test_group_format_keeps_four_bit_only_when_every_member_is():
    assert quant.group_format(["Q4_K", "Q4_K"]) == "q4_k"
    assert quant.group_format(["Q6_K"]) == "q6_k"
    assert quant.group_format(["Q6_K"], ("q8_0", "q4_0", "q4_1", "q4_k")) == "q8_0"  # (no q6_k tile here)
    assert quant.group_format(["Q4_0", "Q4_0"]) == "q4_0"
    assert quant.group_format(["Q4_0", "Q4_1", "Q4_K"]) == "q4_1"
    assert quant.group_format(["Q4_K", "Q6_K"]) == "q8_0"
    assert quant.group_format(["Q3_K", "Q3_K"]) == "q3_k" and quant.group_format(["Q2_K"]) == "q2_k"
    assert quant.group_format(["Q3_K"], tuple(quant.XLA_FORMS)) == "q8_0"  # (the XLA path: no form per 16 values)
    assert quant.group_format(["IQ3_XXS"]) == "iq3_xxs" and quant.group_format(["IQ3_S", "IQ3_S"]) == "iq3_s"
    assert quant.group_format(["IQ3_S"], tuple(quant.XLA_FORMS)) == "q8_0"  # (the XLA path: q8_0)
    assert quant.group_format(["IQ2_XXS"]) == "iq2_xxs" and quant.group_format(["IQ2_S", "IQ2_S"]) == "iq2_s"
    assert quant.group_format(["IQ2_XS", "IQ2_XXS"]) == "q8_0" and quant.group_format(["IQ1_M"]) == "iq1_m"
    assert quant.group_format(["IQ2_XS"], tuple(quant.XLA_FORMS)) == "q8_0"  # (the XLA path: q8_0)
    assert quant.group_format(["F32"]) == "q8_0"


def test_huge_values_are_refused_not_overflowed():
    with pytest.raises(ValueError, match="too large"):
        quant.quantize_q8_0(np.full((1, 32), 1e9, np.float32))


@needs_kernel
@pytest.mark.parametrize("fmt", quant.FORMATS)
@pytest.mark.parametrize("out, inp", [(40, 64), (13, 96), (1000, 320), (256, 320), (48, 96)])
def test_kernel_matches_the_xla_path(fmt, out, inp):
    """Every chunk width of the layout: 40 and 1000 rows (5 and 125 groups) are chunks of one
    group, 13 and 48 rows (2 and 6) of two, 256 rows (32) of four."""
    rng = np.random.default_rng(1)
    inp = _inputs(fmt, inp)
    rows = _random_rows(rng, fmt, out, inp)
    w = _qlinear(fmt, rows, stacked=True)
    dense = _dense(fmt, *rows)
    mm = jax.jit(lambda x, w: quant.matmul(x, w, jnp.int32(0)))
    for C in (1, 3, 8, 64):
        x = rng.standard_normal((C, inp)).astype(np.float32)
        got = np.asarray(mm(jnp.asarray(x), w))
        want = x @ dense.T
        # the kernel rounds x to int8 per 32 values, as llama.cpp does: ~0.5% of the largest output
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max(), (fmt, C)


@needs_kernel
@pytest.mark.parametrize("fmt", quant.FORMATS)
def test_kernel_rows_do_not_depend_on_the_batch(fmt):
    """A row's result is bit-identical in a 1-, 3-, 8- or 64-row call: a token's K/V do not depend
    on whether a decode step, a speculative verify or a prefill chunk computed it."""
    rng = np.random.default_rng(2)
    mm = jax.jit(lambda x, w: quant.matmul(x, w, jnp.int32(0)))
    for out in (520, 528, 512):  # chunks of one, two and four groups
        w = _qlinear(fmt, _random_rows(rng, fmt, out, 256), stacked=True)
        x = rng.standard_normal((64, 256)).astype(np.float32)
        full = np.asarray(mm(jnp.asarray(x), w))
        for lo, hi in ((5, 6), (4, 7), (0, 8), (13, 21)):
            np.testing.assert_array_equal(np.asarray(mm(jnp.asarray(x[lo:hi]), w)), full[lo:hi])


@needs_kernel
def test_layer_index_selects_the_stacked_weight():
    rng = np.random.default_rng(4)
    layers = [_random_rows(rng, "q4_0", 16, 64) for _ in range(3)]
    parts = [quant.pack(*r, "q4_0") for r in layers]
    w = quant.QLinear(jnp.asarray(np.stack([p[0] for p in parts])), jnp.asarray(np.stack([p[1] for p in parts])),
                      None, "q4_0", 16)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    for i in range(3):
        got = np.asarray(quant.matmul(jnp.asarray(x), w, jnp.int32(i)))
        want = x @ _dense("q4_0", *layers[i]).T
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()


def test_the_kernel_builds_here():
    """The install built the kernel's variants here (CI installs what a user's ./run.sh does), and
    the engine runs one of them, not a compile of its own."""
    assert kernels.available(), kernels.status()
    assert kernels.packaged() and kernels.status().startswith("native ") and "compiled" not in kernels.status()


def _runnable_variants() -> list[str]:
    import ctypes
    import platform

    from engine.kernels import variants

    built = kernels.packaged()
    family = variants.VARIANTS.get(variants.machine(platform.machine()), ())
    base = next((v for v in reversed(family) if not v.needs and v.name in built), None)
    if base is None:
        return []
    have = kernels.cpu_features(ctypes.CDLL(str(built[base.name])))
    # The variant this session loaded runs these tests here already; a process of its own would
    # repeat them (~27 s), so only the others get one.
    status = kernels.status()
    return [v.name for v in family if v.name in built and not v.needs - have
            and not (status.startswith(f"native {v.name} (") and "compiled" not in status)]


@pytest.mark.parametrize("variant", _runnable_variants() or ["none"])
def test_every_variant_this_cpu_runs_agrees_with_the_xla_path(variant):
    """Each prebuilt variant the CPU can run, forced in a process of its own, passes this file's
    kernel tests (products of each format against the XLA path, batch invariance) and the native
    attention's (test_forward). The AVX2 build without VNNI once computed wrong products here.
    The variant this session chose is the one these tests ran on in this process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    if variant == "none":
        pytest.skip("no prebuilt variant this CPU runs besides the one this session's own tests ran on")
    env = {**os.environ, "PINWHEEL_KERNEL_VARIANT": variant}
    forward = str(Path(__file__).with_name("test_forward.py"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, forward, "-k",
                        "(kernel or native_attention) and not every_variant and not builds_here"],
                       cwd=Path(__file__).parents[2], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and " passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("type_name, fmt", [("F16", "f16"), ("BF16", "bf16")])
def test_f16_and_bf16_are_held_as_stored(tmp_path, type_name, fmt):
    """An F16 or BF16 file's matrices are held in their own 2 bytes a value where the kernel
    multiplies them (not re-quantized to q8_0): the loaded weights are the file's values exactly,
    and held / file tensor bytes is 1 (up to the F32 norms)."""
    from engine import load_model
    from engine.gguf_loader import check_model_file, read_gguf, weight_bytes
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    if fmt not in (kernels.formats() or ()):
        pytest.skip(f"this kernel build does not multiply {fmt} at speed: {kernels.status()}")
    tensor_types = {f"blk.{i}.{n}.weight": type_name for i in range(2)
                    for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")}
    path = write_tiny_gguf(tmp_path / f"{fmt}.gguf", d_model=64, ffn_dim=128, n_layers=2, tensor_type="F16",
                           embedding_type="F16", tied=False, tensor_types=tensor_types if type_name == "BF16" else None)
    tensors = read_gguf(path).tensors
    types = {t.name: t.tensor_type.name for t in tensors}
    file_bytes = sum(int(t.n_bytes) for t in tensors if t.tensor_type.name != "F32")
    held = weight_bytes(check_model_file(path), types.get)
    assert held <= 1.02 * file_bytes, held / file_bytes
    model = load_model(path)
    assert model.weight_bytes == held
    down = next(t for t in tensors if t.name == "blk.1.ffn_down.weight")
    import gguf

    assert model.params.layers.w_down.fmt == fmt
    want = gguf.quants.dequantize(np.asarray(down.data), down.tensor_type).reshape(64, 128)
    got = np.asarray(quant.dequantize(quant.layer_of(model.params.layers.w_down, 1)))
    np.testing.assert_array_equal(got, want)
