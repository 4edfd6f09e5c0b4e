"""The bounded KV cache: device arrays of exactly `capacity` slots, and the host ring that
decides which token lives in which slot.

Device side (`KVCache`): K and V for every layer, `[layers, capacity, kv_dim]`, int8 with one
f32 scale per 32 values, or bf16 (held as its uint16 bits) or f32. Allocated once; the jitted
step donates and updates it in place. Its nbytes equal the plan's kv_bytes exactly.

Host side (`Ring`): the stream index held by each slot (-1 = empty). Slots [0, n_sink) hold the
sinks, the first tokens of the stream; slots [n_sink, capacity) are a ring over the rest.
Attention masks are derived from these positions, never from slot indices (as in gemma).

Models with sliding-window layers (Gemma 3) get a second, smaller cache for those layers
(`KVCache.local`, `[local layers, local_slots, kv_dim]`) and a second ring whose masks follow
the file's sliding-window rule: query t sees key p iff t - p < sliding window.

Hybrid models (Qwen3.5) keep no K/V in their Gated DeltaNet layers but a fixed state
(`KVCache.state`): per recurrent layer an S x S matrix per value head and the conv's last
kernel - 1 inputs, f32, allocated here once, beside the K/V and donated with it. Unlike the
ring, the state is not masked by positions: it is the running summary of every token fed, so
forgetting means zeroing it (`zero_state`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .budget import KV_GROUP, MemoryPlan
from .config import GLOBAL, LOCAL, ModelConfig

# A bf16 cache is held as its bits (uint16): XLA:CPU widens a bf16 scatter to f32, so each step
# converted the whole cache to f32 and back to write its rows (two copies of K and V a step, 95 MB
# on the default model: decode 7x slower than with int8); a uint16 write is in place. Readers
# take the bits as bf16 (forward.dequantize_kv; the native attention reads them as stored).
_DTYPES = {"int8": jnp.int8, "bf16": jnp.uint16, "f32": jnp.float32}


@jax.tree_util.register_dataclass
@dataclass
class RecurrentState:
    """The Gated DeltaNet layers' state: what they remember of the whole stream."""

    ssm: jax.Array  # [Lr, Hv, S, S] f32: per value head, value dim x key dim
    conv: jax.Array  # [Lr, kernel - 1, conv_dim] f32: the last inputs of the causal conv


@jax.tree_util.register_dataclass
@dataclass
class KVCache:
    k: jax.Array  # [L, S, kv_dim]
    v: jax.Array
    k_scale: jax.Array | None = None  # [L, S, kv_dim // 32] f32, int8 only
    v_scale: jax.Array | None = None
    local: "KVCache | None" = None  # the sliding-window layers' own cache (Gemma 3)
    state: RecurrentState | None = None  # the recurrent layers' state (Qwen3.5)

    @property
    def nbytes(self) -> int:
        return sum(int(x.nbytes) for x in jax.tree_util.tree_leaves(self))


def _arrays(n_layers: int, slots: int, kv_dim: int, kv_dtype: str) -> KVCache:
    shape = (n_layers, slots, kv_dim)
    if kv_dtype != "int8":
        dtype = _DTYPES[kv_dtype]
        return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))
    sshape = shape[:2] + (-(-kv_dim // KV_GROUP),)
    return KVCache(jnp.zeros(shape, jnp.int8), jnp.zeros(shape, jnp.int8),
                   jnp.zeros(sshape, jnp.float32), jnp.zeros(sshape, jnp.float32))


def allocate(config: ModelConfig, plan: MemoryPlan) -> KVCache:
    """Exactly the plan's bytes: the global layers' capacity, the local layers' slots (at their
    own width), the recurrent layers' state; nothing for layers that share another's cache."""
    from . import compile_cache

    # One compiled program makes every array (eager zeros compile two small programs a dtype at
    # each start, ~25 ms); the store loads it on later starts.
    fresh = compile_cache.compiled(_fresh, (), config=config, capacity=plan.capacity,
                                   local_slots=plan.local_slots, kv_dtype=plan.kv_dtype)
    return fresh()


@partial(jax.jit, static_argnames=("config", "capacity", "local_slots", "kv_dtype"))
def _fresh(config: ModelConfig, capacity: int, local_slots: int, kv_dtype: str) -> KVCache:
    cache = _arrays(config.cache_layers(GLOBAL), capacity, config.kv_dim, kv_dtype)
    if config.local_layers:
        cache.local = _arrays(config.cache_layers(LOCAL), local_slots, config.local_kv_dim, kv_dtype)
    if config.recurrent_layers:
        cache.state = zero_state(config)
    return cache


def zero_state(config: ModelConfig) -> RecurrentState:
    """A recurrent state that has seen nothing (config.state_bytes bytes)."""
    Lr, Hv, S = config.recurrent_layers, config.ssm_heads, config.ssm_state
    return RecurrentState(jnp.zeros((Lr, Hv, S, S), jnp.float32),
                          jnp.zeros((Lr, config.ssm_conv - 1, config.conv_dim), jnp.float32))


class Ring:
    """Which stream position lives in which slot; the source of every attention mask."""

    def __init__(self, capacity: int, n_sink: int, reach: int | None = None):
        """reach: a sliding-window layer's rule (query t sees key p iff t - p < reach), sinks
        included; None: a global layer (sinks always seen, the window as far as it holds)."""
        if not 0 <= n_sink < capacity:
            raise ValueError(f"need 0 <= sinks < capacity (sinks={n_sink}, capacity={capacity})")
        self.capacity = capacity
        self.n_sink = n_sink
        self.window = capacity - n_sink
        self.reach = reach
        self.slot_pos = np.full(capacity, -1, dtype=np.int64)
        self.next_pos = 0  # stream index of the next token to enter

    def slot_of(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        ring = self.n_sink + (pos - self.n_sink) % self.window
        return np.where(pos < self.n_sink, pos, ring)

    def plan_chunk(self, n: int, chunk: int) -> "ChunkPlan":
        """Masks and write slots for the next `n` tokens, padded to `chunk` rows.

        Row i (stream index t) may attend to: cached slots holding a sink, or a position p with
        t - window < p <= t; and chunk rows j <= i under the same rule. Rows beyond n are padding:
        they repeat the last token's mask and write nowhere (slot index = capacity, dropped).
        """
        assert 0 < n <= chunk
        S, C = self.capacity, chunk
        q_pos = self.next_pos + np.minimum(np.arange(C), n - 1)
        key_pos = np.concatenate([self.slot_pos, self.next_pos + np.arange(C)])
        key_real = np.concatenate([self.slot_pos >= 0, np.arange(C) < n])
        key_sink = (key_pos < self.n_sink) & key_real
        t, p = q_pos[:, None], key_pos[None, :]
        if self.reach is None:
            mask = key_real[None, :] & (p <= t) & (key_sink[None, :] | (t - p < self.window))
        else:  # the file's sliding window; a sink is just an early token, scored at its own position
            near = np.where(key_sink[None, :], t - p < self.reach, t - p < min(self.reach, self.window))
            mask = key_real[None, :] & (p <= t) & near
            key_sink = np.zeros_like(key_sink)
        # Rows that a later row of the same chunk overwrites (more than `window` new tokens)
        # and padding rows are dropped: scatter with an out-of-range index and mode="drop".
        new_pos = self.next_pos + np.arange(C)
        last = self.next_pos + n - 1
        keep = (np.arange(C) < n) & ((new_pos < self.n_sink) | (last - new_pos < self.window))
        write_slot = np.where(keep, self.slot_of(new_pos), S)
        # The in-cache position the query has relative to the sinks (StreamingLLM):
        # sinks sit at 0..n_sink-1 and the query at most at capacity - 1.
        sink_q_pos = np.minimum(q_pos, S - 1)
        # Keys by stream position (empty slots last): the order attention sums in, the same for a
        # token whatever chunk computes it (engine/kernels: exact speculation).
        order = np.argsort(np.where(key_real, key_pos, np.iinfo(np.int64).max), kind="stable").astype(np.int32)
        return ChunkPlan(q_pos=q_pos, sink_q_pos=sink_q_pos, mask=mask, key_sink=key_sink,
                         write_slot=write_slot.astype(np.int32), n=n, order=order)

    def commit(self, plan: "ChunkPlan") -> None:
        """Record that the chunk's tokens were written to their slots."""
        w = plan.write_slot[: plan.n]
        kept = w < self.capacity
        self.slot_pos[w[kept]] = plan.q_pos[: plan.n][kept]
        self.next_pos += plan.n

    # --- what the session reports -------------------------------------------------------
    def cached_positions(self) -> np.ndarray:
        return np.sort(self.slot_pos[self.slot_pos >= 0])

    @property
    def cache_tokens(self) -> int:
        return int((self.slot_pos >= 0).sum())

    @property
    def evicted(self) -> int:
        return self.next_pos - self.cache_tokens


@dataclass
class ChunkPlan:
    q_pos: np.ndarray  # [C] stream index of each row
    sink_q_pos: np.ndarray  # [C] query position used against sink keys
    mask: np.ndarray  # [C, S + C] bool
    key_sink: np.ndarray  # [S + C] bool: score this key with the sink-rotated query
    write_slot: np.ndarray  # [C] int32, == capacity for rows not written
    n: int  # real rows
    order: np.ndarray  # [S + C] int32: keys sorted by stream position, empty slots last
