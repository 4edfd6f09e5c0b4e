"""The window's Tab order, set again whenever messages come or go."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtWidgets import QWidget


def chain_tabs(win) -> None:
    """Tab goes: the message box and its buttons, the chat and each message's buttons, the
    conversations, the Details toggle and the memory gauge, then the settings (not every
    message button after twenty settings fields)."""
    order = [win.input, win.sendButton, win.stopButton, win.regenButton, win.chat]
    for w in win.chat.widgets:
        order += w.buttons()
    sb = win.sidebar
    order += [sb.search, sb.list, sb.newButton, sb.renameButton, sb.deleteButton, sb.exportButton,
              win.sidePanel.detailsToggle, win.gauge, win.settingsPanel.modelEdit]
    for a, b in zip(order, order[1:]):
        QWidget.setTabOrder(a, b)
