"""Start the window: ``run_gui(argv, model_path=None) -> exit code``."""
from __future__ import annotations

import sys

from app import qt_compat  # noqa: F401  (before any Qt call: guards a PySide6 bug, see qt_compat)
from app.theme import apply_theme  # noqa: E402


def _quit_on_signals(app) -> None:
    """SIGTERM (a logout, `kill`) and SIGINT (Ctrl+C in the terminal) end the event loop like
    Quit does, so run_gui's shutdown saves the reply in flight (as interrupted) and stops the
    engine thread: no "QThread: Destroyed while thread is still running" abort, exit code 0."""
    import signal

    from PySide6.QtCore import QTimer

    def handler(signum, _frame):
        app.quit()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or not allowed here
            return
    # Python runs signal handlers between bytecodes only; while Qt's loop waits in C++, this
    # timer lets the interpreter in a few times a second.
    tick = QTimer(app)
    tick.setObjectName("signalTick")
    tick.timeout.connect(lambda: None)
    tick.start(200)


def run_gui(argv: list[str] | None = None, model_path: str | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(list(argv if argv is not None else sys.argv))
    if not app.applicationName() or app.applicationName() == "python":
        app.setApplicationName("Pinwheel")
    from app.main_window import MainWindow

    win = MainWindow(model_path=model_path)
    _quit_on_signals(app)
    apply_theme(app, win.settings.theme)
    # a later system light/dark switch re-picks the sheet (System: the palette follows by itself)
    app.styleHints().colorSchemeChanged.connect(
        lambda *_: apply_theme(app, win.settings.theme) if win.settings.theme == "system" else None)
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
