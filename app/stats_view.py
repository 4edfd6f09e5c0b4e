"""The session's memory stats, shown: the gauge, which messages the model no longer sees, the
cache count in the status bar, and the settings preview's idea of the current cache; and the
plan in force (`show_plan`), with what a hybrid model remembers.

The engine thread sends a StatsSnapshot after each reply (and while one streams); `show_stats`
spreads it over the window's widgets. It reads the window's attributes (gauge, chat,
settingsPanel, cacheLabel, speedLabel), the way :mod:`app.window_view` does.
"""
from __future__ import annotations

import dataclasses

from .chat_view import MessageMemoryView


def message_memory(stats, system_prompt: str) -> tuple[dict[int, MessageMemoryView], int, int]:
    """(each message's memory by index, tokens of the system prompt in the sinks, tokens of
    pinned messages) from a session's stats."""
    per = {}
    system_tokens = pinned_tokens = 0
    for mm in stats.messages:
        if mm.index < 0:  # the system prompt: part of the sinks
            system_tokens += int(mm.tokens_in_cache)
            continue
        per[mm.index] = MessageMemoryView(int(mm.tokens), int(mm.tokens_in_cache), bool(mm.pinned))
        if mm.pinned:
            pinned_tokens += int(mm.tokens)
    if not getattr(stats, "system_in_sinks", True):  # (Gemma folds it into the first turn)
        system_tokens = 0
    elif not system_tokens and system_prompt and not stats.messages:
        system_tokens = max(int(stats.sink_tokens) - pinned_tokens, 0)  # pinned before the first turn feeds it
    return per, system_tokens, pinned_tokens


def show_stats(win, snap) -> None:
    s = snap.stats
    win.gauge.set_snapshot(snap)
    per, system_tokens, pinned_tokens = message_memory(s, win.settings.system_prompt)
    win.chat.set_memory(per, int(s.sink_tokens), system_tokens)
    panel = win.settingsPanel
    if not win.generating:  # a reply's own tokens are never pinned: skip the work while streaming
        plan = panel.applied_plan
        if plan is not None and (plan.sinks, plan.window) != (int(s.sink_tokens), int(s.window)):
            # a pin (or a new system prompt) moved tokens into the sinks: that is the cache now,
            # so the preview compares against it ("same as the current cache" after a pin)
            panel.applied_plan = dataclasses.replace(plan, sinks=int(s.sink_tokens), window=int(s.window))
            panel.refresh_preview()
        panel.set_pinned_tokens(pinned_tokens)  # (refreshes the preview if they changed)
    if s.reread_pending:
        # a version stepped to with ‹ ›: the cache still holds the one before it; count the
        # version shown (what the cache will hold, at most its capacity) and say when that is
        shown = min(sum(int(mm.tokens) for mm in s.messages), int(s.capacity))
        show_cache(win, shown, int(s.capacity), " (re-read at the next reply)")
    else:
        show_cache(win, int(s.cache_tokens), int(s.capacity))
    if win.generating and snap.tok_s:
        win.speedLabel.setText(f"{snap.tok_s:.1f} tok/s")


def show_plan(win, plan) -> None:
    """A plan in force (a model loaded, settings applied): the gauge shows it before any stats,
    and a hybrid model's memory (app.memory_words) reaches the gauge's and the chat's words."""
    info = win.model_info
    win.gauge.set_plan(plan, info.config if info is not None else None)
    win.chat.set_hybrid(win.gauge.hybrid)


def show_cache(win, tokens: int, capacity: int, note: str = "") -> None:
    win.cacheLabel.setText(f"cache {tokens:,} / {capacity:,}{note}")
