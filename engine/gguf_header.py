"""A GGUF file's header, read fast and bounded, without its weights or its vocabulary's strings:
what the model library lists for every file it finds (hundreds of files, some of them hostile).

The metadata's scalars are kept, and short numeric arrays (the per-layer lists of the 2026
families: Gemma 4's sliding-window pattern and FFN widths, Qwen3.5's rotary sections); any
other array keeps only its length (a 262k-token vocabulary is walked, not built). The tensor
table is kept whole (names, types, shapes): it is what the weights will take. Every count and
length is checked against the file's size before it is used, every tensor's data must end inside
the file (a download cut short is said so), and a file that lies is one HeaderError line, as the
loader's own checks do.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

# value types of the GGUF spec: fixed sizes, and the struct format of the scalars
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_KV = 1 << 16
_MAX_TENSORS = 1 << 17
_MAX_DIMS = 8
_MAX_KEY = 1 << 16  # bytes of a key or a scalar string
# Numeric arrays up to this long are kept as lists (per-layer metadata: at most 1,024 layers in
# the loader's limits); longer ones (scores and token types: two per vocabulary token) by length.
# A header keeps at most _MAX_KEPT_ITEMS such numbers in all (a Python list costs ~8x the file's
# bytes: a hostile file of many short arrays must not make the library's listing huge).
_MAX_KEPT_ARRAY = 1024
_MAX_KEPT_ITEMS = 1 << 16


class HeaderError(ValueError):
    """The file is not a GGUF whose header can be read (one line, for a table's row)."""


@dataclass(frozen=True)
class ArrayInfo:
    """A metadata array, by its length only."""

    item_type: int
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass
class Header:
    version: int
    metadata: dict = field(default_factory=dict)  # scalars and short numeric arrays as values, others as ArrayInfo
    tensors: dict = field(default_factory=dict)  # name -> (GGML type name, numpy-order shape)

    def type_of(self, name: str) -> str | None:
        t = self.tensors.get(name)
        return None if t is None else t[0]


class _Cursor:
    def __init__(self, buf, size: int):
        self.buf, self.size, self.pos = buf, size, 0
        self.kept = 0  # numbers kept in lists so far (_MAX_KEPT_ITEMS)

    def take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.size:
            raise HeaderError(f"the header runs past the end of the file (at byte {start})")
        self.pos = start + n
        return start

    def unpack(self, fmt: str):
        n = struct.calcsize(fmt)
        return struct.unpack_from(fmt, self.buf, self.take(n))[0]

    def string(self, limit: int | None = _MAX_KEY) -> str | None:
        n = self.unpack("<Q")
        if limit is not None and n > limit:
            self.take(n)
            return None
        start = self.take(n)
        return bytes(self.buf[start : start + n]).decode("utf-8", "replace")


_U64 = struct.Struct("<Q")


def _skip_strings(buf, pos: int, size: int, n: int) -> int:
    """Walk n length-prefixed strings from pos (the hot loop of a big vocabulary: locals only)."""
    unpack = _U64.unpack_from
    for _ in range(n):
        if pos + 8 > size:
            raise HeaderError("the header runs past the end of the file (inside a string array)")
        pos += 8 + unpack(buf, pos)[0]
    if pos > size:
        raise HeaderError("the header runs past the end of the file (inside a string array)")
    return pos


def _value(c: _Cursor, vtype: int, depth: int = 0):
    if vtype in _SCALARS:
        return c.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        return c.string()
    if vtype == _ARRAY:
        if depth > 2:
            raise HeaderError("metadata arrays nested too deep")
        itype, n = c.unpack("<I"), c.unpack("<Q")
        if itype in _SCALARS and depth == 0 and n <= _MAX_KEPT_ARRAY and c.kept + n <= _MAX_KEPT_ITEMS:
            fmt = _SCALARS[itype]
            c.kept += n
            return list(struct.unpack_from(f"<{n}{fmt[1:]}", c.buf, c.take(n * struct.calcsize(fmt))))
        if itype in _SCALARS:
            c.take(n * struct.calcsize(_SCALARS[itype]))
        elif itype == _STRING:
            if n * 8 > c.size - c.pos:
                raise HeaderError(f"a metadata array claims {n} strings, more than the file holds")
            c.pos = _skip_strings(c.buf, c.pos, c.size, n)
        elif itype == _ARRAY:
            for _ in range(n):
                _value(c, _ARRAY, depth + 1)
        else:
            raise HeaderError(f"unknown metadata value type {itype}")
        return ArrayInfo(itype, n)
    raise HeaderError(f"unknown metadata value type {vtype}")


def _tensor_bytes(gguf, ttype: int, dims: list[int]) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
    n = 1
    for x in dims:
        n *= x
    return n // block * type_size


def _check_complete(h: Header, header_end: int, extent: int, size: int) -> None:
    """A file whose tensors run past its end is cut short: an interrupted download or copy, the
    commonest broken model file. Said here, so the library does not list it as one to run."""
    if extent == 0:  # no tensor data (a vocabulary-only file): nothing to be cut
        return
    align = h.metadata.get("general.alignment", 32)
    align = align if isinstance(align, int) and not isinstance(align, bool) and align > 0 else 32
    need = -(-header_end // align) * align + extent
    if need <= size:
        return
    if need > 4 * size + (1 << 30):  # no download stops that early: an offset or shape is garbage
        raise HeaderError("its tensor table points past the end of the file (the file is damaged)")
    raise HeaderError(f"the file is cut short ({_size(size)} of {_size(need)}; an incomplete download?)")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


def read_header(path: str | Path) -> Header:
    """The header of a GGUF file; HeaderError (one line) for anything else."""
    import gguf

    p = Path(path)
    try:
        size = p.stat().st_size
        if size < 24:
            raise HeaderError("not a GGUF model file (too short)")
        with open(p, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        try:
            if mm[:4] != b"GGUF":
                raise HeaderError("not a GGUF model file")
            c = _Cursor(view, size)
            try:
                c.take(4)
                version, n_tensors, n_kv = c.unpack("<I"), c.unpack("<Q"), c.unpack("<Q")
                if version not in (2, 3):
                    raise HeaderError(f"unsupported GGUF version {version}")
                if n_kv > _MAX_KV or n_tensors > _MAX_TENSORS:
                    raise HeaderError(f"implausible header ({n_tensors} tensors, {n_kv} metadata entries)")
                h = Header(version)
                extent = 0  # where the last tensor's data ends, after the data section's start
                for _ in range(n_kv):
                    key = c.string()
                    vtype = c.unpack("<I")
                    val = _value(c, vtype)
                    if key is not None:
                        h.metadata[key] = val
                for _ in range(n_tensors):
                    name = c.string()
                    n_dims = c.unpack("<I")
                    if n_dims > _MAX_DIMS:
                        raise HeaderError(f"tensor {name} claims {n_dims} dimensions")
                    dims = [c.unpack("<Q") for _ in range(n_dims)]
                    ttype = c.unpack("<I")
                    offset = c.unpack("<Q")
                    try:
                        tname = gguf.GGMLQuantizationType(ttype).name
                        extent = max(extent, offset + _tensor_bytes(gguf, ttype, dims))
                    except (ValueError, KeyError):
                        tname = f"type {ttype}"
                    h.tensors[name] = (tname, tuple(reversed(dims)))
                _check_complete(h, c.pos, extent, size)
                return h
            finally:
                del c
        finally:
            # a traceback may still hold a slice of the view: then the map closes when it goes
            try:
                view.release()
                mm.close()
            except BufferError:
                pass
    except HeaderError:
        raise
    except OSError as e:
        raise HeaderError(f"cannot read the file ({e.strerror or e})") from None
    except (struct.error, ValueError, OverflowError) as e:
        raise HeaderError(f"malformed header ({type(e).__name__})") from None
    except MemoryError:
        raise HeaderError("its header is too large to read") from None
