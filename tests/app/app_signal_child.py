"""Child process for tests/app/test_app_exit.py: the real app through run_gui (offscreen) on
the tiny test model. Once a reply is streaming it sends itself the signal named on the command
line (TERM or INT), as a logout or Ctrl+C in the terminal would; or, with "EXIT", calls
sys.exit from inside the event loop with the window still open.

    python tests/app/app_signal_child.py MODEL.gguf TERM|INT|EXIT
"""
import os
import signal
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.gui import run_gui  # noqa: E402


def main(model: str, how: str) -> int:
    app = QApplication([])
    state = {"sent": False}

    def drive():
        wins = [w for w in app.topLevelWidgets() if w.objectName() == "mainWindow"]
        if not wins:
            return
        win = wins[0]
        if not state["sent"] and win.model_ready:
            win.settings = win.settings.replace(max_tokens=1_000_000)
            win.sampling_overrides = {"ignore_eos": True}
            win.input.setPlainText("tell me everything")
            win.send()
            state["sent"] = True
            print("SENT", flush=True)
        elif state["sent"] and win.reply is not None and "".join(win.reply.parts):
            print("STREAMING", flush=True)
            timer.stop()
            if how == "EXIT":
                sys.exit(0)  # from a slot: PySide turns it into an exception at the loop's edge
            os.kill(os.getpid(), signal.SIGTERM if how == "TERM" else signal.SIGINT)

    timer = QTimer()
    timer.timeout.connect(drive)
    timer.start(20)
    return run_gui([], model_path=model)


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2])
    print(f"EXITED {code}", flush=True)
    sys.exit(code)
