"""What a ChatSession reports while it works: plain frozen dataclasses, safe to hand to any
thread (the app turns them into Qt signals)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MessageMemory:
    index: int  # position in session.messages (-1 = the system prompt)
    role: str
    tokens: int  # tokens this message contributed to the stream
    tokens_in_cache: int  # how many of them the model still sees
    pinned: bool = False


@dataclass(frozen=True)
class SessionStats:
    tokens_seen: int  # every token that ever entered the cache
    cache_tokens: int  # tokens the cache holds now
    capacity: int  # sinks + window slots
    sink_tokens: int
    window: int
    evicted_tokens: int
    kv_bytes: int  # bytes of the cache arrays actually allocated
    budget_bytes: int
    weight_bytes: int
    rss_bytes: int
    kv_dtype: str = "int8"
    messages: tuple[MessageMemory, ...] = field(default_factory=tuple)
    # False when the template folds the system prompt into the first user turn (Gemma): the
    # sinks then hold only the turn's opening, not the prompt itself
    system_in_sinks: bool = True
    # True while another version of the conversation is shown than the cache holds (stepped to
    # with ‹ ›): the counts above are the cache's, `messages` the shown version's sizes; the
    # next reply (or a pin) re-reads it
    reread_pending: bool = False

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "messages"}
        d["messages"] = [m.__dict__ for m in self.messages]
        return d


@dataclass(frozen=True)
class PrefillProgress:
    done: int
    total: int


@dataclass(frozen=True)
class Token:
    text: str  # text ready to show (may be "" while a UTF-8 character is incomplete)
    token_id: int
    # on a reply's first token only: seconds from the turn's start to it (Done's ttft_s), so a
    # window can show the wait as soon as it is over, not when the reply ends
    ttft_s: float | None = None


@dataclass(frozen=True)
class Stats:
    stats: SessionStats


@dataclass(frozen=True)
class Rebuilt:
    """The cache was re-encoded from the conversation (pin, regenerate, new plan)."""

    tokens: int
    seconds: float


@dataclass(frozen=True)
class Done:
    reason: str  # "eos" | "max_tokens" | "cancelled"
    reply: str
    prompt_tokens: int
    generated_tokens: int
    prefill_tok_s: float
    decode_tok_s: float
    ttft_s: float
    # speculative decoding over the session so far: verifies, drafted, accepted, acceptance
    draft: dict | None = None
    # the whole reply's tokens: generated_tokens plus, after a Continue, those it extended
    reply_tokens: int = 0
