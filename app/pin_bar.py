"""Pinning a message, previewed: what it costs the memory plan, then Confirm or Cancel.

:func:`pin_preview` (Qt-free) says what pinning or unpinning a message would do to the running
cache (its sinks grow by the message's tokens and the window shrinks to fit the same budget);
:class:`PinBar` shows that under the chat and emits `confirmed` once the user agrees.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton

from engine.budget import MIN_WINDOW
from engine.errors import PinwheelError

from .memory_gauge import fmt_bytes, words, wrapped
from .settings_panel import session_plan


def pin_preview(stats, config, settings, index: int, pinned: bool, name: str) -> tuple[str, bool]:
    """(what pinning, or unpinning, message `index` would do, whether it can be done), from the
    session's last `stats` and the model's `config` (None while the model is not ready);
    `name` is how the status line names the message."""
    if stats is None or config is None:
        return "The model is not ready yet; try again in a moment.", False
    mm = next((m for m in stats.messages if m.index == index), None)
    if mm is None:
        return "This message's size is not known yet; try again in a moment.", False
    tokens = int(mm.tokens)
    wanted = stats.sink_tokens + tokens if pinned else stats.sink_tokens - tokens
    try:
        # pins come out of the running cache's budget (an auto budget is not re-sized for them)
        new = session_plan(config, settings.kv_dtype, stats.budget_bytes, settings.window_arg, wanted)
    except PinwheelError as exc:
        return f"Can't pin {name} ({tokens:,} tokens): {exc}", False
    verb = "Pin" if pinned else "Unpin"
    kept = "It will always be kept in view" if pinned else "It will no longer be kept for good"
    # plain words first; the exact change of the plan after them, in its own terms
    text = (f"{verb} {name} ({tokens:,} tokens)? {kept}; the recent text the model sees goes from "
            f"{words(stats.window)} to {words(new.window)} words. (Sinks {stats.sink_tokens:,} → {new.sinks:,}, "
            f"window {stats.window:,} → {new.window:,}; KV {fmt_bytes(new.kv_bytes)} of "
            f"{fmt_bytes(new.budget_bytes)} budget.)")
    if pinned and new.sinks < wanted:
        text += (f" Only {new.sinks - stats.sink_tokens:,} of its tokens fit in the sinks (the window keeps "
                 f"at least {MIN_WINDOW} tokens).")
    if stats.reread_pending:
        # another version was stepped to: the cache still holds the one before, so the pin
        # re-reads the version shown (whose sizes, above, the engine counted without reading it)
        text += " This version of the conversation will be read into the model first."
    elif pinned and mm.tokens_in_cache < mm.tokens:
        text += " It has left the window, so it will be read again."
    return text, True


class PinBar(QFrame):
    """Preview of what pinning/unpinning a message costs, with Confirm / Cancel."""

    confirmed = Signal(int, bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("pinBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setObjectName("pinPreview")
        self.label.setWordWrap(True)
        self.label.setToolTip(wrapped("Pinning moves the message's tokens into the attention sinks, which the model always "
                              "sees. The cache keeps its size, so the sliding window of recent tokens shrinks by as "
                              "much; unpinning gives them back to the window."))
        self.ok = QPushButton("Pin")
        self.ok.setObjectName("pinConfirmButton")
        self.cancel = QPushButton("Cancel")
        self.cancel.setObjectName("pinCancelButton")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.ok)
        lay.addWidget(self.cancel)
        self.ok.clicked.connect(self._confirm)
        self.cancel.clicked.connect(self.hide)
        self.pending: tuple[int, bool] | None = None
        self.hide()

    def ask(self, index: int, pinned: bool, text: str, possible: bool) -> None:
        self.pending = (index, pinned)
        self.label.setText(text)
        self.ok.setText("Pin" if pinned else "Unpin")
        self.ok.setAccessibleName(f"{'Pin' if pinned else 'Unpin'} message {index + 1}")
        self.ok.setEnabled(possible)
        self.show()
        (self.ok if possible else self.cancel).setFocus()

    def _confirm(self) -> None:
        if self.pending is not None:
            index, pinned = self.pending
            self.pending = None
            self.hide()
            self.confirmed.emit(index, pinned)
