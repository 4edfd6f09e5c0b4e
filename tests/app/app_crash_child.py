"""Child process for tests/app/test_app_crash.py: the real chat window (offscreen) on the tiny
test model. It answers one message in full, prints that reply as JSON, then starts a second,
endless reply and keeps streaming until the parent kills it with SIGKILL.

    python tests/app/app_crash_child.py MODEL.gguf DATA_DIR
"""
import json
import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app import MainWindow  # noqa: E402


def wait(app, pred, seconds, what):
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            print(f"TIMEOUT {what}", flush=True)
            sys.exit(3)
        app.processEvents()
        time.sleep(0.005)


def main(model: str, data_dir: str) -> None:
    app = QApplication([])
    win = MainWindow(model_path=model, data_dir=data_dir)
    win.show()
    wait(app, lambda: win.model_ready or win.errors, 180, "model")
    if not win.model_ready:
        print("ERROR " + json.dumps(win.errors), flush=True)
        sys.exit(2)
    win.sampling_overrides = {"seed": 3, "ignore_eos": True}
    win.settings = win.settings.replace(max_tokens=12, temperature=0.8)
    finished = []
    win.replyFinished.connect(finished.append)
    win.input.setPlainText("first question")
    win.send()
    wait(app, lambda: finished, 120, "first reply")
    print("REPLY " + json.dumps({"conversation": win.current_id, "reply": finished[0].reply}), flush=True)
    win.settings = win.settings.replace(max_tokens=1_000_000)
    win.input.setPlainText("second question")
    win.send()
    print("STREAMING", flush=True)
    while True:  # until SIGKILL
        app.processEvents()
        time.sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
