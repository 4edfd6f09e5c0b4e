"""The message box: Enter (or Ctrl+Enter) sends, Shift+Enter starts a new line."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy


class MessageInput(QPlainTextEdit):
    """Enter (or Ctrl+Enter) sends, Shift+Enter starts a new line."""

    submitted = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("messageInput")
        self.setAccessibleName("Message")
        self.setPlaceholderText("Message Pinwheel — Enter sends, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 12)

    def keyPressEvent(self, e):  # noqa: N802
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = e.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                return
            if not mods & ~(Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.KeypadModifier):
                self.submitted.emit()
                return
        super().keyPressEvent(e)
