"""The size ladder: random-weight GGUFs at the shapes of bigger models, with the default model's
tokenizer, so both engines can be timed on them (`pinwheel bench --ladder`).

Random weights give garbage text and the same speed and memory as real ones: every matrix has
its real shape and its real block type, and neither engine's work depends on the values. Files
are written once into the user cache (platformdirs) and reused. The bytes of each Q4_0/Q8_0
tensor are drawn at random, with every block's f16 scale set to a small constant, so a 1.7B
file takes seconds to write and decodes to values of a realistic size.

The types people download (Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, IQ4_XS: QUANTIZED) are made the way
their files are made: an F16 file of random normal weights is written, llama.cpp's own quantizer
(llama_cpp.llama_model_quantize, the code of llama-quantize) turns it into the type with its
usual mix of tensor types, and the F16 source is deleted. That needs llama-cpp-python, and
room for both files while it runs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Rung:
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    head_dim: int = 64
    note: str = ""
    arch: str = "llama"  # qwen2: Q/K/V biases, NEOX rotary; qwen35, gemma4: the family's own layout
    vocab: int = 0  # pad the default tokenizer to this many tokens (0: its own 49,152)
    meta: tuple = ()  # the family's own metadata: (key without the arch prefix, value) pairs

    @property
    def params(self) -> int:
        """Weights in the file (the tied embedding once; no norms)."""
        return sum(int(np.prod(shape)) for _, shape, kind in _specs(self, self.vocab or 49152) if kind == "mat")


RUNGS = (
    Rung("smollm2-135m", 30, 576, 9, 3, 1536),
    Rung("smollm2-360m", 32, 960, 15, 5, 2560),
    Rung("llama-3.2-1b", 16, 2048, 32, 8, 8192, note="Llama 3.2 1B's blocks, the default 49k vocabulary"),
    Rung("smollm2-1.7b", 24, 2048, 32, 32, 8192),
    Rung("qwen2.5-0.5b", 24, 896, 14, 2, 4864, arch="qwen2", vocab=151936,
         note="Qwen2.5-0.5B's shape and 151,936-token vocabulary (the default tokenizer, padded)"),
    Rung("qwen2.5-1.5b", 28, 1536, 12, 2, 8960, head_dim=128, arch="qwen2", vocab=151936,
         note="Qwen2.5-1.5B's shape and vocabulary (the default tokenizer, padded)"),
    # What laptops run: 3-4B shapes with their real vocabularies, as llama blocks (each family's
    # norms and fused layouts aside, the bytes a step reads are these)
    Rung("llama-3.2-3b", 28, 3072, 24, 8, 8192, head_dim=128, vocab=128256,
         note="Llama-3.2-3B's shape and 128,256-token vocabulary"),
    Rung("qwen3-4b", 36, 2560, 32, 8, 9728, head_dim=128, vocab=151936,
         note="Qwen3-4B's shape and vocabulary (as llama blocks: no Q/K norms)"),
    Rung("phi-4-mini", 32, 3072, 24, 8, 8192, head_dim=128, vocab=200064,
         note="Phi-4-mini's shape and 200,064-token vocabulary (as llama blocks: Q/K/V and gate/up unfused)"),
    Rung("gemma-3-4b", 34, 2560, 8, 4, 10240, head_dim=256, vocab=262144,
         note="Gemma-3-4B's shape and 262,144-token vocabulary (as llama blocks: every layer global)"),
)


def _gemma4_meta(layers: int, period: int, shared: int, ffn: list[int] | None = None) -> tuple:
    """Gemma 4 E2B/E4B's own keys: every `period`-th layer global (512-wide heads), the others
    sliding over 512 tokens with 256-wide heads and rotary base 10k; the last `shared` layers
    read the K/V of the last earlier layer of their kind; 256 per-layer inputs; soft-cap 30."""
    pattern = [i % period < period - 1 for i in range(layers)]
    meta = (("attention.sliding_window_pattern", pattern), ("attention.sliding_window", 512),
            ("attention.key_length_swa", 256), ("attention.value_length_swa", 256),
            ("rope.dimension_count_swa", 256), ("rope.freq_base_swa", 10000.0),
            ("attention.shared_kv_layers", shared), ("embedding_length_per_layer_input", 256),
            ("final_logit_softcapping", 30.0))
    return meta + ((("feed_forward_length", ffn),) if ffn else ())


# Gemma 4 E2B and E4B (google/gemma-4-E2B's and -E4B's text_config). E2B: 35 layers, 4 sliding to
# 1 global, 1 KV head, the last 20 sharing the K/V of layers 13 and 14 with double-wide FFNs. E4B:
# 42 layers, 5 to 1, 2 KV heads, the last 18 sharing those of layers 22 and 23, FFNs all 10,240.
GEMMA4_E2B = Rung("gemma-4-e2b", 35, 1536, 8, 1, 6144, head_dim=512, arch="gemma4", vocab=262144,
                  note="Gemma 4 E2B's shape: per-layer embeddings, 20 KV-shared layers, 262,144 tokens",
                  meta=_gemma4_meta(35, 5, 20, [6144] * 15 + [12288] * 20))
GEMMA4_E4B = Rung("gemma-4-e4b", 42, 2560, 8, 2, 10240, head_dim=512, arch="gemma4", vocab=262144,
                  note="Gemma 4 E4B's shape: per-layer embeddings, 18 KV-shared layers, 262,144 tokens",
                  meta=_gemma4_meta(42, 6, 18))
# Qwen3.5 0.8B (Qwen/Qwen3.5-0.8B's text_config): 24 layers, every 4th gated full attention
# (8 heads of 256, 2 KV, a quarter of each head rotated in sections 11/11/10), the others Gated
# DeltaNet with 16 key and 16 value heads of 128 and a 4-tap conv; 248,320 tokens.
QWEN35_08B = Rung("qwen3.5-0.8b", 24, 1024, 8, 2, 3584, head_dim=256, arch="qwen35", vocab=248320,
                  note="Qwen3.5-0.8B's shape: 18 Gated DeltaNet layers, 6 attention layers, 248,320 tokens",
                  meta=(("full_attention_interval", 4), ("ssm.conv_kernel", 4), ("ssm.state_size", 128),
                        ("ssm.group_count", 16), ("ssm.time_step_rank", 16), ("ssm.inner_size", 2048),
                        ("rope.dimension_count", 64), ("rope.dimension_sections", [11, 11, 10, 0]),
                        ("rope.freq_base", 10000000.0)))
RUNGS = RUNGS + (QWEN35_08B, GEMMA4_E2B, GEMMA4_E4B)
BIG = ("llama-3.2-3b", "qwen3-4b", "phi-4-mini", "gemma-3-4b", "gemma-4-e2b", "gemma-4-e4b")  # run with --rungs: 2-9 GB files
TYPES = ("Q4_0", "Q8_0")  # written directly
QUANTIZED = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_XS")  # made by llama.cpp's quantizer
DEFAULT_TYPES = ("Q4_0", "Q8_0", "Q4_K_M")


def cache_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("pinwheel", appauthor=False) / "ladder"


def _random_blocks(rng, qtype, rows: int, cols: int) -> np.ndarray:
    """Raw bytes [rows, row_bytes] of a valid tensor of type qtype with random values."""
    import gguf

    if qtype == gguf.GGMLQuantizationType.F16:  # a source for llama.cpp's quantizer: real numbers
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16).view(np.uint8)
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    nb = cols // block
    raw = rng.integers(0, 256, (rows, nb, type_size), dtype=np.uint8)
    scale = np.float16(0.02 / 8 if qtype == gguf.GGMLQuantizationType.Q4_0 else 0.02 / 127)
    raw[..., 0:2] = np.frombuffer(scale.tobytes(), np.uint8)
    if qtype == gguf.GGMLQuantizationType.Q8_0:  # int8 values in [-127, 127], as llama.cpp writes
        vals = raw[..., 2:].view(np.int8)
        vals[vals == -128] = -127
    return raw.reshape(rows, nb * type_size)


def _metadata(rung: Rung, n_vocab: int) -> dict:
    """The rung's model keys (GGUF key -> value), the family's own included."""
    a = rung.arch
    md = {f"{a}.block_count": rung.n_layers, f"{a}.embedding_length": rung.d_model,
          f"{a}.attention.head_count": rung.n_heads, f"{a}.attention.head_count_kv": rung.n_kv_heads,
          f"{a}.attention.key_length": rung.head_dim, f"{a}.attention.value_length": rung.head_dim,
          f"{a}.feed_forward_length": rung.ffn_dim, f"{a}.context_length": 8192, f"{a}.rope.freq_base": 100000.0,
          f"{a}.attention.layer_norm_rms_epsilon": 1e-5, f"{a}.rope.dimension_count": rung.head_dim,
          f"{a}.vocab_size": n_vocab}
    md.update({f"{a}.{k}": v for k, v in rung.meta})
    return md


def _specs(rung: Rung, n_vocab: int) -> list[tuple[str, tuple[int, ...], str]]:
    """Every tensor of the rung: (name, numpy shape, "mat" for a matrix in the file's type, "vec"
    for an F32 vector or table). Llama/Qwen2 blocks as written here before; other families from
    the engine's own tensor list for the config the metadata gives (engine.families)."""
    d, hd, F = rung.d_model, rung.head_dim, rung.ffn_dim
    if rung.arch in ("llama", "qwen2"):
        out = [("token_embd.weight", (n_vocab, d), "mat"), ("output_norm.weight", (d,), "vec")]
        for i in range(rung.n_layers):
            p = f"blk.{i}."
            out += [(p + "attn_norm.weight", (d,), "vec"), (p + "ffn_norm.weight", (d,), "vec"),
                    (p + "attn_q.weight", (rung.n_heads * hd, d), "mat"),
                    (p + "attn_k.weight", (rung.n_kv_heads * hd, d), "mat"),
                    (p + "attn_v.weight", (rung.n_kv_heads * hd, d), "mat")]
            if rung.arch == "qwen2":
                out += [(p + f"attn_{t}.bias", (n * hd,), "vec")
                        for t, n in (("q", rung.n_heads), ("k", rung.n_kv_heads), ("v", rung.n_kv_heads))]
            out += [(p + "attn_output.weight", (d, rung.n_heads * hd), "mat"), (p + "ffn_gate.weight", (F, d), "mat"),
                    (p + "ffn_up.weight", (F, d), "mat"), (p + "ffn_down.weight", (d, F), "mat")]
        return out
    from engine.families import FAMILIES, model_tensors
    from engine.gguf_loader import config_from_metadata

    cfg = config_from_metadata({"general.architecture": rung.arch} | _metadata(rung, n_vocab))
    wanted = model_tensors(FAMILIES[rung.arch], cfg, lambda n: False)
    keep = {"rope_freqs.weight"} if rung.arch == "gemma4" else set()  # llama.cpp requires Gemma 4's
    return [(n, shape, "mat" if len(shape) == 2 and "conv1d" not in n else "vec")
            for n, (shape, optional) in wanted.items() if not optional or n in keep]


def _vector(name: str, shape: tuple[int, ...], rung: Rung, rng) -> np.ndarray:
    """A plausible F32 vector: norms 1, DeltaNet decays negative, Gemma 4's proportional rotary."""
    if name.endswith("ssm_a"):
        return np.full(shape, -0.5, np.float32)
    if name.endswith("ssm_dt.bias") or name.endswith(".bias"):
        return np.zeros(shape, np.float32)
    if "conv1d" in name:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)
    if name == "rope_freqs.weight":  # a quarter of the pairs turn (partial_rotary_factor 0.25)
        f = np.full(shape, 1e30, np.float32)
        f[: shape[0] // 4] = 1.0
        return f
    return np.ones(shape, np.float32)


def _row_runs(rows: int, cols: int, values: int = 1 << 26) -> list[int]:
    """A tensor's rows in runs of about `values` values (Gemma 4 E4B's per-layer table is 2.8G
    values: whole, its random source alone would need 11 GB)."""
    step = max(1, values // cols)
    return [min(step, rows - r) for r in range(0, rows, step)]


def _write_blocks(w, parts) -> None:
    """gguf's write_tensor_data for a tensor given as consecutive row runs (the writer takes one
    array a tensor): the same alignment padding before and after, the same bookkeeping."""
    fout = w.fout[0]
    name = next(iter(w.tensors[0]))
    ti = w.tensors[0].pop(name)
    w.write_padding(fout, fout.tell())
    written = 0
    for part in parts:
        part.tofile(fout)
        written += part.nbytes
    assert written == ti.nbytes, (name, written, ti.nbytes)
    w.write_padding(fout, written)
    w.state = type(w.state).WEIGHTS


def write(rung: Rung, qtype_name: str, tokenizer_from: str | Path, path: Path | None = None,
          keep_source: bool = False) -> Path:
    """The rung's GGUF (written once, then reused from the cache). qtype_name: a GGUF tensor type
    (Q4_0, Q8_0, F16) written directly, or one of QUANTIZED, made by llama.cpp's quantizer from
    an F16 file of the rung, deleted after unless keep_source (more types of the rung follow:
    drop_source() then). Tensors are written one at a time (a multi-GB F16 source never sits in
    memory)."""
    import gguf

    path = path or cache_dir() / f"{rung.name}-{qtype_name}.gguf"
    if path.exists():
        return path
    if qtype_name in QUANTIZED:
        return _quantized(rung, qtype_name, tokenizer_from, path, keep_source)
    path.parent.mkdir(parents=True, exist_ok=True)
    qtype = gguf.GGMLQuantizationType[qtype_name]
    src = gguf.GGUFReader(str(tokenizer_from))
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), rung.arch)
    w.add_name(f"ladder {rung.name} {qtype_name} (random weights)")
    n_vocab = len(src.fields["tokenizer.ggml.tokens"].contents())
    pad = max(rung.vocab - n_vocab, 0)  # a bigger vocabulary: unused control tokens at the end
    for key, value in _metadata(rung, n_vocab + pad).items():
        if isinstance(value, list):
            w.add_array(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_uint32(key, value)
    for key, field in src.fields.items():  # the tokenizer and template of the default model
        if key.startswith("tokenizer."):
            value = field.contents()
            vtype = field.types[0]
            if key == "tokenizer.ggml.tokens":
                value = value + [f"<|pad_{i}|>" for i in range(pad)]
            elif key == "tokenizer.ggml.token_type":
                value = value + [3] * pad
            if vtype == gguf.GGUFValueType.ARRAY:
                w.add_key_value(key, value, vtype, sub_type=field.types[-1])
            else:
                w.add_key_value(key, value, vtype)
    rng = np.random.default_rng(0)
    specs = _specs(rung, n_vocab + pad)
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    for name, shape, kind in specs:
        if kind == "mat":
            rows, cols = shape
            w.add_tensor_info(name, (rows, cols // block * type_size), np.dtype(np.uint8), rows * cols // block * type_size,
                              raw_dtype=qtype)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, kind in specs:
        if kind == "mat":
            _write_blocks(w, (_random_blocks(rng, qtype, n, shape[1]) for n in _row_runs(*shape)))
        else:
            w.write_tensor_data(_vector(name, shape, rung, rng))
    w.close()
    tmp.rename(path)
    return path


def _source(rung: Rung, path: Path) -> Path:
    return path.with_name(f"{rung.name}-F16-source.gguf")


def drop_source(rung: Rung) -> None:
    """Delete the rung's F16 source, kept while more of its types were being made."""
    _source(rung, cache_dir() / "x").unlink(missing_ok=True)


def _quantized(rung: Rung, ftype: str, tokenizer_from: str | Path, path: Path, keep_source: bool = False) -> Path:
    """Quantize an F16 file of the rung (written first, or the one kept from its previous type:
    writing 3.4 GB of random F16 takes longer than quantizing it) to ftype with llama.cpp's
    quantizer; delete the F16 file unless keep_source. Refuses up front when the disk cannot
    hold both."""
    import ctypes
    import shutil

    try:
        import llama_cpp
    except ImportError:
        raise RuntimeError(f"{ftype} rungs are made by llama.cpp's quantizer: pip install llama-cpp-python") from None
    f16_bytes = 2 * rung.params
    src = _source(rung, path)
    free = shutil.disk_usage(path.parent if path.parent.exists() else Path.home()).free
    if free < (0.7 if src.exists() else 1.7) * f16_bytes:
        raise RuntimeError(f"{rung.name} {ftype}: needs ~{1.7 * f16_bytes / 1e9:.1f} GB free for the F16 source and "
                           f"the result, {free / 1e9:.1f} GB are")
    src = write(rung, "F16", tokenizer_from, src)
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
        params.nthread = os.cpu_count() or 1
        tmp = path.with_suffix(".tmp")
        if llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params)) != 0:
            raise RuntimeError(f"llama.cpp's quantizer failed on {src.name} -> {ftype}")
        tmp.rename(path)
    finally:
        if not keep_source:
            src.unlink(missing_ok=True)
    return path


# --- pinwheel bench --ladder ---------------------------------------------------------------------

LADDER_SETTINGS = dict(prefill=(200,), decode=(128,), repeat=2, long_repeat=1)


def run(args, R) -> int:
    """Both engines on every rung and type, alternating; a table, JSON and a PNG. R: the bench.run
    module, whose speed workers time each rung (handed in, so this module imports nothing of
    bench.run and bench.run can dispatch --ladder here)."""
    import json
    import os
    import sys
    import tempfile
    import time

    from engine.model_locator import locate_model

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    tokenizer_from = locate_model(None)
    engines, skipped = ("ours",), "--no-llamacpp" if args.no_llamacpp else None
    if not args.no_llamacpp:
        ok, why = R.llamacpp_available()
        engines, skipped = (("ours", "llamacpp"), None) if ok else (("ours",), why)
    named = args.rungs.split(",") if args.rungs else None
    wanted = [r for r in RUNGS if (r.name in named if named else r.name not in BIG)]
    types = args.types.split(",") if getattr(args, "types", None) else list(DEFAULT_TYPES)
    unknown = [t for t in types if t not in TYPES + QUANTIZED]
    if unknown:
        log(f"pinwheel bench --ladder: unknown type {', '.join(unknown)} (types: {', '.join(TYPES + QUANTIZED)})")
        return 2
    s = dict(R.FULL)
    s.update(LADDER_SETTINGS)
    if args.repeat:
        s["repeat"] = args.repeat
    log_dir = Path(tempfile.mkdtemp(prefix="pinwheel-ladder-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(R.ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    log("pinwheel bench --ladder: random weights (garbage text, real speed and memory); engines: "
        + ", ".join(engines) + (f" (llama.cpp skipped: {skipped})" if skipped else ""))
    rows, errors = [], []
    for rung in wanted:
        try:  # (finally: an interrupted run leaves no multi-GB F16 source behind)
            for n, qtype in enumerate(types):
                t0 = time.perf_counter()
                more = any(t in QUANTIZED for t in types[n + 1 :])  # keep the F16 source for them
                try:
                    path = write(rung, qtype, tokenizer_from, keep_source=more)
                except RuntimeError as e:
                    errors.append(f"{rung.name} {qtype}: {e}")
                    log(f"{rung.name} {qtype}: skipped: {e}")
                    continue
                log(f"{rung.name} {qtype}: {path.stat().st_size / 1e6:.0f} MB ({time.perf_counter() - t0:.0f}s to get the file)")
                spec = R.build_spec(args, path, s)
                spec["llama_ctx_speed"] = max(-(-((R._capacity(path) or 0) + 8) // 256) * 256, 512)
                spec_path = log_dir / f"{rung.name}-{qtype}.json"
                spec_path.write_text(json.dumps(spec))
                try:
                    sp = R.run_speed(engines, spec, spec_path, log_dir, env, log)
                except R.WorkerError as e:
                    errors.append(f"{rung.name} {qtype}: {e}")
                    log(f"  failed: {e}")
                    continue
                rows.append(_row(rung, qtype, path, sp, engines))
        finally:
            drop_source(rung)
    report = {"schema": 1, "kind": "ladder", "date": time.strftime("%Y-%m-%d %H:%M:%S"), "engines": list(engines),
              "llamacpp_skipped": skipped, "settings": {k: s[k] for k in ("prefill", "decode", "repeat")},
              "rows": rows, "errors": errors,
              "note": "random-weight GGUFs with the default model's tokenizer: garbage text, the speed and memory "
                      "of real weights; speculative acceptance on random text is not that of chat"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"ladder-{stamp}.json").write_text(json.dumps(report, indent=1))
    try:
        plot(rows, out / f"ladder-{stamp}.png")
        log(f"PNG:  {out / f'ladder-{stamp}.png'}")
    except Exception as e:  # matplotlib missing: the numbers still count
        log(f"no plot: {type(e).__name__}: {e}")
    print(format_table(report))
    print(f"\nJSON: {out / f'ladder-{stamp}.json'}")
    return 1 if errors else 0


def _row(rung: Rung, qtype: str, path: Path, sp: dict, engines) -> dict:
    def get(e, *keys):
        d = sp.get(e, {})
        for k in keys:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    n_dec, n_pre = str(LADDER_SETTINGS["decode"][0]), str(LADDER_SETTINGS["prefill"][0])
    row = {"rung": rung.name, "type": qtype, "params": rung.params, "file_bytes": path.stat().st_size,
           "note": rung.note}
    for e in engines:
        row[e] = {"decode_tok_s": get(e, "decode", n_dec, "tok_s"), "prefill_tok_s": get(e, "prefill", n_pre, "tok_s"),
                  "peak_rss_mb": get(e, "speed_process", "peak_rss_mb"),
                  "rss_after_warmup_mb": get(e, "speed_process", "rss_after_warmup_mb")}
    row["ours"]["decode_spec_tok_s"] = get("ours", "decode_spec", n_dec, "tok_s")
    row["ours"]["spec_same_tokens"] = get("ours", "decode_spec", n_dec, "same_tokens_as_plain")
    if "llamacpp" in engines:
        row["ratios"] = {"decode": get("ours", "decode", n_dec, "vs_llamacpp"),
                         "prefill": get("ours", "prefill", n_pre, "vs_llamacpp"),
                         "peak_rss": _div(row["ours"]["peak_rss_mb"], row["llamacpp"]["peak_rss_mb"])}
    return row


def _div(a, b):
    return None if a is None or not b else a / b


def format_table(report: dict) -> str:
    def f(x, nd=1):
        return "-" if x is None else f"{x:.{nd}f}"

    two = "llamacpp" in report["engines"]
    head = "| rung | type | params | decode tok/s (ours / llama.cpp) | prefill tok/s | peak RSS MB | spec decode |"
    lines = [report["note"], "", head, "|" + "---|" * 7]
    for r in report["rows"]:
        o, lc, rt = r["ours"], r.get("llamacpp", {}), r.get("ratios", {})
        dec = f"{f(o['decode_tok_s'])} / {f(lc.get('decode_tok_s'))} = {f(rt.get('decode'), 2)}x" if two else f(o["decode_tok_s"])
        pre = f"{f(o['prefill_tok_s'])} / {f(lc.get('prefill_tok_s'))} = {f(rt.get('prefill'), 2)}x" if two else f(o["prefill_tok_s"])
        rss = f"{f(o['peak_rss_mb'], 0)} / {f(lc.get('peak_rss_mb'), 0)} = {f(rt.get('peak_rss'), 2)}x" if two else f(o["peak_rss_mb"], 0)
        lines.append(f"| {r['rung']} | {r['type']} | {r['params'] / 1e9:.2f}B | {dec} | {pre} | {rss} | "
                     f"{f(o['decode_spec_tok_s'])} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for qtype, style in (("Q4_0", "-o"), ("Q8_0", "--s")):
        rs = sorted((r for r in rows if r["type"] == qtype), key=lambda r: r["params"])
        x = [r["params"] / 1e9 for r in rs]
        for e, colour in (("ours", "tab:blue"), ("llamacpp", "tab:orange")):
            if all(e in r for r in rs) and rs:
                label = f"{'Pinwheel' if e == 'ours' else 'llama.cpp'} {qtype}"
                a.plot(x, [r[e]["decode_tok_s"] or 0 for r in rs], style, color=colour, label=label)
                b.plot(x, [r[e]["peak_rss_mb"] or 0 for r in rs], style, color=colour, label=label)
    a.set(xlabel="parameters (billions)", ylabel="plain decode tok/s", title="decode speed")
    b.set(xlabel="parameters (billions)", ylabel="peak RSS (MB)", title="peak memory")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("pinwheel bench --ladder (random weights, 2 threads each)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
