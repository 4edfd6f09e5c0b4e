"""Light and dark, on every platform: View → Theme picks System, Light or Dark.

Asking Qt for a colour scheme (QStyleHints.setColorScheme) only works where the platform theme
honours it; on plain X11 and offscreen the palette stayed light under the dark stylesheet, and
buttons lost their borders. So an explicit Light or Dark choice sets a complete palette on
the Fusion style (which draws from the palette on every platform); System keeps the
platform's own style and palette, as the desktop gives them. The packaged stylesheet shapes
widgets only; its colours follow whichever palette is in force.
"""
from __future__ import annotations

import logging

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette

log = logging.getLogger(__name__)
THEMES = ("system", "light", "dark")

_DARK = {
    QPalette.ColorRole.Window: "#2b2d30", QPalette.ColorRole.WindowText: "#e6e6e6",
    QPalette.ColorRole.Base: "#1f2023", QPalette.ColorRole.AlternateBase: "#383c44",
    QPalette.ColorRole.ToolTipBase: "#3a3d41", QPalette.ColorRole.ToolTipText: "#f0f0f0",
    QPalette.ColorRole.PlaceholderText: "#8a8d91", QPalette.ColorRole.Text: "#e6e6e6",
    QPalette.ColorRole.Button: "#3a3d41", QPalette.ColorRole.ButtonText: "#e6e6e6",
    QPalette.ColorRole.BrightText: "#ff6b6b", QPalette.ColorRole.Light: "#4a4d52",
    QPalette.ColorRole.Midlight: "#404348", QPalette.ColorRole.Mid: "#5c6066",
    QPalette.ColorRole.Dark: "#18191b", QPalette.ColorRole.Shadow: "#0d0d0e",
    QPalette.ColorRole.Highlight: "#3d7fd9", QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.Link: "#6fa8ff", QPalette.ColorRole.LinkVisited: "#b58cff",
}


# AlternateBase is the user's messages' background (chat_view): a step lighter than the window
# the replies sit on, so who said what reads at a glance (it was the window's own colour).


def dark_palette() -> QPalette:
    pal = QPalette()
    for role, color in _DARK.items():
        pal.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7c7f84"))
    return pal


_platform = {}  # the style the platform gave, to go back to for "system"


def _tooltips_follow(app) -> None:
    """Tooltips in the palette just set. QToolTip keeps a palette of its own, taken from the
    platform at start-up, which QApplication.setPalette does not reach: after a switch at run
    time the stylesheet's tool-tip-text came from the new theme and the box from the old one
    (near-white on near-white after light -> dark). setPalette also repaints a tooltip shown."""
    from PySide6.QtWidgets import QToolTip

    QToolTip.setPalette(app.palette())


def apply_theme(app, theme: str = "system") -> str:
    """Set `theme` on the application; returns the scheme in force ("light" or "dark")."""
    from PySide6.QtWidgets import QStyleFactory

    if not _platform:
        _platform["style"] = app.style().name()
        _platform["overridden"] = False
    hints = app.styleHints()
    if theme in ("light", "dark"):
        if hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Dark if theme == "dark" else Qt.ColorScheme.Light)
        app.setStyle(QStyleFactory.create("Fusion"))
        app.setPalette(dark_palette() if theme == "dark" else app.style().standardPalette())
        _platform["overridden"] = True
        _tooltips_follow(app)
    else:
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        if _platform["overridden"]:  # back to the platform's own style and (live) palette
            app.setStyle(QStyleFactory.create(_platform["style"]) or app.style())
            app.setPalette(QPalette())
            _platform["overridden"] = False
            _tooltips_follow(app)
    scheme = "dark" if app.palette().color(QPalette.ColorRole.Window).lightness() < 128 else "light"
    try:
        from .desktop_integration import apply_style

        apply_style(app, scheme)
    except (ImportError, OSError, ValueError) as exc:  # no stylesheet: the native look is fine
        log.info("no stylesheet applied: %s", exc)
    return scheme


def choose_theme(win, name: str) -> None:
    """View → Theme on `win`: applied at once and kept in its settings file."""
    from PySide6.QtWidgets import QApplication

    from .settings import save_settings

    win.settings = win.settings.replace(theme=name)
    try:
        save_settings(win.settings, win.settings_path)
    except OSError as exc:
        win.show_error(f"Couldn't save the theme: {exc.strerror or exc}", "store")
    app = QApplication.instance()
    if app is not None:
        apply_theme(app, name)
    win.themeActions[name].setChecked(True)
    win.stageLabel.setText(f"Theme: {name}")
