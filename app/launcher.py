"""The ``pinwheel`` command: the chat window, or one of the engine's terminal subcommands.

    pinwheel [--model PATH] [Qt options]     the chat window
    pinwheel chat|plan|score|bench ...        engine.cli (terminal chat, memory plan, ...)
    pinwheel install-desktop|uninstall-desktop
    pinwheel --version | --help

Importing this module loads neither Qt nor JAX, so ``pinwheel --version`` and the terminal
subcommands start without the GUI stack, and the window path loads Qt only once it runs.

Smoke mode (used by tests/test_packaging.py and packaging/smoke_bundle.sh): with
``PINWHEEL_SMOKE_QUIT_MS=N`` the window path checks that a main window comes up and then
closes it, exiting 0, or exits 3 when none showed within N ms. With
``PINWHEEL_SMOKE_MESSAGE=text`` as well, it types the text into ``messageInput``, presses
``sendButton`` and waits (within the same N ms) for a reply in ``chatView``, which must
contain ``PINWHEEL_SMOKE_EXPECT`` when that is set; exit 4 when no reply came.
"""

from __future__ import annotations

import os
import sys
import time

from app.identity import DIST_NAME, get_version  # noqa: F401 (re-exported: the launcher's --version)

CLI_COMMANDS = ("chat", "plan", "score", "bench", "models")
DESKTOP_COMMANDS = ("install-desktop", "uninstall-desktop")

HELP = """\
usage: pinwheel [--model PATH] [Qt options]
       pinwheel COMMAND [options]

Pinwheel: offline chat with a local language model on a KV cache of fixed size.
With no command it opens the chat window.

commands:
  chat               chat in the terminal (a REPL, or one answer with --prompt)
  plan               show the KV-cache memory plan for a model and a budget
  score              measure what a memory setting costs in quality on your own text
  bench              measure prefill and decode speed
  models             the GGUF models on this machine (other apps' folders too) and what each needs
  install-desktop    add Pinwheel to your application launcher (desktop entry + icons)
  uninstall-desktop  remove what install-desktop added

options:
  --model PATH       GGUF model file to open in the window (default: $PINWHEEL_MODEL,
                     your models folder, then the bundled SmolLM2-135M-Instruct)
  -V, --version      print the version and exit
  -h, --help         print this help and exit

`pinwheel COMMAND --help` lists a command's options.
"""


def _err(msg: str) -> None:
    print(f"pinwheel: {msg}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    first = args[0] if args else None
    try:
        if first in ("-V", "--version"):
            from engine import kernels  # (ctypes alone: neither Qt nor JAX)

            print(f"pinwheel {get_version()}")
            print(f"kernel: {kernels.describe()}")
            return 0
        if first in ("-h", "--help"):
            print(HELP, end="")
            return 0
        if first == "bench":  # the benchmark lives in bench/, outside the engine; it parses its own flags
            from bench.run import main as bench_main

            return int(bench_main(args[1:]) or 0)
        if first in CLI_COMMANDS:
            try:
                from engine.cli import main as cli_main
            except ModuleNotFoundError as exc:
                if exc.name not in ("engine", "engine.cli"):
                    raise
                _err(f"'{first}' is not available: this build has no engine.cli")
                return 2
            return int(cli_main(args) or 0)
        if first in DESKTOP_COMMANDS:
            from app import desktop_integration

            return desktop_integration.main(args)
        if first is not None and not first.startswith("-"):
            _err(f"unknown command '{first}' (see pinwheel --help)")
            return 2
        return _run_window(args)
    except KeyboardInterrupt:
        return 130


# -- the window ---------------------------------------------------------------------------------


def set_app_identity() -> None:
    """Name the application before (or after) its QApplication exists.

    The X11 WM_CLASS class comes from applicationName ("Pinwheel", the desktop entry's
    StartupWMClass) and the Wayland app id from the desktop file name ("pinwheel"), so
    launchers group the window under the entry that install-desktop writes. These setters
    are static: they hold for the QApplication that run_gui creates or reuses.
    """
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtGui import QGuiApplication

    from app.identity import APP_ID, APP_NAME

    QCoreApplication.setApplicationName(APP_NAME)
    QCoreApplication.setApplicationVersion(get_version())
    QGuiApplication.setDesktopFileName(APP_ID)


def _no_display(qt_args: list[str]) -> bool:
    """True on Linux with no X11/Wayland display and no platform chosen: Qt would abort there."""
    if not sys.platform.startswith("linux"):
        return False
    if any(os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")):
        return False
    return not any(a == "-platform" or a.startswith("-platform=") for a in qt_args)


def _run_window(args: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="pinwheel", add_help=False)
    parser.add_argument("--model", metavar="PATH")
    ns, qt_args = parser.parse_known_args(args)

    if _no_display(qt_args):
        _err("no graphical display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset)")
        _err("the terminal chat works anywhere: pinwheel chat")
        return 1
    smoke = _Smoke.from_env()
    try:
        import PySide6.QtWidgets  # noqa: F401  (fails here, with a clear message, when system libraries are missing)
    except ImportError as exc:
        from app.desktop_integration import qt_libs_hint

        _err(f"cannot load Qt for the window: {exc}")
        _err(f"on Debian/Ubuntu the libraries Qt needs come with: {qt_libs_hint()}")
        _err("the terminal chat works without them: pinwheel chat")
        return 1
    try:
        from app.gui import run_gui
    except ModuleNotFoundError as exc:
        if exc.name not in ("app.gui",):
            raise
        _err("this build has no chat window (app.gui is missing); try: pinwheel chat")
        return 1

    set_app_identity()
    qt_argv = [sys.argv[0] if sys.argv and sys.argv[0] else "pinwheel", *qt_args]
    if smoke is not None:
        smoke.arm(qt_argv)
    code = run_gui(qt_argv, model_path=ns.model)
    if smoke is not None:
        return smoke.result(code)
    return int(code or 0)


class _Smoke:
    """Drives a started window from inside its event loop; see the module docstring."""

    POLL_MS = 100
    SETTLE_S = 0.5  # how long the window stays up before a window-only smoke run closes it

    def __init__(self, limit_ms: int, message: str | None, expect: str | None):
        self.limit_s = limit_ms / 1000.0
        self.message = message or None
        self.expect = expect or None
        self.code: int | None = None
        self.shown_at: float | None = None
        self.sent_at: float | None = None
        self.baseline: set[str] = set()
        self.saw_busy = False
        self.stable = 0
        self.last_new = ""

    @classmethod
    def from_env(cls) -> _Smoke | None:
        raw = os.environ.get("PINWHEEL_SMOKE_QUIT_MS", "").strip()
        if not raw:
            return None
        try:
            limit = int(raw)
        except ValueError:
            _err(f"ignoring PINWHEEL_SMOKE_QUIT_MS={raw!r}: not a whole number of milliseconds")
            return None
        return cls(max(limit, 1), os.environ.get("PINWHEEL_SMOKE_MESSAGE"), os.environ.get("PINWHEEL_SMOKE_EXPECT"))

    def log(self, msg: str) -> None:
        print(f"pinwheel smoke: {msg}", file=sys.stderr, flush=True)

    def arm(self, qt_argv: list[str]) -> None:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication

        # run_gui reuses this instance (QApplication.instance() or QApplication(argv)).
        self.app = QApplication.instance() or QApplication(qt_argv)
        self.t0 = time.monotonic()
        self.timer = QTimer()
        self.timer.setInterval(self.POLL_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def result(self, code: int | None) -> int:
        if self.code is None:
            self.log(f"the window closed by itself (exit {code}) before the smoke check ended")
            return int(code) if code else 5
        return self.code

    # -- inside the event loop --

    def _main_window(self):
        from PySide6.QtWidgets import QApplication, QMainWindow

        for w in QApplication.topLevelWidgets():
            if isinstance(w, QMainWindow) and w.isVisible():
                return w
        return None

    @staticmethod
    def _texts(widget) -> list[str]:
        """The pieces of text a user can read in ``widget`` and its visible children."""
        from PySide6.QtCore import Qt
        from PySide6.QtWidgets import QAbstractItemView, QLabel, QLineEdit, QPlainTextEdit, QTextEdit

        parts = []
        for w in [widget, *widget.findChildren(QLabel), *widget.findChildren(QTextEdit),
                  *widget.findChildren(QPlainTextEdit), *widget.findChildren(QLineEdit),
                  *widget.findChildren(QAbstractItemView)]:
            if w is not widget and not w.isVisibleTo(widget):
                continue
            if isinstance(w, (QTextEdit, QPlainTextEdit)):
                parts.append(w.toPlainText())
            elif isinstance(w, (QLabel, QLineEdit)):
                parts.append(w.text())
            elif isinstance(w, QAbstractItemView) and w.model() is not None:
                m = w.model()
                parts += [str(m.data(m.index(r, 0), Qt.ItemDataRole.DisplayRole) or "") for r in range(m.rowCount())]
        return [p.strip() for p in parts if p and p.strip()]

    def _send(self, win) -> bool:
        from PySide6.QtWidgets import QAbstractButton, QLineEdit, QPlainTextEdit, QTextEdit, QWidget

        box = win.findChild(QWidget, "messageInput")
        button = win.findChild(QAbstractButton, "sendButton")
        if box is None or button is None:
            self.log("no messageInput/sendButton in the window")
            self._finish(4)
            return False
        if not button.isEnabled():
            return False  # still loading: try again at the next tick
        view = win.findChild(QWidget, "chatView")
        self.baseline = set(self._texts(view)) if view is not None else set()
        if isinstance(box, (QTextEdit, QPlainTextEdit)):
            box.setPlainText(self.message)
        elif isinstance(box, QLineEdit):
            box.setText(self.message)
        else:
            self.log(f"messageInput is a {type(box).__name__}, which this smoke check cannot type into")
            self._finish(4)
            return False
        button.click()
        return True

    def _reply(self, win) -> str | None:
        """The reply text once it is complete (and holds the expected word), else None."""
        from PySide6.QtWidgets import QAbstractButton, QWidget

        view = win.findChild(QWidget, "chatView")
        if view is None:
            return None
        skip = self.baseline | {self.message.strip()}
        new = "\n".join(p for p in self._texts(view) if p not in skip)
        if not new:
            return None
        if self.expect is not None:
            return new if self.expect.lower() in new.lower() else None
        # No word to wait for: the reply is complete once Stop was usable and is not any more
        # (or, in a window without stopButton, once the new text stops changing for 1 s).
        stop = win.findChild(QAbstractButton, "stopButton")
        if stop is not None:
            busy = stop.isVisible() and stop.isEnabled()
            self.saw_busy = self.saw_busy or busy
            return new if self.saw_busy and not busy else None
        self.stable = self.stable + 1 if new == self.last_new else 0
        self.last_new = new
        return new if self.stable * self.POLL_MS >= 1000 else None

    def _tick(self) -> None:
        if self.code is not None:
            return
        now = time.monotonic() - self.t0
        win = self._main_window()
        if win is not None and self.shown_at is None:
            self.shown_at = now
            size = win.size()
            self.log(f"window {win.windowTitle()!r} {size.width()}x{size.height()} shown after {now:.2f} s")
        if win is not None and self.message is None:
            if now - self.shown_at >= self.SETTLE_S:
                self._finish(0)
                return
        elif win is not None:
            if self.sent_at is None:
                if self._send(win):
                    self.sent_at = now
                    self.log(f"sent {self.message!r} after {now:.2f} s")
            else:
                reply = self._reply(win)
                if reply is not None:
                    snippet = " ".join(reply.split())[:200]
                    self.log(f"reply after {now - self.sent_at:.2f} s: {snippet}")
                    self._finish(0)
                    return
        if self.code is None and now >= self.limit_s:
            if self.shown_at is None:
                self.log(f"no main window within {self.limit_s:.1f} s")
                self._finish(3)
            else:
                what = f"reply containing {self.expect!r}" if self.expect else "complete reply"
                self.log(f"no {what} within {self.limit_s:.1f} s")
                self._finish(4)

    def _finish(self, code: int) -> None:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication

        self.code = code
        self.timer.stop()
        for w in QApplication.topLevelWidgets():  # let the window shut its engine down as on a user's close
            if w.isVisible():
                w.close()
        QTimer.singleShot(0, lambda: self.app.exit(code))


if __name__ == "__main__":
    sys.exit(main())
