"""Issue 25 (3, 4): what a hybrid model remembers, in the window's words (and Gemma 4's layers
without a cache of their own, in the preview's exact terms).

Qwen3.5's DeltaNet layers keep a fixed summary of the whole chat and only its attention layers
read the window. The settings preview and the memory gauge say so, and text that has left the
window is "out of the attention window, still summarised", not "no longer seen". Every other
family's words stay as they were.

The widget tests use a Qwen3.5-0.8B shape (no weights); the last test opens the window on the
tiny random-weight qwen35 file and chats past a small window, as a user would.
"""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from engine.budget import hybrid_words, plan_memory  # noqa: E402
from engine.config import ModelConfig  # noqa: E402
from app.engine_events import StatsSnapshot  # noqa: E402
from engine.events import SessionStats  # noqa: E402
from tests.engine.test_deltanet import qwen35_shape  # noqa: E402

FLAT = ModelConfig("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 40960, qk_norm=True)  # every layer attends


def panel_for(qtbot, cfg):
    from app.settings import AppSettings
    from app.settings_panel import SettingsPanel

    panel = SettingsPanel(AppSettings())
    qtbot.addWidget(panel)
    panel.set_model_config(cfg)
    panel.sinkSpin.setValue(4)
    panel.windowSpin.setValue(2048)
    panel.refresh_preview()
    return panel


def test_the_preview_says_what_a_hybrid_remembers(qtbot):
    from app.memory_gauge import fmt_bytes, words

    cfg = qwen35_shape("0.8B")
    panel = panel_for(qtbot, cfg)
    plan = panel.preview_plan()
    assert plan.recurrent_layers == cfg.recurrent_layers > 0 and plan.window == 2048
    plain = panel.previewLabel.text()
    assert (f"{cfg.recurrent_layers} layers keep a fixed <b>{fmt_bytes(plan.state_bytes)} summary</b> of the whole "
            f"chat; {cfg.attention_layers} attention layers see the last <b>{words(2048)} words</b>") in plain, plain
    assert "Recent text the model sees" not in plain  # (the sentence says it, for the attention layers)
    assert f"up to {fmt_bytes(plan.snapshot_bytes)}" in plain  # the snapshots' memory, beside the cache
    expert = panel.preview_text()
    assert hybrid_words(plan, cfg) in expert, expert  # the engine's own words, in tokens
    assert f"state {fmt_bytes(plan.state_bytes)} (in the KV above)" in expert
    assert f"snapshots for edits ≤ {fmt_bytes(plan.snapshot_bytes)}" in expert
    assert "B/token (attention layers)" in expert
    panel.set_details(True)
    assert hybrid_words(plan, cfg) in panel.previewLabel.text()
    panel.set_details(False)

    panel.windowSpin.setValue(512)  # a short window: the warning says what the summary keeps
    assert "so it will lose the exact words of what was said a few messages ago: its " \
           f"{cfg.recurrent_layers} DeltaNet layers keep only a summary of older text." in panel.previewLabel.text()
    assert "forget" not in panel.previewLabel.text()

    panel.set_model_config(FLAT)  # another model, whose layers all attend: nothing new is said
    plain, expert = panel.previewLabel.text(), panel.preview_text()
    assert plain.startswith("Recent text the model sees: <b>")
    assert "so it will forget what was said a few messages ago" in plain
    for text in (plain, expert):
        assert "summary" not in text and "attention layers" not in text and "snapshot" not in text, text


def test_a_budget_below_a_hybrids_smallest_cache_counts_the_state(qtbot):
    from app.memory_gauge import fmt_bytes

    cfg = qwen35_shape("0.8B")
    panel = panel_for(qtbot, cfg)
    panel.windowSpin.setValue(0)
    panel.budgetPresetCombo.setCurrentIndex(panel.budgetPresetCombo.findData("custom"))
    panel.budgetSpin.setValue(1.0)  # MiB: below the 19 MiB state alone
    panel.refresh_preview()
    plan = panel.preview_plan()
    assert plan.kv_bytes > plan.budget_bytes
    assert f"the smallest cache is 160 slots = {fmt_bytes(plan.kv_bytes)}" in panel.preview_text()


def test_the_preview_counts_only_the_layers_that_hold_a_cache(qtbot, tmp_path):
    """Gemma 4: the exact-terms split names the global layers that own a cache (the shared ones
    read an earlier layer's), and each kind's bytes at its own width."""
    from app.memory_gauge import fmt_bytes
    from engine.budget import layer_bytes_per_position
    from engine.config import GLOBAL, LOCAL
    from engine.gguf_loader import config_from_metadata, metadata, read_gguf
    from tests.fixtures.family_gguf import write_family_gguf

    cfg = config_from_metadata(metadata(read_gguf(str(write_family_gguf(tmp_path / "g4.gguf", "gemma4")))))
    assert cfg.shared_kv_layers and cfg.cache_layers(GLOBAL) < cfg.global_layers
    panel = panel_for(qtbot, cfg)
    plan = panel.preview_plan()
    glob = cfg.cache_layers(GLOBAL) * plan.capacity * layer_bytes_per_position(cfg, plan.kv_dtype)
    local = cfg.cache_layers(LOCAL) * plan.local_slots * layer_bytes_per_position(cfg, plan.kv_dtype, cfg.local_kv_dim)
    assert glob + local == plan.kv_bytes
    n = cfg.cache_layers(GLOBAL)
    assert (f"{n} global layer{'s' if n != 1 else ''} × {plan.capacity:,} slots ({fmt_bytes(glob)}) + "
            f"{cfg.cache_layers(LOCAL)} sliding-window layers × {plan.local_slots:,} slots ({fmt_bytes(local)}; "
            f"window {cfg.sliding_window:,}) + {cfg.shared_kv_layers} shared layers reading an earlier layer's cache "
            "(0 B)") in panel.preview_text(), panel.preview_text()


def snapshot_of(plan, *, seen: int, evicted: int) -> StatsSnapshot:
    stats = SessionStats(tokens_seen=seen, cache_tokens=seen - evicted, capacity=plan.capacity,
                         sink_tokens=plan.sinks, window=plan.window, evicted_tokens=evicted, kv_bytes=plan.kv_bytes,
                         budget_bytes=plan.budget_bytes, weight_bytes=500 << 20, rss_bytes=900 << 20)
    return StatsSnapshot(stats=stats, t=1.0, tok_s=12.0)


def test_the_gauge_shows_the_summary_and_what_left_the_window(qtbot):
    from app.memory_gauge import MemoryGauge, fmt_bytes, words

    cfg = qwen35_shape("0.8B")
    plan = plan_memory(cfg, "int8", window=2048, sinks=4, budget_bytes=1 << 30)
    flat = MemoryGauge()
    qtbot.addWidget(flat)
    flat.set_plan(plan_memory(FLAT, "int8", window=2048, sinks=4, budget_bytes=1 << 30), FLAT)
    gauge = MemoryGauge()
    qtbot.addWidget(gauge)
    gauge.set_plan(plan, cfg)
    assert gauge.filled_bytes() == plan.state_bytes  # nothing said yet, but the state is all there
    gauge.set_snapshot(snapshot_of(plan, seen=5000, evicted=5000 - plan.capacity))
    assert gauge.filled_bytes() == plan.kv_bytes
    rows = {label: (value, tip) for label, value, tip in gauge.rows()}
    value, tip = rows["Summary of the whole chat"]
    assert value == f"{fmt_bytes(plan.state_bytes)}, fixed"
    assert hybrid_words(plan, cfg) in tip and "never grows" in tip
    assert f"at most {fmt_bytes(plan.snapshot_bytes)}, beside".replace(" MiB", "\u00a0MiB") in tip
    assert "Forgotten so far" not in rows  # it is summarised, not forgotten
    value, tip = rows["Left the window"]
    assert value == f"{words(5000 - plan.capacity)} words, summarized"
    assert f"{cfg.attention_layers} attention layers no longer see them" in tip
    assert f"{cfg.recurrent_layers} DeltaNet layers still carry a summary of them" in tip
    assert gauge.height() > flat.height()  # one more row, and the gauge grew to show it
    assert hybrid_words(plan, cfg) in gauge.accessibleDescription()
    gauge.show()
    gauge.grab()  # paints: each row's tooltip is where it is drawn
    tips = " ".join(t for _top, _bottom, t in gauge._tips)
    assert f"{fmt_bytes(plan.state_bytes)} of it the recurrent layers' fixed state" in tips
    assert f"Only this model's {cfg.attention_layers} attention layers read these slots" in tips
    gauge.set_details(True)
    assert ("Recurrent state", f"{cfg.recurrent_layers} layers, {fmt_bytes(plan.state_bytes)}") in \
        [(label, value) for label, value, _tip in gauge.rows()]
    gauge.set_details(False)

    other = plan_memory(FLAT, "int8", window=2048, sinks=4, budget_bytes=1 << 30)
    gauge.set_plan(other, FLAT)  # another model, whose layers all attend: the rows as before
    gauge.set_snapshot(snapshot_of(other, seen=5000, evicted=5000 - other.capacity))
    labels = [label for label, _value, _tip in gauge.rows()]
    assert labels[0] == "Forgotten so far" and "Summary of the whole chat" not in labels
    assert "summar" not in gauge.accessibleDescription() and gauge.height() == flat.height()


def test_the_divider_says_a_hybrid_keeps_a_summary_of_the_faded_text(qtbot):
    from app.chat_view import ChatMessage, ChatView, MessageMemoryView
    from app.memory_words import hybrid_memory

    cfg = qwen35_shape("0.8B")
    plan = plan_memory(cfg, "int8", window=2048, sinks=4, budget_bytes=1 << 30)
    view = ChatView()
    qtbot.addWidget(view)
    for i in range(4):
        view.append(ChatMessage("user" if i % 2 == 0 else "assistant", f"message {i}"))
    memory = {0: MessageMemoryView(40, 0, False), 1: MessageMemoryView(30, 10, False),
              2: MessageMemoryView(20, 20, False), 3: MessageMemoryView(20, 20, False)}
    view.set_memory(memory, 0)
    before = view.boundary.text()
    assert "no longer sees" in before and not view.boundary.toolTip()
    assert view.widgets[0].memoryLabel.text() == "out of view (40 tokens)"

    view.set_hybrid(hybrid_memory(plan, cfg))  # the plan in force is a hybrid's
    text, tip = view.boundary.text(), view.boundary.toolTip()
    assert "60 tokens out of the attention window" in text and "keeps only a summary of the faded text" in text
    assert "no longer sees" not in text
    assert f"{cfg.attention_layers} attention layers" in tip and f"{cfg.recurrent_layers} DeltaNet layers" in tip
    assert "still carry a summary of it" in tip
    assert view.widgets[0].memoryLabel.text() == "summary only (40 tokens)"
    assert "still carry a summary of it" in view.widgets[0].memoryLabel.toolTip()
    assert "still carry a summary of it" in view.widgets[1].memoryLabel.toolTip()  # the message cut

    view.set_hybrid(None)  # another model, whose layers all attend: the words as before
    assert view.boundary.text() == before and not view.boundary.toolTip()
    assert view.widgets[0].memoryLabel.text() == "out of view (40 tokens)"


# --------------------------------------------------------------------------- as a user, on a qwen35 file


def test_a_qwen35_chat_past_its_window_says_the_summary_everywhere(qtbot, tmp_path):
    """The tiny qwen35 file, a 64-token window, three exchanges: the gauge, the preview and the
    divider all say what the hybrid keeps, with the loaded plan's numbers."""
    from app import MainWindow
    from app.memory_gauge import fmt_bytes
    from tests.app.test_main_window import LOAD_TIMEOUT_MS, apply_and_wait, send, set_settings
    from tests.fixtures.family_gguf import write_family_gguf

    win = MainWindow(model_path=write_family_gguf(tmp_path / "qwen35.gguf", "qwen35"), data_dir=tmp_path / "data")
    win.show()
    try:
        qtbot.waitUntil(lambda: win.model_ready or bool(win.errors), timeout=LOAD_TIMEOUT_MS)
        assert win.model_ready, win.errors
        cfg = win.model_info.config
        assert cfg.recurrent_layers and cfg.attention_layers
        win.sampling_overrides = {"seed": 7, "ignore_eos": True}
        set_settings(win, max_tokens=16, temperature=0.8)
        _rebuilt, plan, _ = apply_and_wait(win, qtbot, window=64)
        assert plan.window == 64 and plan.state_bytes == cfg.state_bytes
        assert win.banner.isVisible()  # a short window, said when applied: what the summary keeps
        assert f"its {cfg.recurrent_layers} DeltaNet layers keep only a summary" in win.banner.label.text()
        for i in range(3):
            send(win, qtbot, f"message number {i} with a few more words in it")
        qtbot.waitUntil(lambda: win.chat.out_of_view > 0, timeout=10_000)
        assert "out of the attention window" in win.chat.boundary.text()
        assert f"{cfg.recurrent_layers} DeltaNet layers still carry a summary" in win.chat.boundary.toolTip()
        rows = {label: value for label, value, _tip in win.gauge.rows()}
        assert rows["Summary of the whole chat"] == f"{fmt_bytes(plan.state_bytes)}, fixed"
        assert rows["Left the window"].endswith("words, summarized")
        preview = win.settingsPanel.previewLabel.text()
        assert f"{cfg.recurrent_layers} layers keep a fixed <b>{fmt_bytes(plan.state_bytes)} summary</b>" in preview
        assert f"{cfg.attention_layers} attention layers see the last" in preview
    finally:
        win.shutdown()
        win.close()
        win.deleteLater()


def test_a_reply_that_starts_inside_the_thinking_block_its_template_opened_is_folded(qtbot):
    """Qwen3.5's generation prompt opens the <think> block, so its replies start inside it: the
    reasoning folds as a Qwen3 reply's does, once </think> has come."""
    import pathlib

    from app.chat_view import ChatMessage, ChatView
    from engine.chat_template import ChatTemplate

    source = (pathlib.Path(__file__).parent.parent / "fixtures" / "templates" / "qwen35.jinja").read_text()
    prompt = ChatTemplate(source).render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")  # the reply begins inside the block
    view = ChatView()
    qtbot.addWidget(view)
    content = "The user greets me.\nI should greet back briefly.\n</think>\n\nHello **there**."
    w = view.append(ChatMessage("assistant", content))
    text = w.body.toPlainText()
    assert "Thought for 9 words" in text and "Hello there." in text
    assert "greets" not in text and "</think>" not in text
    unfinished = view.append(ChatMessage("assistant", "Still thinking about it"))  # no </think> yet: as written
    assert unfinished.body.toPlainText().strip() == "Still thinking about it"
