"""A one-line label that gives way in a narrow window: its text ends in "…" instead of widening
what holds it (a message's header at 480 px). ``text()`` is always the whole text."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self._full = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802
        self._full = text or ""
        self.updateGeometry()
        self._elide()

    def text(self) -> str:
        return self._full

    def sizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(fm.horizontalAdvance(self._full) + 2, fm.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(min(fm.horizontalAdvance("…") * 3, self.sizeHint().width()), fm.height())

    def resizeEvent(self, e):  # noqa: N802
        super().resizeEvent(e)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(self.width(), 1))
        if super().text() != shown:
            super().setText(shown)
