"""Reading a GGUF chat model: validate, read metadata, turn tensors into the engine's block
formats (engine.quant: the file's own Q8_0/Q4_0/Q4_1/Q4_K blocks as stored, other types
re-quantized per 32 values).

A GGUF file comes from a stranger, so nothing in it is trusted: the header's counts are checked
against the file size before the `gguf` reader walks them, every tensor is checked against the
shapes the metadata implies, and every failure becomes one ModelFileError line.
"""
from __future__ import annotations

import mmap
import os
import struct
from array import array
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .config import RECURRENT, ModelConfig
from .errors import ModelFileError, NotEnoughMemoryError
from . import quant
from .families import FAMILIES, FAMILY_NAMES, SUPPORTED_ARCHS, Family, fused_qkv, model_tensors
from .forward import Layers, Params
from .quant import QLinear
from .sysmem import trim

# The tensor types a file may hold. Q8_0/Q4_0/Q4_1/Q4_K are kept as stored, and Q6_K, Q5_x,
# IQ4_x, Q3_K, Q2_K, IQ3_x, IQ2_x and IQ1_x where the kernel has a vector tile for them (engine.quant.NATIVE,
# held_formats); the rest (and those, on the XLA path) are dequantized by gguf-py and
# re-quantized to Q8_0 (engine.quant.convert). Each is checked against llama.cpp on a file its quantizer made
# (tests/engine/test_quant_types.py; the IQ2 and IQ1 types, which llama.cpp makes only with an
# importance matrix, through its quantizer with a uniform one).
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K",
                   "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_XXS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M")
# Smallest on-disk size of one key/value pair and one tensor-info record: a header that
# claims more of them than the file could hold is lying, and is refused before parsing.
_MIN_KV_BYTES = 8 + 1 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8
_LIMITS = dict(n_layers=1024, d_model=65536, n_heads=1024, n_kv_heads=1024, head_dim=4096, ffn_dim=1 << 20,
               vocab_size=1 << 22)
# The gguf reader keeps ~1.4 KB of Python objects per string in a metadata array: cap the strings
# a file may make it build (real vocabularies plus merges stay under ~0.5M: Llama 3 has 128k tokens
# and 280k merges), the numbers (scores and token types: two per token; ~40 B each once listed),
# and how deep arrays may nest (each level is a Python recursion in the reader).
_MAX_ARRAY_STRINGS = 1 << 20
_MAX_ARRAY_NUMBERS = 1 << 22
_MAX_ARRAY_DEPTH = 4


def check_header(path: Path) -> int:
    """Cheap checks before the gguf reader touches the file; returns the file size."""
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelFileError(f"not a file: {path}")
    size = path.stat().st_size
    if size == 0:
        raise ModelFileError(f"model file is empty: {path}")
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError as e:
        raise ModelFileError(f"cannot read model file {path}: {e.strerror or e}") from None
    if len(head) < 4 or head[:4] != b"GGUF":
        raise ModelFileError(f"{path.name} is not a GGUF model file (it does not start with the GGUF signature)")
    if len(head) < 24:
        raise ModelFileError(f"GGUF file is truncated inside its header ({size} bytes): {path}")
    version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3):
        raise ModelFileError(f"unsupported GGUF version {version} (supported: 2, 3): {path}")
    if n_kv * _MIN_KV_BYTES > size or n_tensors * _MIN_TENSOR_INFO_BYTES > size:
        raise ModelFileError(
            f"corrupt GGUF header: it claims {n_tensors} tensors and {n_kv} metadata entries, "
            f"more than a {size}-byte file can hold: {path}"
        )
    return size


def read_gguf(path: str | os.PathLike):
    """Open with the gguf package after the header checks; any parse failure is one line."""
    import gguf

    p = Path(path)
    check_header(p)
    try:
        with np.errstate(all="ignore"):  # wrapped uint64 sums in the reader: caught by the checks below
            return _checked_reader(gguf)(p, "r")
    except (ValueError, IndexError, KeyError, TypeError, struct.error, OverflowError, MemoryError) as e:
        cut = _cut_short(p)  # the commonest broken file, said in plain words rather than the parser's
        raise ModelFileError(cut or f"malformed GGUF file ({type(e).__name__}: {_short(e)}): {p}") from None


def _cut_short(p: Path) -> str | None:
    from .gguf_header import HeaderError, read_header

    try:
        read_header(p)
    except HeaderError as e:
        if "cut short" in str(e):
            return f"{p.name}: {e}"
    return None


_READER_CLASS = None


def _checked_reader(gguf):
    """gguf.GGUFReader with bounds: the stock reader slices its memmap without checking, so a
    read past the end yields a short array and the walk goes on (an array claiming 2^40 numbers
    loops 2^40 times, growing a list); here a short read, an array that cannot fit in the rest of
    the file, too many strings or numbers or too-deep nesting is a ValueError. Numeric arrays are read as one
    view (contents() returns the same list) instead of one object per number."""
    global _READER_CLASS
    if _READER_CLASS is not None:
        return _READER_CLASS
    V = gguf.GGUFValueType

    class CheckedReader(gguf.GGUFReader):
        _n_strings = 0
        _n_numbers = 0
        _depth = 0

        def _get(self, offset, dtype, count=1, override_order=None):
            arr = super()._get(offset, dtype, count, override_order)
            if len(arr) != int(count):
                raise ValueError(f"file ends inside a field at byte {offset}")
            return arr

        def _get_field_parts(self, orig_offs, raw_type):
            if raw_type != V.ARRAY:
                return super()._get_field_parts(orig_offs, raw_type)
            raw_itype = self._get(orig_offs, np.uint32)
            alen = self._get(orig_offs + 4, np.uint64)
            itype, n = V(int(raw_itype[0])), int(alen[0])
            nptype = self.gguf_scalar_to_np.get(itype)
            least = np.dtype(nptype).itemsize if nptype is not None else 8 if itype == V.STRING else 12
            room = len(self.data) - orig_offs - 12
            if n * least > room:
                raise ValueError(f"metadata array at byte {orig_offs} claims {n} items, more than the "
                                 f"{room} bytes after it can hold")
            if nptype is not None:  # one view for the whole array
                self._n_numbers += n
                if self._n_numbers > _MAX_ARRAY_NUMBERS:
                    raise ValueError(f"metadata arrays hold more than {_MAX_ARRAY_NUMBERS} numbers")
                vals = self._get(orig_offs + 12, nptype, n)
                return 12 + int(vals.nbytes), [raw_itype, alen, vals], [2], [V.ARRAY] + ([itype] if n else [])
            self._n_strings += n
            if self._n_strings > _MAX_ARRAY_STRINGS:
                raise ValueError(f"metadata arrays hold more than {_MAX_ARRAY_STRINGS} strings")
            if self._depth >= _MAX_ARRAY_DEPTH:
                raise ValueError(f"metadata arrays nested more than {_MAX_ARRAY_DEPTH} deep")
            if itype == V.STRING:
                return self._string_array(orig_offs, raw_itype, alen, n)
            self._depth += 1
            try:
                return super()._get_field_parts(orig_offs, raw_type)
            finally:
                self._depth -= 1

        def _string_array(self, orig_offs, raw_itype, alen, n):
            """An array of strings as (start, size) pairs into the file, decoded only when
            contents() asks (nested ones: one memoryview slice a string, which the stock
            contents() reads). The stock walk builds two numpy arrays per string (2.6 s of every
            start for the default model's vocabulary); a memoryview a string still cost ~200 B
            each, 50 MB for a 262k vocabulary, much of it stranded in the heap once freed."""
            mv = memoryview(self.data)
            pos, end = orig_offs + 12, len(self.data)
            run = _StringRun(self.data) if self._depth == 0 else None
            parts, idxs = [raw_itype, alen], []
            u64 = struct.Struct("<Q").unpack_from
            for _ in range(n):
                if pos + 8 > end:
                    raise ValueError(f"file ends inside a string at byte {pos}")
                size, = u64(mv, pos)
                pos += 8
                if size > end - pos:
                    raise ValueError(f"a string at byte {pos} claims {size} bytes, more than the file holds")
                if run is not None:
                    run.starts.append(pos)
                else:
                    idxs.append(len(parts))
                    parts.append(mv[pos : pos + size])
                pos += size
            if run is not None:
                run.starts.append(pos + 8)  # where a next string's text would start: the sizes follow
                parts.append(run)
                idxs.append(2)
            return pos - orig_offs, parts, idxs, [V.ARRAY, V.STRING]

        def _push_field(self, field, skip_sum=False):
            if isinstance(field.parts[-1], _StringRun):
                field = _StringArrayField(*field)
            return super()._push_field(field, skip_sum)

    class _StringArrayField(gguf.ReaderField):
        """A field whose strings are a _StringRun: contents() as the stock field's."""
        __slots__ = ()

        def contents(self, index_or_slice=slice(None)):
            return self.parts[-1].decode(index_or_slice)

    _READER_CLASS = CheckedReader
    return CheckedReader


class _StringRun:
    """The strings of one metadata array as offsets into the mapped file: 8 B a string until
    decoded. String i's text starts at starts[i] and ends 8 bytes (the next one's size) before
    starts[i + 1]."""

    __slots__ = ("data", "starts")

    def __init__(self, data):
        self.data = data
        self.starts = array("q")

    def decode(self, index_or_slice=slice(None)):
        buf = getattr(self.data, "_mmap", None) or memoryview(self.data)  # mmap slices are bytes
        st = self.starts
        if isinstance(index_or_slice, int):
            i = range(len(st) - 1)[index_or_slice]
            return str(bytes(buf[st[i] : st[i + 1] - 8]), encoding="utf-8")
        if index_or_slice == slice(None) and isinstance(buf, mmap.mmap):  # what metadata() asks
            return [str(buf[a : b - 8], encoding="utf-8") for a, b in zip(st, st[1:])]
        return [str(bytes(buf[st[i] : st[i + 1] - 8]), encoding="utf-8")
                for i in range(len(st) - 1)[index_or_slice]]


def _short(e: BaseException, n: int = 160) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def metadata(reader) -> dict[str, Any]:
    """GGUF key/values as plain Python values (lists for arrays)."""
    md: dict[str, Any] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            md[key] = f.contents()
        except Exception as e:  # a field the gguf package itself cannot decode
            raise ModelFileError(f"unreadable metadata field {key!r}: {_short(e)}") from None
    return md


# Arrays longer than this (the vocabulary's tokens, scores, types and merges: ~0.4 KB a token as
# Python objects) are left out of Model.metadata; the tokenizer keeps its own compact copy.
SMALL_ARRAY = 256


def small_metadata(md: dict[str, Any]) -> dict[str, Any]:
    """md without its big arrays: what a loaded Model keeps (every scalar, short lists)."""
    return {k: v for k, v in md.items() if not isinstance(v, list) or len(v) <= SMALL_ARRAY}


def _get(md: dict, key: str, kind: type, default: Any = None):
    v = md.get(key, default)
    if v is None:
        raise ModelFileError(f"missing metadata key {key!r}")
    if kind is int and isinstance(v, float) and v.is_integer():
        v = int(v)
    if kind is float and isinstance(v, int):
        v = float(v)
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise ModelFileError(f"metadata key {key!r} has the wrong type ({type(v).__name__})")
    return v


def _ffn_widths(md: dict, arch: str) -> tuple[int, ...]:
    """feed_forward_length: one width, or (llama.cpp's get_key_or_arr) one per layer."""
    key = f"{arch}.feed_forward_length"
    v = md.get(key)
    if isinstance(v, list):
        if v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return tuple(v)
        raise ModelFileError(f"metadata key {key!r} has the wrong type (a list, but not of widths)")
    return (_get(md, key, int),)


def config_from_metadata(md: dict, n_vocab_tokens: int | None = None) -> ModelConfig:
    arch = md.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFileError("missing metadata key 'general.architecture'")
    if arch not in SUPPORTED_ARCHS:
        raise ModelFileError(f"unsupported model architecture {arch!r} (supported: "
                             f"{', '.join(f'{a} ({FAMILY_NAMES[a]})' for a in SUPPORTED_ARCHS)})")
    fam = FAMILIES[arch]
    n_heads = _get(md, f"{arch}.attention.head_count", int)
    d_model = _get(md, f"{arch}.embedding_length", int)
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = _get(md, f"{arch}.vocab_size", int, len(tokens) if isinstance(tokens, list) else n_vocab_tokens)
    cfg = ModelConfig(
        arch=arch,
        n_layers=_get(md, f"{arch}.block_count", int),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=_get(md, f"{arch}.attention.head_count_kv", int, n_heads),
        head_dim=_get(md, f"{arch}.attention.key_length", int, d_model // max(n_heads, 1)),
        ffn_dim=max(ffn) if (ffn := _ffn_widths(md, arch)) else 0,
        vocab_size=vocab,
        context_length=_get(md, f"{arch}.context_length", int, 2048),
        rope_base=_get(md, f"{arch}.rope.freq_base", float, 10000.0),
        rms_eps=_get(md, f"{arch}.attention.layer_norm_rms_epsilon", float, 1e-5),
        name=str(md.get("general.name") or ""),
    )
    for k, hi in _LIMITS.items():
        v = getattr(cfg, k)
        if not 0 < v <= hi:
            raise ModelFileError(f"implausible model shape: {k} = {v}")
    if isinstance(md.get(f"{arch}.feed_forward_length"), list):  # per layer: one for each, as llama.cpp requires
        ffn = _ffn_widths(md, arch)
        if len(ffn) != cfg.n_layers or not all(0 < f <= _LIMITS["ffn_dim"] and f % 32 == 0 for f in ffn):
            raise ModelFileError(f"implausible per-layer FFN widths ({len(ffn)} for {cfg.n_layers} layers)")
        if len(set(ffn)) > 1 and not fam.layer_widths:
            raise ModelFileError(f"per-layer FFN widths are not supported for {arch} models")
        cfg = replace(cfg, ffn_dims=ffn if len(set(ffn)) > 1 else ())
    if cfg.d_model % 32 or cfg.ffn_dim % 32 or (cfg.n_heads * cfg.head_dim) % 32:
        raise ModelFileError(f"unsupported model shape: widths must be multiples of 32 (d_model {cfg.d_model}, "
                             f"FFN {cfg.ffn_dim}, {cfg.n_heads} heads of {cfg.head_dim})")
    if cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2 or cfg.kv_dim % 32:
        raise ModelFileError(
            f"unsupported attention shape: {cfg.n_heads} heads, {cfg.n_kv_heads} KV heads, head size {cfg.head_dim}"
        )
    if not 0 < cfg.context_length <= (1 << 24):
        raise ModelFileError(f"implausible context length {cfg.context_length}")
    if not (np.isfinite(cfg.rope_base) and cfg.rope_base > 0 and np.isfinite(cfg.rms_eps) and 0 <= cfg.rms_eps < 1):
        raise ModelFileError(f"implausible rope base {cfg.rope_base} or RMS epsilon {cfg.rms_eps}")
    rope_dims = md.get(f"{arch}.rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim and not (fam.partial_rotary and isinstance(rope_dims, int)
                                           and 0 < rope_dims < cfg.head_dim and rope_dims % 2 == 0):
        raise ModelFileError(f"partial rotary embeddings ({rope_dims} of {cfg.head_dim} dims) are not supported "
                             f"for {arch} models")
    try:
        cfg = replace(cfg, rope_dims=0 if rope_dims == cfg.head_dim else rope_dims, **fam.config_traits(md, cfg))
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise ModelFileError(f"implausible {arch} metadata ({_short(e)})") from None
    if cfg.local_layers and not 0 < cfg.sliding_window <= (1 << 24):
        raise ModelFileError(f"implausible sliding window {cfg.sliding_window}")
    if not all(np.isfinite(v) and v > 0 for v in (cfg.embed_scale, cfg.scores_scale, cfg.rope_scale,
                                                  cfg.rope_attn_factor, cfg.rope_local_base)):
        raise ModelFileError(f"implausible {arch} scales in the metadata")
    return cfg


# --- tensors ---------------------------------------------------------------------------------


def _stored(t, rows: slice | None = None) -> np.ndarray:
    """The file's data of a tensor (or a slice of its rows), checked against the shape the
    tensor's header declares: block types as bytes [rows, row bytes], F32/F16 as numbers."""
    import gguf

    name = t.tensor_type.name
    if name not in SUPPORTED_TYPES:
        raise ModelFileError(f"unsupported tensor type {name} in {t.name} (supported: {', '.join(SUPPORTED_TYPES)})")
    shape = tuple(int(x) for x in reversed(t.shape.tolist()))
    want = gguf.quants.quant_shape_to_byte_shape(shape, t.tensor_type) if name not in ("F32", "F16") else None
    data = np.asarray(t.data)
    if want is not None and tuple(data.shape) != tuple(want):
        raise ModelFileError(f"tensor {t.name} is corrupt or truncated (stored as {tuple(data.shape)}, "
                             f"expected {tuple(want)})")
    return data if rows is None else data[rows]  # 2-D data is stored one row per first index


def _dequantize(t, rows: slice | None = None) -> np.ndarray:
    """A tensor (or a slice of its rows) as float32 in numpy order (rows = output features)."""
    import gguf

    name = t.tensor_type.name
    shape = tuple(int(x) for x in reversed(t.shape.tolist()))
    try:
        data = _stored(t, rows)
        if rows is not None:
            shape = (data.shape[0],) + shape[1:]
        if name in ("F32", "F16"):
            out = data.astype(np.float32).reshape(shape)
        else:
            out = gguf.quants.dequantize(data, t.tensor_type).astype(np.float32).reshape(shape)
    except ModelFileError:
        raise
    except Exception as e:
        raise ModelFileError(f"tensor {t.name} is corrupt or truncated ({_short(e)})") from None
    if not np.isfinite(out).all():
        raise ModelFileError(f"tensor {t.name} holds NaN or infinite values")
    return out


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation so rotate-half RoPE applies (pitfall 1). Rows are
    output features, so this works on f32 rows and on rows of quantized blocks alike."""
    out, rest = w.shape[0], w.shape[1:]
    return w.reshape(n_heads, out // n_heads // 2, 2, *rest).swapaxes(1, 2).reshape(out, *rest)


class _Tensors:
    def __init__(self, reader, file_size: int):
        self.by_name = {}
        self.data = reader.data  # the file's memory map
        # llama.cpp's rule: tensors lie in the data section in the order of their infos, each at
        # the end of the previous one rounded up to the alignment (no overlaps, gaps or strays).
        align, expected = int(reader.alignment), 0
        for t in reader.tensors:
            if t.data_offset + int(t.n_bytes) > file_size:
                raise ModelFileError(f"tensor {t.name} lies outside the file (truncated download?)")
            start = int(t.data_offset) - int(reader.data_offset)
            if start != expected:
                raise ModelFileError(f"tensor {t.name} starts at byte {start} of the data section, not at "
                                     f"{expected} where the tensors before it end (overlapping or misplaced data)")
            expected += -(-int(t.n_bytes) // align) * align
            self.by_name[t.name] = t

    def check(self, wanted: dict[str, tuple[tuple[int, ...], bool]]) -> None:
        """Every tensor the model needs is present, of a supported type and of the shape the
        metadata implies, before anything is allocated: the allocation is then bounded by what
        the file really holds, whatever the metadata claims."""
        for name, (shape, optional) in wanted.items():
            t = self.by_name.get(name)
            if t is None:
                if optional:
                    continue
                raise ModelFileError(f"missing tensor {name}")
            if t.tensor_type.name not in SUPPORTED_TYPES:
                raise ModelFileError(f"unsupported tensor type {t.tensor_type.name} in {name} "
                                     f"(supported: {', '.join(SUPPORTED_TYPES)})")
            have = tuple(int(x) for x in reversed(t.shape.tolist()))
            if have != shape:
                raise ModelFileError(f"tensor {name} has shape {have}, the metadata implies {shape}")

    def release_pages(self, start: int = 0, length: int = 0) -> None:
        """Drop the file's pages that reading the tensors brought into memory (they are clean
        and re-read on demand): otherwise a mapped file counts in RSS as much as the weights.
        start, length: only the pages of those bytes of the file (length 0: the whole file)."""
        mm = getattr(self.data, "_mmap", None)
        if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            if length:  # madvise wants a page-aligned start
                start, length = start - start % mmap.PAGESIZE, length + start % mmap.PAGESIZE
            try:
                mm.madvise(mmap.MADV_DONTNEED, start, length or len(mm))
            except (OSError, ValueError):
                pass

    def type_of(self, name: str) -> str | None:
        t = self.by_name.get(name)
        return None if t is None else t.tensor_type.name

    def _shaped(self, name: str, shape: tuple[int, ...]):
        """Tensor `name`'s header, checked to have this shape."""
        t = self.by_name.get(name)
        if t is None:
            raise ModelFileError(f"missing tensor {name}")
        full = tuple(int(x) for x in reversed(t.shape.tolist()))
        if full != shape:
            raise ModelFileError(f"tensor {name} has shape {full}, the metadata implies {shape}")
        return t

    def relay(self, name: str, shape: tuple[int, ...], fmt: str, dst: tuple, g0: int, heads: int | None = None,
              block: int = 4096) -> bool:
        """Tensor `name` straight from the file's bytes into groups g0.. of one layer's arrays in
        the kernel's layout (engine.quant.relay), `block` rows at a time, where the kernel library
        re-lays its type in format fmt; heads: un-permute its rows (taken whole, read in
        unpermute_qk's order). False, with nothing written, where it does not (then blocks()
        and quant.interleave do it)."""
        t = self._shaped(name, shape)
        if not quant.relayable(t.tensor_type.name, fmt):
            return False
        block = shape[0] if heads is not None else block  # (a multiple of 8: whole groups a block)
        order = None if heads is None else unpermute_qk(np.arange(shape[0]), heads)  # (rows read in this order)
        row_bytes = int(t.n_bytes) // shape[0]
        for r0 in range(0, shape[0], block):
            rows = slice(r0, min(r0 + block, shape[0]))
            raw = _stored(t, rows)  # a view of the file's map: no copy
            try:
                bad = quant.relay(raw, fmt, dst, g0 + r0 // quant.GROUP, order)
            except ValueError as e:
                raise ModelFileError(f"tensor {name} cannot be stored: {e}") from None
            if bad:
                raise ModelFileError(f"tensor {name} holds NaN or infinite scales")
            self.release_pages(int(t.data_offset) + r0 * row_bytes, (rows.stop - r0) * row_bytes)
        return True

    def blocks(self, name: str, shape: tuple[int, ...], fmt: str, block: int = 4096):
        """Tensor `name` in format fmt (engine.quant), `block` rows at a time: yields (first row,
        q, d, m) in row layout, so no whole f32 (or even block) copy of a large tensor exists."""
        t = self._shaped(name, shape)
        type_name = t.tensor_type.name
        row_bytes = int(t.n_bytes) // shape[0]
        for r0 in range(0, shape[0], block):
            rows = slice(r0, min(r0 + block, shape[0]))
            raw = _stored(t, rows) if type_name in quant.NATIVE else None
            try:
                q, d, m = quant.convert(type_name, raw, lambda: _dequantize(t, rows), fmt)
            except ValueError as e:
                raise ModelFileError(f"tensor {name} cannot be stored: {e}") from None
            if not (np.isfinite(d).all() and (m is None or np.isfinite(m).all())):
                raise ModelFileError(f"tensor {name} holds NaN or infinite scales")
            yield r0, q, d, m
            # this block's file pages, now that it is held: a tensor's pages would otherwise stay
            # until its layer is done, the embedding's all at once (+178 MB at the peak for a
            # 262k-token vocabulary in Q8_0)
            self.release_pages(int(t.data_offset) + r0 * row_bytes, (rows.stop - r0) * row_bytes)

    def get(self, name: str, shape: tuple[int, ...], optional: bool = False) -> np.ndarray | None:
        t = self.by_name.get(name)
        if t is None:
            if optional:
                return None
            raise ModelFileError(f"missing tensor {name}")
        w = _dequantize(t)
        if w.shape != shape:
            raise ModelFileError(f"tensor {name} has shape {w.shape}, the metadata implies {shape}")
        return w


def _family(cfg: ModelConfig) -> Family:
    return FAMILIES[cfg.arch]


def layer_formats(names: list[list[tuple[str, int, int | None]]], type_of, xla: bool = False) -> list:
    """The block format each layer of a stacked weight is held in, from the types of that
    layer's merged tensors and the formats this path holds (quant.held_formats): one format, or
    on the kernel's path, where the merged tensors' own formats differ, a tuple of one format a
    member (quant.SplitLinear). The XLA path merges them into one (its forms are all ~8.5 bits a
    value: nothing to save, and a product more)."""
    formats = quant.held_formats(xla)

    def of(members):
        own = tuple(quant.group_format([type_of(n)], formats) for n, _, _ in members)
        if xla or len(set(own)) == 1:
            return quant.group_format((type_of(n) for n, _, _ in members), formats)
        return own

    return [of(members) for members in names]


def _runs(key) -> list[tuple[str, slice]]:
    """A layer's format (layer_formats) as runs of members held alike: (format, members)."""
    if isinstance(key, str):
        return [(key, slice(None))]
    out, start = [], 0
    for i in range(1, len(key) + 1):
        if i == len(key) or key[i] != key[start]:
            out.append((key[start], slice(start, i)))
            start = i
    return out


def _group(tensors: _Tensors, names: list[list[tuple[str, int, int | None]]], inp: int, stacked: bool = True,
           xla: bool = False):
    """One stacked weight from per-layer lists of (tensor name, rows, heads to un-permute or
    None), merged along the output axis in that order. Layers whose tensors differ in type (a
    Q4_K_M file's Q6_K attn_v and ffn_down in some layers) are stacked per format
    (quant.MixedLinear), so that each layer keeps the narrowest format its tensors allow."""
    formats = layer_formats(names, tensors.type_of, xla)

    def part(key):
        layers = [m for m, f in zip(names, formats) if f == key]
        pieces = [_stack(tensors, [m[run] for m in layers], inp, fmt, stacked, xla) for fmt, run in _runs(key)]
        return pieces[0] if len(pieces) == 1 else quant.SplitLinear(tuple(pieces))

    return quant.mixed([part(key) for key in dict.fromkeys(formats)], formats)


def _stack(tensors: _Tensors, names: list[list[tuple[str, int, int | None]]], inp: int, fmt: str,
           stacked: bool = True, xla: bool = False):
    """One stacked weight, every layer in block format fmt. stacked=False: one layer, no layer
    axis (the embedding, the head). Built straight into the arrays JAX adopts, then the file's
    pages are dropped: the peak is the model plus one tensor. xla: in the XLA path's form
    (engine.quant.XLA_FORMS), else the kernel's layout."""
    out = sum(r for _, r, _ in names[0])
    if xla:  # no kernel: the XLA path's own int8 form, and nothing of the kernel's layout
        form, pieces = quant.XLA_FORMS[fmt], quant.xla_pieces(inp)
        q, d, m = quant.empty_xla(form, (len(names),), out, inp)
    else:  # the kernel's chunked layout, written in place group by group
        q, d, m = quant.empty_chunked(fmt, (len(names),), out, inp)
    G = quant.GROUP
    layer = lambda i: tuple(None if a is None else a[i] for a in (q, d, m))  # noqa: E731

    def put(i, r0, part):  # rows r0.. of layer i; r0 and every member's size are multiples of 8
        if xla:
            for dst, a in zip((q, d, m), quant.xla_rows(*part, fmt)):
                if dst is not None:
                    quant.put_xla_rows(dst[i], r0, a, pieces)
            return
        for dst, a in zip(layer(i), quant.interleave(*part, fmt)):
            if dst is not None:
                quant.put_groups(dst, r0 // G, a)

    for i, members in enumerate(names):
        r0 = 0
        for name, rows, heads in members:
            if not xla and tensors.relay(name, (rows, inp), fmt, layer(i), r0 // G, heads):
                pass  # the file's blocks re-laid by the kernel library, in place
            elif heads is None:
                for b0, *part in tensors.blocks(name, (rows, inp), fmt):
                    put(i, r0 + b0, part)
            else:  # un-permuting mixes rows across the tensor: q and k are taken whole (<= d x d)
                (_, *part), = tensors.blocks(name, (rows, inp), fmt, block=rows)
                put(i, r0, [None if a is None else unpermute_qk(a, heads) for a in part])
            r0 += rows
        tensors.release_pages()  # this layer's file pages: the peak stays one layer above the model
    if not stacked:
        q, d, m = (None if a is None else a[0] for a in (q, d, m))
    if xla:
        return QLinear(*map(quant.to_device, (q, d, m)), form, out, pieces)
    return QLinear(*map(quant.to_device, (q, d, m)), fmt, out)


def xla_path() -> bool:
    """True when this process runs the XLA path (no native kernel): the loader then holds the
    weights in the XLA path's form (engine.quant.XLA_FORMS) instead of the kernel's."""
    from . import kernels

    return not kernels.available()


def _matrices(cfg: ModelConfig, has, tied: bool) -> dict[str, tuple[list, int, bool]]:
    """Every block-quantized weight the engine holds: key -> (per-layer lists of (tensor name,
    rows, heads to un-permute or None), input width, stacked over layers). has(name): the file
    holds that tensor (fused or split Q/K/V)."""
    fam = _family(cfg)
    L, d, F, hd, H, KVH, V = (cfg.n_layers, cfg.d_model, cfg.ffn_dim, cfg.head_dim,
                             cfg.n_heads, cfg.n_kv_heads, cfg.vocab_size)
    perm = (lambda n: n) if fam.permuted_qk else (lambda n: None)  # noqa: E731

    def qkv(i: int, p: str) -> list:
        if fused_qkv(fam, i, has):
            return [(p + "attn_qkv.weight", (H + 2 * KVH) * hd, None)]
        Q = (2 if cfg.attn_gate else 1) * H * hd  # Qwen3.5: [q | gate] per head
        return [(p + "attn_q.weight", Q, perm(H)), (p + "attn_k.weight", KVH * hd, perm(KVH)),
                (p + "attn_v.weight", KVH * hd, None)]

    def gate_up(p: str) -> list:
        if fam.fused_gate_up:
            return [(p + "ffn_up.weight", 2 * F, None)]
        return [(p + "ffn_gate.weight", F, None), (p + "ffn_up.weight", F, None)]

    blk = [f"blk.{i}." for i in range(L)]
    if cfg.per_layer_weights:  # Gemma 4: the layers' own weights are _layer_matrices'; these are global
        n = cfg.per_layer_dim * L
        out = {"embed": ([[("token_embd.weight", V, None)]], d, False),
               "pl_embed": ([[("per_layer_token_embd.weight", V, None)]], n, False),
               "pl_model_proj": ([[("per_layer_model_proj.weight", n, None)]], d, False)}
        return out | ({} if tied else {"head": ([[("output.weight", V, None)]], d, False)})
    att = [i for i in range(L) if cfg.kinds[i] != RECURRENT]  # hybrids: attention weights of these only
    out = {
        "wqkv": ([qkv(i, blk[i]) for i in att], d, True),
        "wo": ([[(blk[i] + "attn_output.weight", d, None)] for i in att], H * hd, True),
        "w_gate_up": ([gate_up(p) for p in blk], d, True),
        "w_down": ([[(p + "ffn_down.weight", d, None)] for p in blk], F, True),
        "embed": ([[("token_embd.weight", V, None)]], d, False),
    }
    if cfg.recurrent_layers:  # Gated DeltaNet: one input product for [qkv | z | beta | alpha] (engine.deltanet)
        rec = [blk[i] for i in range(L) if cfg.kinds[i] == RECURRENT]
        S, Hv = cfg.ssm_state, cfg.ssm_heads
        out["w_in"] = ([[(p + "attn_qkv.weight", cfg.conv_dim, None), (p + "attn_gate.weight", Hv * S, None),
                         (p + "ssm_beta.weight", Hv, None), (p + "ssm_alpha.weight", Hv, None)] for p in rec], d, True)
        out["w_ssm_out"] = ([[(p + "ssm_out.weight", d, None)] for p in rec], Hv * S, True)
    if not tied:
        out["head"] = ([[("output.weight", V, None)]], d, False)
    return out


def _layer_matrices(cfg: ModelConfig, i: int) -> dict[str, tuple[list, int]]:
    """Gemma 4 (per_layer_weights): layer i's matrices, each a stack of one layer -> (members,
    input width). Q/K/V merged where the layer owns its K/V, Q alone where it shares them."""
    d, H, KVH, hd, F, n, p = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim_of(i), cfg.ffn_width(i),
                              cfg.per_layer_dim, f"blk.{i}.")
    qkv = [(p + "attn_q.weight", H * hd, None)]
    if cfg.owns_kv(i):
        qkv += [(p + "attn_k.weight", KVH * hd, None), (p + "attn_v.weight", KVH * hd, None)]
    return {"wqkv": ([qkv], d), "wo": ([[(p + "attn_output.weight", d, None)]], H * hd),
            "w_gate_up": ([[(p + "ffn_gate.weight", F, None), (p + "ffn_up.weight", F, None)]], d),
            "w_down": ([[(p + "ffn_down.weight", d, None)]], F),
            "pl_gate": ([[(p + "inp_gate.weight", n, None)]], d), "pl_proj": ([[(p + "proj.weight", d, None)]], n)}


def _layer_vectors(cfg: ModelConfig, i: int) -> dict[str, tuple[str, int]]:
    """Gemma 4: layer i's f32 vectors, Layers field -> (tensor name, length)."""
    p, d, hd = f"blk.{i}.", cfg.d_model, cfg.head_dim_of(i)
    out = {"attn_norm": ("attn_norm.weight", d), "q_norm": ("attn_q_norm.weight", hd),
           "post_attn_norm": ("post_attention_norm.weight", d), "ffn_norm": ("ffn_norm.weight", d),
           "post_ffn_norm": ("post_ffw_norm.weight", d), "pl_norm": ("post_norm.weight", d),
           "out_scale": ("layer_output_scale.weight", 1)}
    if cfg.owns_kv(i):
        out["k_norm"] = ("attn_k_norm.weight", hd)
    return {k: (p + name, n) for k, (name, n) in out.items()}


def _vectors(cfg: ModelConfig) -> dict[str, tuple[list[str], int]]:
    """The f32 vectors a layer holds: Layers field -> (tensor names merged in order, length).
    Stacked over _vector_layers(cfg, field)."""
    d, hd, H, KVH = cfg.d_model, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    out = {"attn_norm": (["attn_norm.weight"], d), "ffn_norm": ([_family(cfg).ffn_norm], d)}
    if cfg.qkv_bias:
        out["qkv_bias"] = (["attn_q.bias", "attn_k.bias", "attn_v.bias"], (H + 2 * KVH) * hd)
    if cfg.qk_norm:
        out |= {"q_norm": (["attn_q_norm.weight"], hd), "k_norm": (["attn_k_norm.weight"], hd)}
    if cfg.post_norms:
        out |= {"post_attn_norm": (["post_attention_norm.weight"], d), "post_ffn_norm": (["post_ffw_norm.weight"], d)}
    if cfg.recurrent_layers:
        Hv = cfg.ssm_heads
        out |= {"rec_norm": (["attn_norm.weight"], d), "ssm_a": (["ssm_a"], Hv), "dt_bias": (["ssm_dt.bias"], Hv),
                "ssm_norm": (["ssm_norm.weight"], cfg.ssm_state)}
    return out


_RECURRENT_VECTORS = ("rec_norm", "ssm_a", "dt_bias", "ssm_norm")
_ATTENTION_VECTORS = ("attn_norm", "qkv_bias", "q_norm", "k_norm")


def _vector_layers(cfg: ModelConfig, key: str) -> list[int]:
    """The layers a Layers vector is stacked over: a hybrid's attention (or recurrent) layers for
    the fields only that kind has, else every layer."""
    if key in _RECURRENT_VECTORS:
        return [i for i, k in enumerate(cfg.kinds) if k == RECURRENT]
    if key in _ATTENTION_VECTORS:
        return [i for i, k in enumerate(cfg.kinds) if k != RECURRENT]
    return list(range(cfg.n_layers))


def weight_bytes(cfg: ModelConfig, type_of, xla: bool | None = None) -> int:
    """What load_params will hold, in bytes, from the tensor types alone (type_of(name) -> GGUF
    type name, None when absent): the block formats' sizes plus the f32 vectors. No tensor data
    is read. xla: for the XLA path's form (default: the path this process runs, xla_path())."""
    xla = xla_path() if xla is None else xla
    has = lambda n: type_of(n) is not None  # noqa: E731
    specs = [(names, inp) for names, inp, _ in _matrices(cfg, has, tied=not has("output.weight")).values()]
    if cfg.per_layer_weights:  # each layer's own matrices and vectors; output_norm, per_layer_proj_norm
        total = 4 * (cfg.d_model + cfg.per_layer_dim)
        for i in range(cfg.n_layers):
            specs += _layer_matrices(cfg, i).values()
            total += 4 * sum(n for _, n in _layer_vectors(cfg, i).values())
    else:  # the stacked vectors, output_norm, the DeltaNet conv taps (f32)
        total = (sum(len(_vector_layers(cfg, k)) * n for k, (_, n) in _vectors(cfg).items()) + cfg.d_model) * 4
        total += cfg.recurrent_layers * cfg.conv_dim * cfg.ssm_conv * 4
    for names, inp in specs:
        for members, key in zip(names, layer_formats(names, type_of, xla)):
            for fmt, run in _runs(key):
                rows = sum(r for _, r, _ in members[run])
                total += quant.nbytes(quant.XLA_FORMS[fmt] if xla else fmt, rows, inp)
    return total


def load_params(cfg: ModelConfig, tensors: _Tensors, xla: bool | None = None) -> tuple[Params, dict[str, np.ndarray]]:
    """The weights, and the rotary factor tensors the file has (by name). xla: hold the matrices
    in the XLA path's form (default: when this process runs the XLA path, xla_path()); one form
    only, never both."""
    xla = xla_path() if xla is None else xla
    d = cfg.d_model
    fam = _family(cfg)
    has = lambda n: n in tensors.by_name  # noqa: E731
    tensors.check(model_tensors(fam, cfg, has))
    tied = not has("output.weight")
    w = {key: _group(tensors, names, inp, stacked, xla)
         for key, (names, inp, stacked) in _matrices(cfg, has, tied).items()}
    out_norm = jax.device_put(tensors.get("output_norm.weight", (d,)))
    factors = {n: tensors.get(n, (cfg.rotary_dims // 2,)) for n in fam.rope_factors if has(n)}
    if cfg.per_layer_weights:
        layers = tuple(_layer_params(cfg, tensors, i, xla) for i in range(cfg.n_layers))
        pl_norm = jax.device_put(tensors.get("per_layer_proj_norm.weight", (cfg.per_layer_dim,)))
        return Params(w["embed"], layers, out_norm, w.get("head", w["embed"]), w["pl_embed"], w["pl_model_proj"],
                      pl_norm), factors
    vec = {}
    for key, (names, n) in _vectors(cfg).items():
        rows = [np.concatenate([_vector(tensors, f"blk.{i}.{t}") for t in names]) for i in _vector_layers(cfg, key)]
        vec[key] = jax.device_put(np.stack(rows))
    if cfg.recurrent_layers:  # the conv taps, f32 as the converter writes them
        vec["conv_w"] = jax.device_put(np.stack([tensors.get(f"blk.{i}.ssm_conv1d.weight", (cfg.conv_dim, cfg.ssm_conv))
                                                 for i in _vector_layers(cfg, "ssm_a")]))
    layers = Layers(wqkv=w["wqkv"], wo=w["wo"], w_gate_up=w["w_gate_up"], w_down=w["w_down"],
                    w_in=w.get("w_in"), w_ssm_out=w.get("w_ssm_out"), **vec)
    return Params(w["embed"], layers, out_norm, w.get("head", w["embed"])), factors


def _layer_params(cfg: ModelConfig, tensors: _Tensors, i: int, xla: bool) -> Layers:
    """Gemma 4: layer i's own weights, every field a stack of one layer (its shapes are its own)."""
    w = {key: _group(tensors, names, inp, True, xla) for key, (names, inp) in _layer_matrices(cfg, i).items()}
    vec = {key: jax.device_put(_vector(tensors, name)[None]) for key, (name, _) in _layer_vectors(cfg, i).items()}
    return Layers(**w, **vec)


def _vector(tensors: _Tensors, name: str) -> np.ndarray:
    t = tensors.by_name.get(name)
    if t is None:
        raise ModelFileError(f"missing tensor {name}")
    return _dequantize(t).reshape(-1)  # shapes were checked against the metadata


def params_nbytes(params: Params) -> int:
    import jax

    seen, total = set(), 0
    for leaf in jax.tree_util.tree_leaves(params):
        if id(leaf) not in seen:  # a tied head shares the embedding's arrays
            seen.add(id(leaf))
            total += int(leaf.nbytes)
    return total


@dataclass
class Model:
    path: Path
    config: ModelConfig
    params: Params
    tokenizer: Any
    chat_template: Any
    metadata: dict = field(repr=False)  # the file's key/values, arrays over SMALL_ARRAY items left out
    rope_factors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def freq_factors(self, n_ctx: int) -> np.ndarray | None:
        """The rotary factors llama.cpp uses for a context of n_ctx positions: Llama 3's
        rope_freqs; Phi-3's long factors past the original context, the short ones within it."""
        f = self.rope_factors
        if "rope_freqs.weight" in f:
            return f["rope_freqs.weight"]
        orig = self.config.rope_orig_context or self.config.context_length
        return f.get("rope_factors_long.weight" if n_ctx > orig else "rope_factors_short.weight")

    @property
    def weight_bytes(self) -> int:
        return params_nbytes(self.params)

    @property
    def name(self) -> str:
        return self.config.name or self.path.stem


def _mb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def check_fits(name: str, weights: int, kv_bytes: int) -> None:
    """Refuse, before allocating anything, a model whose weights and cache exceed the memory
    the machine has available now (psutil's estimate of what can be had without swapping)."""
    import psutil

    need = weights + kv_bytes
    available = psutil.virtual_memory().available
    if need > available:
        raise NotEnoughMemoryError(
            f"{name} needs about {_mb(need)} of memory (weights {_mb(weights)}, cache {_mb(need - weights)}) "
            f"but only {_mb(available)} is available: {_mb(need - available)} short; close other programs "
            "or choose a smaller model")


def check_model_file(path: str | os.PathLike) -> ModelConfig:
    """Everything about a model file that can be checked without reading its weights: the
    header, the metadata, the shape, the vocabulary and every tensor's presence, type and
    shape. Seconds at most; the window runs it before it lets go of the model that works."""
    from .tokenizer import Tokenizer

    p = Path(path).expanduser()
    size = check_header(p)
    reader = read_gguf(p)
    md = metadata(reader)
    reader.fields.clear()
    cfg = config_from_metadata(md)
    tok = Tokenizer.from_metadata(md)
    if tok.vocab_size != cfg.vocab_size:
        raise ModelFileError(f"vocabulary has {tok.vocab_size} tokens but the model expects {cfg.vocab_size}")
    tensors = _Tensors(reader, size)
    tensors.check(model_tensors(_family(cfg), cfg, lambda n: n in tensors.by_name))
    return cfg


def load_model(path: str | os.PathLike, xla: bool | None = None) -> Model:
    """Load a GGUF chat model; every failure is a ModelFileError with one clear line. xla: the
    weights in the XLA path's form; None (always, but in the bench that times both paths in one
    process): exactly when the native kernel is unavailable."""
    import jax

    from .budget import auto_budget
    from .chat_template import ChatTemplate
    from .code_pages import release_library_code
    from .tokenizer import Tokenizer

    p = Path(path).expanduser()
    size = check_header(p)
    reader = read_gguf(p)
    md = metadata(reader)
    reader.fields.clear()  # md has the values now
    cfg = config_from_metadata(md)
    tok = Tokenizer.from_metadata(md)
    if tok.vocab_size != cfg.vocab_size:
        raise ModelFileError(
            f"vocabulary has {tok.vocab_size} tokens but the model expects {cfg.vocab_size}"
        )
    # The tokenizer has what it needs of the big arrays (~0.4 KB a token as Python lists): gone
    # before the weights arrive. No garbage collection: lists hold no cycles, and a full one
    # costs ~60 ms a call once JAX is loaded.
    md = small_metadata(md)
    trim(collect=False)
    tensors = _Tensors(reader, size)
    xla = xla_path() if xla is None else xla
    check_fits(p.name, weight_bytes(cfg, tensors.type_of, xla), auto_budget(cfg)[0])  # the default cache
    # JAX's backend is up (or comes up here): the start-up code it left resident goes before the
    # weights arrive (~95 MB of jaxlib's pages, engine.code_pages)
    jax.devices()
    release_library_code()
    try:
        params, freq = load_params(cfg, tensors, xla)
        tensors.release_pages()
    except MemoryError:
        raise ModelFileError(f"not enough memory to load {p.name}") from None
    # No template, or one that does not even compile: the family's built-in turn format, as far
    # as the vocabulary has its markers (template.origin says which; the app shows load_error).
    template = ChatTemplate.for_model(
        md.get("tokenizer.chat_template"),
        family_format=_family(cfg).turn_format,
        has_special=tok.has_special,
        bos_token=tok.bos_text or "",
        eos_token=tok.eos_text or "",
    )
    model = Model(p, cfg, params, tok, template, md, freq)
    del reader
    trim(collect=False)  # the f32 temporaries of dequantization: give the heap back (~100 MB)
    return model
