"""The memory plan: a KV byte budget turned into cache slots (Needle 2's rule, generalised).

Needle sizes its window from an ~11.5 MiB budget: bytes per cached position for the model's
shape and the KV precision, the largest multiple of 32 positions that fits, clamped to
[160, context length]. A user window can only shrink it; sinks live inside the same slots.

Needle's 11.5 MiB suits its own small model; at 1.7B it buys 160 slots. So the default budget
("auto") is sized to the model: the bytes of a 4,096-token window plus the sinks (or of the
trained context, if shorter), at most 10% of the machine's RAM. It is still a byte budget
turned into a window, allocated once; only where the number comes from differs. Needle's
budget stays a named preset (NEEDLE_BUDGET).

Models with sliding-window (local) layers (Gemma 3) pay for those layers only up to what they
can see: a local layer holds min(sliding window + sinks, capacity) slots, a global layer the
whole capacity, and the budget rule sizes the global capacity with that split counted.

Hybrid models (Qwen3.5's Gated DeltaNet layers) hold no KV in their recurrent layers, only a
fixed state (config.state_bytes): it comes off the budget first, and the window is what the
rest buys for the attention layers alone. kv_bytes counts it (it is what the cache allocates);
state_bytes says how much of it is state. A session also keeps up to SNAPSHOTS copies of the
state at message ends, so that an edit or a regenerate re-reads about a window of tokens, not
the whole chat: snapshot_bytes, beside the cache.
Pure Python on purpose: the settings panel calls it on every keystroke.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from .config import GLOBAL, LOCAL, ModelConfig
from .errors import SettingsError

MIB = 1024 * 1024
NEEDLE_BUDGET = 11 * MIB + 512 * 1024  # 11.5 MiB, Needle's KV_BUDGET_BYTES: a named preset
AUTO_WINDOW = 4096  # the auto budget's window: room for a real conversation on a 1-4B model
RAM_SHARE = 0.10  # the auto budget never takes more of the machine's RAM than this
SHORT_WINDOW = 1024  # a window below this forgets within a few messages: the user is told
KV_GROUP = 32  # int8 scale group, and the slot granularity
MIN_SLOTS = 160  # Needle's KV_WINDOW_MIN
KV_DTYPES = ("int8", "bf16", "f32")
AUTO_SINKS_WITHOUT_SYSTEM = 4  # StreamingLLM's 4 attention sinks, when there is no system prompt
MIN_WINDOW = 32  # sinks never take the whole cache: the model must still see recent tokens
_VALUE_BYTES = {"int8": 1, "bf16": 2, "f32": 4}
SNAPSHOTS = 4  # a hybrid's state snapshots a session keeps for edits and regenerates (engine.snapshots)


@dataclass(frozen=True)
class MemoryPlan:
    kv_dtype: str
    budget_bytes: int
    bytes_per_position: int
    slots: int  # what the budget allows
    sinks: int
    window: int
    kv_bytes: int  # what is allocated: capacity * bytes_per_position + local layers' slots + state
    local_layers: int = 0  # sliding-window layers that hold a cache (Gemma 3, 4); 0 for other families
    local_slots: int | None = None  # slots each local layer holds; None without local layers
    budget_rule: str = ""  # where budget_bytes came from, e.g. "auto: 4,096 tokens"
    state_bytes: int = 0  # the recurrent layers' fixed state (in kv_bytes); 0 for other families
    recurrent_layers: int = 0  # layers that keep a state instead of K/V (Qwen3.5's DeltaNet)
    shared_kv_layers: int = 0  # layers reading an earlier layer's cache, holding none (Gemma 4)
    local_bytes: int = 0  # the local layers' caches (in kv_bytes; their slots can be narrower: Gemma 4)
    snapshot_bytes: int = 0  # at most this in state snapshots beside the cache (engine.snapshots), not in kv_bytes

    @property
    def capacity(self) -> int:
        """Cache slots actually allocated (sinks + window)."""
        return self.sinks + self.window

    def to_dict(self) -> dict:
        return asdict(self)


def layer_bytes_per_position(config: ModelConfig, kv_dtype: str = "int8", kv_dim: int | None = None) -> int:
    """K and V of one layer at one position (+ one f32 scale per 32 values for int8); kv_dim: a
    layer kind's own width (Gemma 4's local layers are narrower), else the global layers'."""
    if kv_dtype not in _VALUE_BYTES:
        raise SettingsError(f"KV precision must be one of {', '.join(KV_DTYPES)} (got {kv_dtype!r})")
    kv = config.kv_dim if kv_dim is None else kv_dim
    per_layer = 2 * kv * _VALUE_BYTES[kv_dtype]
    if kv_dtype == "int8":
        per_layer += 2 * (-(-kv // KV_GROUP)) * 4
    return per_layer


def _local_bytes_per_position(config: ModelConfig, kv_dtype: str) -> int:
    return layer_bytes_per_position(config, kv_dtype, config.local_kv_dim)


def bytes_per_position(config: ModelConfig, kv_dtype: str = "int8") -> int:
    """One slot of the global capacity: K and V of every global layer that holds a cache (every
    layer, for models without local, recurrent or shared layers)."""
    return config.cache_layers(GLOBAL) * layer_bytes_per_position(config, kv_dtype)


def local_slots(config: ModelConfig, capacity: int, sinks: int) -> int | None:
    """Slots a local layer holds: its sliding window plus the sinks, at most the capacity."""
    return min(config.sliding_window + sinks, capacity) if config.local_layers else None


def cache_bytes(config: ModelConfig, kv_dtype: str, capacity: int, sinks: int) -> int:
    """Bytes of a cache whose global layers hold `capacity` slots (local layers their reach,
    shared layers nothing), the recurrent layers' fixed state included."""
    local = local_slots(config, capacity, sinks) or 0
    return (capacity * bytes_per_position(config, kv_dtype)
            + config.cache_layers(LOCAL) * local * _local_bytes_per_position(config, kv_dtype) + config.state_bytes)


def budget_slots(config: ModelConfig, kv_dtype: str, budget_bytes: int, sinks: int = 4) -> int:
    """Largest multiple of 32 global slots whose cache (local layers counted) fits the budget,
    at least 160, at most the context (the whole context, when the budget holds it)."""
    room = max(int(budget_bytes) - config.state_bytes, 0)  # the bytes the K/V may take
    per_global = bytes_per_position(config, kv_dtype)
    per_local = config.cache_layers(LOCAL) * _local_bytes_per_position(config, kv_dtype)
    reach = config.sliding_window + max(int(sinks), 0)
    slots = room // (per_global + per_local) // KV_GROUP * KV_GROUP  # while local layers hold every slot
    if per_local and per_global:
        wide = (room - per_local * reach) // per_global // KV_GROUP * KV_GROUP  # once they stop at their reach
        if wide >= reach:
            slots = max(slots, wide)
    ctx = config.context_length
    if slots < ctx and int(budget_bytes) >= cache_bytes(config, kv_dtype, ctx, sinks):
        slots = ctx  # a context that is not a multiple of 32 still fits whole
    return max(MIN_SLOTS, min(slots, ctx))


@functools.lru_cache(maxsize=1)
def machine_ram() -> int:
    """This machine's physical memory in bytes (the auto budget's cap is a share of it)."""
    import psutil

    return int(psutil.virtual_memory().total)


def auto_budget(config: ModelConfig, kv_dtype: str = "int8", sinks: int = 4,
                ram_bytes: int | None = None) -> tuple[int, str]:
    """The default budget and the rule that chose it: the bytes of a window of AUTO_WINDOW
    tokens beside `sinks` (or of the trained context, if that is shorter), capped at RAM_SHARE
    of the machine's RAM. When the cap binds, the window shrinks, and the rule says so."""
    sinks = max(int(sinks), 0)
    ctx = config.context_length
    want = min(-(-(AUTO_WINDOW + sinks) // KV_GROUP) * KV_GROUP, ctx)
    need = cache_bytes(config, kv_dtype, want, sinks)
    ram = machine_ram() if ram_bytes is None else int(ram_bytes)
    cap = int(ram * RAM_SHARE)
    if need > cap:
        return cap, f"auto: capped at 10% of RAM ({cap / MIB:,.0f} MiB of {ram / 2**30:,.1f} GiB)"
    if want == ctx and AUTO_WINDOW + sinks > ctx:
        return need, f"auto: the trained context, {ctx:,} tokens"
    return need, f"auto: {AUTO_WINDOW:,} tokens"


def named_rule(budget_bytes: int) -> str:
    """The rule of a budget the user set: Needle's preset by name, any other by its size."""
    if int(budget_bytes) == NEEDLE_BUDGET:
        return "11.5 MiB (Needle 2)"
    return f"set: {budget_bytes / MIB:,.4g} MiB"


def short_window_warning(plan: MemoryPlan, context_length: int | None = None) -> str | None:
    """A plain-words warning when a plan leaves the model too little recent text to chat in
    (none when the window is all the model was trained to see: more would not help)."""
    if plan.window >= SHORT_WINDOW or (context_length and plan.capacity >= context_length):
        return None
    words = int(plan.window * 0.75) // 10 * 10 or plan.window  # ~0.75 English words a token
    return (f"This memory setting lets the model see only the last {_count(plan.window, 'token')} (about "
            f"{_count(words, 'word')}) of the chat, so it will forget what was said a few messages ago. "
            f"The auto memory budget gives it {AUTO_WINDOW:,} tokens.")


def _count(n: int, noun: str) -> str:
    """"1 token", "2,048 tokens"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def hybrid_words(plan: MemoryPlan, config: ModelConfig) -> str | None:
    """What a hybrid model remembers, in plain words for the settings preview and the gauge (None
    for models whose every layer attends): its recurrent layers' fixed summary of the whole
    chat, and how far back its attention layers see."""
    if not plan.recurrent_layers:
        return None
    return (f"{plan.recurrent_layers} layers keep a fixed {plan.state_bytes / MIB:,.1f} MiB summary of the whole "
            f"chat; {config.attention_layers} attention layers see the last {plan.window:,} tokens")


def plan_memory(
    config: ModelConfig,
    kv_dtype: str = "int8",
    budget_bytes: int | float | None = None,
    window: int | None = None,
    sinks: int = 4,
    *,
    ram_bytes: int | None = None,
    budget_rule: str | None = None,
) -> MemoryPlan:
    """The cache the engine will allocate for this model and setting. `budget_bytes` None is
    the auto budget (auto_budget); `budget_rule` names a budget's origin when the caller knows
    it better (a session re-planning its base plan's bytes keeps the base plan's rule).

    Raises SettingsError with what would fit when the setting is impossible.
    """
    if budget_bytes is None:
        layer_bytes_per_position(config, kv_dtype)  # an unknown precision says so first
        budget_bytes, rule = auto_budget(config, kv_dtype, sinks, ram_bytes)
    elif not budget_bytes > 0:
        raise SettingsError(f"KV budget must be positive (got {budget_bytes})")
    else:
        rule = named_rule(budget_bytes)
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
    local_bytes = config.cache_layers(LOCAL) * (local or 0) * _local_bytes_per_position(config, kv_dtype)
    return MemoryPlan(
        kv_dtype=kv_dtype,
        budget_bytes=int(budget_bytes),
        bytes_per_position=per_pos,
        slots=slots,
        sinks=sinks,
        window=largest,
        kv_bytes=capacity * per_pos + local_bytes + config.state_bytes,
        local_layers=config.cache_layers(LOCAL),
        local_slots=local,
        budget_rule=budget_rule or rule,
        state_bytes=config.state_bytes,
        recurrent_layers=config.recurrent_layers,
        shared_kv_layers=config.shared_kv_layers,
        local_bytes=local_bytes,
        snapshot_bytes=SNAPSHOTS * config.state_bytes,
    )
