"""Child process for tests/app/test_window_issue21.py: the window's geometry on a small screen.

The scale factor is read when QApplication starts, so the parent sets QT_SCALE_FACTOR and the
offscreen screen (QT_QPA_PLATFORM=offscreen:configfile=...) for this process. It opens the
first window, one whose geometry is restored from a larger screen's and one placed, before it
shows, larger than the screen; it prints for each its frame, its minimum size, Send's rectangle
(all in global logical pixels) and the screen's available area, as one JSON line.

    python tests/app/window_fit_child.py DATA_DIR
"""
import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from PySide6.QtCore import QRect  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from app import MainWindow  # noqa: E402


def rect(r: QRect) -> list[int]:
    return [r.x(), r.y(), r.width(), r.height()]


def settle(app, seconds: float = 0.3) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def report(win) -> dict:
    send = win.sendButton
    return {
        "frame": rect(win.frameGeometry()),
        "geometry": rect(win.geometry()),
        "minimum": [win.minimumSize().width(), win.minimumSize().height()],
        "hint": [win.minimumSizeHint().width(), win.minimumSizeHint().height()],  # what its layout needs
        "send": rect(QRect(send.mapToGlobal(send.rect().topLeft()), send.size())),
        "available": rect(win.screen().availableGeometry()),
    }


def main(data_dir: str) -> None:
    app = QApplication([])
    out = {"screen": rect(app.primaryScreen().geometry()), "dpr": app.primaryScreen().devicePixelRatio()}
    # the model file is missing: the window opens (with a banner), which is all this looks at
    first = MainWindow(model_path=os.path.join(data_dir, "no-model.gguf"), data_dir=os.path.join(data_dir, "a"))
    first.show()
    settle(app)
    out["first"] = report(first)

    big = QWidget()  # a geometry saved on a larger screen (1600x1000 at 100,80)
    big.setGeometry(100, 80, 1600, 1000)
    saved = big.saveGeometry()
    restored = MainWindow(model_path=os.path.join(data_dir, "no-model.gguf"), data_dir=os.path.join(data_dir, "b"))
    restored.restoreGeometry(saved)
    restored.show()
    settle(app)
    out["restored"] = report(restored)

    placed = MainWindow(model_path=os.path.join(data_dir, "no-model.gguf"), data_dir=os.path.join(data_dir, "c"))
    placed.setGeometry(100, 80, 1600, 1000)  # set before it shows, as a session manager would
    placed.show()
    settle(app)
    out["placed"] = report(placed)
    print("RESULT " + json.dumps(out), flush=True)
    for w in (first, restored, placed):
        w.shutdown()
        w.close()


if __name__ == "__main__":
    main(sys.argv[1])
