"""Weights as GGUF stores them: 32-value blocks with f16 scales, and the one matrix product.

The engine keeps each matrix in one of llama.cpp's block formats, the file's own where it can:
- `q8_0`: int8 values [..., out, in] and a scale per 32 (Q8_0 tensors as stored; F32, F16, BF16,
  Q5_x and Q6_K quantized to it per 32 values, which keeps them within 1/254 of a block's
  largest value);
- `q4_0`: two 4-bit values per byte [..., out, in/2] (GGUF's order: a block's 16 bytes hold
  values 0-15 in the low nibbles, 16-31 in the high) and a scale: w = d * (q - 8);
- `q4_1`: the same nibbles with a scale and an offset: w = d * q + m (Q4_1 as stored);
- `q4_k`: the same nibbles in llama.cpp's Q4_K super-blocks of 256, as stored: w = d * scale *
  q - dmin * min, with f16 d and dmin per super-block and 6-bit scales and mins per 32 (their
  12 bytes re-laid for the kernel to decode 8 rows at once, see qmatmul.cc). A Q4_K tensor
  merged with Q4_0/Q4_1 ones is held as q4_1 (d * scale and -dmin * min rounded to f16);
- `q6_k`: llama.cpp's Q6_K as stored: w = d * scale * (q - 32), q in 0..63 (its low 4 bits as
  q4_x's nibbles, its high 2 bits beside them), an f16 d per super-block of 256 and an int8
  scale per 16 values. Only where the kernel multiplies it at speed (kernels.formats(): every
  vector build); elsewhere, and in the XLA path, Q6_K is re-quantized to q8_0;
- `q5_0`, `q5_1`, `q5_k`: Q5_0, Q5_1 and Q5_K as stored: q4_0's, q4_1's and q4_k's layouts with
  each value's 5th bit beside the nibbles (q5_0: w = d * (q - 16)). Where the kernel has no tile
  for them they are re-quantized to q8_0; the XLA path holds them as xla_q8 / xla_q8m;
- `iq4_nl`, `iq4_xs`: IQ4_NL and IQ4_XS as stored: 4-bit indices into llama.cpp's 16 non-linear
  values (IQ4_VALUES) in q4_x's nibbles, with q4_0's f16 scale per 32 (iq4_nl) or an f16 d per
  super-block and a 6-bit scale per 32, w = d (ls - 32) value (iq4_xs); re-quantized to q8_0
  where the kernel has no tile for them, held as xla_q8 in the XLA path;
- `q3_k`: llama.cpp's Q3_K as stored: w = d * (ls - 32) * (q - 4), q in 0..7 (its low 2 bits in
  two 32-byte steps a block, its high bit in a third), an f16 d per super-block of 256 and a
  6-bit ls per 16 values (the file's 12 bytes re-packed 12 bits a row and block; qmatmul.cc);
- `q2_k`: llama.cpp's Q2_K as stored: w = d * sc * q - dmin * mn, q in 0..3 (q3_k's low-bit
  steps), f16 d and dmin per super-block and the file's scale bytes, 4-bit sc and mn per 16.
  Like q6_k, both are held so only where the kernel multiplies them at speed (every vector
  build); elsewhere, and in the XLA path, they are re-quantized to q8_0 (a scale per 16 values
  has no xla_q8 form);
- `iq3_xxs`, `iq3_s`: llama.cpp's IQ3_XXS and IQ3_S as stored: per 32 values 8 indices into
  llama.cpp's grids of 4 values (8-bit; 9-bit for iq3_s), a sign per value (iq3_xxs: 7 stored
  signs per 8, the 8th their parity) and a 4-bit scale ls, w = d (2 ls + 1) / 4 (iq3_xxs) or
  d (2 ls + 1) (iq3_s) times the signed grid value, with an f16 d per super-block (qmatmul.cc
  has the byte layout). Held so where the kernel multiplies them at speed; re-quantized to
  q8_0 elsewhere and in the XLA path;
- `iq2_xxs`, `iq2_xs`, `iq2_s`, `iq1_s`, `iq1_m`: llama.cpp's IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and
  IQ1_M as stored: per 32 values 4 indices into llama.cpp's grids of 8 values (8-bit for
  iq2_xxs, 9-bit iq2_xs, 10-bit iq2_s, 11-bit iq1), a scale ls per 16 values (iq2_xxs, iq1_s: per
  32) and an f16 d per super-block; iq2: w = d (2 ls + 1) / 8 times the grid value with its
  sign (iq2_xxs, iq2_xs: 7 stored signs per 8, the 8th their parity), iq1: w = d (2 ls + 1)
  (grid value +- 1/8) (qmatmul.cc has the byte layout). Held so where the kernel multiplies them
  at speed; re-quantized to q8_0 elsewhere and in the XLA path;
- `f16`, `bf16`: F16 and BF16 weights as stored, 2 bytes a value (per group of 8 rows and block
  of 32, [value][row]; no scales: d is empty), multiplied in f32 against x as it is. Held so
  where the kernel multiplies them at speed; re-quantized to q8_0 elsewhere and in the XLA path.
A stacked weight whose layers differ in type is held per format (MixedLinear): each layer in
the narrowest format its own tensors allow; a layer whose merged tensors differ in type (a
Q4_K_M file's Q4_K attn_q/attn_k beside a Q6_K attn_v) keeps each run of them in its own format
(SplitLinear, one product per run).

At load the kernel library re-lays the file's blocks into the kernel's layout itself, in place
and on every core (relay, engine/kernels/relayout.cc); interleave, to_chunks and the blocks_*
readers below are the numpy spelling of the same bytes, used where the library does not (the
XLA path's forms, a format converted to another) and as the reference it is tested against.

`matmul(x, w, layer)` runs the native kernel (engine.kernels) when it is built. Where it is not
(`PINWHEEL_KERNELS=0`, a GPU, a CPU no variant covers) the loader holds each matrix in the XLA
path's own form instead, made once at load (xla_rows, empty_xla), never beside the kernel's:
- `xla_q8`: int8 values [..., out, in] in plain row order and a scale per 32 values
  [..., out, in/32]: w = d * q (q8_0 as stored; q4_0's nibbles unpacked at load to q - 8);
- `xla_q8m`: the same with an offset per 32: w = d * q + m (q4_1 and q4_k, q in 0..15; q4_k's
  d * scale and -dmin * min computed in f32, as the kernel does).
Their scales and offsets are the file's f16 values held as f32 (exactly): an f16 convert inside
the product's loop costs XLA:CPU time (a 32-layer scan of 5120x960 products, 20 -> 30 ms spelled
with engine.half) and, on a CPU without F16C, does not compile at all (engine/half.py).
A matrix wider than XLA_MATVEC_WIDTH inputs is held as `pieces` column blocks, each contiguous:
q [..., pieces, out, in/pieces] (see xla_pieces).
XLA fuses the int8 -> f32 convert and the scale into the dot's loop, so a decode step streams the
int8 bytes once (no nibble unpacking, no f32 copy of a weight); see matmul.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from . import half, kernels

QK = 32
F16_MAX = 65504.0
GROUP = 8  # output rows interleaved together (the kernel's layout, see qmatmul.cc)
QK_K = 256  # values per super-block (q4_k)
FORMATS = ("q8_0", "q4_0", "q4_1", "q4_k", "q6_k", "q5_0", "q5_1", "q5_k", "iq4_nl", "iq4_xs", "q3_k", "q2_k",
           "iq3_xxs", "iq3_s", "f16", "bf16", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m")
IQ3 = ("iq3_xxs", "iq3_s")
IQ12 = ("iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m")  # grids of 8 values, a scale per 16 (qmatmul.cc)
FLOAT = ("f16", "bf16")
FIVE_BIT = {"q5_0": "q4_0", "q5_1": "q4_1", "q5_k": "q4_k"}  # each 5-bit format and its 4-bit base
IQ4 = ("iq4_nl", "iq4_xs")
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)
# The XLA path's form of each kernel format (see the module doc): int8 values in row order.
XLA_FORMS = {"q8_0": "xla_q8", "q4_0": "xla_q8", "q4_1": "xla_q8m", "q4_k": "xla_q8m",
             "q5_0": "xla_q8", "q5_1": "xla_q8m", "q5_k": "xla_q8m", "iq4_nl": "xla_q8", "iq4_xs": "xla_q8"}
_BLOCK_BYTES = {"q8_0": QK * GROUP, "q4_0": QK // 2 * GROUP, "q4_1": QK // 2 * GROUP, "q4_k": QK // 2 * GROUP,
                "q6_k": 3 * QK // 4 * GROUP, "q5_0": 5 * QK // 8 * GROUP, "q5_1": 5 * QK // 8 * GROUP,
                "q5_k": 5 * QK // 8 * GROUP, "iq4_nl": QK // 2 * GROUP, "iq4_xs": QK // 2 * GROUP,
                "q3_k": 3 * QK // 8 * GROUP, "q2_k": QK // 4 * GROUP, "iq3_xxs": 12 * GROUP, "iq3_s": 27 * GROUP // 2,
                "f16": 2 * QK * GROUP, "bf16": 2 * QK * GROUP, "iq2_xxs": 8 * GROUP, "iq2_xs": 9 * GROUP,
                "iq2_s": 10 * GROUP, "iq1_s": 6 * GROUP, "iq1_m": 27 * GROUP // 4}
# iq3's sign words' offset in a group's block (iq3_s: after the 9th bits), and its row-layout widths
_IQ3_SIGNS = {"iq3_xxs": 64, "iq3_s": 72}


def _iq3_grid(fmt: str) -> np.ndarray:
    """llama.cpp's grid of IQ3_XXS (256 entries) or IQ3_S (512): uint8 [n, 4], as gguf-py has it."""
    import gguf.quants

    cls = gguf.quants.IQ3_XXS if fmt == "iq3_xxs" else gguf.quants.IQ3_S
    if cls.grid is None:
        cls.init_grid()
    return np.asarray(cls.grid).reshape(-1, 4).astype(np.uint8)


def _iq12_grid(fmt: str) -> np.ndarray:
    """llama.cpp's grid of IQ2_XXS (256 entries), IQ2_XS (512), IQ2_S (1024) or IQ1_S / IQ1_M (2048):
    int8 [n, 8], as gguf-py has it."""
    import gguf.quants

    cls = {"iq2_xxs": gguf.quants.IQ2_XXS, "iq2_xs": gguf.quants.IQ2_XS, "iq2_s": gguf.quants.IQ2_S}.get(fmt, gguf.quants.IQ1_S)
    if cls.grid is None:
        cls.init_grid()
    return np.asarray(cls.grid).reshape(-1, 8).astype(np.int8)


# q3_k's and q2_k's per-group, per-super-block scale bytes (m)
_K3_M, _K2_M = 12 * GROUP, 16 * GROUP
# q4_k's per-group, per-super-block scale data: d's f16 (d and dmin of 8 rows) and m's bytes
_K_D, _K_M = 2 * GROUP, 12 * GROUP


@jax.tree_util.register_dataclass
@dataclass
class QLinear:
    """A block-quantized weight [..., out, in] in the kernel's layout: output rows in groups of 8,
    their blocks interleaved 4 values at a time, and the groups in chunks of K (chunk_width)
    stored block by block (qmatmul.cc says why).

    q: uint8 [..., out/8/K, in/32, K * 256] (q8_0: each value + 128) or [..., K * 128] (4-bit);
    d: f16 [..., out/8/K, in/32, K * 8]; m: the same, q4_1 only; rows: the real output count
    (the last group is padded with zero rows when it is not a multiple of 8). q4_k: d f16
    [..., out/8/K, in/256, K * 16] (d of the 8 rows, then dmin), m uint8 [..., in/256, K * 96]
    (the 6-bit scales and mins, qmatmul.cc's layout). q6_k: q [..., in/32, K * 192] (nibbles, then
    the high 2 bits), d f16 [..., in/256, K * 8], m int8 [..., in/256, K * 128] (the scales).
    q3_k: q [..., in/32, K * 96] (low 2 bits, then the high bit), d f16 [..., in/256, K * 8], m
    uint8 [..., in/256, K * 96] (the 6-bit scales); q2_k: q [..., in/32, K * 64], d f16
    [..., in/256, K * 16] (d of the 8 rows, then dmin), m uint8 [..., in/256, K * 128].

    In the XLA path's forms (fmt xla_q8 / xla_q8m, see the module doc): q int8 [..., out, in],
    d (and m) f32 [..., out, in/32], rows = out; with pieces > 1, [..., pieces, out, in/pieces]
    and [..., pieces, out, in/pieces/32]."""

    q: jax.Array
    d: jax.Array
    m: jax.Array | None = None
    fmt: str = field(default="q8_0", metadata=dict(static=True))
    rows: int = field(default=0, metadata=dict(static=True))
    pieces: int = field(default=1, metadata=dict(static=True))  # XLA forms: column blocks (xla_pieces)

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.q, self.d, self.m) if a is not None)


@jax.tree_util.register_dataclass
@dataclass
class SplitLinear:
    """A stacked weight whose output rows come in runs of different formats: the tensors merged
    into one product (q, k and v) are Q4_K and Q6_K in some layers of a Q4_K_M file, and one
    format for all of them would be q8_0. Each run is a QLinear over the same layers; the product
    is theirs side by side (a kernel call each, the norm fused into both)."""

    pieces: tuple[QLinear, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.pieces)


@jax.tree_util.register_dataclass
@dataclass
class MixedLinear:
    """A stacked weight whose layers come in more than one format: llama.cpp's _M and _L
    quantizations give some layers' attn_v and ffn_down more bits (Q6_K among Q4_K), and one
    format for the whole stack would hold every layer at the widest (q8_0). Each format's layers
    are a QLinear of their own, stacked in layer order; layer i is parts[part[i]][index[i]].
    matmul picks the part with a switch on the layer (one kernel call either way)."""

    parts: tuple[QLinear | SplitLinear, ...]
    part: tuple[int, ...] = field(metadata=dict(static=True))
    index: tuple[int, ...] = field(metadata=dict(static=True))

    @property
    def rows(self) -> int:
        return self.parts[0].rows

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def layers_of(self, p: int) -> tuple[int, ...]:
        """The model layers part p holds, in its own order."""
        return tuple(i for i, k in enumerate(self.part) if k == p)


def mixed(parts: list, formats: list) -> QLinear | SplitLinear | MixedLinear:
    """One stacked weight from per-format stacks: parts[k] holds, in order, the layers whose entry
    in formats is the k-th distinct format (in order of first appearance); a single part is
    returned as it is."""
    if len(parts) == 1:
        return parts[0]
    order = list(dict.fromkeys(formats))
    part = tuple(order.index(f) for f in formats)
    index = tuple(part[:i].count(part[i]) for i in range(len(part)))
    return MixedLinear(tuple(parts), part, index)


def layer_of(w, i: int):
    """Layer i (a Python int) of a stacked weight, as a QLinear (or SplitLinear) without the
    layer axis."""
    if isinstance(w, MixedLinear):
        w, i = w.parts[w.part[i]], w.index[i]
    if isinstance(w, SplitLinear):
        return SplitLinear(tuple(layer_of(p, i) for p in w.pieces))
    return QLinear(w.q[i], w.d[i], None if w.m is None else w.m[i], w.fmt, w.rows, w.pieces)


def chunk_width(groups: int) -> int:
    """Groups per chunk of the kernel's layout: 4, else 2 or 1 (a group count not a multiple of 4)."""
    return 4 if groups % 4 == 0 else 2 if groups % 2 == 0 else 1


def to_chunks(a: np.ndarray | None, step: int = 256) -> np.ndarray | None:
    """[..., G, nb, W] in group order -> the chunked layout [..., G/K, nb, K * W], in place: a
    chunk's bytes stay where they were, only their order changes, `step` chunks at a time (so
    loading never holds a second copy of a weight)."""
    if a is None:
        return None
    a = np.ascontiguousarray(a)  # the loader's arrays already are: no copy
    *lead, G, nb, W = a.shape
    K = chunk_width(G)
    if a.size == 0:  # (f16's empty scales)
        return a.reshape(*lead, G // K, nb, K * W)
    flat = a.reshape(-1, G // K, K, nb, W)  # a view
    for i in range(flat.shape[0]):
        for c0 in range(0, G // K, step):
            part = flat[i, c0 : c0 + step]
            part[...] = np.ascontiguousarray(part.transpose(0, 2, 1, 3)).reshape(part.shape)
    return a.reshape(*lead, G // K, nb, K * W)


def _groups(a: jax.Array, width: int) -> jax.Array:
    """The chunked layout [..., G/K, nb, K * width] -> group order [..., G, nb, width]."""
    *lead, gk, nb, kw = a.shape
    k = kw // width
    return jnp.moveaxis(a.reshape(*lead, gk, nb, k, width), -2, -3).reshape(*lead, gk * k, nb, width)


def _values(q: jax.Array, fmt: str) -> jax.Array:
    """Integer values of interleaved groups [..., nb, bytes] -> f32 [..., 8 rows, nb, 32]."""
    *lead, nb, _ = q.shape
    if fmt == "q8_0":  # [nb, 8 steps, 8 rows, 4]
        v = q.reshape(*lead, nb, 8, GROUP, 4).astype(jnp.float32) - 128.0
        v = jnp.moveaxis(v, -2, -4)  # [8 rows, nb, 8 steps, 4]
    elif fmt in FIVE_BIT:  # the nibbles, plus 16 x the 5th bit: [nb, 8 rows, 4] at bit 4 half + k
        v = _values(q[..., : QK // 2 * GROUP], "q4_1")
        hb = q[..., QK // 2 * GROUP :].reshape(*lead, nb, 1, 1, GROUP, 4)
        shift = (4 * jnp.arange(2, dtype=jnp.uint8)[:, None] + jnp.arange(4, dtype=jnp.uint8)).reshape(2, 4, 1, 1)
        hi = jnp.moveaxis(((hb >> shift) & 1).astype(jnp.float32), -2, -5)  # [8 rows, nb, 2, 4, 4]
        return v + 16.0 * hi.reshape(*lead, GROUP, nb, QK) - (16.0 if fmt == "q5_0" else 0.0)
    elif fmt == "q6_k":  # the nibbles, plus 16 x the high 2 bits: [nb, half, 8 rows, 4] at bits 2k
        v = _values(q[..., : QK // 2 * GROUP], "q4_1")
        hb = q[..., QK // 2 * GROUP :].reshape(*lead, nb, 2, 1, GROUP, 4)
        hi = (hb >> (2 * jnp.arange(4, dtype=jnp.uint8)).reshape(4, 1, 1)) & 3  # [nb, 2, 4 steps, 8, 4]
        hi = jnp.moveaxis(hi.astype(jnp.float32), -2, -5)  # [8 rows, nb, 2, 4, 4]
        return v + 16.0 * hi.reshape(*lead, GROUP, nb, QK) - 32.0
    elif fmt in ("q3_k", "q2_k"):  # 2 bits at bits 2k of step h's lane (row, j): value 16h + 4k + j
        c = q[..., : QK // 4 * GROUP].reshape(*lead, nb, 2, 1, GROUP, 4)
        v = (c >> (2 * jnp.arange(4, dtype=jnp.uint8)).reshape(4, 1, 1)) & 3  # [nb, 2, 4 steps, 8, 4]
        v = jnp.moveaxis(v.astype(jnp.float32), -2, -5)  # [8 rows, nb, 2, 4, 4]
        if fmt == "q3_k":  # plus 4 x the high bit (value 4k + j at bit k, 16 + 4k + j at 4 + k), minus 4
            hb = q[..., QK // 4 * GROUP :].reshape(*lead, nb, 1, 1, GROUP, 4)
            shift = (4 * jnp.arange(2, dtype=jnp.uint8)[:, None] + jnp.arange(4, dtype=jnp.uint8)).reshape(2, 4, 1, 1)
            hi = jnp.moveaxis(((hb >> shift) & 1).astype(jnp.float32), -2, -5)  # [8 rows, nb, 2, 4, 4]
            v = v + 4.0 * hi - 4.0
    elif fmt in FLOAT:  # [nb, value j, 8 rows] of 16-bit floats
        h = jax.lax.bitcast_convert_type(q.reshape(*lead, nb, QK, GROUP, 2), jnp.uint16)
        f = (jax.lax.bitcast_convert_type(h, jnp.float16) if fmt == "f16"
             else jax.lax.bitcast_convert_type(h, jnp.bfloat16)).astype(jnp.float32)
        return jnp.moveaxis(jnp.moveaxis(f, -1, -2), -2, -3)  # [8 rows, nb, 32]
    elif fmt in IQ3:  # grid entries [nb, step, row, 4] with each value's sign (bit v of the row's word)
        idx = q[..., : 8 * GROUP].reshape(*lead, nb, 8, GROUP).astype(jnp.int32)
        if fmt == "iq3_s":  # the 9th bits: bit k of row's byte
            hb = q[..., 8 * GROUP : 9 * GROUP].reshape(*lead, nb, 1, GROUP).astype(jnp.int32)
            idx = idx | (((hb >> jnp.arange(8, dtype=jnp.int32).reshape(8, 1)) & 1) << 8)
        g = jnp.asarray(_iq3_grid(fmt), jnp.float32)[idx]  # [nb, step, row, 4]
        g = jnp.moveaxis(g, -2, -3).reshape(*lead, nb, GROUP, QK)  # [nb, row, 32]
        at = _IQ3_SIGNS[fmt]
        sw = q[..., at : at + 4 * GROUP].reshape(*lead, nb, GROUP, 4).astype(jnp.int32)  # [nb, row, byte l]
        if fmt == "iq3_xxs":  # 7 stored signs, the 8th their parity
            b = sw & 0x7F
            p = b ^ (b >> 4)
            p = p ^ (p >> 2)
            sw = b | ((p ^ (p >> 1)) & 1) << 7
        neg = ((sw[..., None] >> jnp.arange(8, dtype=jnp.int32)) & 1).reshape(*lead, nb, GROUP, QK)
        return jnp.moveaxis(g * (1 - 2 * neg).astype(jnp.float32), -2, -3)
    elif fmt in IQ12:  # w8 [nb, row, 32]: grid entries by index, each value's sign (iq2) or 8 g +- 1 (iq1)
        i32 = jnp.int32
        idx = q[..., : 4 * GROUP].reshape(*lead, nb, 4, GROUP).astype(i32)  # [nb, l, row]
        l = jnp.arange(4, dtype=i32).reshape(4, 1)
        one = fmt in ("iq1_s", "iq1_m")
        if one:  # the 16-bit qh words: index bits 8-10 (and ls), the deltas' signs
            at = 32 if fmt == "iq1_s" else 38
            qh = jax.lax.bitcast_convert_type(q[..., at : at + 2 * GROUP].reshape(*lead, nb, GROUP, 2), jnp.uint16)
            qh = qh.astype(i32)[..., None, :]  # [nb, 1, row]
            idx = idx | (((qh >> ((3 if fmt == "iq1_s" else 4) * l)) & 7) << 8)
            neg = jnp.broadcast_to((qh >> 15) & 1 if fmt == "iq1_s" else (qh >> (4 * l + 3)) & 1, idx.shape)
        else:
            sw = q[..., 32:64].reshape(*lead, nb, GROUP, 4).astype(i32)  # [nb, row, byte l]
            if fmt == "iq2_xs":  # index l's 9th bit at bit 7 of sign byte l
                idx = idx | (jnp.swapaxes((sw >> 7) & 1, -1, -2) << 8)
            if fmt == "iq2_s":  # bits 8-9 at bits 2l of the row's qh byte
                qh = q[..., 64:72].reshape(*lead, nb, 1, GROUP).astype(i32)
                idx = idx | (((qh >> (2 * l)) & 3) << 8)
            else:  # 7 stored signs, the 8th their parity
                b = sw & 0x7F
                p = b ^ (b >> 4)
                p = p ^ (p >> 2)
                sw = b | ((p ^ (p >> 1)) & 1) << 7
        g = jnp.asarray(_iq12_grid(fmt), jnp.float32)[idx]  # [nb, l, row, 8]
        if one:
            g = 8.0 * g + (1 - 2 * neg).astype(jnp.float32)[..., None]
        g = jnp.moveaxis(g, -2, -3).reshape(*lead, nb, GROUP, QK)  # [nb, row, 32]
        if not one:
            neg = ((sw[..., None] >> jnp.arange(8, dtype=i32)) & 1).reshape(*lead, nb, GROUP, QK)
            g = g * (1 - 2 * neg).astype(jnp.float32)
        return jnp.moveaxis(g, -2, -3)
    else:  # [nb, 4 steps, 8 rows, 4]: low nibbles values 4k+j, high 16+4k+j
        b = q.reshape(*lead, nb, 4, GROUP, 4)
        v = jnp.stack([b & 0x0F, b >> 4], axis=-4).astype(jnp.float32)  # [nb, 2, 4, 8, 4]
        v = jnp.moveaxis(v, -2, -5)  # [8 rows, nb, 2, 4, 4]
        if fmt == "q4_0":
            v = v - 8.0
        if fmt in IQ4:  # index -> value
            v = jnp.asarray(IQ4_VALUES, jnp.float32)[v.astype(jnp.int32)]
    return v.reshape(*lead, GROUP, nb, QK)


def _scales(a: jax.Array) -> jax.Array:
    """[..., nb, 8 rows] f16 -> f32 [..., 8 rows, nb, 1]."""
    return jnp.moveaxis(half.to_f32(a), -1, -2)[..., None]


def _k_bits(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """q4_k's scale bytes [..., nsb, 96] -> 6-bit scales and mins, int32 [..., 8 rows, nsb, 8]."""
    lo = m[..., :64].reshape(*m.shape[:-1], 8, GROUP).astype(jnp.uint32)  # [nsb, block, row]
    hw = jax.lax.bitcast_convert_type(m[..., 64:].reshape(*m.shape[:-1], 8, 4), jnp.uint32)
    shift = 2 * jnp.arange(GROUP, dtype=jnp.uint32)
    hs = (hw[..., None] >> shift) & 3  # [nsb, block, row]
    hm = (hw[..., None] >> (shift + 16)) & 3
    sc, mn = (lo & 15) | (hs << 4), (lo >> 4) | (hm << 4)
    return (jnp.moveaxis(a.astype(jnp.int32), -1, -3) for a in (sc, mn))


def _k_scales(d: jax.Array, m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """q4_k's d [..., nsb, 16] f16 and scale bytes [..., nsb, 96] -> each block's d * scale and
    -dmin * min, f32 [..., 8 rows, nb, 1] (the kernel's products, rounded as it rounds them)."""
    sc, mn = _k_bits(m)  # [..., 8 rows, nsb, 8 blocks]
    dd = jnp.moveaxis(half.to_f32(d).reshape(*d.shape[:-1], 2, GROUP), -1, -3)  # [8 rows, nsb, 2]
    dw = dd[..., 0:1] * sc.astype(jnp.float32)
    coef = dd[..., 1:2] * (-mn).astype(jnp.float32)
    return dw.reshape(*dw.shape[:-2], -1, 1), coef.reshape(*coef.shape[:-2], -1, 1)


def _k6_scales(d: jax.Array, m: jax.Array) -> jax.Array:
    """q6_k's d [..., nsb, 8] f16 and scales [..., nsb, 128] int8 -> each 16 values' d * scale,
    f32 [..., 8 rows, nb, 32] (repeated over its 16 values)."""
    sc = m.reshape(*m.shape[:-1], 16, GROUP).astype(jnp.float32)  # [nsb, block * 2 + half, row]
    s = half.to_f32(d)[..., None, :] * sc
    s = jnp.moveaxis(s, -1, -3)  # [8 rows, nsb, 16]
    return jnp.repeat(s.reshape(*s.shape[:-2], -1), QK // 2, axis=-1).reshape(*s.shape[:-2], -1, QK)


def _per16(s: jax.Array) -> jax.Array:
    """Scales [..., nsb, 16, 8 rows] (one per 16 values) -> f32 [..., 8 rows, nb, 32]."""
    s = jnp.moveaxis(s, -1, -3)  # [8 rows, nsb, 16]
    return jnp.repeat(s.reshape(*s.shape[:-2], -1), QK // 2, axis=-1).reshape(*s.shape[:-2], -1, QK)


def _k3_scales(d: jax.Array, m: jax.Array) -> jax.Array:
    """q3_k's d [..., nsb, 8] f16 and 6-bit scales [..., nsb, 96] -> each 16 values' d (ls - 32),
    f32 [..., 8 rows, nb, 32] (repeated over its 16 values)."""
    b = m.reshape(*m.shape[:-1], 8, 4, 3).astype(jnp.int32)  # [nsb, block, row pair, 3 bytes]
    v = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16  # rows 2p and 2p + 1: 12 bits each
    v = jnp.stack([v & 0xFFF, v >> 12], axis=-1).reshape(*v.shape[:-1], GROUP)  # [nsb, block, row]
    ls = jnp.stack([v & 63, v >> 6], axis=-2).reshape(*v.shape[:-2], 16, GROUP)  # [nsb, scale, row]
    return _per16(half.to_f32(d)[..., None, :] * (ls - 32).astype(jnp.float32))


def _k2_scales(d: jax.Array, m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """q2_k's d [..., nsb, 16] f16 (d, dmin) and scale bytes [..., nsb, 128] -> each 16 values'
    d * sc and -dmin * mn, f32 [..., 8 rows, nb, 32] each."""
    b = m.reshape(*m.shape[:-1], 16, GROUP).astype(jnp.int32)  # [nsb, scale, row]
    dd = half.to_f32(d).reshape(*d.shape[:-1], 2, GROUP)  # [nsb, d | dmin, row]
    return (_per16(dd[..., 0:1, :] * (b & 15).astype(jnp.float32)),
            _per16(dd[..., 1:2, :] * (-(b >> 4)).astype(jnp.float32)))


def _iq3_scales(q: jax.Array, d: jax.Array, fmt: str) -> jax.Array:
    """iq3's groups q [..., nb, bytes] and d [..., nsb, 8] f16 -> each block's db, f32 [..., 8 rows,
    nb, 1]: d (2 ls + 1) / 4 (iq3_xxs), d (2 ls + 1) (iq3_s), as the kernel forms them."""
    *lead, nb, _ = q.shape
    if fmt == "iq3_xxs":  # ls's bit l at bit 7 of sign byte l
        sw = q[..., 64 : 64 + 4 * GROUP].reshape(*lead, nb, GROUP, 4).astype(jnp.int32)
        ls = (((sw >> 7) & 1) << jnp.arange(4, dtype=jnp.int32)).sum(-1)  # [nb, row]
    else:  # rows 2i and 2i + 1 in byte 104 + i's low and high nibble
        b = q[..., 104:108].astype(jnp.int32)
        ls = jnp.stack([b & 15, b >> 4], axis=-1).reshape(*lead, nb, GROUP)
    dd = jnp.repeat(half.to_f32(d), QK_K // QK, axis=-2)  # [nb, row]
    db = dd * (2 * ls + 1).astype(jnp.float32)
    if fmt == "iq3_xxs":
        db = db * 0.25
    return jnp.moveaxis(db, -1, -2)[..., None]


def _iq12_scales(q: jax.Array, d: jax.Array, fmt: str) -> jax.Array:
    """iq2's and iq1's groups q [..., nb, bytes] and d [..., nsb, 8] f16 -> each value's d / 8 (2 ls + 1)
    (ls of its 16), f32 [..., 8 rows, nb, 32]: the scale of _values' w8, exact (11 bits times 5)."""
    *lead, nb, _ = q.shape
    i32 = jnp.int32
    if fmt == "iq2_xxs":  # ls's bit l at bit 7 of sign byte l
        sw = q[..., 32:64].reshape(*lead, nb, GROUP, 4).astype(i32)
        ls = (((sw >> 7) & 1) << jnp.arange(4, dtype=i32)).sum(-1)
        ls = jnp.stack([ls, ls], axis=-1)
    elif fmt in ("iq2_xs", "iq2_s"):  # a byte a row: the first 16's ls low, the second's high
        at = 64 if fmt == "iq2_xs" else 72
        b = q[..., at : at + GROUP].astype(i32)
        ls = jnp.stack([b & 15, b >> 4], axis=-1)
    elif fmt == "iq1_s":  # bits 12-14 of the row's qh
        qh = jax.lax.bitcast_convert_type(q[..., 32:48].reshape(*lead, nb, GROUP, 2), jnp.uint16).astype(i32)
        ls = (qh >> 12) & 7
        ls = jnp.stack([ls, ls], axis=-1)
    else:  # iq1_m: rows 4h..4h+3's 6 bits at bit 6 (row - 4h) of the 24-bit word at 32 + 3h
        b = q[..., 32:38].reshape(*lead, nb, 2, 3).astype(i32)
        v = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16
        ls6 = ((v[..., None] >> (6 * jnp.arange(4, dtype=i32))) & 63).reshape(*lead, nb, GROUP)
        ls = jnp.stack([ls6 & 7, ls6 >> 3], axis=-1)
    dd = jnp.repeat(half.to_f32(d), QK_K // QK, axis=-2) * 0.125  # [nb, row]
    s = jnp.repeat(dd[..., None] * (2 * ls + 1).astype(jnp.float32), QK // 2, axis=-1)  # [nb, row, 32]
    return jnp.moveaxis(s, -2, -3)


def _xs_scales(d: jax.Array, m: jax.Array) -> jax.Array:
    """iq4_xs's d [..., nsb, 8] f16 and 6-bit scales [..., nsb, 48] -> each block's d (ls - 32),
    f32 [..., 8 rows, nb, 1]."""
    lo = m[..., :32].reshape(*m.shape[:-1], 8, 1, 4)  # [nsb, block, 1, row & 3]
    lo = (lo >> jnp.array([0, 4], jnp.uint8).reshape(2, 1)) & 15  # [nsb, block, row >> 2, row & 3]
    hw = jax.lax.bitcast_convert_type(m[..., 32:].reshape(*m.shape[:-1], 8, 2), jnp.uint16)  # [nsb, block]
    hi = (hw[..., None] >> (2 * jnp.arange(GROUP, dtype=jnp.uint16))) & 3  # [nsb, block, row]
    ls = lo.reshape(*lo.shape[:-2], GROUP).astype(jnp.int32) | (hi.astype(jnp.int32) << 4)
    s = half.to_f32(d)[..., None, :] * (ls - 32).astype(jnp.float32)  # [nsb, block, row]
    s = jnp.moveaxis(s, -1, -3)  # [8 rows, nsb, block]
    return s.reshape(*s.shape[:-2], -1, 1)


def is_xla_form(w) -> bool:
    if isinstance(w, MixedLinear):
        return is_xla_form(w.parts[0])  # (every part is in one path's form)
    if isinstance(w, SplitLinear):
        return is_xla_form(w.pieces[0])
    return w.fmt in ("xla_q8", "xla_q8m")


def _dequantize_xla(q: jax.Array, d: jax.Array, m: jax.Array | None) -> jax.Array:
    """The XLA form's blocks -> f32 [..., out, in]: elementwise, so XLA fuses it into its consumer."""
    *lead, out, inp = q.shape
    v = q.astype(jnp.float32).reshape(*lead, out, inp // QK, QK) * d.astype(jnp.float32)[..., None]
    if m is not None:
        v = v + m.astype(jnp.float32)[..., None]
    return v.reshape(*lead, out, inp)


def _joined(v: jax.Array, pieces: int) -> jax.Array:
    """[..., pieces, out, w] -> [..., out, pieces * w] (the column blocks side by side)."""
    if pieces == 1:
        return v
    v = jnp.moveaxis(v, -3, -2)
    return v.reshape(*v.shape[:-2], -1)


def dequantize(w: QLinear | MixedLinear) -> jax.Array:
    """f32 [..., out, in] (XLA: the fallback product)."""
    if isinstance(w, MixedLinear):
        return jnp.stack([dequantize(layer_of(w, i)) for i in range(len(w.part))])
    if isinstance(w, SplitLinear):
        return jnp.concatenate([dequantize(p) for p in w.pieces], axis=-2)
    if is_xla_form(w):
        return _joined(_dequantize_xla(w.q, w.d, w.m), w.pieces)
    v = _values(_groups(w.q, _BLOCK_BYTES[w.fmt]), w.fmt)
    if w.fmt in ("q4_k", "q5_k"):
        dw, coef = _k_scales(_groups(w.d, _K_D), _groups(w.m, _K_M))
        v = v * dw + coef
    elif w.fmt == "q6_k":
        v = v * _k6_scales(_groups(w.d, GROUP), _groups(w.m, 16 * GROUP))
    elif w.fmt == "iq4_xs":
        v = v * _xs_scales(_groups(w.d, GROUP), _groups(w.m, 6 * GROUP))
    elif w.fmt == "q3_k":
        v = v * _k3_scales(_groups(w.d, GROUP), _groups(w.m, _K3_M))
    elif w.fmt == "q2_k":
        dw, coef = _k2_scales(_groups(w.d, _K_D), _groups(w.m, _K2_M))
        v = v * dw + coef
    elif w.fmt in IQ3:
        v = v * _iq3_scales(_groups(w.q, _BLOCK_BYTES[w.fmt]), _groups(w.d, GROUP), w.fmt)
    elif w.fmt in IQ12:
        v = v * _iq12_scales(_groups(w.q, _BLOCK_BYTES[w.fmt]), _groups(w.d, GROUP), w.fmt)
    elif w.fmt in FLOAT:
        pass  # (the values themselves)
    else:
        v = v * _scales(_groups(w.d, GROUP))
    if w.fmt in ("q4_1", "q5_1"):
        v = v + _scales(_groups(w.m, GROUP))
    *lead, G, _, nb, _ = v.shape
    return v.reshape(*lead, G * GROUP, nb * QK)[..., : w.rows or G * GROUP, :]


def take_rows(w: QLinear, rows: jax.Array) -> jax.Array:
    """Rows of a 2-D weight as f32 [len(rows), in] (the embedding lookup)."""
    if is_xla_form(w):
        pick = (lambda a: None if a is None else a[rows]) if w.pieces == 1 else (  # noqa: E731
            lambda a: None if a is None else a[:, rows])
        return _joined(_dequantize_xla(pick(w.q), pick(w.d), pick(w.m)), w.pieces)
    k = w.q.shape[-1] // _BLOCK_BYTES[w.fmt]
    g, r, i = rows // GROUP, rows % GROUP, jnp.arange(rows.shape[0])

    def group(a):  # [C, nb, width]: each row's group, out of its chunk
        c = a[g // k]
        return c.reshape(*c.shape[:-1], k, -1)[i, :, g % k]

    if w.fmt in ("q4_k", "q5_k"):
        dw, coef = _k_scales(group(w.d), group(w.m))
        v = _values(group(w.q), w.fmt)[i, r] * dw[i, r] + coef[i, r]
    elif w.fmt == "q6_k":
        v = _values(group(w.q), w.fmt)[i, r] * _k6_scales(group(w.d), group(w.m))[i, r]
    elif w.fmt == "iq4_xs":
        v = _values(group(w.q), w.fmt)[i, r] * _xs_scales(group(w.d), group(w.m))[i, r]
    elif w.fmt == "q3_k":
        v = _values(group(w.q), w.fmt)[i, r] * _k3_scales(group(w.d), group(w.m))[i, r]
    elif w.fmt == "q2_k":
        dw, coef = _k2_scales(group(w.d), group(w.m))
        v = _values(group(w.q), w.fmt)[i, r] * dw[i, r] + coef[i, r]
    elif w.fmt in IQ3:
        v = _values(group(w.q), w.fmt)[i, r] * _iq3_scales(group(w.q), group(w.d), w.fmt)[i, r]
    elif w.fmt in IQ12:
        v = _values(group(w.q), w.fmt)[i, r] * _iq12_scales(group(w.q), group(w.d), w.fmt)[i, r]
    elif w.fmt in FLOAT:
        v = _values(group(w.q), w.fmt)[i, r]
    else:
        v = _values(group(w.q), w.fmt)[i, r] * _scales(group(w.d))[i, r]  # [C, nb, 32]
    if w.fmt in ("q4_1", "q5_1"):
        v = v + _scales(group(w.m))[i, r]
    return v.reshape(rows.shape[0], -1)


def rms_norm(x: jax.Array, g: jax.Array, eps: float) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rms_norm_rows(x: jax.Array, g: jax.Array, eps: float) -> jax.Array:
    """rms_norm with the sum of squares as a fixed tree of elementwise adds: XLA's reductions
    may vectorize differently for 1 row and for 64, and a one-ulp difference flips an int8
    rounding downstream; adds of halves give every row the same bits whatever the row count
    (exact speculation and chunking for the Q/K and post norms, as the kernel's fused norm)."""
    n = x.shape[-1]
    sq = x * x
    width = 1 << max(n - 1, 0).bit_length()
    if width != n:
        sq = jnp.concatenate([sq, jnp.zeros(sq.shape[:-1] + (width - n,), sq.dtype)], axis=-1)
    while width > 1:
        width //= 2
        sq = sq[..., :width] + sq[..., width:]
    return x * jax.lax.rsqrt(sq / jnp.float32(n) + jnp.float32(eps)) * g


def matmul(x: jax.Array, w: QLinear | MixedLinear, layer: jax.Array | None = None, norm: jax.Array | None = None,
           eps: float = 1e-5) -> jax.Array:
    """rms_norm(x, norm[layer]) (when norm is given) @ w[layer].T -> [C, out] f32, x [C, in] f32;
    w (and norm) are stacked [L, ...] when layer is given. The kernel does the norm itself, so
    that it too is computed the same way for every row count."""
    if isinstance(w, MixedLinear):
        return _matmul_mixed(x, w, layer, norm, eps)
    if isinstance(w, SplitLinear):
        return jnp.concatenate([matmul(x, p, layer, norm, eps) for p in w.pieces], axis=-1)
    if is_xla_form(w):
        return _matmul_xla(x, w, layer, norm, eps)
    if kernels.available():
        lift = (lambda a: a) if layer is not None else (lambda a: None if a is None else a[None])  # noqa: E731
        q, d, m = lift(w.q), lift(w.d), lift(w.m)
        g = jnp.zeros((0,), jnp.float32) if norm is None else lift(norm)
        idx = jnp.asarray(0 if layer is None else layer, jnp.int32)
        out = jax.ShapeDtypeStruct((x.shape[0], q.shape[-3] * (q.shape[-1] // _BLOCK_BYTES[w.fmt]) * GROUP),
                                   jnp.float32)
        y = jax.ffi.ffi_call(f"pinwheel_{w.fmt}", out)(x, q, d, d if m is None else m, idx, g, eps=np.float32(eps))
        return y[:, : w.rows] if w.rows and w.rows != y.shape[1] else y
    if layer is not None:
        w = QLinear(w.q[layer], w.d[layer], None if w.m is None else w.m[layer], w.fmt, w.rows)
        norm = None if norm is None else norm[layer]
    if norm is not None:
        x = rms_norm(x, norm, eps)
    return jnp.dot(x, dequantize(w).T, preferred_element_type=jnp.float32)


def _matmul_mixed(x: jax.Array, w: MixedLinear, layer: jax.Array, norm: jax.Array | None, eps: float) -> jax.Array:
    """matmul for a stack of mixed formats: a switch on the layer's part, whose branch multiplies
    by that part's layer. The norm goes along as the part's own stack of the layers' norms (a few
    KB gathered), so the kernel still indexes weights and norm with one layer number."""

    def branch(p: int):
        own = jnp.asarray(w.layers_of(p), jnp.int32)
        return lambda x, at, norm: matmul(x, w.parts[p], at, None if norm is None else norm[own], eps)

    at = jnp.asarray(w.index, jnp.int32)[layer]
    return jax.lax.switch(jnp.asarray(w.part, jnp.int32)[layer], [branch(p) for p in range(len(w.parts))], x, at,
                          norm)


# XLA:CPU fuses a matrix-vector product's producers only while the vector is under 16 KB (4,096
# f32): a longer one (the 1.7B's 8,192-wide down projection) would make XLA dequantize the whole
# weight into an f32 copy first. Wider matrices are held in column blocks of at most this width
# (xla_pieces), each contiguous (a strided slice of the whole streams 2.8x slower), and the
# product is summed over the blocks.
XLA_MATVEC_WIDTH = 4064


def xla_pieces(inp: int) -> int:
    """Column blocks of an XLA-form matrix with `inp` inputs: the fewest that divide its blocks
    of 32 evenly, each at most XLA_MATVEC_WIDTH wide (8,192 -> 4 of 2,048)."""
    nb, most = inp // QK, XLA_MATVEC_WIDTH // QK
    return next(p for p in range(-(-nb // most), nb + 1) if nb % p == 0)


def _materialized(v: jax.Array) -> jax.Array:
    """v, computed once into its own buffer. Left to itself XLA:CPU fuses the vector's cheap
    producers (the norm's multiplies, silu(gate) * up) into the product's loop, where they are
    recomputed for every output row: 2x the time of the down projection (bench: 4.6 vs 2.4 ms
    for 16 layers of 960 x 2560). A conditional is a fusion boundary XLA keeps (an
    optimization_barrier is removed before fusion); both branches return v (the second as
    v * 1, exact: two identical branches would be merged back into one by JAX), so the
    predicate (false only for a NaN) never changes the result."""
    return jax.lax.cond(v[0] == v[0], lambda a: a, lambda a: a * jnp.float32(1), v)


def _matmul_xla(x: jax.Array, w: QLinear, layer: jax.Array | None, norm: jax.Array | None, eps: float) -> jax.Array:
    """The XLA path's product on its int8 form. The layer's slice of the stacked weight, the
    int8 -> f32 convert and the per-32 scale all stay inside the dot's fusion: for one row
    (a decode step) XLA:CPU emits the matrix-vector product as one vectorized loop over the int8
    bytes, split across the threads, and materializes nothing (jit(...).lower(...).compile()
    .as_text() shows one fusion per matrix (per column block), its temp buffers a few KB). XLA
    fuses the producers into the dot only for a rank-1 vector on the left, hence x[0] and the
    transposed weight. More rows (a prefill chunk, a draft to verify) go to XLA's GEMM, which
    takes a dequantized f32 copy of the layer's weight, made once per chunk and shared by its
    rows."""
    q, d, m = w.q, w.d, w.m
    if layer is not None:
        q, d, m = q[layer], d[layer], None if m is None else m[layer]
        norm = None if norm is None else norm[layer]
    if norm is not None:
        x = rms_norm(x, norm, eps)
    if x.shape[0] != 1:
        wf = _joined(_dequantize_xla(q, d, m), w.pieces)
        return jnp.dot(x, wf.T, preferred_element_type=jnp.float32)
    cpu = jax.default_backend() == "cpu"  # (on a GPU a conditional would cost a host sync)
    v = _materialized(x[0]) if cpu else x[0]
    if w.pieces == 1:
        return jnp.dot(v, _dequantize_xla(q, d, m).T, preferred_element_type=jnp.float32)[None]
    width = q.shape[-1]
    y = None
    for p in range(w.pieces):
        part = jnp.dot(v[p * width : (p + 1) * width], _dequantize_xla(q[p], d[p], None if m is None else m[p]).T,
                       preferred_element_type=jnp.float32)
        # Each block leaves its dot through a fusion boundary before the sum: XLA:CPU would fuse
        # a dot's add consumer into an output fusion, which takes the weight as a materialized
        # f32 operand (measured: 0.4 s a step for the 1.7B's down projection).
        part = _materialized(part) if cpu else part
        y = part if y is None else y + part
    return y[None]


# --- numpy side: GGUF blocks -> these formats (the loader) -------------------------------------


def quantize_q8_0(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """f32 [..., in] -> int8 values and f16 scales per 32, as llama.cpp's quantize_row_q8_0."""
    g = w.reshape(*w.shape[:-1], -1, QK)
    d = np.abs(g).max(axis=-1) / 127.0
    if not d.max(initial=0.0) <= F16_MAX:
        raise ValueError(f"values up to {d.max() * 127:.3g}, too large for 16-bit block scales")
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.rint(g * inv[..., None]).clip(-127, 127).astype(np.int8)
    return q.reshape(w.shape), d.astype(np.float16)


def _f16(b: np.ndarray) -> np.ndarray:
    """[..., 2] bytes -> [...] f16."""
    return np.ascontiguousarray(b).view(np.float16)[..., 0]


def _plain_blocks(raw: np.ndarray, block_bytes: int, has_min: bool, values: type):
    """GGUF's Q8_0 / Q4_0 / Q4_1 rows, bytes [rows, row_bytes] -> (values, d, m) in row layout.
    A block is an f16 scale, for Q4_1 an f16 offset, then the values (32 int8 or 16 bytes)."""
    b = raw.reshape(raw.shape[0], -1, block_bytes)
    head = 4 if has_min else 2
    q = np.ascontiguousarray(b[..., head:]).view(values).reshape(raw.shape[0], -1)
    return q, _f16(b[..., :2]), _f16(b[..., 2:4]) if has_min else None


def blocks_q4_k(raw: np.ndarray):
    """Q4_K super-blocks (256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes
    of nibbles) -> q4_1 blocks of 32 (gguf.quants.Q4_K is the reference layout). The nibbles are
    kept; d * scale and dmin * min are rounded to f16 (a file's values move by up to ~1e-3 of
    the tensor's largest)."""
    from gguf.quants import Q4_K

    rows = raw.shape[0]
    b = raw.reshape(-1, 144)
    d = _f16(b[:, 0:2]).astype(np.float32)[:, None]
    dmin = _f16(b[:, 2:4]).astype(np.float32)[:, None]
    sc, mn = Q4_K.get_scale_min(b[:, 4:16].copy())
    with np.errstate(over="ignore"):  # an overflowing scale becomes inf: the loader refuses it
        d, m = (d * sc).astype(np.float16), (-dmin * mn).astype(np.float16)
    qs = b[:, 16:].reshape(-1, 4, 32)  # chunk j: sub-block 2j in the low nibbles, 2j+1 in the high
    vals = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, QK)  # [n, 8 sub-blocks, 32]
    packed = (vals[..., :16] | (vals[..., 16:] << 4)).astype(np.uint8)
    return packed.reshape(rows, -1), d.reshape(rows, -1), m.reshape(rows, -1)


def blocks_q4_k_native(raw: np.ndarray):
    """Q4_K super-blocks as stored -> q4_k rows: the nibbles in q4_x's order, d [rows, nsb, 2]
    (d, dmin as f16) and the 6-bit scales and mins [rows, nsb, 16] (8 of each, one a byte;
    interleave packs them back into 12 bytes a row)."""
    from gguf.quants import Q4_K

    rows = raw.shape[0]
    b = raw.reshape(-1, 144)
    sc, mn = Q4_K.get_scale_min(b[:, 4:16].copy())  # [n, 8] each
    qs = b[:, 16:].reshape(-1, 4, 32)  # chunk j: sub-block 2j in the low nibbles, 2j+1 in the high
    vals = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, QK)
    packed = (vals[..., :16] | (vals[..., 16:] << 4)).astype(np.uint8)
    d = np.ascontiguousarray(b[:, 0:4]).view(np.float16).reshape(rows, -1, 2)
    bits = np.concatenate([sc, mn], axis=-1).astype(np.uint8).reshape(rows, -1, 16)
    return packed.reshape(rows, -1), d, bits


def _f16_rows(b: np.ndarray, rows: int, at: int = 0) -> np.ndarray:
    """A super-block's f16 d at byte `at` (b: [n, block bytes]) -> [rows, nsb] f16."""
    return np.ascontiguousarray(b[:, at : at + 2]).view(np.float16).reshape(rows, -1)


def blocks_q6_k(raw: np.ndarray):
    """Q6_K super-blocks (256 values: 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8 scales,
    an f16 d) -> q6_k rows: q as unsigned values [rows, in] (0..63), d [rows, nsb] f16, the
    scales [rows, nsb, 16] int8. The values come from gguf's own dequantization of the blocks
    with d and every scale set to 1 (exact small integers), so the bit layout is gguf-py's."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 210)
    unit = b.copy()
    unit[:, 192:208] = 1
    unit[:, 208:210] = np.array([1.0], np.float16).view(np.uint8)
    q = _dequantize_blocks(unit, "Q6_K").reshape(rows, -1)
    u = (q + 32).astype(np.uint8)
    d = _f16_rows(b, rows, 208)
    sc = np.ascontiguousarray(b[:, 192:208]).view(np.int8).reshape(rows, -1, 16)
    return u, d, sc


def _unit_values(raw: np.ndarray, type_name: str, block: int, unit: bytes) -> np.ndarray:
    """The integer values of GGUF blocks, through gguf's own dequantization of a copy whose
    scales are set to 1 and offsets to 0 (`unit`: the new first bytes of every block): exact
    small integers, and the bit layout is gguf-py's, not written out here."""
    import gguf

    b = raw.reshape(-1, block).copy()
    b[:, : len(unit)] = np.frombuffer(unit, np.uint8)
    return _dequantize_blocks(b, type_name).reshape(raw.shape[0], -1)


def _dequantize_blocks(blocks: np.ndarray, type_name: str) -> np.ndarray:
    """gguf's dequantization of [n, block bytes] in one call over all blocks (its
    gguf.quants.dequantize goes a row at a time: 7 of a 1.7B Q4_K_M file's 20 s of loading)."""
    import gguf.quants

    return getattr(gguf.quants, type_name).dequantize_blocks(blocks)  # (the type's class: Q6_K, IQ4_XS, ...)


_ONE = np.float16(1.0).tobytes()


def blocks_q5_0(raw: np.ndarray):
    """Q5_0 blocks (f16 d, 4 bytes of 5th bits, 16 of nibbles) -> q5_0 rows: unsigned values
    [rows, in] (0..31) and d [rows, in/32]."""
    u = (_unit_values(raw, "Q5_0", 22, _ONE) + 16).astype(np.uint8)
    return u, _f16(raw.reshape(raw.shape[0], -1, 22)[..., :2]), None


def blocks_q5_1(raw: np.ndarray):
    """Q5_1 blocks (f16 d and m, 5th bits, nibbles) -> q5_1 rows: values, d and m [rows, in/32]."""
    u = _unit_values(raw, "Q5_1", 24, _ONE + bytes(2)).astype(np.uint8)
    b = raw.reshape(raw.shape[0], -1, 24)
    return u, _f16(b[..., :2]), _f16(b[..., 2:4])


def blocks_q5_k(raw: np.ndarray):
    """Q5_K super-blocks (f16 d and dmin, 12 bytes of 6-bit scales and mins, 32 of 5th bits, 128
    of nibbles) -> q5_k rows: values [rows, in] (0..31), d [rows, nsb, 2], the scales and mins
    [rows, nsb, 16] (as q4_k's)."""
    from gguf.quants import Q4_K

    rows = raw.shape[0]
    ones = bytes([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1])  # every scale 1, every min 0 (the 6-bit packing)
    u = _unit_values(raw, "Q5_K", 176, _ONE + bytes(2) + ones).astype(np.uint8)
    b = raw.reshape(-1, 176)
    sc, mn = Q4_K.get_scale_min(b[:, 4:16].copy())
    d = np.ascontiguousarray(b[:, 0:4]).view(np.float16).reshape(rows, -1, 2)
    return u, d, np.concatenate([sc, mn], axis=-1).astype(np.uint8).reshape(rows, -1, 16)


def _iq4_index(values: np.ndarray) -> np.ndarray:
    """IQ4 values (as gguf dequantizes them with unit scales) -> their 4-bit indices."""
    lookup = np.zeros(256, np.uint8)
    lookup[IQ4_VALUES.view(np.uint8)] = np.arange(16, dtype=np.uint8)
    return lookup[values.astype(np.int8).view(np.uint8)]


def blocks_iq4_nl(raw: np.ndarray):
    """IQ4_NL blocks (f16 d, 16 bytes of indices in Q4_0's nibble order) -> iq4_nl rows: the
    nibbles as stored [rows, in/2] and d [rows, in/32]."""
    b = raw.reshape(raw.shape[0], -1, 18)
    q = np.ascontiguousarray(b[..., 2:]).reshape(raw.shape[0], -1)
    return q, _f16(b[..., :2]), None


def blocks_iq4_xs(raw: np.ndarray):
    """IQ4_XS super-blocks (f16 d, 2 + 4 bytes of 6-bit scales, 128 of indices) -> iq4_xs rows:
    the nibbles as stored [rows, in/2], d [rows, nsb] f16, the scales ls [rows, nsb, 8] (0..63).
    The scales come from gguf's dequantization with d = 1 and every index 8 (value 1): ls - 32."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 136)
    probe = b.copy()
    probe[:, 0:2] = np.frombuffer(_ONE, np.uint8)
    probe[:, 8:] = 0x88
    ls = _dequantize_blocks(probe, "IQ4_XS").reshape(-1, 8, 32)[..., 0] + 32
    d = _f16_rows(b, rows)
    q = np.ascontiguousarray(b[:, 8:]).reshape(rows, -1)
    return q, d, ls.astype(np.uint8).reshape(rows, -1, 8)


def blocks_q3_k(raw: np.ndarray):
    """Q3_K super-blocks (256 values: 32 bytes of high bits, 64 of low 2 bits, 12 of 6-bit scales,
    an f16 d) -> q3_k rows: unsigned values [rows, in] (0..7, w = d (ls - 32) (q - 4)), d [rows,
    nsb] f16, the scales ls [rows, nsb, 16] (0..63). Values and scales come from gguf's own
    dequantization of probes: d = 1 and every ls 33 (scale 1) gives q - 4; d = 1 and every value
    5 (q - 4 = 1) gives ls - 32. The bit layout is gguf-py's, not written out here."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 110)
    probe = b.copy()
    probe[:, 96:104], probe[:, 104:108] = 0x11, 0xAA  # ls = 33: low 4 bits 1, high 2 bits 2 (the 12-byte packing)
    probe[:, 108:110] = np.frombuffer(_ONE, np.uint8)
    u = (_dequantize_blocks(probe, "Q3_K").reshape(rows, -1) + 4).astype(np.uint8)
    probe = b.copy()
    probe[:, 0:32], probe[:, 32:96] = 0xFF, 0x55  # every value's high bit 1, low bits 1: q = 5
    probe[:, 108:110] = np.frombuffer(_ONE, np.uint8)
    ls = _dequantize_blocks(probe, "Q3_K").reshape(-1, 16, 16)[..., 0] + 32
    d = _f16_rows(b, rows, 108)
    return u, d, ls.astype(np.uint8).reshape(rows, -1, 16)


def blocks_q2_k(raw: np.ndarray):
    """Q2_K super-blocks (256 values: 16 scale bytes sc | mn << 4, 64 bytes of 2-bit values, f16
    d and dmin) -> q2_k rows: values [rows, in] (0..3, w = d sc q - dmin mn), d [rows, nsb, 2]
    (d, dmin) and the scale bytes as stored [rows, nsb, 16]. The values come from gguf's
    dequantization with d = 1, dmin = 0 and every sc 1."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 84)
    probe = b.copy()
    probe[:, 0:16] = 1
    probe[:, 80:84] = np.frombuffer(_ONE + bytes(2), np.uint8)
    u = _dequantize_blocks(probe, "Q2_K").reshape(rows, -1).astype(np.uint8)
    d = np.ascontiguousarray(b[:, 80:84]).view(np.float16).reshape(rows, -1, 2)
    return u, d, np.ascontiguousarray(b[:, 0:16]).reshape(rows, -1, 16)


def blocks_iq3_xxs(raw: np.ndarray):
    """IQ3_XXS super-blocks (llama.cpp's block_iq3_xxs: an f16 d, 64 grid indices, then per block of
    32 a 32-bit word of four 7-bit sign indices and the 4-bit ls at bits 28-31) -> iq3_xxs rows:
    q [rows, nb, 12] (a block's 8 indices, then its sign word as the kernel reads it: byte l the
    7-bit index l, ls's bit l at bit 7), d [rows, nsb] f16."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 98)
    aux = np.ascontiguousarray(b[:, 66:98]).view("<u4").reshape(-1, 8, 1)  # [n, block]
    l = np.arange(4, dtype=np.uint32)
    sign = ((aux >> (7 * l)) & 0x7F) | (((aux >> (28 + l)) & 1) << 7)  # [n, block, byte l]
    q = np.concatenate([b[:, 2:66].reshape(-1, 8, 8), sign.astype(np.uint8)], axis=-1)
    d = _f16_rows(b, rows)
    return q.reshape(rows, -1, 12), d, None


def blocks_iq3_s(raw: np.ndarray):
    """IQ3_S super-blocks (llama.cpp's block_iq3_s: an f16 d, 64 grid indices' low 8 bits, 8 bytes of
    9th bits, 32 sign bytes, 4 bytes of 4-bit ls) -> iq3_s rows: q [rows, nb, 14] (a block's 8
    indices, their 9th bits, its 4 sign bytes, its ls), d [rows, nsb] f16."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 110)
    ls = (b[:, 106:110, None] >> np.array([0, 4], np.uint8)) & 15  # [n, block / 2, block % 2]
    q = np.concatenate([b[:, 2:66].reshape(-1, 8, 8), b[:, 66:74].reshape(-1, 8, 1), b[:, 74:106].reshape(-1, 8, 4),
                        ls.reshape(-1, 8, 1)], axis=-1)
    d = _f16_rows(b, rows)
    return q.reshape(rows, -1, 14), d, None


def blocks_iq2_xxs(raw: np.ndarray):
    """IQ2_XXS super-blocks (llama.cpp's block_iq2_xxs: an f16 d, then per block of 32 two 32-bit
    words: 4 grid indices, and four 7-bit sign indices with the 4-bit ls at bits 28-31) ->
    iq2_xxs rows: q [rows, nb, 8] (a block's 4 indices, then its sign word as the kernel reads it:
    byte l the 7-bit index l, ls's bit l at bit 7), d [rows, nsb] f16."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 66)
    aux = np.ascontiguousarray(b[:, 2:66]).view("<u4").reshape(-1, 8, 2)[..., 1:]  # [n, block, 1]
    l = np.arange(4, dtype=np.uint32)
    sign = ((aux >> (7 * l)) & 0x7F) | (((aux >> (28 + l)) & 1) << 7)  # [n, block, byte l]
    q = np.concatenate([b[:, 2:66].reshape(-1, 8, 8)[..., :4], sign.astype(np.uint8)], axis=-1)
    return q.reshape(rows, -1, 8), _f16_rows(b, rows), None


def blocks_iq2_xs(raw: np.ndarray):
    """IQ2_XS super-blocks (an f16 d, 32 16-bit words: a 9-bit grid index and a 7-bit sign index
    each, then 8 scale bytes) -> iq2_xs rows: q [rows, nb, 9] (a block's 4 indices' low 8 bits, its
    sign word: byte l the 7-bit sign index l, index l's 9th bit at bit 7; its scale byte), d."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 74)
    qs = np.ascontiguousarray(b[:, 2:66]).view("<u2").reshape(-1, 8, 4)  # [n, block, l]
    sign = (qs >> 9) | ((qs >> 8) & 1) << 7
    q = np.concatenate([(qs & 255).astype(np.uint8), sign.astype(np.uint8), b[:, 66:74].reshape(-1, 8, 1)], axis=-1)
    return q.reshape(rows, -1, 9), _f16_rows(b, rows), None


def blocks_iq2_s(raw: np.ndarray):
    """IQ2_S super-blocks (an f16 d, 32 bytes of grid indices' low 8 bits, 32 sign bytes, 8 bytes of
    their bits 8-9, 8 scale bytes) -> iq2_s rows: q [rows, nb, 10] (a block's 4 index bytes, its 4
    sign bytes, its qh byte, its scale byte), d."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 82)
    q = np.concatenate([b[:, 2:34].reshape(-1, 8, 4), b[:, 34:66].reshape(-1, 8, 4), b[:, 66:74].reshape(-1, 8, 1),
                        b[:, 74:82].reshape(-1, 8, 1)], axis=-1)
    return q.reshape(rows, -1, 10), _f16_rows(b, rows), None


def blocks_iq1_s(raw: np.ndarray):
    """IQ1_S super-blocks (an f16 d, 32 bytes of grid indices' low 8 bits, 8 16-bit qh words: a
    block's indices' bits 8-10, its 3-bit ls and its delta's sign) -> iq1_s rows: q [rows, nb, 6]
    (a block's 4 index bytes, its qh word), d."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 50)
    q = np.concatenate([b[:, 2:34].reshape(-1, 8, 4), b[:, 34:50].reshape(-1, 8, 2)], axis=-1)
    return q.reshape(rows, -1, 6), _f16_rows(b, rows), None


def blocks_iq1_m(raw: np.ndarray):
    """IQ1_M super-blocks (32 bytes of grid indices' low 8 bits, 16 qh bytes: each index's bits
    8-10 and its delta's sign, a nibble each; 4 16-bit scale words: 3-bit ls per 16 values, and
    the f16 d in their top nibbles) -> iq1_m rows: q [rows, nb, 7] (a block's 4 index bytes, its
    2 qh bytes, its two ls: the first 16's in the low 3 bits), d [rows, nsb] f16."""
    rows = raw.shape[0]
    b = raw.reshape(-1, 56)
    sc = np.ascontiguousarray(b[:, 48:56]).view("<u2").reshape(-1, 4)
    d = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0x00F0) | ((sc[:, 2] >> 4) & 0x0F00) | (sc[:, 3] & 0xF000)
    ls = (sc[:, :, None] >> np.array([0, 6], np.uint16)) & 63  # [n, block / 2, block % 2]
    q = np.concatenate([b[:, 0:32].reshape(-1, 8, 4), b[:, 32:48].reshape(-1, 8, 2), ls.astype(np.uint8).reshape(-1, 8, 1)],
                       axis=-1)
    return q.reshape(rows, -1, 7), d.astype(np.uint16).view(np.float16).reshape(rows, -1), None


def rows_float(raw: np.ndarray):
    """F16 or BF16 rows (numbers or their bytes) -> f16 / bf16 rows: the 16-bit values [rows, in]
    as uint16, an empty d [rows, in/32, 0] (no scales)."""
    q = np.ascontiguousarray(raw).view(np.uint16).reshape(raw.shape[0], -1)
    return q, np.zeros((q.shape[0], q.shape[1] // QK, 0), np.float16), None


# GGUF type -> (the format it is kept in as stored, its rows' reader)
NATIVE = {"Q8_0": ("q8_0", lambda raw: _plain_blocks(raw, 34, False, np.int8)),
          "Q4_0": ("q4_0", lambda raw: _plain_blocks(raw, 18, False, np.uint8)),
          "Q4_1": ("q4_1", lambda raw: _plain_blocks(raw, 20, True, np.uint8)),
          "Q4_K": ("q4_k", blocks_q4_k_native),
          "Q6_K": ("q6_k", blocks_q6_k),
          "Q5_0": ("q5_0", blocks_q5_0),
          "Q5_1": ("q5_1", blocks_q5_1),
          "Q5_K": ("q5_k", blocks_q5_k),
          "IQ4_NL": ("iq4_nl", blocks_iq4_nl),
          "IQ4_XS": ("iq4_xs", blocks_iq4_xs),
          "Q3_K": ("q3_k", blocks_q3_k),
          "Q2_K": ("q2_k", blocks_q2_k),
          "IQ3_XXS": ("iq3_xxs", blocks_iq3_xxs),
          "IQ3_S": ("iq3_s", blocks_iq3_s),
          "F16": ("f16", rows_float),
          "BF16": ("bf16", rows_float),
          "IQ2_XXS": ("iq2_xxs", blocks_iq2_xxs),
          "IQ2_XS": ("iq2_xs", blocks_iq2_xs),
          "IQ2_S": ("iq2_s", blocks_iq2_s),
          "IQ1_S": ("iq1_s", blocks_iq1_s),
          "IQ1_M": ("iq1_m", blocks_iq1_m)}


def held_formats(xla: bool) -> tuple[str, ...]:
    """The formats weights may be held in: the XLA path's (those with an XLA form), or the ones
    the loaded kernel multiplies at speed."""
    return tuple(XLA_FORMS) if xla else kernels.formats() or tuple(XLA_FORMS)


def group_format(type_names, formats: tuple[str, ...] = FORMATS) -> str:
    """The one format a stacked group of tensors (every layer's q/k/v, say) is kept in: the
    members' own when they share one of `formats`, q4_1 when all are 4-bit, else q8_0."""
    fmts = {f if f in formats else "q8_0" for f in (NATIVE.get(t, ("q8_0",))[0] for t in type_names)}
    if len(fmts) == 1 and fmts != {"q8_0"}:
        return fmts.pop()
    if fmts <= {"q4_0", "q4_1", "q4_k"}:
        return "q4_1"
    return "q8_0"


def convert(type_name: str, raw: np.ndarray | None, dequantize_f32, fmt: str):
    """One tensor's rows in format fmt: (q, d, m). raw is the file's bytes [rows, row_bytes]
    for block types; dequantize_f32() gives f32 [rows, in] for the rest."""
    native = NATIVE.get(type_name)
    if native is not None and native[0] == fmt:
        return native[1](raw)
    if fmt == "q4_1" and native is not None and native[0] == "q4_k":
        return blocks_q4_k(raw)
    if fmt == "q4_1" and native is not None and native[0] == "q4_0":  # Q4_0 is Q4_1 with m = -8 d
        q, d, _ = native[1](raw)
        with np.errstate(over="ignore"):  # inf for a hostile scale: the loader refuses it
            return q, d, (d.astype(np.float32) * -8.0).astype(np.float16)
    assert fmt == "q8_0", (type_name, fmt)
    q, d = quantize_q8_0(dequantize_f32())
    return q, d, None


def interleave(q: np.ndarray, d: np.ndarray, m: np.ndarray | None, fmt: str):
    """Row-layout blocks (q [out, in] int8 or [out, in/2] packed nibbles; d, m [out, in/32]) ->
    groups of 8 interleaved rows (q [G, nb, bytes], d, m [G, nb, 8]), padding out to a multiple
    of 8 with zero rows; to_chunks then orders the groups as the kernel reads them."""
    if fmt == "q4_k":
        return _interleave_k(q, d, m)
    if fmt == "q6_k":
        return _interleave_6k(q, d, m)
    if fmt == "iq4_nl":  # q4_0's layout (the nibbles are indices)
        return interleave(q, d, m, "q4_0")
    if fmt == "iq4_xs":
        return _interleave_xs(q, d, m)
    if fmt in ("q3_k", "q2_k"):
        return _interleave_lowk(q, d, m, fmt)
    if fmt in IQ3:
        return _interleave_iq3(q, d, fmt)
    if fmt in IQ12:
        return _interleave_iq12(q, d, fmt)
    if fmt in FLOAT:  # [G, block, value j, row], 2 bytes each
        q, d = _pad_groups(q, d)
        G, nb = q.shape[0] // GROUP, q.shape[1] // QK
        qi = q.reshape(G, GROUP, nb, QK).transpose(0, 2, 3, 1)
        return np.ascontiguousarray(qi).view(np.uint8).reshape(G, nb, _BLOCK_BYTES[fmt]), np.zeros((G, nb, 0), np.float16), None
    if fmt in FIVE_BIT:  # the base format's layout of the low 4 bits, then the 5th bits' step
        qi, di, mi = interleave(_nibbles(q & 15), d, m, FIVE_BIT[fmt])
        return np.concatenate([qi, _fifth_bits(q)], axis=-1), di, mi
    nb = d.shape[1]
    q, d, m = _pad_groups(q, d, m)
    G = d.shape[0] // GROUP
    if fmt == "q8_0":
        u = (q.view(np.uint8) ^ 0x80).reshape(G, GROUP, nb, 8, 4)
    else:
        u = q.reshape(G, GROUP, nb, 4, 4)
    qi = u.transpose(0, 2, 3, 1, 4).reshape(G, nb, _BLOCK_BYTES[fmt])
    si = lambda a: None if a is None else a.reshape(G, GROUP, nb).transpose(0, 2, 1)  # noqa: E731
    return qi, si(d), si(m)


def _pad_groups(*arrays):
    """Arrays of rows [out, ...] padded with zero rows to whole groups of GROUP (None stays None):
    the kernel's layout interleaves rows 8 at a time."""
    pad = -arrays[0].shape[0] % GROUP
    if not pad:
        return arrays
    return tuple(None if a is None else np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)]) for a in arrays)


def _interleave_iq3(q: np.ndarray, d: np.ndarray, fmt: str):
    """interleave for iq3_xxs and iq3_s (blocks_iq3_*'s rows q [out, nb, width]): per group and block
    the 8 rows' indices as [step][row], iq3_s's 9th bits a byte a row, the rows' sign words, iq3_s's
    ls two rows a byte (qmatmul.cc's layout); per group and super-block the 8 rows' d."""
    q, d = _pad_groups(q, d)
    G, nb, nsb = q.shape[0] // GROUP, q.shape[1], d.shape[1]
    v = q.reshape(G, GROUP, nb, -1)
    parts = [v[..., :8].transpose(0, 2, 3, 1).reshape(G, nb, 8 * GROUP)]
    if fmt == "iq3_xxs":
        parts.append(v[..., 8:12].transpose(0, 2, 1, 3).reshape(G, nb, 4 * GROUP))
    else:
        sc = v[..., 13].transpose(0, 2, 1)  # [G, nb, row]
        parts += [v[..., 8].transpose(0, 2, 1), v[..., 9:13].transpose(0, 2, 1, 3).reshape(G, nb, 4 * GROUP),
                  (sc[..., 0::2] | sc[..., 1::2] << 4).astype(np.uint8)]
    return np.concatenate(parts, axis=-1), d.reshape(G, GROUP, nsb).transpose(0, 2, 1), None


def _interleave_iq12(q: np.ndarray, d: np.ndarray, fmt: str):
    """interleave for the iq2 and iq1 formats (blocks_iq2_* / blocks_iq1_*'s rows q [out, nb,
    width]): per group and block the 8 rows' 4 index bytes as [l][row], then each field a row:
    iq2_xxs's sign words; iq2_xs's sign words, scale bytes; iq2_s's 4 sign bytes, qh bytes, scale
    bytes; iq1_s's qh words; iq1_m's ls, 6 bits a row (24 bits for rows 4h..4h+3), then its qh
    words (qmatmul.cc's layout); per group and super-block the 8 rows' d."""
    q, d = _pad_groups(q, d)
    G, nb, nsb = q.shape[0] // GROUP, q.shape[1], d.shape[1]
    v = q.reshape(G, GROUP, nb, -1)  # [G, row, block, width]
    parts = [v[..., :4].transpose(0, 2, 3, 1).reshape(G, nb, 4 * GROUP)]
    if fmt == "iq1_m":
        ls = v[..., 6].astype(np.uint32).transpose(0, 2, 1).reshape(G, nb, 2, 4)  # [G, block, h, row - 4h]
        word = (ls << (6 * np.arange(4, dtype=np.uint32))).sum(-1, dtype=np.uint32)  # [G, block, h]
        parts.append(np.stack([word & 255, (word >> 8) & 255, word >> 16], axis=-1).astype(np.uint8).reshape(G, nb, 6))
        fields = [(4, 2)]
    else:
        fields = {"iq2_xxs": [(4, 4)], "iq2_xs": [(4, 4), (8, 1)], "iq2_s": [(4, 4), (8, 1), (9, 1)], "iq1_s": [(4, 2)]}[fmt]
    for at, width in fields:
        parts.append(v[..., at : at + width].transpose(0, 2, 1, 3).reshape(G, nb, GROUP * width))
    return np.concatenate(parts, axis=-1), d.reshape(G, GROUP, nsb).transpose(0, 2, 1), None


def _interleave_xs(q: np.ndarray, d: np.ndarray, ls: np.ndarray):
    """interleave for iq4_xs: the nibbles as q4_x's; per group and super-block the 8 rows' d, and
    their 6-bit scales packed as qmatmul.cc reads them (48 bytes: low 4 bits of rows r and r + 4
    in byte 4j + r, the high 2 bits at bits 2 row of a 16-bit word per block)."""
    nsb = d.shape[1]
    q, d, ls = _pad_groups(q, d, ls)
    G = d.shape[0] // GROUP
    qi = q.reshape(G, GROUP, nsb * 8, 4, 4).transpose(0, 2, 3, 1, 4).reshape(G, nsb * 8, QK // 2 * GROUP)
    di = d.reshape(G, GROUP, nsb).transpose(0, 2, 1)
    s = ls.reshape(G, GROUP, nsb, 8).transpose(0, 2, 3, 1).astype(np.uint16)  # [G, nsb, block, row]
    lo = ((s[..., :4] & 15) | (s[..., 4:] & 15) << 4).astype(np.uint8).reshape(G, nsb, 32)
    hi = ((s >> 4) << (2 * np.arange(GROUP, dtype=np.uint16))).sum(-1, dtype=np.uint16)  # [G, nsb, block]
    return qi, di, np.concatenate([lo, hi.astype("<u2").view(np.uint8).reshape(G, nsb, 16)], axis=-1)


def _interleave_lowk(u: np.ndarray, d: np.ndarray, m: np.ndarray, fmt: str):
    """interleave for q3_k and q2_k (rows of values u [out, in]): each block's low 2 bits in two
    32-byte steps ([half][8 rows][4]: value 16 half + 4k + j at bits 2k), q3_k's high bit in a
    third (q5's 5th-bit lanes); per group and super-block the 8 rows' d (q2_k: then dmin), and
    their scales: q3_k's 6-bit ls packed as qmatmul.cc reads them (12 bytes a block: row r's 12
    bits at bit 12r, its first half's ls in the low 6), q2_k's bytes as [scale][row]."""
    u, d, m = _pad_groups(u, d, m)
    G, nb, nsb = u.shape[0] // GROUP, u.shape[1] // QK, u.shape[1] // QK_K
    v = u.reshape(G, GROUP, nb, 2, 4, 4)  # [G, row, block, half, step k, j]
    lo = ((v & 3) << (2 * np.arange(4, dtype=np.uint8)).reshape(4, 1)).sum(axis=-2, dtype=np.uint8)  # [G, row, block, half, j]
    qi = lo.transpose(0, 2, 3, 1, 4).reshape(G, nb, QK // 4 * GROUP)
    if fmt == "q3_k":
        qi = np.concatenate([qi, _fifth_bits((u & 4) << 2)], axis=-1)  # (the high bit, as the 5th bit's lanes)
        di = d.reshape(G, GROUP, nsb).transpose(0, 2, 1)
        s = m.reshape(G, GROUP, nsb, 8, 2).transpose(0, 2, 3, 1, 4).astype(np.uint32)  # [G, nsb, block, row, half]
        v = s[..., 0] | s[..., 1] << 6  # 12 bits a row
        v = v[..., 0::2] | v[..., 1::2] << 12  # rows 2p, 2p + 1: 24 bits, bytes 3p..3p + 2
        b = np.stack([v & 255, (v >> 8) & 255, v >> 16], axis=-1).astype(np.uint8)  # [G, nsb, block, 4, 3]
        return qi, di, b.reshape(G, nsb, _K3_M)
    di = d.reshape(G, GROUP, nsb, 2).transpose(0, 2, 3, 1).reshape(G, nsb, _K_D)
    return qi, di, m.reshape(G, GROUP, nsb, 16).transpose(0, 2, 3, 1).reshape(G, nsb, _K2_M)


def _nibbles(v: np.ndarray) -> np.ndarray:
    """4-bit values [out, in] -> GGUF's nibble order [out, in/2]: byte t of a block holds value t
    low and t + 16 high."""
    b = v.reshape(v.shape[0], -1, 2, QK // 2)
    return (b[:, :, 0] | b[:, :, 1] << 4).astype(np.uint8).reshape(v.shape[0], -1)


def _fifth_bits(u: np.ndarray) -> np.ndarray:
    """The 5th bits of values [out, in] -> [G, nb, 32]: per group and block, lane (row, j) holds
    value 4k + j's bit at bit k and value 16 + 4k + j's at bit 4 + k (qmatmul.cc's layout)."""
    u, = _pad_groups(u)
    G, nb = u.shape[0] // GROUP, u.shape[1] // QK
    h = (u >> 4).reshape(G, GROUP, nb, 2, 4, 4)  # [G, row, block, half, k, j]
    shift = (4 * np.arange(2, dtype=np.uint8)[:, None] + np.arange(4, dtype=np.uint8)).reshape(2, 4, 1)
    lanes = (h << shift).sum(axis=(3, 4), dtype=np.uint8)  # [G, row, block, j]
    return lanes.transpose(0, 2, 1, 3).reshape(G, nb, 4 * GROUP)


def _interleave_k(q: np.ndarray, d: np.ndarray, bits: np.ndarray):
    """interleave for q4_k: the nibbles as q4_x's; per group and super-block the 8 rows' d then
    dmin (16 f16), and their scales and mins packed as qmatmul.cc reads them (96 bytes)."""
    nsb = d.shape[1]
    q, d, bits = _pad_groups(q, d, bits)
    G = d.shape[0] // GROUP
    qi = q.reshape(G, GROUP, nsb * 8, 4, 4).transpose(0, 2, 3, 1, 4).reshape(G, nsb * 8, QK // 2 * GROUP)
    di = d.reshape(G, GROUP, nsb, 2).transpose(0, 2, 3, 1).reshape(G, nsb, _K_D)
    b = bits.reshape(G, GROUP, nsb, 2, 8).transpose(0, 2, 3, 4, 1).astype(np.uint32)  # [G, nsb, sc|mn, block, row]
    sc, mn = b[:, :, 0], b[:, :, 1]
    lo = ((sc & 15) | (mn & 15) << 4).astype(np.uint8)  # [G, nsb, block, row]
    shift = 2 * np.arange(GROUP, dtype=np.uint32)
    hi = ((sc >> 4) << shift).sum(-1, dtype=np.uint32) | ((mn >> 4) << (shift + 16)).sum(-1, dtype=np.uint32)
    mi = np.concatenate([lo.reshape(G, nsb, 64), hi.astype("<u4").view(np.uint8).reshape(G, nsb, 32)], axis=-1)
    return qi, di, mi


def _interleave_6k(u: np.ndarray, d: np.ndarray, sc: np.ndarray):
    """interleave for q6_k: each block's low 4 bits as q4_x's nibbles, then its high 2 bits in
    two 32-byte steps ([half][8 rows][4]: values 16 half + 4k + j at bits 2k); per group and
    super-block the 8 rows' d, and their scales as [block][half][row] (qmatmul.cc's layout)."""
    u, d, sc = _pad_groups(u, d, sc)
    G, nb, nsb = u.shape[0] // GROUP, u.shape[1] // QK, u.shape[1] // QK_K
    v = u.reshape(G, GROUP, nb, 2, 4, 4)  # [G, row, block, half, step k, j]
    lo = ((v[:, :, :, 0] & 15) | (v[:, :, :, 1] & 15) << 4).astype(np.uint8)  # [G, row, block, k, j]
    nib = lo.transpose(0, 2, 3, 1, 4).reshape(G, nb, 128)
    hi = ((v >> 4) << (2 * np.arange(4, dtype=np.uint8)).reshape(4, 1)).sum(axis=-2, dtype=np.uint8)  # [G, row, block, half, j]
    hib = hi.transpose(0, 2, 3, 1, 4).reshape(G, nb, 64)
    qi = np.concatenate([nib, hib], axis=-1)
    di = d.reshape(G, GROUP, nsb).transpose(0, 2, 1)
    mi = sc.reshape(G, GROUP, nsb, 16).transpose(0, 2, 3, 1).reshape(G, nsb, 16 * GROUP)
    return qi, di, mi


def nbytes(fmt: str, out: int, inp: int) -> int:
    """Bytes of one [out, in] weight in format fmt (a kernel format or an XLA form), as empty()
    or empty_xla() allocates it."""
    if fmt in ("xla_q8", "xla_q8m"):
        return out * inp + out * (inp // QK) * 4 * (2 if fmt == "xla_q8m" else 1)
    G, nb = -(-out // GROUP), inp // QK
    if fmt == "q4_k":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * _K_D + _K_M))
    if fmt == "q6_k":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * GROUP + 16 * GROUP))
    if fmt == "q5_k":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * _K_D + _K_M))
    if fmt in FIVE_BIT:
        return G * nb * (_BLOCK_BYTES[fmt] + 2 * GROUP * (2 if fmt == "q5_1" else 1))
    if fmt == "iq4_xs":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * GROUP + 6 * GROUP))
    if fmt == "q3_k":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * GROUP + _K3_M))
    if fmt == "q2_k":
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * (2 * _K_D + _K2_M))
    if fmt in IQ3 or fmt in IQ12:
        return G * (nb * _BLOCK_BYTES[fmt] + inp // QK_K * 2 * GROUP)
    if fmt in FLOAT:
        return G * nb * _BLOCK_BYTES[fmt]
    return G * nb * (_BLOCK_BYTES[fmt] + 2 * GROUP * (2 if fmt == "q4_1" else 1))


def aligned_empty(shape: tuple[int, ...], dtype, align: int = 64) -> np.ndarray:
    """np.empty on a 64-byte boundary: JAX's CPU client then adopts the array as it is
    (device_put(may_alias=True)) instead of copying it, so a weight exists once in memory."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + align, np.uint8)
    off = -raw.ctypes.data % align
    return raw[off : off + n].view(dtype).reshape(shape)


def pack(q: np.ndarray, d: np.ndarray, m: np.ndarray | None, fmt: str):
    """Row-layout blocks -> the kernel's layout (interleave, then to_chunks)."""
    return tuple(to_chunks(a) for a in interleave(q, d, m, fmt))


def empty(fmt: str, lead: tuple[int, ...], out: int, inp: int):
    """Preallocated numpy arrays (q, d, m) for a (stacked) weight in group order (to_chunks
    turns them into the kernel's layout once filled)."""
    G, nb = -(-out // GROUP), inp // QK
    q = aligned_empty((*lead, G, nb, _BLOCK_BYTES[fmt]), np.uint8)
    if fmt in ("q4_k", "q5_k"):
        nsb = inp // QK_K
        return q, aligned_empty((*lead, G, nsb, _K_D), np.float16), aligned_empty((*lead, G, nsb, _K_M), np.uint8)
    if fmt == "q6_k":
        nsb = inp // QK_K
        return q, aligned_empty((*lead, G, nsb, GROUP), np.float16), aligned_empty((*lead, G, nsb, 16 * GROUP), np.int8)
    if fmt == "iq4_xs":
        nsb = inp // QK_K
        return q, aligned_empty((*lead, G, nsb, GROUP), np.float16), aligned_empty((*lead, G, nsb, 6 * GROUP), np.uint8)
    if fmt == "q3_k":
        nsb = inp // QK_K
        return q, aligned_empty((*lead, G, nsb, GROUP), np.float16), aligned_empty((*lead, G, nsb, _K3_M), np.uint8)
    if fmt == "q2_k":
        nsb = inp // QK_K
        return q, aligned_empty((*lead, G, nsb, _K_D), np.float16), aligned_empty((*lead, G, nsb, _K2_M), np.uint8)
    if fmt in IQ3 or fmt in IQ12:
        return q, aligned_empty((*lead, G, inp // QK_K, GROUP), np.float16), None
    if fmt in FLOAT:
        return q, aligned_empty((*lead, G, nb, 0), np.float16), None
    d = aligned_empty((*lead, G, nb, GROUP), np.float16)
    return q, d, (aligned_empty(d.shape, np.float16) if fmt in ("q4_1", "q5_1") else None)


def empty_chunked(fmt: str, lead: tuple[int, ...], out: int, inp: int):
    """empty()'s arrays seen in the kernel's chunked layout [..., G/K, nb, K * width] (views:
    filled group by group with put_groups or relay, in place, with no to_chunks pass)."""
    G = -(-out // GROUP)
    K = chunk_width(G)
    return tuple(None if a is None else a.reshape(*a.shape[:-3], G // K, a.shape[-2], K * a.shape[-1])
                 for a in empty(fmt, lead, out, inp))


def put_groups(dst: np.ndarray, g0: int, a: np.ndarray) -> None:
    """Groups g0, g0 + 1, ... of one layer (interleave's output a [n, nb, width], group order)
    into that layer's chunked array dst [G/K, nb, K * width], where to_chunks would put them."""
    if a.shape[-1] == 0:  # (f16's empty scales)
        return
    C, nb, kw = dst.shape
    K = kw // a.shape[-1]
    v = dst.reshape(C, nb, K, -1)  # [chunk, block, group in chunk, width]: a view
    g, end = g0, g0 + len(a)
    while g < end and (g % K or end - g < K):  # groups of a chunk shared with a neighbour
        v[g // K, :, g % K] = a[g - g0]
        g += 1
    whole = (end - g) // K
    if whole:
        v[g // K : g // K + whole] = a[g - g0 : g - g0 + whole * K].reshape(whole, K, nb, -1).transpose(0, 2, 1, 3)
    for g in range(g + whole * K, end):
        v[g // K, :, g % K] = a[g - g0]


def relayable(type_name: str, fmt: str) -> bool:
    """Whether relay can write a tensor of GGUF type type_name held in format fmt: its own
    format, with the kernel library's re-layout loaded."""
    native = NATIVE.get(type_name)
    return native is not None and native[0] == fmt and kernels.relayout() is not None


def _threads() -> int:
    """Cores for re-laying a tensor: this process's share of the machine (PINWHEEL_KERNEL_THREADS
    caps it, as it caps the kernel's products)."""
    import os

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cap = os.environ.get("PINWHEEL_KERNEL_THREADS", "")
    return max(1, min(n, int(cap))) if cap.isdigit() else n


def relay(raw: np.ndarray, fmt: str, dst: tuple, g0: int, order: np.ndarray | None = None) -> int:
    """GGUF rows raw [rows, row bytes] of a tensor held in its own format fmt (relayable) ->
    groups g0, g0 + 1, ... of one layer's chunked arrays dst (q, d, m: empty_chunked's, without
    the layer axis), in the kernel library (relayout.cc: the bytes interleave and to_chunks
    would write, from the file's bytes, on every core). order: row i is raw[order[i]] (the
    loader's un-permuting, without a copy). Returns the NaN or infinite scales met."""
    raw = np.ascontiguousarray(raw)
    if raw.dtype != np.uint8 and raw.ndim == 2:  # (F16 rows read as numbers: their bytes)
        raw = raw.view(np.uint8)
    if order is not None:
        order = np.ascontiguousarray(order, np.int64)
        assert order.shape == raw.shape[:1]
    q, d, m = dst
    G = q.shape[0] * (q.shape[-1] // _BLOCK_BYTES[fmt])
    inp = q.shape[1] * QK
    ptr = lambda a: None if a is None else a.ctypes.data  # noqa: E731
    bad = kernels.relayout()(fmt.encode(), ptr(raw), raw.shape[0], raw.shape[1] if raw.ndim == 2 else 0, ptr(order),
                             inp, ptr(q), ptr(d), ptr(m), G, g0, _threads())
    if bad < 0:
        raise ValueError(f"{raw.shape} bytes do not fit {fmt} rows of {inp} values")
    return bad


def xla_rows(q: np.ndarray, d: np.ndarray, m: np.ndarray | None, fmt: str):
    """Row-layout blocks of kernel format fmt (convert's output) -> the XLA form's rows: int8
    values [out, in] (4-bit values unpacked from GGUF's nibble order, q4_0's minus 8), d and m
    as they are. Exact: the XLA form dequantizes to the same numbers as the kernel's."""
    if fmt == "q8_0":
        return q.view(np.int8), d, None
    if fmt in ("q4_k", "q5_k"):  # d * scale and -dmin * min per block of 32, in f32 as the kernel forms them
        dd = d.astype(np.float32)
        sc, mn = m[..., :8].astype(np.float32), m[..., 8:].astype(np.float32)
        d = (dd[..., :1] * sc).reshape(len(d), -1)
        m = (dd[..., 1:] * -mn).reshape(len(d), -1)
    if fmt == "iq4_xs":  # d (ls - 32) per block of 32, in f32 (exact: 11 bits times 6)
        d = (d.astype(np.float32)[..., None] * (m.astype(np.float32) - 32)).reshape(len(d), -1)
    if fmt in IQ4:  # indices -> values
        b = q.reshape(q.shape[0], -1, QK // 2)
        idx = np.concatenate([b & 0x0F, b >> 4], axis=-1).reshape(q.shape[0], -1)
        return IQ4_VALUES[idx], d, None
    out, nb = d.shape
    if fmt in FIVE_BIT:  # (rows of unsigned values already)
        v = q.astype(np.int8) - np.int8(16 if fmt == "q5_0" else 0)
        return v, d, None if fmt == "q5_0" else m
    b = q.reshape(out, nb, QK // 2)
    v = np.concatenate([b & 0x0F, b >> 4], axis=-1).reshape(out, nb * QK).view(np.int8)
    if fmt == "q4_0":
        v -= 8  # 0..15 -> -8..7, in place (v is a fresh array)
        return v, d, None
    return v, d, m  # (q4_1, q4_k)


def empty_xla(form: str, lead: tuple[int, ...], out: int, inp: int):
    """Preallocated numpy arrays (q, d, m) for a (stacked) weight in an XLA form, in column
    blocks when it is wider than XLA_MATVEC_WIDTH (put_xla_rows fills them)."""
    P = xla_pieces(inp)
    blocks = (P,) if P > 1 else ()
    q = aligned_empty((*lead, *blocks, out, inp // P), np.int8)
    d = aligned_empty((*lead, *blocks, out, inp // P // QK), np.float32)  # (f16 -> f32 exactly)
    return q, d, (aligned_empty(d.shape, np.float32) if form == "xla_q8m" else None)


def put_xla_rows(dst: np.ndarray, r0: int, a: np.ndarray, pieces: int) -> None:
    """Rows [r0, r0 + len(a)) of one layer's XLA-form array dst ([out, w] or [pieces, out, w])
    from row-layout a [rows, in]."""
    if pieces == 1:
        dst[r0 : r0 + len(a)] = a
    else:
        dst[:, r0 : r0 + len(a)] = a.reshape(len(a), pieces, -1).transpose(1, 0, 2)


def to_device(a: np.ndarray | None) -> jax.Array | None:
    """A host array as a JAX array, without a copy where the backend can adopt it (CPU)."""
    if a is None:
        return None
    try:
        return jax.device_put(a, may_alias=True)
    except TypeError:  # a jax without may_alias: an ordinary copy
        return jnp.asarray(a)
