"""How the window fits its screen and how its side panels give way to the chat (pure geometry).

The chat keeps at least CHAT_SHARE of the window's width: the settings-and-memory panel goes
first, then the conversations, unless the user asked for one at this width.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, QMargins, QObject, QPoint, QRect, QSize

CHAT_SHARE = 0.6  # the chat keeps at least this share of the window's width; side panels give way
# ...give or take a styled button row: with the stylesheet the list is 217 px, not 200, and at the
# default 1280 px the rule then hid the memory panel as soon as Ctrl+F asked for the list
FIT_SLACK = 8
CONVERSATIONS_WIDTH = 200
FIRST_SIZE = QSize(1280, 800)  # the first window, where its screen has room for it
# A window's frame is unknown until the window manager has framed it (X11 does so after the
# window is shown): until then, leave room for a title bar and borders as most draw them.
FRAME_GUESS = QMargins(8, 40, 8, 8)


def fit_rect(want: QRect, avail: QRect, frame: QMargins, minimum: QSize) -> QRect:
    """`want` (a window's geometry, frame excluded) fitted with its `frame` into `avail`: no
    larger than the room there, no smaller than `minimum` where the room allows, and moved no
    further than it must be to lie inside."""
    inner = avail.marginsRemoved(frame)
    room = inner.size().expandedTo(QSize(1, 1))
    size = want.size().boundedTo(room).expandedTo(minimum.boundedTo(room))
    x = max(inner.left(), min(want.x(), inner.left() + room.width() - size.width()))
    y = max(inner.top(), min(want.y(), inner.top() + room.height() - size.height()))
    return QRect(QPoint(x, y), size)


def panels_shown(width: int, conv_width: int, side_width: int, want: dict, forced: dict) -> tuple[bool, bool]:
    """(conversations, side panel) shown at `width`: each one wanted and leaving the chat its
    share (or asked for by the user at this width), the side panel giving way first."""
    chat = CHAT_SHARE * width - FIT_SLACK
    side = want["side"] and (forced["side"] or width - side_width - (conv_width if want["conversations"] else 0)
                             >= chat)
    conv = want["conversations"] and (forced["conversations"] or width - conv_width - (side_width if side else 0)
                                      >= chat)
    return conv, side


def fit_to_screen(win) -> None:
    """`win`, frame included, inside its screen's available area: at QT_SCALE_FACTOR=2 on a
    1920x1080 screen the first window was 2560x1600 pixels, Send and the title bar's buttons
    off the screen. Its minimum size gives way only where the screen is smaller."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication

    screen = win.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    geo, outer = win.geometry(), win.frameGeometry()
    frame = QMargins(geo.left() - outer.left(), geo.top() - outer.top(),
                     outer.right() - geo.right(), outer.bottom() - geo.bottom())
    minimum = win.minimumSize().expandedTo(win.minimumSizeHint())
    fitted = fit_rect(geo, screen.availableGeometry(), FRAME_GUESS if frame.isNull() else frame, minimum)
    # a screen smaller than the minimum wins (in that direction only: the layout keeps the other)
    if fitted.width() < minimum.width():
        win.setMinimumWidth(fitted.width())
    if fitted.height() < minimum.height():
        win.setMinimumHeight(fitted.height())
    if win.testAttribute(Qt.WidgetAttribute.WA_Moved):  # placed (a restored geometry): kept on screen
        win.setGeometry(fitted)
    else:  # the window manager places it
        win.resize(fitted.size())


class _FloorWatch(QObject):
    """Lowers the window's floor whenever the chat pane's layout changes: read only at a fit (a
    resize, a panel shown), the floor kept the width of a bar since hidden (the edit hint's
    937 px stayed after Escape, until Ctrl+B twice). Only lowers: raised between fits, it held
    a window that fitted a small screen wider than the screen once the error banner showed."""

    def __init__(self, panels: "PanelFit"):
        super().__init__(panels.win)
        self._panels = panels

    def eventFilter(self, obj, e):  # noqa: N802
        if e.type() == QEvent.Type.LayoutRequest:
            self._panels.floor(lower_only=True)
        return False


class PanelFit:
    """The conversations and the settings-and-memory panel, each shown when the user wants it
    (remembered in the window's ui_state) and it leaves the chat its share. Acts on the window's
    sidebar, sidePanel, status line, splitter and View actions."""

    def __init__(self, win):
        self.win = win
        self.forced = {"conversations": False, "side": False}  # opened by the user at a tight width
        self._watch = None  # a _FloorWatch on the chat pane, once the window has one

    def set_panel(self, which: str, shown: bool) -> None:
        """Show or hide a panel at the user's request (remembered). A panel asked for shows even
        where the width is tight; one that does not fit hides on its own."""
        w = self.win
        if which == "conversations":
            w.ui_state.show_conversations = shown
        else:
            w.ui_state.show_side_panel = shown
        self.forced[which] = shown
        w.ui_state.save(w.ui_state_path)
        self.fit()

    def resized(self, old: int, new: int) -> None:
        if old > 0 and new < old:  # shrinking: a panel the user opened at this width may go again
            self.forced = {k: False for k in self.forced}
        self.fit()

    def fit(self) -> None:
        w = self.win
        if not hasattr(w, "conversationsAction"):  # (still being built)
            return
        from .side_panel import SIDE_PANEL_WIDTH

        width = max(w.width(), 1)
        conv_w = max(w.sidebar.minimumSizeHint().width(), CONVERSATIONS_WIDTH)
        want = {"conversations": w.ui_state.show_conversations, "side": w.ui_state.show_side_panel}
        conv, side = panels_shown(width, conv_w, SIDE_PANEL_WIDTH, want, self.forced)
        w.sidebar.setVisible(conv)
        w.sidePanel.setVisible(side)
        w.status.fit(width)
        split = self.floor()
        need = split.minimumSizeHint().width()  # one the user asked for at this width widens the window
        if need > width and (self.forced["side"] or self.forced["conversations"]):
            w.resize(need, w.height())
        for a, on in ((w.conversationsAction, conv), (w.sidePanelAction, side)):
            a.blockSignals(True)
            a.setChecked(on)
            a.blockSignals(False)

    def floor(self, lower_only: bool = False):
        """The window's narrowest: the chat pane's. The panels' own widths never hold the window
        wide: a narrower window is let through, and they give way above (fit). Returns the
        splitter (None while the window has none)."""
        w = self.win
        split = w.centralWidget()
        if split is None:
            return None
        if self._watch is None:
            self._watch = _FloorWatch(self)
            w._center.installEventFilter(self._watch)
        need = w._center.minimumSizeHint().width()
        if not lower_only or need < split.minimumWidth():
            split.setMinimumWidth(need)
        return split
