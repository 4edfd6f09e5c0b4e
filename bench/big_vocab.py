"""A random-weight GGUF at Gemma-3-270M's shape with a 262,144-token SentencePiece vocabulary: the
model whose footprint is mostly its vocabulary (the embedding is 168M of its 268M parameters),
for measuring what each vocabulary token costs at run time (`python -m bench.footprint`).

    python -m bench.big_vocab [--out PATH] [--vocab N] [--type Q8_0] [--shape 270m|1b]

Shape: 18 layers (every sixth global, the rest a 512-token sliding window), d_model 640, 4 heads
of 256, one KV head, FFN 2048, a tied embedding, Gemma 3's chat template. The vocabulary is a
SentencePiece BPE trained on the test corpus (its bytes, control and first merges), then filled
to `vocab` with made-up normal pieces of real pieces' lengths (3-12 characters, half of them
word-initial), 100 user-defined <unusedN> pieces and Gemma's turn markers: the tables a tokenizer
builds scale with the count and the lengths, not with what the pieces say. Written once into the
ladder's cache folder.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

GEMMA_270M = dict(n_layers=18, d_model=640, n_heads=4, n_kv_heads=1, head_dim=256, ffn_dim=2048,
                  sliding_window=512, context_length=32768)
GEMMA_1B = dict(n_layers=26, d_model=1152, n_heads=4, n_kv_heads=1, head_dim=256, ffn_dim=6912,
                sliding_window=512, context_length=32768)
SHAPES = {"270m": GEMMA_270M, "1b": GEMMA_1B}
VOCAB = 262_144
TT_NORMAL, TT_CONTROL, TT_USER_DEFINED = 1, 3, 4


def vocabulary(n: int, seed: int = 0) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types) of an n-token SentencePiece vocabulary (see the module doc)."""
    from tests.fixtures.family_gguf import GEMMA_CONTROL
    from tests.fixtures.tiny_gguf import train_spm_vocab

    tokens, scores, types = (list(x) for x in train_spm_vocab(512, GEMMA_CONTROL))
    seen = set(tokens)
    for i in range(100):
        tokens.append(f"<unused{i}>")
        scores.append(0.0)
        types.append(TT_USER_DEFINED)
    seen.update(tokens)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzéàüñçø"))
    lo = min(scores)
    while len(tokens) < n:
        k = n - len(tokens)
        lens = rng.integers(3, 13, k)
        chars = letters[rng.integers(0, len(letters), (k, 12))]
        for j in range(k):
            t = ("\u2581" if j % 2 else "") + "".join(chars[j, : lens[j]])
            if t not in seen:
                seen.add(t)
                tokens.append(t)
                scores.append(lo - len(tokens))
                types.append(TT_NORMAL)
    return tokens, scores, types


def write(path: Path | None = None, n_vocab: int = VOCAB, qtype_name: str = "Q8_0", shape: str = "270m") -> Path:
    import gguf

    from bench.ladder import _random_blocks, cache_dir
    from tests.fixtures.family_gguf import TEMPLATES

    path = path or cache_dir() / f"gemma-3-{shape}-shape-{n_vocab}-{qtype_name}.gguf"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    s, a = SHAPES[shape], "gemma3"
    qtype = gguf.GGMLQuantizationType[qtype_name]
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), a)
    w.add_name(f"Gemma-3-{shape.upper()} shape, {n_vocab}-token vocabulary, {qtype_name} (random weights)")
    d, hd, H, KVH, F = s["d_model"], s["head_dim"], s["n_heads"], s["n_kv_heads"], s["ffn_dim"]
    w.add_uint32(f"{a}.block_count", s["n_layers"])
    w.add_uint32(f"{a}.context_length", s["context_length"])
    w.add_uint32(f"{a}.embedding_length", d)
    w.add_uint32(f"{a}.feed_forward_length", F)
    w.add_uint32(f"{a}.attention.head_count", H)
    w.add_uint32(f"{a}.attention.head_count_kv", KVH)
    w.add_uint32(f"{a}.attention.key_length", hd)
    w.add_uint32(f"{a}.attention.value_length", hd)
    w.add_float32(f"{a}.rope.freq_base", 1e6)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32(f"{a}.attention.sliding_window", s["sliding_window"])
    tokens, scores, types = vocabulary(n_vocab)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", scores)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    w.add_string("tokenizer.chat_template", (TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8"))
    w.add_uint32("general.quantization_version", 2)
    rng = np.random.default_rng(0)

    def mat(name, rows, cols):
        w.add_tensor(name, _random_blocks(rng, qtype, rows, cols), raw_dtype=qtype)

    def vec(name, n):
        w.add_tensor(name, np.ones(n, np.float32))

    mat("token_embd.weight", n_vocab, d)
    vec("output_norm.weight", d)
    for i in range(s["n_layers"]):
        p = f"blk.{i}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            vec(p + n + ".weight", d)
        vec(p + "attn_q_norm.weight", hd)
        vec(p + "attn_k_norm.weight", hd)
        mat(p + "attn_q.weight", H * hd, d)
        mat(p + "attn_k.weight", KVH * hd, d)
        mat(p + "attn_v.weight", KVH * hd, d)
        mat(p + "attn_output.weight", d, H * hd)
        mat(p + "ffn_gate.weight", F, d)
        mat(p + "ffn_up.weight", F, d)
        mat(p + "ffn_down.weight", d, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.big_vocab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="where to write (default: the ladder's cache folder)")
    ap.add_argument("--vocab", type=int, default=VOCAB, help=f"vocabulary size (default {VOCAB:,})")
    ap.add_argument("--type", default="Q8_0", choices=("Q8_0", "Q4_0"), help="weight type (default Q8_0)")
    ap.add_argument("--shape", default="270m", choices=sorted(SHAPES),
                    help="Gemma-3-270M's shape (default) or Gemma-3-1B's (26 layers, d_model 1152, FFN 6912)")
    args = ap.parse_args(argv)
    print(write(args.out, args.vocab, args.type, args.shape))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
