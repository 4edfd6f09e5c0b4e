"""Issue 21 (part 3): five bugs in the window, each checked on the real widgets (offscreen).

1. Apply in the settings panel wrote the theme picked in View → Theme back to the old one.
2. The first window could be larger than its screen (QT_SCALE_FACTOR=2 on 1920x1080).
3. The mouse wheel over a spin or combo box in the settings panel changed its value.
4. A message the window cuts (only its last tokens seen) showed all its text bright.
5. The gauge's first-start legend did not add up to the cache's capacity.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtGui import QAction, QPalette, QTextCursor, QTextFormat  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import (QAbstractSpinBox, QApplication, QComboBox, QDoubleSpinBox, QPushButton,  # noqa: E402
                               QScrollArea, QWidget)

from app.engine_events import PlanApplied, StatsSnapshot  # noqa: E402
from engine.events import SessionStats  # noqa: E402
from tests.app.engine_waits import expect  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LOAD_TIMEOUT_MS = 180_000
APPLY_TIMEOUT_MS = 60_000


def close(win) -> None:
    win.shutdown()
    win.close()
    win.deleteLater()


# --------------------------------------------------------------------------- 1. the theme


def test_a_theme_picked_in_the_view_menu_survives_an_apply_and_a_restart(qtbot, tmp_path, tiny_bpe_gguf):
    from app import MainWindow
    from app.settings import load_settings

    data = tmp_path / "data"
    win = MainWindow(model_path=tiny_bpe_gguf, data_dir=data)
    win.show()
    try:
        qtbot.waitUntil(lambda: win.model_ready or bool(win.errors), timeout=LOAD_TIMEOUT_MS)
        assert win.model_ready, win.errors
        win.findChild(QAction, "themeDarkAction").trigger()
        assert load_settings(win.settings_path)[0].theme == "dark"
        temperature = win.findChild(QDoubleSpinBox, "temperatureSpin")
        temperature.setValue(0.55)
        with expect(qtbot, win.engine, PlanApplied, APPLY_TIMEOUT_MS):
            qtbot.mouseClick(win.findChild(QPushButton, "applyButton"), Qt.MouseButton.LeftButton)
        saved = load_settings(win.settings_path)[0]
        assert saved.temperature == 0.55  # the Apply was kept...
        assert win.settings.theme == "dark" and saved.theme == "dark"  # ...and the theme with it

        # picked while an Apply is on its way to the engine: the Apply, when taken, keeps it too
        temperature.setValue(0.6)
        with expect(qtbot, win.engine, PlanApplied, APPLY_TIMEOUT_MS):
            qtbot.mouseClick(win.findChild(QPushButton, "applyButton"), Qt.MouseButton.LeftButton)
            win.findChild(QAction, "themeLightAction").trigger()
        assert win.settings.theme == "light" and load_settings(win.settings_path)[0].theme == "light"
        assert win.settings.temperature == 0.6
    finally:
        close(win)

    again = MainWindow(model_path=tiny_bpe_gguf, data_dir=data)  # a restart on the same data folder
    try:
        assert again.settings.theme == "light"
        assert again.findChild(QAction, "themeLightAction").isChecked()
        again.findChild(QAction, "themeSystemAction").trigger()  # leave the app as the other tests expect
    finally:
        close(again)


# --------------------------------------------------------------------------- 2. the first window's size


def _inside(rect, area) -> bool:
    x, y, w, h = rect
    ax, ay, aw, ah = area
    return ax <= x and ay <= y and x + w <= ax + aw and y + h <= ay + ah


@pytest.mark.parametrize("screen", [(1920, 1080), (640, 400)])
def test_the_first_window_fits_a_small_screen_at_scale_factor_2(tmp_path, screen):
    """QT_SCALE_FACTOR=2 on a 1920x1080 screen opened the window at 2560x1600 physical pixels:
    its frame, and Send, must lie in the screen's available area (a restored geometry too),
    at its minimum size or more where the screen has room for that."""
    width, height = screen
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "small", "x": 0, "y": 0, "width": width, "height": height,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_SCREEN_SCALE", "QT_SCALE", "QT_AUTO_SCREEN"))}
    env.update(QT_QPA_PLATFORM=f"offscreen:configfile={config}", QT_SCALE_FACTOR="2", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "app" / "window_fit_child.py"), str(tmp_path)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout + p.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["dpr"] == 2.0 and out["screen"] == [0, 0, width // 2, height // 2]  # the screen as asked for
    for which in ("first", "restored", "placed"):
        win = out[which]
        avail = win["available"]
        assert _inside(win["frame"], avail), (which, win)
        assert _inside(win["send"], avail), (which, win)
        frame_w, frame_h = win["frame"][2] - win["geometry"][2], win["frame"][3] - win["geometry"][3]
        room = (avail[2] - frame_w, avail[3] - frame_h)
        hint = win["hint"]
        assert win["geometry"][2] >= min(hint[0], room[0]) and win["geometry"][3] >= min(hint[1], room[1]), win
    first = out["first"]
    room = (first["available"][2] - (first["frame"][2] - first["geometry"][2]),
            first["available"][3] - (first["frame"][3] - first["geometry"][3]))
    assert first["geometry"][2:] == [min(1280, room[0]), min(800, room[1])]  # as large as it fits


# --------------------------------------------------------------------------- 3. the wheel in the panel


@pytest.fixture
def panel_in_scroll_area(qtbot):
    from app.settings import AppSettings
    from app.settings_panel import SettingsPanel

    area = QScrollArea()
    area.setWidgetResizable(True)
    panel = SettingsPanel(AppSettings())
    area.setWidget(panel)
    area.resize(600, 180)  # far shorter than the panel: it scrolls
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    return area, panel


def _value(box):
    return box.currentIndex() if isinstance(box, QComboBox) else box.value()


def _wheel(box, delta: int) -> None:
    win = box.window()
    at = box.mapTo(win, box.rect().center())
    QTest.wheelEvent(win.windowHandle(), at, QPoint(0, delta))  # through the platform, like a mouse
    QApplication.processEvents()


@pytest.mark.parametrize("name, delta", [("sinkSpin", 120), ("windowSpin", 120), ("temperatureSpin", 120),
                                         ("maxTokensSpin", -120), ("kvDtypeCombo", -120)])
def test_the_wheel_over_an_unfocused_box_scrolls_the_panel_not_the_value(panel_in_scroll_area, qtbot, name, delta):
    area, panel = panel_in_scroll_area
    box = panel.findChild(QWidget, name)
    assert isinstance(box, (QAbstractSpinBox, QComboBox))
    area.ensureWidgetVisible(box, 10, 40)
    bar = area.verticalScrollBar()
    start = bar.value()
    assert bar.minimum() < start < bar.maximum()  # it can scroll either way from here
    before = _value(box)
    _wheel(box, delta)
    assert _value(box) == before, f"the wheel changed {name}"
    assert not box.hasFocus()  # nor took the focus
    assert (bar.value() < start) if delta > 0 else (bar.value() > start), "the panel did not scroll"

    # a box the user has focused still takes the wheel
    area.activateWindow()
    box.setFocus()
    qtbot.waitUntil(box.hasFocus, timeout=2000)
    area.ensureWidgetVisible(box, 10, 40)
    _wheel(box, delta)
    assert _value(box) != before


# --------------------------------------------------------------------------- 4. a partly seen message


def _faded_colour(widget) -> object:
    from app.markdown_view import blend

    pal = widget.palette()
    return blend(pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.Window), 0.6)


def _faded_flags(body) -> list[bool]:
    """For each rendered character of a message body (all its views), whether it is drawn faded."""
    flags = []
    for view in body.views:
        doc, colour = view.document(), _faded_colour(view)
        cursor = QTextCursor(doc)
        for pos in range(doc.characterCount() - 1):
            cursor.setPosition(pos + 1)  # the format of the character before the cursor: pos
            fmt = cursor.charFormat()
            flags.append(fmt.hasProperty(QTextFormat.Property.ForegroundBrush)
                         and fmt.foreground().color() == colour)
    return flags


@pytest.mark.parametrize("words", [500, 2500])  # one view, and a long message in several
def test_a_partly_seen_message_fades_the_start_the_model_no_longer_sees(qtbot, words):
    from app.chat_view import ChatMessage, ChatView, MessageMemoryView

    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    long_text = " ".join(f"word{i}" for i in range(words))
    view.set_messages([ChatMessage("user", long_text), ChatMessage("assistant", "A short reply.")])
    cut = view.widgets[0]
    assert (len(cut.body.views) > 1) == (words > 1000)
    view.set_memory({0: MessageMemoryView(3882, 882, False), 1: MessageMemoryView(5, 5, False)}, 0)
    assert "last 882 of 3,882 tokens seen" in cut.memoryLabel.text()
    assert not cut.faded  # not the whole message...
    flags = _faded_flags(cut.body)
    unseen = round(len(flags) * 3000 / 3882)
    assert all(flags[:unseen]) and not any(flags[unseen:]), (flags.index(False), unseen, len(flags))  # ...its start
    assert not any(_faded_flags(view.widgets[1].body))
    assert "start of the message below" in view.boundary.text()
    assert view.boundary_index() == 0

    # the window slides on: more of it fades; a rebuild brings it all back into view
    view.set_memory({0: MessageMemoryView(3882, 400, False), 1: MessageMemoryView(5, 5, False)}, 0)
    flags = _faded_flags(cut.body)
    assert flags.index(False) == round(len(flags) * 3482 / 3882)
    view.set_memory({0: MessageMemoryView(3882, 3882, False), 1: MessageMemoryView(5, 5, False)}, 0)
    assert not any(_faded_flags(cut.body))


# --------------------------------------------------------------------------- 5. the gauge's legend


def first_start_snapshot(sinks=11, window=917, cache_tokens=0) -> StatsSnapshot:
    stats = SessionStats(tokens_seen=cache_tokens, cache_tokens=cache_tokens, capacity=sinks + window,
                         sink_tokens=sinks, window=window, evicted_tokens=0, kv_bytes=928 * 1024,
                         budget_bytes=1 << 20, weight_bytes=10 << 20, rss_bytes=300 << 20)
    return StatsSnapshot(stats=stats, t=0.0, tok_s=0.0)


def test_the_gauges_slot_legend_adds_up_to_the_capacity_at_first_start(qtbot):
    from app.memory_gauge import MemoryGauge

    gauge = MemoryGauge()
    qtbot.addWidget(gauge)
    gauge.show()
    gauge.set_snapshot(first_start_snapshot())  # sinks planned, nothing in the cache yet
    described = gauge.accessibleDescription()
    assert "11 sink tokens, window 0 of 917 used, 917 slots free" in described, described
    assert gauge.legend() == ["sinks 11", "window 0/917", "free 917"]
    gauge.grab()  # paints with it

    gauge.set_snapshot(first_start_snapshot(cache_tokens=111))  # the first turn is in
    assert gauge.legend() == ["sinks 11", "window 100/917", "free 817"]

    fresh = MemoryGauge()  # just loaded: the plan, before any stats
    qtbot.addWidget(fresh)
    fresh.set_plan(SimpleNamespace(kv_bytes=928 * 1024, budget_bytes=1 << 20, sinks=11, window=917))
    assert fresh.legend() == ["sinks 11", "window 0/917", "free 917"]


# --------------------------------------------------------------------------- the built-in turn format


def test_a_file_without_a_template_says_so_in_the_status_bar(qtbot, tmp_path):
    """Issue 21 (2): the window names the built-in turn format a template-less file chats in, with
    why and the base-model hint in the tooltip."""
    from PySide6.QtWidgets import QLabel

    from app import MainWindow
    from tests.fixtures.family_gguf import write_family_gguf

    win = MainWindow(model_path=write_family_gguf(tmp_path / "gemma-bare.gguf", "gemma3", template=""),
                     data_dir=tmp_path / "data")
    win.show()
    try:
        qtbot.waitUntil(lambda: win.model_ready or bool(win.errors), timeout=LOAD_TIMEOUT_MS)
        assert win.model_ready, win.errors
        label = win.findChild(QLabel, "statusTemplate")
        assert label.isVisible() and label.text() == "built-in gemma format"
        assert "no chat template" in label.toolTip() and "base model" in label.toolTip()
        assert "the file has no chat template" in win.stageLabel.text()
    finally:
        close(win)
