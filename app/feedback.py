"""Brief visible feedback on a button: "Copied ✓" for a moment, then its own text again.

A copy puts nothing on screen by itself; the status bar is far from the button clicked (and
hidden from a narrow window's reader's eye), so the button itself says it worked.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QTimer

FLASH_MS = 1500
_OWN_TEXT = "pinwheelOwnText"  # the button's text before the flash (a second click keeps it)


def flash(button, text: str = "Copied ✓", ms: int = FLASH_MS) -> None:
    """Show `text` on `button` for `ms` milliseconds."""
    own = button.property(_OWN_TEXT) or button.text()
    button.setProperty(_OWN_TEXT, own)
    button.setText(text)

    def restore() -> None:
        try:
            if button.text() == text:  # (nothing renamed it meanwhile, e.g. Pin -> Unpin)
                button.setText(own)
            button.setProperty(_OWN_TEXT, None)
        except RuntimeError:  # the message was removed meanwhile
            pass

    QTimer.singleShot(ms, button, restore)
