"""What the engine thread says, sent on to whoever shows it: one app.engine_events object at a
time, by its type (the model's loading, a reply's tokens and end, stats, applied settings ...).

Qt-free: the handlers are the window's and its helpers' (models, applier), found on `win`.
"""
from __future__ import annotations

import logging

from . import engine_events as E

log = logging.getLogger(__name__)


class EngineNews:
    def __init__(self, win):
        self.win = win
        self._table: dict | None = None  # built on the first event (the window is whole by then)

    def dispatch(self, ev) -> None:
        if self._table is None:
            self._table = self.handlers()
        handler = self._table.get(type(ev))
        if handler is None:
            log.warning("unhandled engine event %r", ev)
            return
        handler(ev)

    def handlers(self) -> dict:
        from engine.events import PrefillProgress, Token  # (pure dataclasses: no JAX)

        w = self.win

        def reply(ev: E.ReplyEvent) -> None:
            if isinstance(ev.event, Token):
                w._on_token(ev.request, ev.event.text, ev.event.ttft_s)
            elif isinstance(ev.event, PrefillProgress):
                w._on_prefill(ev.request, ev.event.done, ev.event.total)

        return {
            E.LoadProgress: lambda ev: w.models.on_progress(ev.stage, ev.done, ev.total),
            E.ModelLoaded: lambda ev: w.models.on_loaded(ev.info),
            E.LoadFailed: lambda ev: w.models.on_failed(ev.kind, ev.message),
            E.LoadRefused: lambda ev: w.models.on_refused(ev.kind, ev.message),
            E.DevicesFound: lambda ev: w.settingsPanel.set_devices(list(ev.devices)),
            E.ReplyEvent: reply,
            E.StatsReady: lambda ev: w._on_stats(ev.snapshot),
            E.ReplyFinished: lambda ev: w._on_reply_finished(ev.result),
            E.PlanApplied: lambda ev: w.applier.on_plan_applied(ev.rebuilt, ev.plan, ev.note),
            E.PinChanged: lambda ev: w._on_pin_changed(ev.index, ev.pinned),
            E.Failed: lambda ev: w.applier.on_engine_failed(ev.kind, ev.message),
            E.AutoSinks: lambda ev: w.settingsPanel.set_auto_sinks(ev.system, ev.tokens),
            E.HistoryLoaded: lambda ev: w._on_history_loaded(ev.request),
            E.LibraryListed: w.models.on_library_listed,
            E.CacheRebuilt: lambda ev: w.stageLabel.setText(
                f"Re-read {ev.tokens:,} tokens of the conversation in {ev.seconds:.1f} s"),
        }
