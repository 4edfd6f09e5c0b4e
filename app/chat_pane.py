"""The middle of the window: a banner, the conversation, the pin and edit bars, and the message
box with Send, Stop and Regenerate. Laid out here; the window connects what each one does."""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from .banner import Banner
from .chat_view import ChatView
from .message_input import MessageInput
from .pin_bar import PinBar


def _button(text: str, name: str, accessible: str, tip: str) -> QPushButton:
    b = QPushButton(text)
    b.setObjectName(name)
    b.setAccessibleName(accessible)
    b.setToolTip(tip)
    return b


class ChatPane(QWidget):
    """`banner`, `chat`, `pinBar`, `editBar`, `input`, `sendButton`, `stopButton`, `regenButton`."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.banner = Banner()
        self.chat = ChatView()
        self.pinBar = PinBar()
        self.editBar = QLabel()
        self.editBar.setObjectName("editBar")
        # The hint is one long sentence: unwrapped, its width was the chat's minimum (937 px), which
        # pushed the side panel off the window's edge and held the window that wide.
        self.editBar.setWordWrap(True)
        self.editBar.setVisible(False)
        self.input = MessageInput()
        self.sendButton = _button("Send", "sendButton", "Send message", "Send (Enter or Ctrl+Enter)")
        self.stopButton = _button("Stop", "stopButton", "Stop the reply", "Stop the reply (Esc)")
        self.regenButton = _button("Regenerate", "regenerateButton", "Regenerate the last reply",
                                   "Answer the last message again (Ctrl+R)")
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        for b in (self.sendButton, self.stopButton, self.regenButton):
            buttons.addWidget(b)
        buttons.addStretch(1)
        input_row = QHBoxLayout()
        input_row.addWidget(self.input, 1)
        input_row.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.banner)
        lay.addWidget(self.chat, 1)
        lay.addWidget(self.pinBar)
        lay.addWidget(self.editBar)
        lay.addLayout(input_row)
