"""The window's right-hand panel: the memory gauge over the settings, in a scroll area.

Its header holds the Details toggle: off, the gauge and the memory settings speak plain words
("Conversation memory", "Recent text the model sees"); on, the exact terms (KV cache, slots,
sinks, window, RSS). Either way each label's tooltip explains the exact term and its numbers.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

from .memory_gauge import MemoryGauge, wrapped
from .settings import AppSettings
from .settings_panel import SettingsPanel

SIDE_PANEL_WIDTH = 300  # its narrowest: the gauge's bars and the settings' fields stay readable


class SidePanel(QScrollArea):
    """objectName ``sidePanel``: `gauge`, `settingsPanel` and the `detailsToggle` above them."""

    detailsToggled = Signal(bool)

    def __init__(self, settings: AppSettings, details: bool = False, parent=None):
        super().__init__(parent)
        self.setObjectName("sidePanel")
        self.setAccessibleName("Settings and memory")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumWidth(SIDE_PANEL_WIDTH)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a frame, not a stop: its fields are
        self.gauge = MemoryGauge()
        self.settingsPanel = SettingsPanel(settings)
        self.detailsToggle = QToolButton(text="Details")
        self.detailsToggle.setObjectName("memoryDetailsToggle")
        self.detailsToggle.setAccessibleName("Show memory in exact terms")
        self.detailsToggle.setToolTip(wrapped("Show the memory gauge and settings in exact terms: KV cache, "
                                              "slots, sinks, window, bytes per token, process RSS"))
        self.detailsToggle.setCheckable(True)
        self.detailsToggle.setAutoRaise(True)
        self.detailsToggle.toggled.connect(self.set_details)

        inner = QWidget()
        lay = QVBoxLayout(inner)
        lay.setContentsMargins(4, 4, 4, 4)
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Memory</b>"))
        head.addStretch(1)
        head.addWidget(self.detailsToggle)
        lay.addLayout(head)
        lay.addWidget(self.gauge)
        lay.addWidget(self.settingsPanel, 1)
        self.setWidget(inner)
        self.set_details(details)

    def set_details(self, on: bool) -> None:
        """Exact terms (on) or plain words (off), in the gauge and the settings alike."""
        if self.detailsToggle.isChecked() != on:
            self.detailsToggle.setChecked(on)  # (comes back here through toggled)
            return
        self.gauge.set_details(on)
        self.settingsPanel.set_details(on)
        self.detailsToggle.setText("Details ▾" if on else "Details ▸")
        self.detailsToggled.emit(on)
