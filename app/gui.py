"""Start the window: ``run_gui(argv, model_path=None) -> exit code``."""
from __future__ import annotations

import logging
import sys

from app import qt_compat  # noqa: F401  (before any Qt call: guards a PySide6 bug, see qt_compat)


def apply_theme(app, theme: str = "system") -> None:
    """Follow the system's light/dark scheme (or the user's choice); the packaged stylesheet only
    shapes widgets, colours come from the palette.  The sheet is optional."""
    from PySide6.QtCore import Qt

    hints = app.styleHints()
    if theme in ("light", "dark") and hasattr(hints, "setColorScheme"):
        hints.setColorScheme(Qt.ColorScheme.Dark if theme == "dark" else Qt.ColorScheme.Light)
    try:
        from app.desktop_integration import apply_style

        apply_style(app, theme)
    except (ImportError, OSError, ValueError) as exc:  # no stylesheet: the native look is fine
        logging.getLogger(__name__).info("no stylesheet applied: %s", exc)


def run_gui(argv: list[str] | None = None, model_path: str | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(list(argv if argv is not None else sys.argv))
    if not app.applicationName() or app.applicationName() == "python":
        app.setApplicationName("Pinwheel")
    from app.main_window import MainWindow

    win = MainWindow(model_path=model_path)
    apply_theme(app, win.settings.theme)
    # a later system light/dark switch re-picks the sheet; the palette itself updates by itself
    app.styleHints().colorSchemeChanged.connect(lambda *_: apply_theme(app, win.settings.theme))
    win.show()
    code = app.exec()
    win.shutdown()
    from app.engine_worker import ABANDONED

    if ABANDONED:  # the engine is stuck in a compile: leave without destroying its thread
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    return int(code)


if __name__ == "__main__":
    sys.exit(run_gui(sys.argv))
