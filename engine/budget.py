"""The memory plan: a KV byte budget turned into cache slots (Needle 2's rule, generalised).

Needle sizes its window from an ~11.5 MiB budget: bytes per cached position for the model's
shape and the KV precision, the largest multiple of 32 positions that fits, clamped to
[160, context length]. A user window can only shrink it; sinks live inside the same slots.

Models with sliding-window (local) layers (Gemma 3) pay for those layers only up to what they
can see: a local layer holds min(sliding window + sinks, capacity) slots, a global layer the
whole capacity, and the budget rule sizes the global capacity with that split counted.
Pure Python on purpose: the settings panel calls it on every keystroke.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import ModelConfig
from .errors import SettingsError

MIB = 1024 * 1024
DEFAULT_BUDGET = 11 * MIB + 512 * 1024  # 11.5 MiB, Needle's KV_BUDGET_BYTES
KV_GROUP = 32  # int8 scale group, and the slot granularity
MIN_SLOTS = 160  # Needle's KV_WINDOW_MIN
KV_DTYPES = ("int8", "bf16", "f32")
AUTO_SINKS_WITHOUT_SYSTEM = 4  # StreamingLLM's 4 attention sinks, when there is no system prompt
MIN_WINDOW = 32  # sinks never take the whole cache: the model must still see recent tokens
_VALUE_BYTES = {"int8": 1, "bf16": 2, "f32": 4}


@dataclass(frozen=True)
class MemoryPlan:
    kv_dtype: str
    budget_bytes: int
    bytes_per_position: int
    slots: int  # what the budget allows
    sinks: int
    window: int
    kv_bytes: int  # what is allocated: capacity * bytes_per_position + local layers' slots
    local_layers: int = 0  # sliding-window layers (Gemma 3); 0 for other families
    local_slots: int | None = None  # slots each local layer holds; None without local layers

    @property
    def capacity(self) -> int:
        """Cache slots actually allocated (sinks + window)."""
        return self.sinks + self.window

    def to_dict(self) -> dict:
        return asdict(self)


def layer_bytes_per_position(config: ModelConfig, kv_dtype: str = "int8") -> int:
    """K and V of one layer at one position (+ one f32 scale per 32 values for int8)."""
    if kv_dtype not in _VALUE_BYTES:
        raise SettingsError(f"KV precision must be one of {', '.join(KV_DTYPES)} (got {kv_dtype!r})")
    kv = config.kv_dim
    per_layer = 2 * kv * _VALUE_BYTES[kv_dtype]
    if kv_dtype == "int8":
        per_layer += 2 * (-(-kv // KV_GROUP)) * 4
    return per_layer


def bytes_per_position(config: ModelConfig, kv_dtype: str = "int8") -> int:
    """One slot of the global capacity: K and V of every global layer (every layer, for models
    without local layers)."""
    return config.global_layers * layer_bytes_per_position(config, kv_dtype)


def local_slots(config: ModelConfig, capacity: int, sinks: int) -> int | None:
    """Slots a local layer holds: its sliding window plus the sinks, at most the capacity."""
    return min(config.sliding_window + sinks, capacity) if config.local_layers else None


def budget_slots(config: ModelConfig, kv_dtype: str, budget_bytes: int, sinks: int = 4) -> int:
    """Largest multiple of 32 global slots whose cache (local layers counted) fits the budget,
    at least 160, at most the context."""
    per_layer = layer_bytes_per_position(config, kv_dtype)
    room = int(budget_bytes) // per_layer  # layer-positions the budget buys
    G, Lc, reach = config.global_layers, config.local_layers, config.sliding_window + max(int(sinks), 0)
    slots = room // config.n_layers // KV_GROUP * KV_GROUP  # while local layers hold every slot
    if Lc and G:
        wide = (room - Lc * reach) // G // KV_GROUP * KV_GROUP  # once they stop at their reach
        if wide >= reach:
            slots = max(slots, wide)
    return max(MIN_SLOTS, min(slots, config.context_length))


def plan_memory(
    config: ModelConfig,
    kv_dtype: str = "int8",
    budget_bytes: int | float = DEFAULT_BUDGET,
    window: int | None = None,
    sinks: int = 4,
) -> MemoryPlan:
    """The cache the engine will allocate for this model and setting.

    Raises SettingsError with what would fit when the setting is impossible.
    """
    if budget_bytes is None or not budget_bytes > 0:
        raise SettingsError(f"KV budget must be positive (got {budget_bytes})")
    per_pos = bytes_per_position(config, kv_dtype)
    slots = budget_slots(config, kv_dtype, budget_bytes, sinks)
    sinks = int(sinks)
    if sinks < 0:
        raise SettingsError(f"sinks must be 0 or more (got {sinks}); at most {slots - 1} fit")
    if sinks >= slots:
        raise SettingsError(
            f"{sinks} sinks do not fit: this budget holds {slots} slots "
            f"({per_pos:,} B each), so at most {slots - 1} sinks with a window of 1"
        )
    largest = slots - sinks
    if window is not None and window != 0:
        window = int(window)
        if window < 0:
            raise SettingsError(f"window must be positive (got {window}); up to {largest} fits")
        largest = min(largest, window)
    capacity = sinks + largest
    local = local_slots(config, capacity, sinks)
    local_bytes = config.local_layers * (local or 0) * layer_bytes_per_position(config, kv_dtype)
    return MemoryPlan(
        kv_dtype=kv_dtype,
        budget_bytes=int(budget_bytes),
        bytes_per_position=per_pos,
        slots=slots,
        sinks=sinks,
        window=largest,
        kv_bytes=capacity * per_pos + local_bytes,
        local_layers=config.local_layers,
        local_slots=local,
    )
