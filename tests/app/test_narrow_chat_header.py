"""QA of Gemma 4 / Qwen3.5 in the window: a reply's header in a narrow chat.

A reply with versions (‹ 2/2 ›), Continue, Pin and Copy needed 469 px on one line. At 800x600
with the settings-and-memory panel shown the chat is 451 px wide, and at the narrowest window
(480 px) 472 px: the chat's contents were wider than its view, which never scrolls sideways, so
the Copy button, the end of every line of the reply and the "out of the attention window"
divider were cut off at the right. The buttons now move to a line of their own below the header
where the chat is too narrow for both, and come back where it is wide enough.
"""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QApplication  # noqa: E402


def settle() -> None:
    for _ in range(5):  # layouts, then the view's deferred re-fit after its scroll bar came or went
        QApplication.processEvents()


@pytest.mark.parametrize("width,side,below", [(800, True, True), (480, False, True), (800, False, False),
                                              (1280, True, False)])
def test_a_reply_header_fits_the_chat_at_every_width(qtbot, tmp_path, tiny_bpe_gguf, width, side, below):
    from app import MainWindow
    from app.chat_view import ChatMessage
    from tests.app.test_main_window import LOAD_TIMEOUT_MS
    from tests.app.test_window_issue23 import set_theme

    win = MainWindow(model_path=tiny_bpe_gguf, data_dir=tmp_path / "data")
    win.show()
    try:
        qtbot.waitUntil(lambda: win.model_ready or bool(win.errors), timeout=LOAD_TIMEOUT_MS)
        set_theme(win, "light")  # the stylesheet's button widths, as a desktop shows them
        meta = {"model": {"name": "qwen3.5-0.8b-Q4_K_M", "sampling": {}}}
        win.chat.set_messages([ChatMessage("user", "q", store_id=1),
                               ChatMessage("assistant", "a " * 300, "stopped", meta=meta, versions=2, version=2,
                                           store_id=2)])
        win.resize(width, 600)
        qtbot.waitUntil(lambda: win.width() == width, timeout=3000)
        win.set_panel("side", side)  # as View -> Settings and memory asks for it
        settle()
        assert win.sidePanel.isVisible() == side
        reply = win.chat.widgets[-1]
        assert reply.continueButton.isVisibleTo(win) and reply.versionLabel.isVisibleTo(win)
        view = win.chat.viewport()
        assert win.chat.widget().width() <= view.width(), (win.chat.widget().width(), view.width())
        for w in (reply.copyButton, reply.pinButton, reply.body):
            right = w.mapTo(view, w.rect().topRight()).x()
            assert right < view.width(), (w.objectName(), right, view.width())
        assert reply.buttons_below() == below
        if not below:  # on the header's line: the width it was measured to need is what it takes
            assert reply.one_line_width() == reply.minimumSizeHint().width()
            assert reply.copyButton.mapTo(reply, reply.copyButton.rect().topLeft()).y() < reply.body.y()
        else:
            assert reply.copyButton.mapTo(reply, reply.copyButton.rect().topLeft()).y() > reply.roleLabel.y()
        win.resize(1280, 800)  # and back on a wide window: one line again
        qtbot.waitUntil(lambda: win.width() == 1280, timeout=3000)
        settle()
        assert not reply.buttons_below()
        set_theme(win, "system")
    finally:
        win.shutdown()
        win.close()
        win.deleteLater()
