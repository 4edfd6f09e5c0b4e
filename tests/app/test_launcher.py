"""The `pinwheel` entry point: dispatch, --version/--help, import weight and the smoke mode.

The smoke mode is checked here against a small stand-in window; tests/test_packaging.py runs
it on the real window, started from the installed wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from app import launcher
from engine.version import __version__

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("chat", "plan", "score", "bench", "install-desktop", "uninstall-desktop")


def run_py(code: str, env: dict | None = None, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


# -- dispatch -----------------------------------------------------------------------------------


def test_import_and_version_load_neither_qt_nor_jax():
    proc = run_py(textwrap.dedent("""
        import sys
        import app.launcher as l
        assert l.main(["--version"]) == 0
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "PySide6", "numpy"))
        print("HEAVY", heavy)
    """))
    assert proc.returncode == 0, proc.stderr
    assert f"pinwheel {__version__}" in proc.stdout
    assert "HEAVY []" in proc.stdout, proc.stdout


def test_version_is_the_one_in_engine_version(capsys):
    from engine import kernels

    for flag in ("--version", "-V"):  # the version, then the kernel variant in use and why (issue 24)
        assert launcher.main([flag]) == 0
        assert capsys.readouterr().out == f"pinwheel {__version__}\nkernel: {kernels.describe()}\n"
    assert launcher.get_version() == __version__


def test_installed_metadata_matches_engine_version():
    from importlib import metadata

    try:
        installed = metadata.version(launcher.DIST_NAME)
    except metadata.PackageNotFoundError:
        pytest.skip("pinwheel-chat is not installed in this environment (./test.sh installs it)")
    assert installed == __version__, "the installed metadata is stale: re-run ./test.sh (it re-installs on a version change)"


def test_help_lists_every_subcommand(capsys):
    assert launcher.main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in SUBCOMMANDS:
        assert f"\n  {cmd} " in out, cmd
    assert "--model PATH" in out and "--version" in out


def test_unknown_command_is_an_error(capsys):
    assert launcher.main(["chta"]) == 2
    assert "unknown command 'chta'" in capsys.readouterr().err


def test_engine_commands_go_to_engine_cli(monkeypatch):
    calls = []
    fake = types.ModuleType("engine.cli")
    fake.main = lambda argv: calls.append(list(argv)) or 7
    monkeypatch.setitem(sys.modules, "engine.cli", fake)
    for cmd in ("chat", "plan", "score"):
        assert launcher.main([cmd, "--prompt", "hi"]) == 7
    assert calls == [[c, "--prompt", "hi"] for c in ("chat", "plan", "score")]


def test_bench_goes_to_bench_run_with_its_own_flags(monkeypatch):
    """`pinwheel bench --quick` as the README writes it (argparse's REMAINDER used to refuse a
    leading flag: "unrecognized arguments: --quick")."""
    calls = []
    fake = types.ModuleType("bench.run")
    fake.main = lambda argv: calls.append(list(argv)) or 3
    monkeypatch.setitem(sys.modules, "bench.run", fake)
    assert launcher.main(["bench", "--quick", "--no-llamacpp"]) == 3
    assert calls == [["--quick", "--no-llamacpp"]]


def test_missing_engine_cli_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "engine.cli", None)  # import raises ModuleNotFoundError
    assert launcher.main(["chat"]) == 2
    assert "no engine.cli" in capsys.readouterr().err


def test_real_engine_cli_help():
    if not (ROOT / "engine" / "cli.py").is_file():
        pytest.skip("engine/cli.py is not written yet")
    proc = run_py("import sys, app.launcher as l; sys.exit(l.main(['chat', '--help']))")
    assert proc.returncode == 0, proc.stderr
    assert "--prompt" in proc.stdout


def test_desktop_commands_go_to_desktop_integration(tmp_path, capsys):
    assert launcher.main(["install-desktop", "--data-home", str(tmp_path)]) == 0
    assert (tmp_path / "applications" / "pinwheel.desktop").is_file()
    assert launcher.main(["uninstall-desktop", "--data-home", str(tmp_path)]) == 0
    assert not (tmp_path / "applications" / "pinwheel.desktop").exists()
    out = capsys.readouterr().out
    assert "pinwheel.desktop" in out and "removed" in out


def test_window_path_passes_model_and_qt_args_and_names_the_app(monkeypatch, qapp):
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtGui import QGuiApplication

    calls = []
    fake = types.ModuleType("app.gui")
    fake.run_gui = lambda argv, model_path=None: calls.append((list(argv), model_path)) or 0
    monkeypatch.setitem(sys.modules, "app.gui", fake)
    monkeypatch.delenv("PINWHEEL_SMOKE_QUIT_MS", raising=False)
    monkeypatch.setattr(sys, "argv", ["/opt/x/pinwheel"])
    assert launcher.main(["--model", "/m/x.gguf", "-style", "fusion"]) == 0
    assert launcher.main([]) == 0
    assert calls == [(["/opt/x/pinwheel", "-style", "fusion"], "/m/x.gguf"), (["/opt/x/pinwheel"], None)]
    assert QCoreApplication.applicationName() == "Pinwheel"
    assert QGuiApplication.desktopFileName() == "pinwheel"
    assert QCoreApplication.applicationVersion() == __version__


def test_window_without_a_display_says_so_instead_of_aborting(monkeypatch, capsys):
    fake = types.ModuleType("app.gui")
    fake.run_gui = lambda argv, model_path=None: pytest.fail("run_gui must not start without a display")
    monkeypatch.setitem(sys.modules, "app.gui", fake)
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "PINWHEEL_SMOKE_QUIT_MS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert launcher.main([]) == 1
    err = capsys.readouterr().err
    assert "no graphical display" in err and "pinwheel chat" in err


# -- smoke mode, against a stand-in window ------------------------------------------------------

FAKE_GUI = """
import sys, types
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (QApplication, QLabel, QMainWindow, QPlainTextEdit, QPushButton,
                               QScrollArea, QVBoxLayout, QWidget)

MODE = {mode!r}

def run_gui(argv, model_path=None):
    app = QApplication.instance() or QApplication(argv)
    if MODE == "no-window":
        QTimer.singleShot(10_000, app.quit)
        return app.exec()
    win = QMainWindow(); win.setWindowTitle("Pinwheel")
    central = QWidget(); lay = QVBoxLayout(central)
    view = QScrollArea(); view.setObjectName("chatView"); inner = QWidget(); il = QVBoxLayout(inner)
    il.addWidget(QLabel("Say hello"))
    view.setWidget(inner); view.setWidgetResizable(True)
    box = QPlainTextEdit(); box.setObjectName("messageInput")
    send = QPushButton("Send"); send.setObjectName("sendButton")
    stop = QPushButton("Stop"); stop.setObjectName("stopButton"); stop.setEnabled(False)
    for w in (view, box, send, stop):
        lay.addWidget(w)
    win.setCentralWidget(central)

    def on_send():
        text = box.toPlainText(); box.clear()
        il.addWidget(QLabel(text))
        reply = QLabel(""); il.addWidget(reply)
        stop.setEnabled(True); send.setEnabled(False)
        words = iter(["The", " capital", " of France", " is", " Paris."] if MODE == "paris" else ["I", " do", " not", " know."])
        def step():
            try:
                reply.setText(reply.text() + next(words))
            except StopIteration:
                timer.stop(); stop.setEnabled(False); send.setEnabled(True)
        timer = QTimer(win); timer.setInterval(150); timer.timeout.connect(step); timer.start()
    send.clicked.connect(on_send)
    win.resize(800, 600); win.show()
    return app.exec()

mod = types.ModuleType("app.gui"); mod.run_gui = run_gui
sys.modules["app.gui"] = mod
import app.launcher
sys.exit(app.launcher.main([]))
"""


def smoke(mode: str, **env) -> subprocess.CompletedProcess:
    return run_py(FAKE_GUI.format(mode=mode), env={"PINWHEEL_SMOKE_QUIT_MS": "8000", **env}, timeout=60)


def test_smoke_window_only_passes_when_the_window_shows():
    proc = smoke("paris")
    assert proc.returncode == 0, proc.stderr
    assert "window 'Pinwheel' 800x600 shown after" in proc.stderr


def test_smoke_fails_without_a_window():
    proc = smoke("no-window", PINWHEEL_SMOKE_QUIT_MS="1500")
    assert proc.returncode == 3, proc.stderr
    assert "no main window within 1.5 s" in proc.stderr


def test_smoke_message_waits_for_the_expected_reply():
    proc = smoke("paris", PINWHEEL_SMOKE_MESSAGE="What is the capital of France?", PINWHEEL_SMOKE_EXPECT="paris")
    assert proc.returncode == 0, proc.stderr
    assert "sent 'What is the capital of France?'" in proc.stderr
    assert "reply after" in proc.stderr and "Paris." in proc.stderr


def test_smoke_message_without_expect_waits_until_the_reply_is_done():
    proc = smoke("dunno", PINWHEEL_SMOKE_MESSAGE="What is the capital of France?")
    assert proc.returncode == 0, proc.stderr
    assert "I do not know." in proc.stderr  # the whole reply, not the first word


def test_smoke_message_fails_when_the_reply_lacks_the_word():
    proc = smoke("dunno", PINWHEEL_SMOKE_QUIT_MS="3000", PINWHEEL_SMOKE_MESSAGE="What is the capital of France?",
                 PINWHEEL_SMOKE_EXPECT="Paris")
    assert proc.returncode == 4, proc.stderr
    assert "no reply containing 'Paris' within 3.0 s" in proc.stderr
