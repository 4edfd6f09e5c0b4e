"""The window's status bar: what it is doing (the stage), then the model, device, speed and cache.

A status bar lays its permanent labels out at their full width, so six of them made 693 px the
narrowest window possible. Here the stage text may shrink to nothing and the permanent labels
give way one by one, least useful first, when the window is narrower than they need; each one
shows again when there is room.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QStatusBar

STAGE_ROOM = 140  # the stage text keeps at least this much before a permanent label gives way
_WANTED = "pinwheelWanted"  # a label with something to say (the template label only sometimes has)


def _label(text: str, name: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName(name)
    label.setMinimumWidth(1)  # squeezed (until fit() hides it), never a floor under the window's width
    return label


class StatusLine:
    """The labels of `bar`, named as the window's tests and code know them."""

    def __init__(self, bar: QStatusBar):
        self.bar = bar
        self.loadProgress = QProgressBar()
        self.loadProgress.setObjectName("loadProgress")
        self.loadProgress.setAccessibleName("Model loading progress")
        self.loadProgress.setMaximumWidth(180)
        self.loadProgress.setTextVisible(False)
        self.stageLabel = QLabel("Starting…")
        self.stageLabel.setObjectName("statusStage")
        # its text can be long ("Re-read 1,234 tokens…"); cut rather than widen the window
        self.stageLabel.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.stageLabel.setMinimumWidth(1)
        self.modelLabel = _label("no model", "statusModel")
        self.deviceLabel = _label("", "statusDevice")
        self.speedLabel = _label("— tok/s", "statusSpeed")
        self.ttftLabel = _label("TTFT —", "statusTtft")
        self.cacheLabel = _label("cache —", "statusCache")
        self.templateLabel = _label("", "statusTemplate")  # only while a built-in turn format is in use
        self.templateLabel.setProperty(_WANTED, False)
        self.templateLabel.hide()
        bar.addWidget(self.loadProgress)
        bar.addWidget(self.stageLabel, 1)
        for w in (self.templateLabel, self.modelLabel, self.deviceLabel, self.speedLabel, self.ttftLabel,
                  self.cacheLabel):
            bar.addPermanentWidget(w)
        # the order in which they give way is the reverse of this: the model's name stays longest
        self.keep_order = [self.modelLabel, self.templateLabel, self.speedLabel, self.deviceLabel,
                           self.cacheLabel, self.ttftLabel]

    def show_template(self, text: str, tooltip: str = "") -> None:
        """The built-in turn format in use ("" when the file's own template works)."""
        self.templateLabel.setProperty(_WANTED, bool(text))
        self.templateLabel.setText(text)
        self.templateLabel.setToolTip(tooltip)
        self.fit()

    def fit(self, width: int | None = None) -> None:
        """Show the permanent labels that fit in `width` (the bar's own, by default) beside
        STAGE_ROOM of stage text, in keep_order."""
        width = self.bar.width() if width is None else width
        room = width - STAGE_ROOM - (self.loadProgress.sizeHint().width() if self.loadProgress.isVisible() else 0)
        spacing = 12  # the bar's gap between widgets, and a size grip's share
        for label in self.keep_order:
            if label.property(_WANTED) is False:
                label.hide()
                continue
            need = label.sizeHint().width() + spacing
            fits = need <= room
            label.setVisible(fits)
            if fits:
                room -= need
