"""QA of Gemma 4 in the window: "Most layers see only the last N words" where they see it all.

Gemma 4's sliding-window layers hold their window plus the sinks, at most the whole cache. With a
Recent text setting shorter than their window (64 tokens on E2B, whose window is 512) they hold
the whole cache, as every other layer does, yet the gauge and the settings preview still said
"Most layers see only the last ~56 words" right under "Recent text the model sees ~48 words".
The plain words now say it only where those layers see less than the cache; the exact terms
(Details) keep their row.
"""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from engine.budget import plan_memory  # noqa: E402


@pytest.fixture(scope="module")
def gemma4_config(tmp_path_factory):
    from engine.gguf_loader import config_from_metadata, metadata, read_gguf
    from tests.fixtures.family_gguf import write_family_gguf

    path = write_family_gguf(tmp_path_factory.mktemp("g4") / "gemma4.gguf", "gemma4")
    cfg = config_from_metadata(metadata(read_gguf(str(path))))
    assert cfg.local_layers and cfg.sliding_window == 16  # (the fixture's window: the cases below need it)
    return cfg


@pytest.mark.parametrize("window,said", [(8, False), (16, False), (64, True)])
def test_most_layers_see_only_is_said_where_they_see_less(qtbot, gemma4_config, window, said):
    from app.memory_gauge import MemoryGauge, words
    from app.settings import AppSettings
    from app.settings_panel import SettingsPanel

    plan = plan_memory(gemma4_config, window=window, sinks=4)
    assert (plan.local_slots < plan.capacity) == said
    line = f"Most layers see only the last {words(plan.local_slots)} words"

    panel = SettingsPanel(AppSettings())
    qtbot.addWidget(panel)
    panel.set_model_config(gemma4_config)
    panel.sinkSpin.setValue(4)
    panel.windowSpin.setValue(window)
    panel.refresh_preview()
    assert panel.preview_plan().local_slots == plan.local_slots
    assert (line in panel.previewLabel.text()) == said, panel.previewLabel.text()
    assert f"{plan.local_slots:,} slots" in panel.preview_text()  # the exact terms say it either way

    gauge = MemoryGauge()
    qtbot.addWidget(gauge)
    gauge.set_plan(plan, gemma4_config)
    rows = {label: value for label, value, _tip in gauge.rows()}
    assert ("Most layers see only" in rows) == said, rows
    if said:
        assert rows["Most layers see only"] == f"the last {words(plan.local_slots)} words"
    height = gauge.height()
    gauge.set_details(True)  # Details: the sliding-window layers' row in slots, always
    rows = {label: value for label, value, _tip in gauge.rows()}
    assert rows["Sliding-window layers"] == f"{plan.local_layers} × {plan.local_slots:,} slots"
    assert gauge.height() >= height
