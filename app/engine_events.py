"""What the engine thread tells the window: plain frozen dataclasses (no Qt), one per kind of
news, sent over the worker's single `event(object)` signal (as napari's workers send everything
through one `yielded`). A reply's own events are the session's (engine.events.Token,
PrefillProgress) wrapped with the request they belong to."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelInfo:
    path: str
    name: str
    config: Any  # engine.config.ModelConfig
    device: str
    plan: Any  # engine.budget.MemoryPlan actually allocated
    load_s: float
    template: str = ""  # the built-in turn format in use ("gemma"), or "" for the file's own template
    template_why: str = ""  # why that format: "the family's format", "its vocabulary has <|im_start|>"
    template_error: str = ""  # why the file's own template was not used, when it has a broken one


@dataclass(frozen=True)
class StatsSnapshot:
    """What the gauge and the chat view need, taken in the engine thread."""

    stats: Any  # engine SessionStats
    t: float  # time.monotonic()
    tok_s: float  # decode rate over the last second (0 when idle)
    device_bytes: int | None = None  # accelerator memory in use, when on a GPU


@dataclass(frozen=True)
class ReplyResult:
    request: int
    reason: str  # "eos" | "max_tokens" | "cancelled" | "error"
    reply: str
    generated_tokens: int = 0
    prompt_tokens: int = 0
    decode_tok_s: float = 0.0
    prefill_tok_s: float = 0.0
    ttft_s: float | None = None
    error: str = ""
    roles: tuple[str, ...] | None = None  # the session's messages afterwards (to check it is in step)
    reply_tokens: int = 0  # the whole reply's tokens (more than generated_tokens after a Continue)


# --- the events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadProgress:
    stage: str
    done: int
    total: int  # 0: indeterminate


@dataclass(frozen=True)
class ModelLoaded:
    info: ModelInfo


@dataclass(frozen=True)
class LoadFailed:
    """No model is loaded now."""

    kind: str
    message: str


@dataclass(frozen=True)
class LoadRefused:
    """Another model file failed; the model that served serves on (or is being loaded again)."""

    kind: str
    message: str


@dataclass(frozen=True)
class DevicesFound:
    devices: tuple[str, ...]


@dataclass(frozen=True)
class ReplyEvent:
    """One of the session's events (engine.events.Token, PrefillProgress) for request `request`."""

    request: int
    event: Any


@dataclass(frozen=True)
class StatsReady:
    snapshot: StatsSnapshot


@dataclass(frozen=True)
class ReplyFinished:
    result: ReplyResult


@dataclass(frozen=True)
class PlanApplied:
    rebuilt: bool
    plan: Any  # engine.budget.MemoryPlan
    note: str  # "reallocated" | "re-read" | "unchanged"


@dataclass(frozen=True)
class PinChanged:
    index: int
    pinned: bool


@dataclass(frozen=True)
class HistoryLoaded:
    request: int


@dataclass(frozen=True)
class AutoSinks:
    system: str
    tokens: int  # what "auto" sinks would pin for this system prompt


@dataclass(frozen=True)
class CacheRebuilt:
    tokens: int
    seconds: float


@dataclass(frozen=True)
class Failed:
    """Something not tied to a reply went wrong (a refused setting, a pin)."""

    kind: str
    message: str


@dataclass(frozen=True)
class LibraryListed:
    """The model library's rows (engine.library.ModelEntry), listed in the engine thread."""

    request: int
    rows: tuple
