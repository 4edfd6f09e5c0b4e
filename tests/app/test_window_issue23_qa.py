"""Issue 23, found by QA on a fresh clone: tooltips after a theme switch at run time (B2), and
the edit hint that widened the window (B3). Real widgets, found by objectName (offscreen).
"""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from collections import Counter  # noqa: E402

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QAction, QColor, QPalette  # noqa: E402
from PySide6.QtWidgets import QApplication, QLabel, QScrollArea, QToolTip, QWidget  # noqa: E402

# the same seeded data folder and window fixtures (module-scoped: this module gets its own)
from tests.app.test_window_issue23 import (TITLES, at_1280_with_both_panels, seeded, set_theme,  # noqa: E402,F401
                                           tooltip_at, win)

NARROWEST = 480  # the narrowest window issue 23 promises


# --------------------------------------------------------------------------- B2. tooltips


def shown_tooltip() -> QWidget:
    """Qt's one tooltip widget (it is reused from one tooltip to the next)."""
    tips = [w for w in QApplication.topLevelWidgets() if w.objectName() == "qtooltip_label"]
    assert len(tips) == 1, tips
    return tips[0]


def ink_contrast(tip: QWidget) -> int:
    """How far the tooltip's darkest or lightest pixel is from its box (in lightness, 0-255):
    the text, drawn as it is on screen (palette and stylesheet both). Inside the border only:
    its rounded corners show the window's colour behind them."""
    img = tip.grab().toImage()
    inset = 5  # the stylesheet's 1 px border, 4 px radius and padding
    pixels = [img.pixelColor(x, y)
              for x in range(inset, img.width() - inset) for y in range(inset, img.height() - inset)]
    box = Counter(c.rgb() for c in pixels).most_common(1)[0][0]
    box_l = QColor.fromRgb(box).lightness()
    return max(abs(c.lightness() - box_l) for c in pixels)


@pytest.mark.parametrize("start,then", [("light", "dark"), ("dark", "light")])
def test_tooltips_stay_readable_after_a_theme_switch_at_run_time(win, qtbot, start, then):
    """QToolTip keeps a palette of its own that a new application palette did not reach: after
    light -> dark the tooltip was near-white text on a near-white box, and the reverse."""
    win.resize(1280, 800)
    if not win.sidePanelAction.isChecked():
        win.findChild(QAction, "sidePanelAction").trigger()
    gauge = win.findChild(QWidget, "memoryGauge")
    label = win.findChild(QLabel, "windowLabel")  # a settings label with a plain-words tooltip
    try:
        for theme in (start, then):
            set_theme(win, theme)
            pal = QToolTip.palette()
            text, base = pal.color(QPalette.ColorRole.ToolTipText), pal.color(QPalette.ColorRole.ToolTipBase)
            window = pal.color(QPalette.ColorRole.Window)
            assert abs(text.lightness() - base.lightness()) >= 128, (theme, text.name(), base.name())
            assert abs(text.lightness() - window.lightness()) >= 128, (theme, text.name(), window.name())
            # the tooltip's box is in the theme's shade: dark in the dark theme, light in the light
            assert (base.lightness() < 128) == (theme == "dark"), (theme, base.name())
            gauge.grab()  # painted: its rows' places are known
            lh = gauge.fontMetrics().height()
            assert "KV cache" in tooltip_at(gauge, 4 + lh // 2)
            assert ink_contrast(shown_tooltip()) >= 128, theme
            QToolTip.showText(label.mapToGlobal(label.rect().center()), label.toolTip(), label)
            assert ink_contrast(shown_tooltip()) >= 128, theme
    finally:
        QToolTip.hideText()
        set_theme(win, "system")


# --------------------------------------------------------------------------- B3. the edit hint


def side_panel_inside(win) -> None:
    panel = win.findChild(QScrollArea, "sidePanel")
    assert panel.isVisible()
    right = panel.mapTo(win, panel.rect().topRight()).x()
    assert right < win.width(), (right, win.width())
    assert win.centralWidget().width() <= win.width()


def test_the_edit_hint_wraps_and_never_widens_the_window(win, qtbot, seeded):
    """At 1280x800 with both panels, Edit's hint line widened the chat (the side panel went past
    the window's right edge) and left the window's minimum at 937 px, after Escape too."""
    try:
        at_1280_with_both_panels(win, qtbot)
        win.open_conversation(seeded[1][TITLES[1]])
        qtbot.waitUntil(lambda: win.current_id == seeded[1][TITLES[1]], timeout=5000)
        QApplication.processEvents()
        assert win.sidePanel.isVisible() and win.sidebar.isVisible()
        assert win.minimumSizeHint().width() <= NARROWEST and win.minimumWidth() <= NARROWEST

        user = [m for m in win.findChild(QScrollArea, "chatView").widgets if m.message.role == "user"][0]
        qtbot.mouseClick(user.editButton, Qt.MouseButton.LeftButton)
        hint = win.findChild(QLabel, "editBar")
        qtbot.waitUntil(hint.isVisible, timeout=3000)
        assert "Enter sends it as a new version" in hint.text() and "Esc cancels" in hint.text()
        win.resize(1279, 800)  # the panels refit (as any resize does)
        win.resize(1280, 800)
        QApplication.processEvents()
        assert win.minimumSizeHint().width() <= NARROWEST and win.minimumWidth() <= NARROWEST
        assert win.sidePanel.isVisible() and win.sidebar.isVisible()
        side_panel_inside(win)
        hint_right = hint.mapTo(win, hint.rect().topRight()).x()
        assert hint_right < win.sidePanel.mapTo(win, win.sidePanel.rect().topLeft()).x()
        # while editing, the window still narrows to 480 px, the hint on more lines
        win.resize(NARROWEST, 800)
        qtbot.waitUntil(lambda: win.width() == NARROWEST, timeout=3000)
        assert hint.isVisible() and hint.mapTo(win, hint.rect().topRight()).x() <= NARROWEST
        assert hint.height() >= 2 * hint.fontMetrics().lineSpacing()  # wrapped, not cut

        qtbot.keyClick(win.input, Qt.Key.Key_Escape)  # cancels the edit
        qtbot.waitUntil(lambda: not hint.isVisible(), timeout=3000)
        assert win.editing_index is None
        win.resize(1280, 800)
        qtbot.waitUntil(lambda: win.width() == 1280, timeout=3000)
        QApplication.processEvents()
        assert win.minimumSizeHint().width() <= NARROWEST and win.minimumWidth() <= NARROWEST
        side_panel_inside(win)
    finally:
        win.cancel_edit()
        win.resize(1280, 800)
        set_theme(win, "system")


def test_the_windows_floor_comes_back_when_a_wide_bar_hides(win, qtbot):
    """The floor under the window's width is read at a fit (a resize); a bar wider than the
    window's minimum, shown at a fit and hidden after, held the window that wide until the next
    fit (Ctrl+B twice). A one-line edit hint stands in for any such bar."""
    hint = win.findChild(QLabel, "editBar")
    try:
        win.resize(1280, 800)
        qtbot.waitUntil(lambda: win.width() == 1280, timeout=3000)
        hint.setWordWrap(False)
        hint.setText("a bar that will not wrap " * 8)
        hint.show()
        win.resize(1279, 800)  # a fit while it shows: the floor is its width
        QApplication.processEvents()
        assert win.minimumWidth() > 600
        hint.hide()
        qtbot.waitUntil(lambda: win.minimumWidth() <= NARROWEST, timeout=3000)
        assert win.minimumSizeHint().width() <= NARROWEST
    finally:
        hint.hide()
        hint.setWordWrap(True)
        win.resize(1280, 800)
