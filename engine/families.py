"""Model families as data: what each GGUF architecture stores and how one forward reads it.

A family is a small spec: which tensors a layer has (llama.cpp's tensor names, the same for
every architecture), how the loader turns them into the engine's merged weights (un-permuting
llama's Q/K rows, reading phi3's fused QKV and gate+up tensors as they are), and the static
ModelConfig traits the one layer function in engine.forward reads (biases, Q/K norms, post
norms, activation, scales, sliding-window layers, Gated DeltaNet layers). Every convention here is llama.cpp's
(src/llama-model.cpp load_hparams / load_tensors, src/models/<arch>.cpp, convert_hf_to_gguf.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .config import GLOBAL, LOCAL, RECURRENT, ModelConfig


@dataclass(frozen=True)
class Family:
    arch: str
    permuted_qk: bool = False  # llama: Q/K rows in llama.cpp's interleaved-RoPE order (undone at load)
    fused_qkv: bool = False  # phi3: blk.N.attn_qkv holds [q; k; v] (separate q/k/v also accepted)
    fused_gate_up: bool = False  # phi3: blk.N.ffn_up holds [gate; up], there is no ffn_gate
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    activation: str = "silu"
    partial_rotary: bool = False  # rope.dimension_count may be smaller than the head (NEOX only)
    rope_factors: tuple[str, ...] = ()  # optional per-frequency factor tensors (global names)
    turn_format: str = "chatml"  # engine.turn_formats: used when a file has no chat template
    ffn_norm: str = "ffn_norm.weight"  # the pre-FFN norm (Qwen3.5 calls it post_attention_norm)
    layer_widths: bool = False  # Gemma 4: FFN widths may differ per layer (its layers are held one by one)
    traits: Callable[[dict, ModelConfig], dict[str, Any]] = field(default=lambda md, cfg: {})

    def config_traits(self, md: dict, cfg: ModelConfig) -> dict[str, Any]:
        base = dict(qkv_bias=self.qkv_bias, qk_norm=self.qk_norm, post_norms=self.post_norms,
                    activation=self.activation)
        return base | self.traits(md, cfg)


def _gemma3(md: dict, cfg: ModelConfig) -> dict[str, Any]:
    """Every 6th layer (il % 6 == 5) is global, the rest slide over `sliding_window` tokens with
    rotary base 10000 and no scaling (llama.cpp hard-codes both: set_swa_pattern(6)); the linear
    rope scaling of the file applies to the global layers only. The 27B model (62 layers) scales
    scores by 1/sqrt(d_model / heads), the others by 1/sqrt(head size)."""
    a = cfg.arch
    window = md.get(f"{a}.attention.sliding_window")
    kinds = tuple(LOCAL if (window and i % 6 < 5) else GLOBAL for i in range(cfg.n_layers))
    factor = md.get(f"{a}.rope.scaling.factor") or 0.0
    linear = md.get(f"{a}.rope.scaling.type", "linear") == "linear"
    scale = 1.0 / math.sqrt(cfg.d_model // cfg.n_heads) if cfg.n_layers == 62 else cfg.head_dim**-0.5
    return dict(
        embed_scale=math.sqrt(cfg.d_model),
        attn_scale=scale,
        layer_kinds=kinds if window else (),
        sliding_window=int(window or 0),
        rope_local_base=10000.0,
        rope_scale=(1.0 / float(factor)) if (factor and linear) else 1.0,
    )


def _phi3(md: dict, cfg: ModelConfig) -> dict[str, Any]:
    """LongRoPE files carry a magnitude factor for cos/sin (rope.scaling.attn_factor). Phi's
    sliding window stays off, as llama.cpp keeps it ("Phi SWA is currently disabled")."""
    a = cfg.arch
    return dict(rope_attn_factor=float(md.get(f"{a}.rope.scaling.attn_factor", 1.0) or 1.0),
                rope_orig_context=int(md.get(f"{a}.rope.scaling.original_context_length", 0) or 0))


def _qwen35(md: dict, cfg: ModelConfig) -> dict[str, Any]:
    """Gated DeltaNet hybrid: layer il is recurrent iff (il + 1) % full_attention_interval != 0
    (default 4) unless attention.recurrent_layers lists them; llama.cpp's load_hparams. The
    DeltaNet shapes: ssm.state_size S (key and value head size), ssm.group_count key heads,
    ssm.time_step_rank value heads, ssm.inner_size = S x value heads (llama.cpp sizes the value
    heads from S when it loads and from inner_size / heads when it runs: they must agree)."""
    a, L = cfg.arch, cfg.n_layers
    def get(k: str) -> int:
        if f"{a}.{k}" not in md:
            raise ValueError(f"missing metadata key {a}.{k}")
        return int(md[f"{a}.{k}"])

    conv, S, Hk, Hv, inner = (get(k) for k in ("ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                                "ssm.time_step_rank", "ssm.inner_size"))
    if not (0 < conv <= 16 and 0 < S <= 1024 and 0 < Hk <= Hv <= 1024 and Hv % Hk == 0 and inner == S * Hv
            and S % 8 == 0 and Hv % 8 == 0):
        raise ValueError(f"unsupported DeltaNet shape: kernel {conv}, state {S}, {Hk} key / {Hv} value heads, "
                         f"inner size {inner}")
    flags = md.get(f"{a}.attention.recurrent_layers")
    if flags is not None:
        if len(flags) != L:
            raise ValueError(f"attention.recurrent_layers has {len(flags)} entries for {L} layers")
        recurrent = [bool(f) for f in flags]
    else:
        every = int(md.get(f"{a}.full_attention_interval", 4))
        if every <= 0:
            raise ValueError(f"full_attention_interval {every}")
        recurrent = [(i + 1) % every != 0 for i in range(L)]
    if all(recurrent):
        raise ValueError("no attention layer")
    sections = tuple(int(x) for x in md.get(f"{a}.rope.dimension_sections", ()))
    if len(sections) not in (0, 4) or any(x < 0 for x in sections):
        raise ValueError(f"rope.dimension_sections {sections}")
    return dict(layer_kinds=tuple(RECURRENT if r else GLOBAL for r in recurrent), attn_gate=True,
                rope_sections=sections, ssm_conv=conv, ssm_state=S, ssm_groups=Hk, ssm_heads=Hv)


def _gemma4(md: dict, cfg: ModelConfig) -> dict[str, Any]:
    """Gemma 4 (E2B/E4B dense; llama.cpp's gemma4 load_hparams and gemma4-iswa.cpp): per-layer
    sliding flags; the sliding layers' own head size, rotary dims and base; the full layers'
    partial "proportional" rotary comes from the rope_freqs factors (1e30 on the pairs that do
    not turn), read like Llama 3's. Scores are not scaled (attention scale 1.0); V is RMS-normed
    without a weight; the last shared_kv_layers layers read an earlier layer's cache; the logits
    are soft-capped (30 when the key is absent, as llama.cpp defaults it; 0 turns it off)."""
    a, L = cfg.arch, cfg.n_layers
    pattern = md.get(f"{a}.attention.sliding_window_pattern")
    if not isinstance(pattern, list) or len(pattern) != L:
        raise ValueError(f"attention.sliding_window_pattern must list all {L} layers")
    kinds = tuple(LOCAL if bool(f) else GLOBAL for f in pattern)
    window = int(md.get(f"{a}.attention.sliding_window") or 0)
    hd_local = int(md.get(f"{a}.attention.key_length_swa", cfg.head_dim))
    if int(md.get(f"{a}.attention.value_length_swa", hd_local)) != hd_local or \
            int(md.get(f"{a}.attention.value_length", cfg.head_dim)) != cfg.head_dim:
        raise ValueError("value heads differ in size from key heads")
    rot_local = int(md.get(f"{a}.rope.dimension_count_swa", hd_local))
    if not (0 < hd_local <= 4096 and hd_local % 2 == 0 and (cfg.n_kv_heads * hd_local) % 32 == 0
            and (cfg.n_heads * hd_local) % 32 == 0 and rot_local == hd_local):
        raise ValueError(f"sliding heads of {hd_local} ({rot_local} rotated)")
    shared = int(md.get(f"{a}.attention.shared_kv_layers", 0))
    if not 0 <= shared < L:
        raise ValueError(f"shared_kv_layers {shared} of {L}")
    n_pl = int(md.get(f"{a}.embedding_length_per_layer_input", 0))
    if not 0 <= n_pl <= 65536 or n_pl % 32:
        raise ValueError(f"per-layer input width {n_pl}")
    return dict(layer_kinds=kinds, sliding_window=window, head_dim_local=hd_local if hd_local != cfg.head_dim else 0,
                rope_dims_local=rot_local if hd_local != cfg.head_dim else 0, shared_kv_layers=shared,
                per_layer_dim=n_pl, embed_scale=math.sqrt(cfg.d_model), attn_scale=1.0,
                rope_local_base=float(md.get(f"{a}.rope.freq_base_swa", cfg.rope_base)), v_norm=True,
                layer_scale=True, logit_softcap=float(md.get(f"{a}.final_logit_softcapping", 30.0)))


def _smollm3(md: dict, cfg: ModelConfig) -> dict[str, Any]:
    """Llama blocks whose every 4th layer (il + 1) % 4 == 0 rotates neither Q nor K (NoPE);
    llama.cpp hard-codes the step (n_no_rope_layer_step = 4, no metadata key)."""
    return dict(nope_layers=tuple((i + 1) % 4 == 0 for i in range(cfg.n_layers)))


FAMILIES: dict[str, Family] = {
    f.arch: f
    for f in (
        Family("llama", permuted_qk=True, rope_factors=("rope_freqs.weight",), turn_format="llama3"),
        Family("qwen2", qkv_bias=True),
        Family("qwen3", qk_norm=True),
        Family("gemma3", qk_norm=True, post_norms=True, activation="gelu_tanh", traits=_gemma3,
               turn_format="gemma"),
        Family("phi3", fused_qkv=True, fused_gate_up=True, partial_rotary=True,
               rope_factors=("rope_factors_short.weight", "rope_factors_long.weight"), traits=_phi3,
               turn_format="phi3"),
        Family("qwen35", qk_norm=True, partial_rotary=True, traits=_qwen35, ffn_norm="post_attention_norm.weight"),
        Family("smollm3", permuted_qk=True, traits=_smollm3),
        Family("gemma4", qk_norm=True, post_norms=True, activation="gelu_tanh", traits=_gemma4, layer_widths=True,
               rope_factors=("rope_freqs.weight",), turn_format="gemma4"),
    )
}
SUPPORTED_ARCHS = tuple(FAMILIES)

# What each family is called in messages and in the README.
FAMILY_NAMES = {"llama": "Llama (2, 3.x; SmolLM, Mistral-style)", "qwen2": "Qwen2 / Qwen2.5", "qwen3": "Qwen3",
                "gemma3": "Gemma 3", "phi3": "Phi-3 / Phi-3.5 / Phi-4-mini", "qwen35": "Qwen3.5 (dense)",
                "smollm3": "SmolLM3", "gemma4": "Gemma 4 (E2B/E4B)"}


# --- tensors: llama.cpp's names (src/llama-arch.cpp) ------------------------------------------


def layer_tensors(fam: Family, cfg: ModelConfig, i: int, has: Callable[[str], bool]) -> dict[str, tuple]:
    """GGUF name -> (numpy shape, optional) of every tensor layer i of this family has.
    has(name): whether the file holds a tensor (to tell fused layouts from split ones)."""
    d, F, hd, H, KVH = cfg.d_model, cfg.ffn_dim, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    p = f"blk.{i}."
    w = {p + "attn_norm.weight": ((d,), False), p + fam.ffn_norm: ((d,), False), p + "ffn_down.weight": ((d, F), False)}
    if cfg.kinds[i] == RECURRENT:
        return w | deltanet_tensors(cfg, i) | {p + "ffn_gate.weight": ((F, d), False), p + "ffn_up.weight": ((F, d), False)}
    if cfg.per_layer_dim:
        return w | gemma4_tensors(cfg, i)
    w[p + "attn_output.weight"] = ((d, H * hd), False)
    if fused_qkv(fam, i, has):
        w[p + "attn_qkv.weight"] = (((H + 2 * KVH) * hd, d), False)
    else:
        Q = (2 if cfg.attn_gate else 1) * H * hd  # Qwen3.5: [q | gate] per head
        w |= {p + "attn_q.weight": ((Q, d), False), p + "attn_k.weight": ((KVH * hd, d), False),
              p + "attn_v.weight": ((KVH * hd, d), False)}
    if fam.fused_gate_up:
        w[p + "ffn_up.weight"] = ((2 * F, d), False)
    else:
        w |= {p + "ffn_gate.weight": ((F, d), False), p + "ffn_up.weight": ((F, d), False)}
    if fam.qkv_bias:
        w |= {p + "attn_q.bias": ((H * hd,), False), p + "attn_k.bias": ((KVH * hd,), False),
              p + "attn_v.bias": ((KVH * hd,), False)}
    if fam.qk_norm:
        w |= {p + "attn_q_norm.weight": ((hd,), False), p + "attn_k_norm.weight": ((hd,), False)}
    if fam.post_norms:
        w |= {p + "post_attention_norm.weight": ((d,), False), p + "post_ffw_norm.weight": ((d,), False)}
    return w


def deltanet_tensors(cfg: ModelConfig, i: int) -> dict[str, tuple]:
    """A Gated DeltaNet layer's own tensors (llama.cpp's qwen35 load_tensors; attn_qkv and
    attn_gate are optional there and the graph then crashes: here they are required)."""
    d, S, Hv, p = cfg.d_model, cfg.ssm_state, cfg.ssm_heads, f"blk.{i}."
    return {p + "attn_qkv.weight": ((cfg.conv_dim, d), False), p + "attn_gate.weight": ((Hv * S, d), False),
            p + "ssm_conv1d.weight": ((cfg.conv_dim, cfg.ssm_conv), False), p + "ssm_dt.bias": ((Hv,), False),
            p + "ssm_a": ((Hv,), False), p + "ssm_beta.weight": ((Hv, d), False),
            p + "ssm_alpha.weight": ((Hv, d), False), p + "ssm_norm.weight": ((S,), False),
            p + "ssm_out.weight": ((d, Hv * S), False)}


def gemma4_tensors(cfg: ModelConfig, i: int) -> dict[str, tuple]:
    """A Gemma 4 layer's tensors besides its norms (llama.cpp's gemma4 load_tensors): heads of its
    kind's size, K/V only where the layer owns a cache (attn_v is required here: llama.cpp's
    V = K fallback is for checkpoints without one, which the E2B/E4B files are not), the per-layer
    input's gate and projection, and the layer's output scale."""
    d, H, KVH, hd, F, n, p = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim_of(i), cfg.ffn_width(i),
                              cfg.per_layer_dim, f"blk.{i}.")
    w = {p + "attn_q.weight": ((H * hd, d), False), p + "attn_q_norm.weight": ((hd,), False),
         p + "attn_output.weight": ((d, H * hd), False), p + "post_attention_norm.weight": ((d,), False),
         p + "ffn_gate.weight": ((F, d), False), p + "ffn_up.weight": ((F, d), False),
         p + "ffn_down.weight": ((d, F), False), p + "post_ffw_norm.weight": ((d,), False),
         p + "inp_gate.weight": ((n, d), False), p + "proj.weight": ((d, n), False),
         p + "post_norm.weight": ((d,), False), p + "layer_output_scale.weight": ((1,), False)}
    if cfg.owns_kv(i):
        w |= {p + "attn_k.weight": ((KVH * hd, d), False), p + "attn_v.weight": ((KVH * hd, d), False),
              p + "attn_k_norm.weight": ((hd,), False)}
    return w


def fused_qkv(fam: Family, i: int, has: Callable[[str], bool]) -> bool:
    return fam.fused_qkv and has(f"blk.{i}.attn_qkv.weight")


def model_tensors(fam: Family, cfg: ModelConfig, has: Callable[[str], bool]) -> dict[str, tuple]:
    d, V = cfg.d_model, cfg.vocab_size
    w = {"token_embd.weight": ((V, d), False), "output.weight": ((V, d), True), "output_norm.weight": ((d,), False)}
    for name in fam.rope_factors:
        w[name] = ((cfg.rotary_dims // 2,), True)
    if cfg.per_layer_dim:  # Gemma 4's per-layer embeddings: a table over the vocabulary and a projection of x
        n = cfg.per_layer_dim * cfg.n_layers
        w |= {"per_layer_token_embd.weight": ((V, n), False), "per_layer_model_proj.weight": ((n, d), False),
              "per_layer_proj_norm.weight": ((cfg.per_layer_dim,), False)}
    for i in range(cfg.n_layers):
        w |= layer_tensors(fam, cfg, i, has)
    return w
