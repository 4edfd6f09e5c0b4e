"""The size ladder: random-weight GGUFs at the shapes of bigger models, with the default model's
tokenizer, so both engines can be timed on them (`pinwheel bench --ladder`).

Random weights give garbage text and the same speed and memory as real ones: every matrix has
its real shape and its real block type, and neither engine's work depends on the values. Files
are written once into the user cache (platformdirs) and reused. The bytes of each quantized
tensor are drawn at random, with every block's f16 scale set to a small constant, so a 1.7B
file takes seconds to write and decodes to values of a realistic size.
"""
from __future__ import annotations

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

    @property
    def params(self) -> int:
        d, hd, L = self.d_model, self.head_dim, self.n_layers
        per_layer = d * hd * (2 * self.n_heads + 2 * self.n_kv_heads) + 3 * d * self.ffn_dim
        return L * per_layer + 49152 * d  # tied embedding of the default vocabulary


RUNGS = (
    Rung("smollm2-135m", 30, 576, 9, 3, 1536),
    Rung("smollm2-360m", 32, 960, 15, 5, 2560),
    Rung("llama-3.2-1b", 16, 2048, 32, 8, 8192, note="Llama 3.2 1B's blocks, the default 49k vocabulary"),
    Rung("smollm2-1.7b", 24, 2048, 32, 32, 8192),
)
TYPES = ("Q4_0", "Q8_0")


def cache_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("pinwheel", appauthor=False) / "ladder"


def _random_blocks(rng, qtype, rows: int, cols: int) -> np.ndarray:
    """Raw bytes [rows, row_bytes] of a valid tensor of type qtype with random values."""
    import gguf

    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    nb = cols // block
    raw = rng.integers(0, 256, (rows, nb, type_size), dtype=np.uint8)
    scale = np.float16(0.02 / 8 if qtype == gguf.GGMLQuantizationType.Q4_0 else 0.02 / 127)
    raw[..., 0:2] = np.frombuffer(scale.tobytes(), np.uint8)
    if qtype == gguf.GGMLQuantizationType.Q8_0:  # int8 values in [-127, 127], as llama.cpp writes
        vals = raw[..., 2:].view(np.int8)
        vals[vals == -128] = -127
    return raw.reshape(rows, nb * type_size)


def write(rung: Rung, qtype_name: str, tokenizer_from: str | Path, path: Path | None = None) -> Path:
    """The rung's GGUF (written once, then reused from the cache)."""
    import gguf

    path = path or cache_dir() / f"{rung.name}-{qtype_name}.gguf"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    qtype = gguf.GGMLQuantizationType[qtype_name]
    src = gguf.GGUFReader(str(tokenizer_from))
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(f"ladder {rung.name} {qtype_name} (random weights)")
    w.add_block_count(rung.n_layers)
    w.add_embedding_length(rung.d_model)
    w.add_head_count(rung.n_heads)
    w.add_head_count_kv(rung.n_kv_heads)
    w.add_key_length(rung.head_dim)
    w.add_value_length(rung.head_dim)
    w.add_feed_forward_length(rung.ffn_dim)
    w.add_context_length(8192)
    w.add_rope_freq_base(100000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(rung.head_dim)
    for key, field in src.fields.items():  # the tokenizer and template of the default model
        if key.startswith("tokenizer."):
            value = field.contents()
            vtype = field.types[0]
            if vtype == gguf.GGUFValueType.ARRAY:
                w.add_key_value(key, value, vtype, sub_type=field.types[-1])
            else:
                w.add_key_value(key, value, vtype)
    n_vocab = len(src.fields["tokenizer.ggml.tokens"].contents())
    rng = np.random.default_rng(0)
    d, hd, F = rung.d_model, rung.head_dim, rung.ffn_dim

    def mat(name, rows, cols):
        w.add_tensor(name, _random_blocks(rng, qtype, rows, cols), raw_dtype=qtype)

    mat("token_embd.weight", n_vocab, d)
    w.add_tensor("output_norm.weight", np.ones(d, np.float32))
    for i in range(rung.n_layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(d, np.float32))
        mat(p + "attn_q.weight", rung.n_heads * hd, d)
        mat(p + "attn_k.weight", rung.n_kv_heads * hd, d)
        mat(p + "attn_v.weight", rung.n_kv_heads * hd, d)
        mat(p + "attn_output.weight", d, rung.n_heads * hd)
        mat(p + "ffn_gate.weight", F, d)
        mat(p + "ffn_up.weight", F, d)
        mat(p + "ffn_down.weight", d, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(path)
    return path
