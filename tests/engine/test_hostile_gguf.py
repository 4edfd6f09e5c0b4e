"""Hostile GGUF files: every corrupted model file ends in one ModelFileError, fast, without a big
allocation (issue 5, "Hostile GGUF files").

The cases are built from good tiny files (tests/fixtures/tiny_gguf.py) by corrupting bytes at
offsets computed from the byte layout, which bench/fuzz_gguf.py parses independently with struct.
CI runs the hand-aimed catalogue on one base file plus a few hundred hypothesis cases;
``python -m bench.fuzz_gguf --cases 5000`` runs thousands.
"""
from __future__ import annotations

import random
import resource
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_gguf import (
    INTERESTING_U32, INTERESTING_U64, T_ARRAY, T_STRING, T_UINT8, Doc, explicit_cases, parse_layout, put,
    put_bytes, random_case, run_cases, write_bases,
)
from engine.errors import ModelFileError, PinwheelError

ROOT = Path(__file__).resolve().parents[2]
MAX_CASE_S = 5.0  # per case, on a loaded 2-core CI machine; a good tiny file loads in ~0.1 s
MAX_RSS_GROWTH = 200 * 2**20  # peak-RSS growth allowed while refusing a file of a few hundred KB

SETTINGS = settings(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)


# ------------------------------------------------------------------------------ helpers


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _load(path: Path) -> tuple[str, str, float, int]:
    """(outcome, detail, seconds, peak-RSS growth): 'error' | 'ok' | 'crash'."""
    from engine.gguf_loader import load_model

    before, t0 = _peak_rss(), time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            load_model(path)
            outcome, detail = "ok", "loaded"
        except ModelFileError as e:
            outcome, detail = "error", str(e)
        except PinwheelError as e:  # another user-facing class is still one clean line
            outcome, detail = "error", f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - the point of the suite
            outcome, detail = "crash", f"{type(e).__name__}: {e}"
    if caught and outcome != "crash":  # a warning is more lines on the CLI's stderr
        outcome, detail = "crash", f"warned {caught[0].category.__name__}: {caught[0].message} ({detail})"
    return outcome, detail, time.perf_counter() - t0, _peak_rss() - before


def _check(path: Path, data: bytes, name: str, allow_ok: bool = False) -> str | None:
    """Write and load one case; a problem description, or None when it behaved."""
    path.write_bytes(data)
    outcome, detail, dt, grew = _load(path)
    if outcome == "crash" or (outcome == "ok" and not allow_ok):
        return f"{name}: {outcome}: {detail}"
    if outcome == "error" and ("\n" in detail or not detail.strip()):
        return f"{name}: message is not one line: {detail!r}"
    if outcome == "error" and "memory" in detail.lower():
        return f"{name}: tried to allocate: {detail}"
    if dt > MAX_CASE_S:
        return f"{name}: took {dt:.1f} s"
    if grew > MAX_RSS_GROWTH:
        return f"{name}: peak RSS grew by {grew / 2**20:.0f} MiB"
    return None


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, Path]:
    return write_bases(tmp_path_factory.mktemp("hostile-bases"))


@pytest.fixture(scope="module")
def layouts(bases) -> dict:
    return {n: parse_layout(p.read_bytes()) for n, p in bases.items()}


@pytest.fixture(scope="module")
def catalogue(layouts) -> list[tuple[str, bytes, str]]:
    """The hand-aimed cases for the F32/BPE base (CI); the bench runs them on every base."""
    out = []
    for name, data, expect in explicit_cases(layouts["bpe-f32"]):
        if name.startswith("truncate@") and not name.endswith("+0"):
            continue  # CI: the boundary itself; the bench also cuts one byte either side
        out.append((name, data, expect))
    return out


# ------------------------------------------------------------------------------ sanity


def test_layout_parser_round_trips(layouts):
    for lay in layouts.values():
        assert Doc.from_layout(lay).to_bytes() == lay.data
        assert lay.data_start % lay.alignment == 0 and lay.info_end <= lay.data_start


def test_good_bases_load(bases):
    for name, path in bases.items():
        outcome, detail, dt, _ = _load(path)
        assert outcome == "ok", f"{name}: {detail}"


# ------------------------------------------------------------------------------ the catalogue

CATEGORIES = {
    "truncation": ("truncate@",),
    "magic and version": ("magic=", "version="),
    "absurd counts": ("n_tensors", "n_kv="),
    "absurd string lengths": ("strlen ",),
    "absurd arrays": ("count ", "itype ", "tokens: 2^40", "array"),
    "unknown value types": ("vtype ",),
    "tensor offsets": ("offset ", "overlap"),
    "tensor shapes": ("shape:",),
    "tensor types": ("ttype ",),
    "nan and inf weights": ("weights:",),
    "vocabulary vs embedding": ("vocab:",),
    "wrong metadata types": ("type:",),
    "bad model dims": ("dims:",),
    "missing and duplicated": ("missing", "duplicate", "all tensors", "key not UTF-8", "tensor name not", "metadata only"),
}


def _category(name: str) -> str:
    for cat, prefixes in CATEGORIES.items():
        if any(name.startswith(p) for p in prefixes):
            return cat
    return "other"


def test_every_catalogue_case_has_a_category(catalogue):
    assert not [n for n, _, _ in catalogue if _category(n) == "other"]


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_catalogue_is_refused_cleanly(category, catalogue, tmp_path):
    cases = [c for c in catalogue if _category(c[0]) == category]
    assert cases, category
    problems = [p for name, data, expect in cases
                if (p := _check(tmp_path / "case.gguf", data, name, allow_ok=expect == "any"))]
    assert not problems, f"{len(problems)} of {len(cases)} cases misbehaved:\n" + "\n".join(problems)


def test_lenient_cases_load_with_a_safe_reading(catalogue, tmp_path):
    """The "any" cases that do load: a non-text chat template falls back to ChatML with the
    reason kept; an out-of-range EOS id is ignored (as llama.cpp does)."""
    from engine.gguf_loader import load_model

    for name, data, expect in catalogue:
        if expect != "any":
            continue
        p = tmp_path / "lenient.gguf"
        p.write_bytes(data)
        try:
            m = load_model(p)
        except ModelFileError:
            continue
        if "chat_template" in name:
            assert m.chat_template.is_fallback and m.chat_template.load_error, name
        if "eos_token_id" in name:
            assert m.tokenizer.eos_id is None or m.tokenizer.eos_id < m.config.vocab_size, name


# ------------------------------------------------------------------------------ messages say what is wrong


@pytest.mark.parametrize("case, words", [
    ("magic=b'GGML'", "not a GGUF"),
    ("version=4", "version"),
    ("n_tensors=1152921504606846976", "claims"),
    ("weights: nan in blk.0.attn_norm.weight", "NaN"),
    ("weights: inf in token_embd.weight", "infinite"),
    ("vocab: one token fewer than the embedding", "shape"),
    ("vocab: vocab_size says one more", "vocabulary"),
    ("missing tensor blk.0.ffn_down.weight", "missing tensor"),
    ("overlap: two norms share bytes", "overlapping"),
    ("type: llama.block_count as 8='2'", "wrong type"),
    ("dims: llama.attention.head_count_kv=0", "implausible"),
    ("dims: 7B llama shape in a tiny file", "shape"),
    ("tokens: 2^40 items of type 8", "claims"),
    ("tokens: 2^40 items of type 6", "claims"),
    ("ttype blk.0.attn_q.weight=24 (unsupported, right size)", "unsupported tensor type I8"),
    ("ttype blk.0.attn_q.weight=10 (unsupported, right size)", "shape"),  # Q2_K is read: its 256-value rows do not fit
    ("ttype blk.0.attn_q.weight=16 (unsupported, right size)", "shape"),  # so are IQ2_XXS's and IQ1_S's
    ("ttype blk.0.attn_q.weight=19 (unsupported, right size)", "shape"),
    ("ttype blk.0.attn_q.weight=99 (unknown)", "malformed"),
])
def test_messages(case, words, catalogue, tmp_path):
    data = next(d for n, d, _ in catalogue if n == case)
    p = tmp_path / "m.gguf"
    p.write_bytes(data)
    with pytest.raises(ModelFileError) as ei:
        from engine.gguf_loader import load_model

        load_model(p)
    assert words in str(ei.value) and "\n" not in str(ei.value)


# ------------------------------------------------------------------------------ generated cases

BASE_NAMES = ("bpe-f32", "spm-q8_0", "bpe-q4_k")


@settings(SETTINGS, max_examples=60)
@given(base=st.sampled_from(BASE_NAMES), frac=st.floats(0, 1, exclude_max=True))
def test_random_truncation(base, frac, layouts, tmp_path_factory):
    lay = layouts[base]
    cut = 1 + int(frac * (lay.size - 1))
    needed = lay.data_start + max(t.offset + t.nbytes for t in lay.tensors)  # then only padding
    p = tmp_path_factory.mktemp("cut") / "c.gguf"
    assert _check(p, lay.data[:cut], f"{base} cut@{cut}", allow_ok=cut >= needed) is None



@settings(SETTINGS, max_examples=80)
@given(base=st.sampled_from(BASE_NAMES), which=st.integers(0, 10**6), data=st.data())
def test_random_field_values(base, which, data, layouts, tmp_path_factory):
    """Any count, length, type id, dim or offset set to an interesting or arbitrary value."""
    lay = layouts[base]
    f = lay.fields[which % len(lay.fields)]
    bits = 8 * struct.calcsize(f.fmt)
    pool = INTERESTING_U64 if f.fmt == "Q" else INTERESTING_U32
    v = data.draw(st.one_of(st.sampled_from(pool), st.integers(0, 2**bits - 1),
                            st.integers(-4, 4).map(lambda k: (f.value + k) % 2**bits)))
    p = tmp_path_factory.mktemp("field") / "f.gguf"
    assert _check(p, put(lay.data, f.offset, f.fmt, v), f"{base} {f.name}={v}", allow_ok=True) is None



@settings(SETTINGS, max_examples=60)
@given(base=st.sampled_from(BASE_NAMES), frac=st.floats(0, 1, exclude_max=True), junk=st.binary(min_size=1, max_size=8))
def test_random_bytes_in_the_header_and_metadata(base, frac, junk, layouts, tmp_path_factory):
    lay = layouts[base]
    off = int(frac * lay.data_start)
    p = tmp_path_factory.mktemp("bytes") / "b.gguf"
    assert _check(p, put_bytes(lay.data, off, junk[: lay.size - off]), f"{base} bytes@{off}={junk.hex()}",
                  allow_ok=True) is None



@settings(SETTINGS, max_examples=60)
@given(base=st.sampled_from(BASE_NAMES), seed=st.integers(0, 2**32 - 1))
def test_random_mixed_corruptions(base, seed, layouts, tmp_path_factory):
    """The bench's generator (cuts, fields, bytes, several at once)."""
    name, b = random_case(layouts[base], random.Random(seed))
    p = tmp_path_factory.mktemp("mixed") / "m.gguf"
    assert _check(p, b, f"{base} {name}", allow_ok=True) is None



# ------------------------------------------------------------------------------ memory, hard-limited

ABSURD = ("n_tensors=1152921504606846976", "n_kv=1099511627776", "strlen kv0.key.len=1099511627776",
          "tokens: 2^40 items of type 8", "tokens: 2^40 items of type 0", "tokens: 2^40 items of type 6",
          "tokens: 2^40 items of type 10", "dims: llama.embedding_length=2^30",
          "dims: d_model 2^30 with matching heads", "dims: 1024 layers x 65536 wide x 2^20 ffn",
          "dims: 7B llama shape in a tiny file", "shape: dim 2^40", "shape: dims overflow to 0",
          "offset token_embd=2^40", "array nested 5000 deep")


def test_absurd_sizes_under_an_address_space_limit(catalogue, layouts, tmp_path):
    """In a worker whose address space is capped at +1 GiB, the absurd-size cases are refused
    with a file error (not 'out of memory'), each within the time limit, peak RSS barely moving."""
    by_name = {n: d for n, d, _ in catalogue}
    strlen = next(n for n in by_name if n.startswith("strlen ") and ":general.name" in n and n.endswith("=1099511627776"))
    cases = [(n, by_name[n]) for n in ABSURD + (strlen,)]
    results = run_cases(cases, tmp_path, timeout=30, max_rss_mib=64, limit_extra_mib=1024)
    bad = [f"{r['case']}: {r['outcome']}: {r['detail']}" for r in results
           if r["outcome"] != "error" or r["s"] > MAX_CASE_S]
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------ reader bounds


def test_string_cap_counts_every_array(layouts, tmp_path, monkeypatch):
    """Many small string arrays, each within the file, together over the cap, are refused."""
    import engine.gguf_loader as gl

    monkeypatch.setattr(gl, "_MAX_ARRAY_STRINGS", 3000)
    doc = Doc.from_layout(layouts["bpe-f32"])  # ~1,000 strings of vocabulary and merges already
    arr = struct.pack("<IQ", T_STRING, 600) + struct.pack("<Q", 0) * 600
    p = tmp_path / "many.gguf"
    p.write_bytes(Doc(doc.version, doc.kvs + [(f"x.a{i}", T_ARRAY, arr) for i in range(5)], doc.tensors).to_bytes())
    with pytest.raises(ModelFileError, match="strings"):
        gl.load_model(p)
    monkeypatch.setattr(gl, "_MAX_ARRAY_STRINGS", 1 << 20)
    gl.load_model(p)  # the same file is fine under the real cap


def test_number_cap_counts_every_array(layouts, tmp_path, monkeypatch):
    import engine.gguf_loader as gl

    monkeypatch.setattr(gl, "_MAX_ARRAY_NUMBERS", 5000)
    doc = Doc.from_layout(layouts["bpe-f32"])  # 512 token types already
    arr = struct.pack("<IQ", T_UINT8, 1500) + bytes(1500)
    p = tmp_path / "nums.gguf"
    p.write_bytes(Doc(doc.version, doc.kvs + [(f"x.n{i}", T_ARRAY, arr) for i in range(2)], doc.tensors).to_bytes())
    gl.load_model(p)  # 512 + 3,000 numbers
    p.write_bytes(Doc(doc.version, doc.kvs + [(f"x.n{i}", T_ARRAY, arr) for i in range(3)], doc.tensors).to_bytes())
    with pytest.raises(ModelFileError, match="numbers"):  # 512 + 4,500
        gl.load_model(p)


def test_numeric_arrays_read_as_one_view(layouts, tmp_path):
    """A 200k-number array costs one view, not 200k objects (the stock reader's 700 B/number)."""
    from engine.gguf_loader import metadata, read_gguf

    doc = Doc.from_layout(layouts["bpe-f32"])
    n = 200_000
    p = tmp_path / "nums.gguf"
    p.write_bytes(Doc(doc.version, doc.kvs + [("x.nums", T_ARRAY, struct.pack("<IQ", T_UINT8, n) + bytes(range(256)) * (n // 256) + bytes(n % 256))], doc.tensors).to_bytes())
    before, t0 = _peak_rss(), time.perf_counter()
    md = metadata(read_gguf(p))
    assert time.perf_counter() - t0 < MAX_CASE_S and _peak_rss() - before < 50 * 2**20
    assert len(md["x.nums"]) == n and md["x.nums"][:3] == [0, 1, 2] and isinstance(md["x.nums"][0], int)
    assert md["tokenizer.ggml.token_type"][:3] == [3, 3, 3]  # the specials, as the stock reader reads them


def test_metadata_matches_the_stock_reader(bases):
    import gguf

    from engine.gguf_loader import metadata, read_gguf

    for path in bases.values():
        assert metadata(read_gguf(path)) == metadata(gguf.GGUFReader(path))


def test_empty_array_of_unknown_type_is_fine_but_a_full_one_is_not(layouts, tmp_path):
    from engine.gguf_loader import metadata, read_gguf

    doc = Doc.from_layout(layouts["bpe-f32"])
    p = tmp_path / "a.gguf"
    p.write_bytes(Doc(doc.version, doc.kvs + [("x.empty", T_ARRAY, struct.pack("<IQ", T_UINT8, 0))], doc.tensors).to_bytes())
    assert metadata(read_gguf(p))["x.empty"] == []
    p.write_bytes(Doc(doc.version, doc.kvs + [("x.bad", T_ARRAY, struct.pack("<IQ", 77, 3) + bytes(24))], doc.tensors).to_bytes())
    with pytest.raises(ModelFileError):
        read_gguf(p)


# ------------------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("case", [
    "truncate@t5.data_mid+0",
    "tokens: 2^40 items of type 6",
    "weights: nan in blk.0.attn_norm.weight",
    "magic=b'GGML'",
    "overlap: two norms share bytes",
    "dims: llama.attention.head_count_kv=0",
])
def test_cli_one_line_exit_2(case, catalogue, tmp_path):
    data = next(d for n, d, _ in catalogue if n == case)
    p = tmp_path / "hostile.gguf"
    p.write_bytes(data)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "engine.cli", "chat", "--model", str(p), "--prompt", "x"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("pinwheel: error: ") and r.stdout == ""
    assert time.perf_counter() - t0 < 60
