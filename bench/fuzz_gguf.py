"""Hostile GGUF files: generate thousands of corrupted model files and check that every one ends
in one clean ModelFileError (or loads, when the corruption happens to be harmless), never another
exception, a hang or a big allocation.

    python -m bench.fuzz_gguf --cases 5000            # counts per outcome
    python -m bench.fuzz_gguf --cases 500 --seed 7 --json out.json

Cases are built from good tiny files (tests/fixtures/tiny_gguf.py) by corrupting bytes at offsets
computed from the file's byte layout, which this module parses itself with ``struct`` (the engine
relies on the ``gguf`` package; a second, independent reading of the layout is what lets the
fuzzer aim at section boundaries). Every case runs in a worker process with a per-case timeout
and an address-space limit; the worker reports the outcome and the peak-RSS growth.

Outcomes: ``error`` (a PinwheelError: the clean refusal), ``ok`` (the file still loads: harmless
corruption, e.g. a flipped weight byte), ``crash`` (any other exception), ``timeout``,
``bigalloc`` (peak RSS grew by more than --max-rss-mib while loading a file of a few hundred KB).

The same catalogue and generators back tests/engine/test_hostile_gguf.py.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------ byte layout

T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = 8, 9, 10, 11, 12
SCALAR_FMT = {T_UINT8: "B", T_INT8: "b", T_UINT16: "H", T_INT16: "h", T_UINT32: "I", T_INT32: "i",
              T_FLOAT32: "f", T_BOOL: "?", T_UINT64: "Q", T_INT64: "q", T_FLOAT64: "d"}
# ggml type id -> (block size, bytes per block); the ids the gguf package knew when written
QUANT_SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
               9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
               15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
               21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8),
               28: (1, 8), 29: (256, 56), 30: (1, 2)}
Q8_0, Q2_K, IQ2_XXS = 8, 10, 16


@dataclass
class Field:
    """A number stored in the file: where, how wide, what it means."""
    name: str
    offset: int
    fmt: str  # struct format of the stored value ("Q" count/length/offset/dim, "I" type/ndims/version)
    value: int


@dataclass
class KV:
    key: str
    vtype: int
    raw: bytes  # the encoded value (without key and type)
    start: int = 0
    end: int = 0
    value_offset: int = 0
    itype: int | None = None  # arrays: item type


@dataclass
class TInfo:
    name: str
    dims: list[int]
    ttype: int
    offset: int  # relative to the data section
    start: int = 0
    end: int = 0

    @property
    def nbytes(self) -> int:
        block, size = QUANT_SIZES[self.ttype]
        n = 1
        for d in self.dims:
            n *= d
        return n * size // block


@dataclass
class Layout:
    data: bytes
    version: int
    kvs: list[KV]
    tensors: list[TInfo]
    alignment: int
    info_end: int  # end of the tensor infos = start of the alignment padding
    data_start: int
    fields: list[Field] = field(default_factory=list)  # every count/length/type/dim/offset
    boundaries: list[tuple[str, int]] = field(default_factory=list)  # section boundaries (cut points)

    @property
    def size(self) -> int:
        return len(self.data)

    def kv(self, key: str) -> KV:
        return next(k for k in self.kvs if k.key == key)

    def tensor(self, name: str) -> TInfo:
        return next(t for t in self.tensors if t.name == name)

    def blob(self, t: TInfo) -> bytes:
        a = self.data_start + t.offset
        return self.data[a : a + t.nbytes]

    def field_(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def parse_layout(data: bytes) -> Layout:
    """Walk a well-formed GGUF (v2/v3, little-endian) and record where everything is."""
    fields: list[Field] = []
    bounds: list[tuple[str, int]] = [("magic", 4), ("version", 8), ("n_tensors", 16), ("header", 24)]

    def u(fmt: str, off: int) -> int:
        return struct.unpack_from("<" + fmt, data, off)[0]

    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    fields += [Field("version", 4, "I", version), Field("n_tensors", 8, "Q", n_tensors), Field("n_kv", 16, "Q", n_kv)]
    off = 24

    def read_str(off: int, label: str) -> tuple[str, int]:
        n = u("Q", off)
        fields.append(Field(f"{label}.len", off, "Q", n))
        return data[off + 8 : off + 8 + n].decode("utf-8"), off + 8 + n

    def skip_value(off: int, vtype: int, label: str, first_item: bool = True) -> int:
        if vtype in SCALAR_FMT:
            return off + struct.calcsize(SCALAR_FMT[vtype])
        if vtype == T_STRING:
            if not first_item:  # only the first string of an array is recorded (keeps the list short)
                return off + 8 + u("Q", off)
            return read_str(off, label)[1]
        if vtype == T_ARRAY:
            itype, count = u("I", off), u("Q", off + 4)
            fields.extend([Field(f"{label}.itype", off, "I", itype), Field(f"{label}.count", off + 4, "Q", count)])
            off += 12
            for i in range(count):
                off = skip_value(off, itype, f"{label}[{i}]", first_item=(i == 0))
            return off
        raise ValueError(f"unknown value type {vtype}")

    kvs = []
    for i in range(n_kv):
        start = off
        key, off = read_str(off, f"kv{i}.key")
        vtype = u("I", off)
        fields.append(Field(f"kv{i}.type", off, "I", vtype))
        off += 4
        vstart = off
        off = skip_value(off, vtype, f"kv{i}:{key}")
        kvs.append(KV(key, vtype, data[vstart:off], start, off, vstart, u("I", vstart) if vtype == T_ARRAY else None))
        bounds += [(f"kv{i}.key_end", vstart - 4), (f"kv{i}.value", vstart), (f"kv{i}.end", off)]

    tensors = []
    for i in range(n_tensors):
        start = off
        name, off = read_str(off, f"t{i}.name")
        nd = u("I", off)
        fields.append(Field(f"t{i}.n_dims", off, "I", nd))
        off += 4
        dims = []
        for j in range(nd):
            dims.append(u("Q", off))
            fields.append(Field(f"t{i}.dim{j}", off, "Q", dims[-1]))
            off += 8
        ttype, toff = u("I", off), u("Q", off + 4)
        fields += [Field(f"t{i}.type", off, "I", ttype), Field(f"t{i}.offset", off + 4, "Q", toff)]
        off += 12
        tensors.append(TInfo(name, dims, ttype, toff, start, off))
        bounds += [(f"t{i}.dims", start + 8 + len(name.encode())), (f"t{i}.end", off)]

    alignment = 32
    for k in kvs:
        if k.key == "general.alignment" and k.vtype == T_UINT32:
            alignment = struct.unpack("<I", k.raw)[0]
    info_end = off
    data_start = -(-off // alignment) * alignment
    bounds += [("padding", info_end), ("data", data_start)]
    for i, t in enumerate(tensors):
        a = data_start + t.offset
        bounds += [(f"t{i}.data", a), (f"t{i}.data_mid", a + t.nbytes // 2)]
    bounds.append(("last_byte", len(data) - 1))
    return Layout(data, version, kvs, tensors, alignment, info_end, data_start, fields, bounds)


# ------------------------------------------------------------------------------ re-serializing


def enc_str(s: str | bytes) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def enc_value(vtype: int, value) -> bytes:
    """Encode a metadata value of the given GGUF type (arrays: (item_type, [values]))."""
    if vtype in SCALAR_FMT:
        return struct.pack("<" + SCALAR_FMT[vtype], value)
    if vtype == T_STRING:
        return enc_str(value)
    if vtype == T_ARRAY:
        itype, items = value
        return struct.pack("<IQ", itype, len(items)) + b"".join(enc_value(itype, x) for x in items)
    raise ValueError(vtype)


@dataclass
class Doc:
    """A GGUF as parts that can be edited and written back out."""
    version: int
    kvs: list[tuple[str | bytes, int, bytes]]  # key, type, encoded value
    tensors: list[tuple[str | bytes, list[int], int, bytes, int | None]]  # name, dims, type, blob, offset
    alignment: int = 32
    n_tensors: int | None = None  # header count overrides
    n_kv: int | None = None

    @classmethod
    def from_layout(cls, lay: Layout) -> "Doc":
        return cls(lay.version, [(k.key, k.vtype, k.raw) for k in lay.kvs],
                   [(t.name, list(t.dims), t.ttype, lay.blob(t), None) for t in lay.tensors], lay.alignment)

    def set_kv(self, key: str, vtype: int, value) -> "Doc":
        raw = enc_value(vtype, value)
        kvs = [(k, vtype, raw) if k == key else (k, t, r) for k, t, r in self.kvs]
        if not any(k == key for k, _, _ in self.kvs):
            kvs.append((key, vtype, raw))
        return replace(self, kvs=kvs)

    def drop_kv(self, key: str) -> "Doc":
        return replace(self, kvs=[kv for kv in self.kvs if kv[0] != key])

    def edit_tensor(self, which: str, **kw) -> "Doc":
        out = []
        for n, dims, tt, blob, off in self.tensors:
            if n == which:
                dims, tt, blob, off = (kw.get("dims", dims), kw.get("ttype", tt), kw.get("blob", blob),
                                       kw.get("offset", off))
                n = kw.get("name", n)
            out.append((n, dims, tt, blob, off))
        return replace(self, tensors=out)

    def drop_tensor(self, name: str) -> "Doc":
        return replace(self, tensors=[t for t in self.tensors if t[0] != name])

    def to_bytes(self) -> bytes:
        al = self.alignment
        out = [b"GGUF", struct.pack("<IQQ", self.version,
                                    len(self.tensors) if self.n_tensors is None else self.n_tensors,
                                    len(self.kvs) if self.n_kv is None else self.n_kv)]
        for k, t, raw in self.kvs:
            out.append(enc_str(k) + struct.pack("<I", t) + raw)
        blobs, offsets, pos = [], [], 0
        for _n, _d, _t, blob, off in self.tensors:
            offsets.append(pos if off is None else off)
            blobs.append(blob + b"\0" * (-len(blob) % al))
            pos += len(blobs[-1])
        for (n, dims, tt, _b, _o), off in zip(self.tensors, offsets):
            out.append(enc_str(n) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                       + struct.pack("<IQ", tt, off))
        head = b"".join(out)
        return head + b"\0" * (-len(head) % al) + b"".join(blobs)


def put(data: bytes, off: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    size = struct.calcsize("<" + fmt)
    if off + size > len(b):
        return bytes(b)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def put_bytes(data: bytes, off: int, new: bytes) -> bytes:
    return data[:off] + new + data[off + len(new):]


# ------------------------------------------------------------------------------ base files

BASES = {
    # name -> write_tiny_gguf kwargs (small and quick to load; together they cover F32, F16, Q8_0,
    # a K-quant, both vocabularies, tied and untied heads)
    "bpe-f32": dict(vocab="bpe"),
    "spm-q8_0": dict(vocab="spm", tensor_type="Q8_0", embedding_type="F16", n_layers=1, seed=1),
    "bpe-q4_k": dict(vocab="bpe", tensor_type="Q4_K", embedding_type="Q8_0", d_model=256, n_heads=4,
                     n_kv_heads=2, ffn_dim=256, n_layers=1, tied=False, seed=2),
}


def write_bases(folder: Path, names=None) -> dict[str, Path]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    folder.mkdir(parents=True, exist_ok=True)
    return {n: write_tiny_gguf(folder / f"{n}.gguf", **BASES[n]) for n in (names or BASES)}


# ------------------------------------------------------------------------------ the catalogue

BIG = (2**40, 2**60, 2**63, 2**64 - 1)
ARCH = "llama"


def explicit_cases(lay: Layout) -> list[tuple[str, bytes, str]]:
    """Hand-aimed hostile variants of one good file: (name, bytes, expect). expect "error": must be
    refused with a ModelFileError; "any": may also load (a lenient but safe reading, e.g. an
    out-of-range EOS id that llama.cpp ignores too, or a non-text chat template that falls back to
    ChatML) but must never crash."""
    d = lay.data
    cases: list[tuple[str, bytes, str]] = []
    add = lambda name, b, expect="error": cases.append((name, b, expect))  # noqa: E731
    doc = Doc.from_layout(lay)
    tnames = [t.name for t in lay.tensors]
    first_f32 = next(t for t in lay.tensors if t.ttype == 0 and t.name.endswith("norm.weight"))

    # --- truncation at every section boundary (and one byte either side of each)
    seen = set()
    for label, off in lay.boundaries:
        for delta in (-1, 0, 1):
            cut = off + delta
            if 0 < cut < lay.size and cut not in seen:
                seen.add(cut)
                add(f"truncate@{label}{delta:+d}", d[:cut])
    if lay.data_start > lay.info_end:  # inside the alignment padding
        add("truncate@padding_mid", d[: (lay.info_end + lay.data_start) // 2])

    # --- magic and version
    for magic in (b"GGML", b"gguf", b"\0\0\0\0", b"FUGG", b"GGJT"):
        add(f"magic={magic!r}", magic + d[4:])
    for v in (0, 1, 4, 0xFFFF, 0xFFFFFFFF, 3 << 24):
        add(f"version={v}", put(d, 4, "I", v))

    # --- absurd counts
    for v in BIG + (2**32, lay.field_("n_tensors").value + 1, lay.field_("n_tensors").value + 1000):
        add(f"n_tensors={v}", put(d, 8, "Q", v))
    for v in BIG + (2**32, len(lay.kvs) + 1, len(lay.kvs) - 1, 0):
        add(f"n_kv={v}", put(d, 16, "Q", v))
    add("n_tensors=0", put(d, 8, "Q", 0))
    add("n_tensors-1", put(d, 8, "Q", len(lay.tensors) - 1))

    # --- absurd string lengths: a key, a string value, the chat template, a token, a tensor name
    targets = [f for f in lay.fields if f.name.endswith(".len") and (
        f.name.startswith("kv0.key") or ":general.name" in f.name or ":tokenizer.chat_template" in f.name
        or ":tokenizer.ggml.tokens[0]" in f.name or f.name == "t0.name.len")]
    for f in targets:
        for v in BIG + (f.value + 1, f.value + 2**20):
            add(f"strlen {f.name}={v}", put(d, f.offset, "Q", v))

    # --- absurd array counts: strings (tokens, merges) and numbers (token_type, scores)
    for f in lay.fields:
        if f.name.endswith(".count") and f.name.count("[") == 0:
            for v in BIG + (f.value + 1, max(f.value - 1, 0), 0):
                add(f"count {f.name}={v}", put(d, f.offset, "Q", v))
        if f.name.endswith(".itype") and f.name.count("[") == 0:
            for v in (T_ARRAY, T_UINT64, 13, 99, 2**32 - 1):
                add(f"itype {f.name}={v}", put(d, f.offset, "I", v))
    # the same array claims 2^40 items of every element type (strings and numbers)
    tokens = lay.kv("tokenizer.ggml.tokens")
    for it in (T_STRING, T_UINT8, T_INT32, T_FLOAT32, T_UINT64, T_BOOL):
        b = put(d, tokens.value_offset, "I", it)
        add(f"tokens: 2^40 items of type {it}", put(b, tokens.value_offset + 4, "Q", 2**40))

    # --- unknown value types
    for f in lay.fields:
        if f.name.startswith("kv") and f.name.endswith(".type") and f.name[2:].split(".")[0] in ("0", "3", "9"):
            for v in (13, 255, 2**31, 2**32 - 1):
                add(f"vtype {f.name}={v}", put(d, f.offset, "I", v))

    # --- tensor offsets outside the file or overlapping; unaligned
    emb = lay.tensor("token_embd.weight")
    add("offset token_embd=2^40", doc.edit_tensor(emb.name, offset=2**40).to_bytes())
    add("offset token_embd=2^64-1", doc.edit_tensor(emb.name, offset=2**64 - 1).to_bytes())
    last = max(lay.tensors, key=lambda t: t.offset)
    add("offset last past EOF", put(d, lay.field_(f"t{lay.tensors.index(last)}.offset").offset, "Q",
                                    lay.size - lay.data_start - last.nbytes // 2))
    norms = [t for t in lay.tensors if t.name.endswith("norm.weight")]
    a, b = norms[0], norms[1]
    add("overlap: two norms share bytes", doc.edit_tensor(b.name, offset=a.offset).to_bytes())
    add("overlap: shifted by 32", doc.edit_tensor(b.name, offset=a.offset + 32).to_bytes())
    add("overlap: embedding over a layer",
        doc.edit_tensor(lay.tensors[3].name, offset=emb.offset + 64).to_bytes())
    add("offset unaligned", doc.edit_tensor(a.name, offset=a.offset + 1).to_bytes())

    # --- shapes that disagree with the metadata (blob resized to match, and not)
    q = next(t for t in lay.tensors if t.name.endswith("attn_q.weight"))
    k = next(t for t in lay.tensors if t.name.endswith("attn_k.weight"))  # not square
    add("shape: attn_k dims swapped", doc.edit_tensor(k.name, dims=k.dims[::-1]).to_bytes())
    add("shape: token_embd one row short", doc.edit_tensor(
        emb.name, dims=[emb.dims[0], emb.dims[1] - 1], blob=lay.blob(emb)[: -_row_bytes(emb)]).to_bytes())
    add("shape: token_embd one row more (no data)", doc.edit_tensor(emb.name, dims=[emb.dims[0], emb.dims[1] + 1]).to_bytes())
    add("shape: norm 3-D", doc.edit_tensor(a.name, dims=[a.dims[0], 1, 1]).to_bytes())
    add("shape: norm 0-D", doc.edit_tensor(a.name, dims=[]).to_bytes())
    add("shape: zero dim", doc.edit_tensor(q.name, dims=[q.dims[0], 0], blob=b"").to_bytes())
    add("shape: dim 2^63 (negative as int64)", doc.edit_tensor(q.name, dims=[q.dims[0], 2**63]).to_bytes())
    add("shape: dims overflow to 0", doc.edit_tensor(q.name, dims=[2**32, 2**32]).to_bytes())
    add("shape: dim 2^40", doc.edit_tensor(a.name, dims=[2**40]).to_bytes())
    add("shape: 2^32-1 dims", put(d, lay.field_("t0.n_dims").offset, "I", 2**32 - 1))
    add("shape: 17 dims", put(d, lay.field_("t0.n_dims").offset, "I", 17))

    # --- unknown and unsupported tensor types
    for tt in (4, 5, 31, 99, 2**31, 2**32 - 1):
        add(f"ttype {q.name}={tt} (unknown)", doc.edit_tensor(q.name, ttype=tt).to_bytes())
    # known to gguf; Pinwheel refuses most, and reads Q2_K, Q3_K, IQ4_XS only in rows of 256
    for tt in (Q2_K, 11, IQ2_XXS, 17, 19, 23, 24, 26, 27, 28, 15, 9):
        block, size = QUANT_SIZES[tt]
        n = q.dims[0] * q.dims[1]
        dims = q.dims if q.dims[0] % block == 0 else [block, n // block]  # same element count
        blob = bytes(random.Random(tt).randbytes(n * size // block))
        add(f"ttype {q.name}={tt} (unsupported, right size)",
            doc.edit_tensor(q.name, ttype=tt, dims=dims, blob=blob).to_bytes())
    add("ttype norm=Q8_0 with 64-wide... wrong size", doc.edit_tensor(a.name, ttype=Q8_0).to_bytes())
    add("ttype norm=Q4_K (row not a multiple of 256)", doc.edit_tensor(a.name, ttype=12).to_bytes())

    # --- NaN / Inf weights
    for label, val in (("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf"))):
        off = lay.data_start + first_f32.offset + 4 * 3
        add(f"weights: {label} in {first_f32.name}", put_bytes(d, off, struct.pack("<f", val)))
        t = max((t for t in lay.tensors if t.ttype == 0), key=lambda t: t.nbytes)
        add(f"weights: {label} in {t.name}", put_bytes(d, lay.data_start + t.offset + t.nbytes - 4, struct.pack("<f", val)))
    for t in lay.tensors:
        if t.ttype == 1:  # F16
            add(f"weights: f16 inf in {t.name}", put_bytes(d, lay.data_start + t.offset + 10, b"\x00\x7c"))
            add(f"weights: f16 nan in {t.name}", put_bytes(d, lay.data_start + t.offset + 10, b"\x00\x7e"))
            break
    for t in lay.tensors:
        if t.ttype in (8, 12):  # block scale d is the first f16 of the block (Q8_0, Q4_K)
            add(f"weights: nan block scale in {t.name}", put_bytes(d, lay.data_start + t.offset, b"\x00\x7e"))
            add(f"weights: inf block scale in {t.name}", put_bytes(d, lay.data_start + t.offset, b"\x00\x7c"))
            break

    # --- vocabulary vs embedding
    tok = lay.kv("tokenizer.ggml.tokens")
    n_vocab = struct.unpack_from("<Q", tok.raw, 4)[0]
    words = _decode_str_array(tok.raw)
    arrays = [k.key for k in lay.kvs if k.vtype == T_ARRAY and _array_len(k.raw) == n_vocab]
    short = doc
    for key in arrays:
        kv = lay.kv(key)
        itype = kv.itype
        if itype == T_STRING:
            items = _decode_str_array(kv.raw)[:-1]
        else:
            fmt = SCALAR_FMT[itype]
            items = list(struct.unpack_from(f"<{n_vocab - 1}{fmt}", kv.raw, 12))
        short = short.set_kv(key, T_ARRAY, (itype, items))
    short = short.set_kv(f"{ARCH}.vocab_size", T_UINT32, n_vocab - 1)
    add("vocab: one token fewer than the embedding", short.to_bytes())
    add("vocab: vocab_size says one more", doc.set_kv(f"{ARCH}.vocab_size", T_UINT32, n_vocab + 1).to_bytes())
    add("vocab: tokens one more than token_type", doc.set_kv("tokenizer.ggml.tokens", T_ARRAY,
                                                              (T_STRING, words + ["zzz-extra"])).to_bytes())
    add("vocab: empty token list", doc.set_kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, [])).to_bytes())
    add("vocab: token not UTF-8", doc.set_kv("tokenizer.ggml.tokens", T_ARRAY,
                                             (T_STRING, [b"\xff\xfe"] + words[1:])).to_bytes())

    # --- wrong metadata value types
    for key, vt, val in (
        (f"{ARCH}.block_count", T_STRING, "2"), (f"{ARCH}.embedding_length", T_STRING, "64"),
        (f"{ARCH}.attention.head_count", T_FLOAT32, 2.5), (f"{ARCH}.context_length", T_BOOL, True),
        (f"{ARCH}.feed_forward_length", T_ARRAY, (T_UINT32, [128])), (f"{ARCH}.rope.freq_base", T_STRING, "1e4"),
        (f"{ARCH}.attention.layer_norm_rms_epsilon", T_ARRAY, (T_STRING, ["x"])),
        ("general.architecture", T_UINT32, 7), ("general.architecture", T_STRING, "gpt2"),
        ("general.architecture", T_STRING, "llama\0"), ("general.architecture", T_ARRAY, (T_STRING, ["llama"])),
        ("tokenizer.ggml.tokens", T_STRING, "hello"), ("tokenizer.ggml.tokens", T_ARRAY, (T_UINT32, [1, 2, 3])),
        ("tokenizer.ggml.model", T_UINT32, 1), ("tokenizer.ggml.model", T_STRING, "bert"),
        ("tokenizer.ggml.bos_token_id", T_STRING, "1"), ("tokenizer.ggml.eos_token_id", T_UINT32, 10**9),
        ("tokenizer.ggml.token_type", T_STRING, "x"), ("tokenizer.chat_template", T_UINT32, 5),
        ("tokenizer.chat_template", T_ARRAY, (T_STRING, ["{{ x }}"])),
        ("general.alignment", T_STRING, "32"), ("general.alignment", T_UINT32, 0),
        ("general.alignment", T_UINT32, 3), ("general.alignment", T_UINT32, 2**31),
        (f"{ARCH}.rope.dimension_count", T_STRING, "16"),
    ):
        lenient = key == "tokenizer.chat_template" or key.endswith("eos_token_id")
        add(f"type: {key} as {vt}={val!r:.20}", doc.set_kv(key, vt, val).to_bytes(), "any" if lenient else "error")

    # --- negative / zero / huge dims in the metadata
    for key in (f"{ARCH}.block_count", f"{ARCH}.embedding_length", f"{ARCH}.attention.head_count",
                f"{ARCH}.attention.head_count_kv", f"{ARCH}.feed_forward_length", f"{ARCH}.context_length",
                f"{ARCH}.vocab_size", f"{ARCH}.attention.key_length"):
        add(f"dims: {key}=0", doc.set_kv(key, T_UINT32, 0).to_bytes())
        add(f"dims: {key}=-1", doc.set_kv(key, T_INT32, -1).to_bytes())
        add(f"dims: {key}=-2^63", doc.set_kv(key, T_INT64, -(2**63)).to_bytes())
        add(f"dims: {key}=2^30", doc.set_kv(key, T_UINT32, 2**30).to_bytes())
        add(f"dims: {key}=2^64-1", doc.set_kv(key, T_UINT64, 2**64 - 1).to_bytes())
    add("dims: d_model 2^30 with matching heads", doc.set_kv(f"{ARCH}.embedding_length", T_UINT32, 2**30)
        .set_kv(f"{ARCH}.attention.head_count", T_UINT32, 2**20).to_bytes())
    # big but inside every per-key limit: a loader that preallocates before checking tensors would
    # try to reserve terabytes for a file of a few hundred kilobytes
    add("dims: 1024 layers x 65536 wide x 2^20 ffn", doc.set_kv(f"{ARCH}.block_count", T_UINT32, 1024)
        .set_kv(f"{ARCH}.embedding_length", T_UINT32, 65536).set_kv(f"{ARCH}.feed_forward_length", T_UINT32, 2**20)
        .set_kv(f"{ARCH}.attention.head_count", T_UINT32, 1024)
        .set_kv(f"{ARCH}.attention.head_count_kv", T_UINT32, 1024).to_bytes())
    add("dims: 7B llama shape in a tiny file", doc.set_kv(f"{ARCH}.block_count", T_UINT32, 32)
        .set_kv(f"{ARCH}.embedding_length", T_UINT32, 4096).set_kv(f"{ARCH}.feed_forward_length", T_UINT32, 11008)
        .set_kv(f"{ARCH}.attention.head_count", T_UINT32, 32)
        .set_kv(f"{ARCH}.attention.head_count_kv", T_UINT32, 32)
        .set_kv(f"{ARCH}.rope.dimension_count", T_UINT32, 128).to_bytes())
    add("dims: more layers than tensors", doc.set_kv(f"{ARCH}.block_count", T_UINT32, 3).to_bytes())
    add("dims: float context_length nan", doc.set_kv(f"{ARCH}.context_length", T_FLOAT32, float("nan")).to_bytes())
    add("dims: rope base nan", doc.set_kv(f"{ARCH}.rope.freq_base", T_FLOAT32, float("nan")).to_bytes())
    add("dims: rope base -1", doc.set_kv(f"{ARCH}.rope.freq_base", T_FLOAT32, -1.0).to_bytes())
    add("dims: rms eps inf", doc.set_kv(f"{ARCH}.attention.layer_norm_rms_epsilon", T_FLOAT32, float("inf")).to_bytes())

    # --- missing and duplicated things
    for name in ("token_embd.weight", "output_norm.weight", "blk.0.ffn_down.weight", "blk.0.attn_norm.weight",
                 tnames[-2]):
        add(f"missing tensor {name}", doc.drop_tensor(name).to_bytes())
    add("all tensors missing", replace(doc, tensors=[]).to_bytes())
    for key in ("general.architecture", f"{ARCH}.block_count", f"{ARCH}.embedding_length",
                f"{ARCH}.attention.head_count", f"{ARCH}.feed_forward_length", "tokenizer.ggml.tokens",
                "tokenizer.ggml.model"):
        add(f"missing key {key}", doc.drop_kv(key).to_bytes())
    add("duplicate key", replace(doc, kvs=doc.kvs + [doc.kvs[1]]).to_bytes())
    add("duplicate tensor", replace(doc, tensors=doc.tensors + [doc.tensors[1]]).to_bytes())
    add("key not UTF-8", replace(doc, kvs=doc.kvs + [(b"\xff\xfekey", T_UINT32, enc_value(T_UINT32, 1))]).to_bytes())
    add("tensor name not UTF-8", doc.edit_tensor(tnames[1], name=b"\xc3(").to_bytes())
    add("metadata only, no tensor section", d[: lay.tensors[0].start])
    # arrays nested thousands deep (each level is a recursion in a naive reader)
    deep = struct.pack("<IQ", T_UINT8, 0)
    for _ in range(5000):
        deep = struct.pack("<IQ", T_ARRAY, 1) + deep
    add("array nested 5000 deep", replace(doc, kvs=doc.kvs + [("x.deep", T_ARRAY, deep)]).to_bytes())
    # more strings than any real vocabulary, each of which fits in the file
    many = struct.pack("<IQ", T_STRING, 1_100_000) + b"\0" * (8 * 1_100_000)
    add("array: 1.1M empty strings", replace(doc, kvs=doc.kvs + [("x.many", T_ARRAY, many)]).to_bytes())
    nums = struct.pack("<IQ", T_UINT8, (1 << 22) + 1) + bytes((1 << 22) + 1)
    add("array: 4M+1 numbers", replace(doc, kvs=doc.kvs + [("x.nums", T_ARRAY, nums)]).to_bytes())
    return cases


def _row_bytes(t: TInfo) -> int:
    block, size = QUANT_SIZES[t.ttype]
    return t.dims[0] * size // block


def _array_len(raw: bytes) -> int:
    return struct.unpack_from("<Q", raw, 4)[0]


def _decode_str_array(raw: bytes) -> list[bytes]:
    n = _array_len(raw)
    off, out = 12, []
    for _ in range(n):
        ln = struct.unpack_from("<Q", raw, off)[0]
        out.append(raw[off + 8 : off + 8 + ln])
        off += 8 + ln
    return [w.decode("utf-8") for w in out]


# ------------------------------------------------------------------------------ random cases

INTERESTING_U64 = (0, 1, 2, 7, 8, 31, 32, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**60,
                   2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1)
INTERESTING_U32 = (0, 1, 2, 7, 8, 9, 12, 13, 14, 15, 16, 30, 31, 99, 255, 2**16, 2**31, 2**32 - 1)


def random_case(lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    """One random corruption, aimed at the structure most of the time."""
    d = lay.data
    kind = rng.choices(("cut", "field", "bytes_head", "bytes_any", "boundary_cut", "multi"),
                       weights=(2, 4, 3, 1, 1, 1))[0]
    if kind == "cut":
        n = rng.randrange(1, lay.size)
        return f"cut@{n}", d[:n]
    if kind == "boundary_cut":
        label, off = rng.choice(lay.boundaries)
        n = min(max(1, off + rng.randint(-3, 3)), lay.size - 1)
        return f"cut@{label}~{n}", d[:n]
    if kind == "field":
        f = rng.choice(lay.fields)
        pool = INTERESTING_U64 if f.fmt == "Q" else INTERESTING_U32
        r = rng.random()
        if r < 0.6:
            v = rng.choice(pool)
        elif r < 0.8:
            v = (f.value + rng.randint(-3, 3)) % (2 ** (8 * struct.calcsize(f.fmt)))
        else:
            v = rng.getrandbits(8 * struct.calcsize(f.fmt))
        return f"field {f.name}={v}", put(d, f.offset, f.fmt, v)
    if kind == "bytes_head":
        off = rng.randrange(0, lay.data_start)
        n = rng.randint(1, 8)
        return f"bytes@{off}+{n}", put_bytes(d, off, rng.randbytes(min(n, lay.size - off)))
    if kind == "bytes_any":
        off = rng.randrange(0, lay.size)
        n = rng.randint(1, 16)
        return f"bytes_any@{off}+{n}", put_bytes(d, off, rng.randbytes(min(n, lay.size - off)))
    # several corruptions at once
    name, b = "multi", d
    for _ in range(rng.randint(2, 4)):
        f = rng.choice(lay.fields)
        v = rng.choice(INTERESTING_U64 if f.fmt == "Q" else INTERESTING_U32)
        b = put(b, f.offset, f.fmt, v)
        name += f" {f.name}={v}"
    if rng.random() < 0.5:
        n = rng.randrange(1, len(b))
        b, name = b[:n], name + f" cut@{n}"
    return name, b


# ------------------------------------------------------------------------------ running one case


def load_outcome(path: str | os.PathLike) -> tuple[str, str]:
    """('error' | 'ok' | 'crash', detail) for loading one file in this process."""
    from engine.errors import PinwheelError
    from engine.gguf_loader import load_model

    try:
        m = load_model(path)
    except PinwheelError as e:
        msg = str(e)
        if "\n" in msg or not msg:
            return "crash", f"{type(e).__name__} without a one-line message: {msg!r}"
        return "error", f"{type(e).__name__}: {msg}"
    except BaseException as e:  # noqa: BLE001 - anything else is a bug
        import traceback

        tb = traceback.extract_tb(e.__traceback__)
        where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
        return "crash", f"{type(e).__name__}: {str(e)[:200]} @ {where}"
    del m
    return "ok", "loaded"


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker_main(limit_extra_mib: int) -> None:
    """Read case paths from stdin (one a line); answer one JSON line per case."""
    import resource

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax.numpy as jnp

    import engine.gguf_loader  # noqa: F401  (import everything before the limit)
    from engine.chat_template import ChatTemplate  # noqa: F401
    from engine.tokenizer import Tokenizer  # noqa: F401

    (jnp.ones(4) + 1).block_until_ready()  # start XLA's CPU client
    warm = os.environ.get("PINWHEEL_FUZZ_WARM")
    if warm:  # one good load, so caches and thread pools exist before memory is measured
        load_outcome(warm)
    vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    lim = vm + limit_extra_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        before = _peak_rss()
        t0 = time.perf_counter()
        outcome, detail = load_outcome(path)
        dt = time.perf_counter() - t0
        print(json.dumps({"outcome": outcome, "detail": detail, "s": round(dt, 4),
                          "rss_growth": _peak_rss() - before}), flush=True)


class Worker:
    """A worker process with a watchdog: a case that does not answer in time is a timeout."""

    def __init__(self, limit_extra_mib: int = 2048, warm: str | None = None):
        env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
        if warm:
            env["PINWHEEL_FUZZ_WARM"] = str(warm)
        self.p = subprocess.Popen([sys.executable, "-m", "bench.fuzz_gguf", "--worker", str(limit_extra_mib)],
                                  cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        ready = self._read(180)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError("fuzz worker did not start")

    def _read(self, timeout: float):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        line = self.p.stdout.readline()
        return json.loads(line) if line else {"outcome": "crash", "detail": f"worker died (rc {self.p.poll()})"}

    def run(self, path: str, timeout: float) -> dict:
        self.p.stdin.write(path + "\n")
        self.p.stdin.flush()
        res = self._read(timeout)
        if res is None:
            return {"outcome": "timeout", "detail": f"no answer in {timeout} s", "s": timeout}
        return res

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def run_cases(cases, folder: Path, timeout: float = 10.0, max_rss_mib: int = 256, limit_extra_mib: int = 2048,
              warm: str | None = None, progress=None) -> list[dict]:
    """Run (name, bytes) cases through workers; returns one record per case."""
    results = []
    worker = None
    path = folder / "case.gguf"
    try:
        for i, (name, data) in enumerate(cases):
            if worker is None:
                worker = Worker(limit_extra_mib, warm)
            path.write_bytes(data)
            res = worker.run(str(path), timeout)
            if res["outcome"] in ("timeout",) or (res["outcome"] == "crash" and "worker died" in res["detail"]):
                worker.close()
                worker = None
            if res["outcome"] in ("error", "ok") and res.get("rss_growth", 0) > max_rss_mib * 2**20:
                res["detail"] = f"peak RSS +{res['rss_growth'] / 2**20:.0f} MiB; " + res["detail"]
                res["outcome"] = "bigalloc"
            if res["outcome"] == "error" and "memory" in res["detail"].lower():
                res["outcome"] = "bigalloc"  # a few-hundred-KB file must never need the memory limit
            res["case"] = name
            results.append(res)
            if progress:
                progress(i, res)
    finally:
        if worker is not None:
            worker.close()
    return results


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(int(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench.fuzz_gguf", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=5000, help="total cases, explicit catalogue included (default 5000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--max-rss-mib", type=int, default=256, help="peak-RSS growth that counts as a big allocation")
    ap.add_argument("--json", default=None, help="write every case's record here")
    ap.add_argument("--no-explicit", action="store_true", help="random cases only")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="pinwheel-fuzz-") as tmp:
        tmp = Path(tmp)
        bases = write_bases(tmp / "bases")
        layouts = {n: parse_layout(p.read_bytes()) for n, p in bases.items()}
        must_refuse: set[str] = set()
        names = list(layouts)
        n_explicit = 0

        def gen():
            nonlocal n_explicit
            for n, lay in ([] if args.no_explicit else layouts.items()):  # one base's cases in memory at a time
                for c, b, expect in explicit_cases(lay):
                    if n_explicit == args.cases:
                        break
                    n_explicit += 1
                    if expect == "error":
                        must_refuse.add(f"{n}: {c}")
                    yield f"{n}: {c}", b
            for _ in range(args.cases - n_explicit):
                n = rng.choice(names)
                c, b = random_case(layouts[n], rng)
                yield f"{n}: {c}", b

        counts: dict[str, int] = {}
        t0 = time.perf_counter()

        def progress(i, res):
            counts[res["outcome"]] = counts.get(res["outcome"], 0) + 1
            if res["outcome"] not in ("error", "ok"):
                print(f"  [{res['outcome']}] {res['case']}: {res['detail']}", flush=True)
            if (i + 1) % 500 == 0:
                print(f"{i + 1} cases, {time.perf_counter() - t0:.0f} s: {counts}", flush=True)

        results = run_cases(gen(), tmp, timeout=args.timeout, max_rss_mib=args.max_rss_mib,
                            warm=str(bases[names[0]]), progress=progress)
    explicit = results[:n_explicit]
    summary = {
        "cases": len(results), "explicit_cases": n_explicit, "random_cases": len(results) - n_explicit,
        "seconds": round(time.perf_counter() - t0, 1),
        "outcomes": {k: sum(r["outcome"] == k for r in results) for k in ("error", "ok", "crash", "timeout", "bigalloc")},
        "explicit_not_refused": [r["case"] for r in explicit if r["outcome"] != "error" and r["case"] in must_refuse],
        "explicit_loaded_leniently": [r["case"] for r in explicit if r["outcome"] == "ok" and r["case"] not in must_refuse],
        "slowest_s": max((r.get("s", 0) for r in results), default=0),
        "max_rss_growth_mib": round(max((r.get("rss_growth", 0) for r in results), default=0) / 2**20, 1),
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    bad = summary["outcomes"]["crash"] + summary["outcomes"]["timeout"] + summary["outcomes"]["bigalloc"]
    return 1 if bad or summary["explicit_not_refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
