"""Copying a message to the clipboard: said in the status line, and on the message's own Copy
button ("Copied ✓" for a moment: the status line is far from the button clicked)."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtGui import QGuiApplication

from .feedback import flash


def copy_message(win, index: int) -> None:
    """Message `index` of the window's conversation, as Markdown, to the clipboard."""
    chat = win.chat
    QGuiApplication.clipboard().setText(chat.messages()[index].content)
    win.stageLabel.setText(f"Copied {win.message_name(index)}")
    if index >= chat.offset:  # (a message not built yet has no button to show it)
        flash(chat.widgets[index - chat.offset].copyButton)


def copy_last_reply(win) -> None:
    """Ctrl+Shift+C: the last reply."""
    msgs = win.chat.messages()
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].role == "assistant":
            copy_message(win, i)
            return
