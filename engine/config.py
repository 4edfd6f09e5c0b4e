"""The model's shape and its family's traits: a frozen (hashable) dataclass, so jitted functions
can take it as static. One layer function (engine.forward) reads the trait fields; the family
specs (engine.families) fill them from a GGUF's metadata.

Layer kinds: GLOBAL attention over the bounded cache, LOCAL (sliding-window) attention over its
own smaller cache, RECURRENT (Gated DeltaNet, Qwen3.5): no KV at all, a fixed-size state.

Gemma 4 makes layers differ in shape: the local layers' heads are smaller than the global ones'
(head_dim_local), the last shared_kv_layers layers hold no K/V of their own and read the cache of
the last earlier layer of their kind, and FFN widths may be per layer (ffn_dims). Such a model's
weights are held per layer (per_layer_weights) and its layers run unrolled, not scanned."""
from __future__ import annotations

from dataclasses import dataclass, replace

GLOBAL, LOCAL, RECURRENT = "global", "local", "recurrent"


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
    rope_sections: tuple[int, ...] = ()  # Qwen3.5's multi-section rotary (text: one position in each)
    attn_gate: bool = False  # Qwen3.5: attn_q rows are [q | gate] per head; sigmoid(gate) scales the output
    nope_layers: tuple[bool, ...] = ()  # SmolLM3: per layer, True where Q and K are not rotated (NoPE)
    # Gated DeltaNet (RECURRENT layers, Qwen3.5): conv taps, head size S, key heads, value heads
    ssm_conv: int = 0
    ssm_state: int = 0
    ssm_groups: int = 0
    ssm_heads: int = 0
    # Gemma 4: the local layers' head size and rotated dims (0 = as the global layers'), layers at
    # the end reading an earlier layer's cache, per-layer FFN widths, the per-layer embedding
    # width, V RMS-normed without a weight, a scalar per layer on its output, the logits' soft-cap
    head_dim_local: int = 0
    rope_dims_local: int = 0
    shared_kv_layers: int = 0
    ffn_dims: tuple[int, ...] = ()
    per_layer_dim: int = 0
    v_norm: bool = False
    layer_scale: bool = False
    logit_softcap: float = 0.0

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
        return sum(k == GLOBAL for k in self.kinds)

    @property
    def recurrent_layers(self) -> int:
        return sum(k == RECURRENT for k in self.kinds)

    @property
    def attention_layers(self) -> int:
        """Layers that hold K/V (the window covers these only)."""
        return self.n_layers - self.recurrent_layers

    @property
    def local_head_dim(self) -> int:
        return self.head_dim_local or self.head_dim

    @property
    def local_kv_dim(self) -> int:
        return self.n_kv_heads * self.local_head_dim

    @property
    def local_rotary_dims(self) -> int:
        return self.rope_dims_local or (self.head_dim_local or self.rotary_dims)

    def head_dim_of(self, i: int) -> int:
        return self.local_head_dim if self.kinds[i] == LOCAL else self.head_dim

    def ffn_width(self, i: int) -> int:
        return self.ffn_dims[i] if self.ffn_dims else self.ffn_dim

    def owns_kv(self, i: int) -> bool:
        """Whether layer i writes K/V of its own (not a recurrent layer, nor a shared one)."""
        return self.kinds[i] != RECURRENT and i < self.n_layers - self.shared_kv_layers

    def kv_source(self, i: int) -> int:
        """The layer whose cache layer i reads: itself, or for a shared layer (Gemma 4) the last
        earlier layer of the same kind that owns one (llama.cpp's gemma4 KV reuse)."""
        if self.owns_kv(i):
            return i
        for j in range(min(i, self.n_layers - self.shared_kv_layers) - 1, -1, -1):
            if self.kinds[j] == self.kinds[i] and self.owns_kv(j):
                return j
        raise ValueError(f"layer {i} shares the cache of no earlier {self.kinds[i]} layer")

    def cache_layers(self, kind: str) -> int:
        """Cache rows of that kind: the layers of that kind that own their K/V."""
        return sum(k == kind and self.owns_kv(i) for i, k in enumerate(self.kinds))

    @property
    def per_layer_weights(self) -> bool:
        """Layers that differ in shape (Gemma 4): weights held per layer, layers unrolled."""
        return bool(self.head_dim_local or self.shared_kv_layers or self.ffn_dims or self.per_layer_dim)

    def kind_view(self, kind: str) -> "ModelConfig":
        """This config as the attention of one kind sees it (Gemma 4's local heads are smaller)."""
        if kind != LOCAL or not self.head_dim_local:
            return self
        return replace(self, head_dim=self.head_dim_local, rope_dims=self.rope_dims_local)

    @property
    def conv_dim(self) -> int:
        """Channels of a DeltaNet layer's causal conv: [q | k | v] (Hk and Hv heads of S)."""
        return (2 * self.ssm_groups + self.ssm_heads) * self.ssm_state

    @property
    def state_bytes(self) -> int:
        """The recurrent layers' fixed state, f32: an S x S matrix per value head plus the conv's
        last kernel - 1 inputs. The same bytes however long the chat runs."""
        per_layer = self.ssm_heads * self.ssm_state**2 + (self.ssm_conv - 1) * self.conv_dim
        return 4 * self.recurrent_layers * per_layer if self.recurrent_layers else 0

    @property
    def rotary_dims(self) -> int:
        return self.rope_dims or self.head_dim

    @property
    def scores_scale(self) -> float:
        return self.attn_scale or self.head_dim**-0.5
