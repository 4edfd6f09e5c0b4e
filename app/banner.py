"""The banner at the top of the chat: errors and notices in a line of words, with at most one
action button (e.g. "Model library…") and a dismiss button; nothing modal."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton


class Banner(QFrame):
    """An inline message at the top of the chat (errors, notices); dismissible."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setAccessibleName("Error message")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setObjectName("errorText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action = QPushButton()
        self.action.setVisible(False)
        close = QToolButton(text="✕")
        close.setAccessibleName("Dismiss message")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.action)
        lay.addWidget(close)
        self.hide()
        self._action_slot = None

    def show_message(self, text: str, kind: str = "error", action: tuple[str, object] | None = None) -> None:
        colors = {"error": ("#7a1d1d", "#fde8e8"), "memory": ("#7a1d1d", "#fde8e8"),
                  "store": ("#7a1d1d", "#fde8e8"), "notice": ("#1d4e7a", "#e8f1fd"),
                  "warning": ("#6b4a00", "#fff3d1")}
        fg, bg = colors.get(kind, colors["error"])
        if self.palette().color(self.backgroundRole()).lightness() < 128:
            fg, bg = bg, fg
        self.setStyleSheet(f"QFrame#errorBanner {{ background: {bg}; border: 1px solid {fg}; border-radius: 4px; }}"
                           f" QFrame#errorBanner QLabel {{ color: {fg}; }}")
        icon = "ⓘ " if kind == "notice" else "⚠ "
        self.label.setText(icon + text)
        if self._action_slot is not None:
            self.action.clicked.disconnect(self._action_slot)
            self._action_slot = None
        if action:
            self.action.setText(action[0])
            self._action_slot = action[1]
            self.action.clicked.connect(self._action_slot)
        self.action.setVisible(bool(action))
        self.show()
