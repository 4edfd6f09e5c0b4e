"""What a hybrid model remembers, in plain words, for the window's widgets.

Qwen3.5's Gated DeltaNet layers keep no K/V: each holds a fixed-size state that every token of
the chat has updated, a summary of the whole conversation. Only its attention layers read the
sliding window word for word. So for such a model, text that has left the window is not gone:
it is out of the attention window, but the DeltaNet layers still carry a summary of it.

:func:`hybrid_memory` reads that from a MemoryPlan (``recurrent_layers``, ``state_bytes``,
``snapshot_bytes``) and the model's config (how many layers attend); it is None for every
other family, and the widgets then say what they always said. No Qt, no JAX: the settings
panel, the memory gauge and the chat view all take their words from here.
"""
from __future__ import annotations

from dataclasses import dataclass

WORDS_PER_TOKEN = 0.75  # (app.memory_gauge's: about three words for every four tokens)


def approx_words(tokens: int) -> str:
    """About how many words `tokens` tokens are ("~3,100"), as the gauge says it."""
    n = tokens * WORDS_PER_TOKEN
    step = 100 if n >= 1000 else 10 if n >= 100 else 1
    return f"~{round(n / step) * step:,.0f}"


def fmt_bytes(n: float | None) -> str:
    """"19.3 MiB", "132.0 KiB", "—" for None: how the app writes a size."""
    if n is None:
        return "—"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def nb(size: str) -> str:
    """A size that a wrapped tooltip keeps on one line ("152.0 KiB")."""
    return size.replace(" ", "\u00a0")


def layers(n: int | None, kind: str = "") -> str:
    """"18 layers", "1 attention layer"; "the attention layers" when the count is not known."""
    if n is None:
        return f"the {kind} layers".replace("  ", " ")
    return f"{n} {kind + ' ' if kind else ''}layer{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class HybridMemory:
    """A hybrid model's memory, as the app describes it."""

    recurrent_layers: int  # layers that keep a fixed state instead of K/V
    attention_layers: int | None  # layers that read the window (None: not known)
    state_bytes: int  # the recurrent layers' state, all of them (part of the plan's kv_bytes)
    snapshot_bytes: int = 0  # at most this in state copies for edits and regenerates, beside the cache

    def sentence(self, window: int, plain: bool = True, bold: bool = False) -> str:
        """"18 layers keep a fixed 3.1 MiB summary of the whole chat; 6 attention layers see the
        last ~12,000 words" (plain) or "... the last 16,000 tokens" (exact terms); `bold`: the two
        figures in <b> (rich text)."""
        b, _b = ("<b>", "</b>") if bold else ("", "")
        seen = f"{approx_words(window)} words" if plain else f"{window:,} tokens"
        return (f"{layers(self.recurrent_layers)} keep a fixed {b}{fmt_bytes(self.state_bytes)} summary{_b} of "
                f"the whole chat; {layers(self.attention_layers, 'attention')} see the last {b}{seen}{_b}")

    def summary_tip(self, window: int) -> str:
        """What the summary is and costs, for a tooltip."""
        tip = (f"This model is a hybrid: {self.sentence(window, plain=False)}. The summary is the DeltaNet "
               f"layers' state: every token of the conversation updates it, so it carries the gist of the "
               f"whole chat, even of text no longer in the window, but not its exact words. It takes "
               f"{fmt_bytes(self.state_bytes)} of the conversation memory and never grows, however long the chat runs.")
        if self.snapshot_bytes:
            tip += (f" Copies of it kept at recent messages (at most {nb(fmt_bytes(self.snapshot_bytes))}, beside "
                    "the conversation memory) let an edit or a regenerate re-read only about a window of text.")
        return tip

    def out_of_view_tip(self) -> str:
        """The faded-history divider's tooltip: out of the attention window, still summarised."""
        return (f"The faded text has left the attention window: this model's "
                f"{layers(self.attention_layers, 'attention')}, which read the chat word for word, no longer see "
                f"it. Its {layers(self.recurrent_layers, 'DeltaNet')} still carry a summary of it, in a fixed "
                f"{nb(fmt_bytes(self.state_bytes))} state that every token of the chat has updated. So the model "
                "keeps the gist of it, not its exact words. Pin a message to keep it in full view.")

    def evicted_tip(self, evicted: int, seen: int) -> str:
        return (f"Tokens evicted: {evicted:,} of the {seen:,} tokens this conversation has fed the model have "
                f"left the attention window. The {layers(self.attention_layers, 'attention')} no longer see them, "
                f"but the {layers(self.recurrent_layers, 'DeltaNet')} still carry a summary of them (they stay in "
                "the chat, faded, and in the saved conversation); memory stays the same size.")


FORGETS = "so it will forget what was said a few messages ago."  # (engine.budget.short_window_warning's)


def short_window_words(warning: str | None, hybrid: HybridMemory | None) -> str | None:
    """The engine's short-window warning, for a hybrid: it loses the words of older text, not
    all of it (its DeltaNet layers keep a summary)."""
    if not warning or hybrid is None:
        return warning
    keeps = f"its {layers(hybrid.recurrent_layers, 'DeltaNet')} keep only a summary of older text."
    if FORGETS in warning:
        return warning.replace(FORGETS, "so it will lose the exact words of what was said a few messages ago: "
                               + keeps)
    return f"{warning} {keeps[0].upper()}{keeps[1:]}"


def hybrid_memory(plan, config=None) -> HybridMemory | None:
    """The plan's hybrid memory, or None for a model whose every layer attends. `config` (the
    model's ModelConfig) gives how many layers attend; without it the words say "the attention
    layers"."""
    recurrent = int(getattr(plan, "recurrent_layers", 0) or 0) if plan is not None else 0
    if not recurrent:
        return None
    attention = getattr(config, "attention_layers", None) if config is not None else None
    return HybridMemory(recurrent, None if attention is None else int(attention), int(plan.state_bytes),
                        int(getattr(plan, "snapshot_bytes", 0) or 0))


__all__ = ["HybridMemory", "hybrid_memory", "short_window_words"]
