"""The model's shape and its family's traits: a frozen (hashable) dataclass, so jitted functions
can take it as static. One layer function (engine.forward) reads the trait fields; the family
specs (engine.families) fill them from a GGUF's metadata."""
from __future__ import annotations

from dataclasses import dataclass

GLOBAL, LOCAL = "global", "local"


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    context_length: int
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    name: str = ""
    # --- family traits (defaults: llama) ---
    qkv_bias: bool = False  # Qwen2: biases on Q, K and V
    qk_norm: bool = False  # Qwen3, Gemma 3: RMS norm of each Q/K head before rotary
    post_norms: bool = False  # Gemma 3: RMS norms on the attention and FFN outputs
    activation: str = "silu"  # gate activation: "silu" or "gelu_tanh" (Gemma)
    embed_scale: float = 1.0  # Gemma: embeddings times sqrt(d_model)
    attn_scale: float = 0.0  # scores scale; 0 = 1 / sqrt(head_dim)
    rope_dims: int = 0  # rotated dims per head; 0 = all (Phi-4-mini rotates 3/4)
    rope_scale: float = 1.0  # linear position scaling of global layers (Gemma 3 4B+: 1/8)
    rope_attn_factor: float = 1.0  # LongRoPE's magnitude factor on cos/sin (Phi-3.5, Phi-4-mini)
    rope_orig_context: int = 0  # LongRoPE: past this many positions the long factors apply
    layer_kinds: tuple[str, ...] = ()  # GLOBAL/LOCAL per layer; () = every layer global
    sliding_window: int = 0  # a local layer's reach: key p is seen by query t iff t - p < it
    rope_local_base: float = 10000.0  # rotary base of the local layers

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def q_per_kv(self) -> int:
        return self.n_heads // self.n_kv_heads

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.layer_kinds or (GLOBAL,) * self.n_layers

    @property
    def local_layers(self) -> int:
        return sum(k == LOCAL for k in self.kinds)

    @property
    def global_layers(self) -> int:
        return self.n_layers - self.local_layers

    @property
    def rotary_dims(self) -> int:
        return self.rope_dims or self.head_dim

    @property
    def scores_scale(self) -> float:
        return self.attn_scale or self.head_dim**-0.5
