"""Waiting for the engine's events in tests: everything arrives over one `event(object)` signal
(app.engine_events), so a test waits for an event of a kind, optionally one that matches."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def expect(qtbot, engine, kind, timeout, check=None):
    """with expect(qtbot, engine, ReplyFinished, ms) as got: <action>  ->  got[0] is the event."""
    got: list = []

    def match(ev) -> bool:
        return isinstance(ev, kind) and (check is None or check(ev))

    with qtbot.waitSignal(engine.event, timeout=timeout, check_params_cb=match) as blocker:
        yield got
    got.append(blocker.args[0])


def on(engine, kind, fn):
    """Connect fn(ev) to the engine's events of one kind; returns the slot (to disconnect)."""
    def slot(ev):
        if isinstance(ev, kind):
            fn(ev)

    engine.event.connect(slot)
    return slot


def on_tokens(engine, fn):
    """fn(request, text) for every streamed piece of text."""
    from app.engine_events import ReplyEvent
    from engine.events import Token

    def slot(ev):
        if isinstance(ev, ReplyEvent) and isinstance(ev.event, Token):
            fn(ev.request, ev.event.text)

    engine.event.connect(slot)
    return slot
