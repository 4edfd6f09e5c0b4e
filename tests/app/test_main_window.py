"""The chat window end to end, with the real engine and the tiny random-weight test model.

One window (and one compiled model) is shared by the module; tests that need a fresh window
(restart, a broken model file) build their own on the same or a new data folder.
"""
from __future__ import annotations

import os
from pathlib import Path
import json
import threading
import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QByteArray, QPoint, QPointF, QTimer, QUrl, Qt  # noqa: E402
from PySide6.QtGui import QAction, QPalette, QTextDocument, QWheelEvent  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from app.store import ConversationStore, StoreError, default_db_path  # noqa: E402
from engine.budget import MIB, plan_memory  # noqa: E402
from app.conversation_list import WHEN_ROLE  # noqa: E402
from app.engine_events import Failed, PinChanged, PlanApplied, StatsReady  # noqa: E402
from engine.budget import MIN_WINDOW  # noqa: E402
from tests.app.engine_waits import expect, on, on_tokens  # noqa: E402

LOAD_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 60_000
NAMED = ("messageInput", "sendButton", "stopButton", "chatView", "memoryGauge", "windowSpin", "sinkSpin",
         "budgetSpin", "kvDtypeCombo", "systemPromptEdit", "conversationList")


def wait_until(pred, timeout_ms: int, what: str = "condition") -> None:
    """Spin the event loop until pred() (usable from module-scoped fixtures, unlike qtbot)."""
    app = QApplication.instance()
    deadline = time.monotonic() + timeout_ms / 1000
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.005)


def make_window(model_path, data_dir):
    from app import MainWindow

    win = MainWindow(model_path=model_path, data_dir=data_dir)
    win.show()
    return win


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pinwheel-data")


@pytest.fixture(scope="module")
def win(qapp, tiny_bpe_gguf, data_dir):
    w = make_window(tiny_bpe_gguf, data_dir)
    wait_until(lambda: w.model_ready or w.errors, LOAD_TIMEOUT_MS, "the model to load")
    assert w.model_ready, w.errors
    # random weights: make replies deterministic and long enough to stop / overflow
    w.sampling_overrides = {"seed": 7, "ignore_eos": True}
    set_settings(w, max_tokens=24, temperature=0.8)
    yield w
    w.shutdown()
    w.close()
    w.deleteLater()


def set_settings(win, **changes):
    """Change settings the way Apply would keep them (the panel shows what is in force)."""
    win.settings = win.settings.replace(**changes)
    win.settingsPanel.applied = win.settings
    win.settingsPanel.load(win.settings)


def send(win, qtbot, text: str, timeout_ms: int = REPLY_TIMEOUT_MS):
    """Type `text`, press Enter, wait for the reply to finish; returns the ReplyResult."""
    win.input.setFocus()
    win.input.setPlainText(text)
    with qtbot.waitSignal(win.replyFinished, timeout=timeout_ms) as blocker:
        qtbot.keyClick(win.input, Qt.Key.Key_Return)
    return blocker.args[0]


def idle(win, qtbot):
    qtbot.waitUntil(lambda: not win.generating, timeout=REPLY_TIMEOUT_MS)


def stored(data_dir, conversation_id):
    with ConversationStore(default_db_path(data_dir)) as st:
        return st.messages(conversation_id)


# --------------------------------------------------------------------------- structure


def test_named_accessible_widgets(win):
    for name in NAMED:
        w = win.findChild(QWidget, name)
        assert w is not None, name
        assert w.accessibleName(), f"{name} has no accessible name"


def test_keyboard_reaches_the_main_controls(win, qtbot):
    chain, w = [], win.sidebar.search
    for _ in range(400):
        chain.append(w.objectName())
        w = w.nextInFocusChain()
        if w is win.sidebar.search:
            break
    for name in ("conversationList", "chatView", "messageInput", "sendButton", "stopButton",
                 "memoryGauge", "kvDtypeCombo", "budgetSpin", "windowSpin", "sinkSpin", "systemPromptEdit"):
        assert name in chain, f"{name} is not in the tab chain"
    assert chain.index("messageInput") < chain.index("sendButton") < chain.index("stopButton")
    # input -> chat -> sidebar -> settings, the messages' own buttons right after the chat
    start = chain.index("messageInput")
    chain = chain[start:] + chain[:start]
    assert (chain.index("messageInput") < chain.index("chatView") < chain.index("conversationSearch")
            < chain.index("memoryGauge") < chain.index("kvDtypeCombo"))
    if win.chat.widgets:
        first_pin = win.chat.widgets[0].pinButton
        names = []
        w = win.chat
        for _ in range(40):
            w = w.nextInFocusChain()
            names.append(w)
        assert first_pin in names  # the first message's buttons come soon after the chat
    assert "sidePanel" not in chain or win.sidePanel.focusPolicy() == Qt.FocusPolicy.NoFocus


def test_shift_enter_breaks_the_line_enter_sends_when_idle(win, qtbot):
    idle(win, qtbot)
    win.input.setFocus()
    win.input.clear()
    qtbot.keyClicks(win.input, "one")
    qtbot.keyClick(win.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(win.input, "two")
    assert win.input.toPlainText() == "one\ntwo"
    assert not win.generating
    win.input.clear()


# --------------------------------------------------------------------------- chatting


def test_send_streams_a_reply_and_stores_it(win, qtbot, data_dir, monkeypatch):
    # The tiny model (with drafts verified 8 tokens at a time) can finish 24 tokens inside one
    # 30 Hz repaint; pace its steps like a real model's so streaming is observable.
    from engine.decoder import Decoder

    for name in ("feed", "verify"):
        real = getattr(Decoder, name)
        monkeypatch.setattr(Decoder, name, lambda self, *a, _real=real, **k: (time.sleep(0.02), _real(self, *a, **k))[1])
    lengths = []
    on_tokens(win.engine, lambda *_: lengths.append(len(win.chat.messages()[-1].content)))
    result = send(win, qtbot, "Hello, **world**!")
    msgs = win.chat.messages()
    assert [m.role for m in msgs[-2:]] == ["user", "assistant"]
    assert msgs[-2].content == "Hello, **world**!"
    assert result.reason == "max_tokens" and result.generated_tokens == 24
    assert msgs[-1].status == "done" and msgs[-1].content == result.reply
    # the text reached the screen while it was generated, in several steps, not at the end only
    assert len(set(lengths)) >= 2, lengths
    # the user message is rendered as Markdown (bold), not as literal asterisks
    body = win.chat.widgets[-2].body
    assert "**" not in body.toPlainText() and "world" in body.toPlainText()
    rows = stored(data_dir, win.current_id)
    assert [(r.role, r.status) for r in rows[-2:]] == [("user", "done"), ("assistant", "done")]
    assert rows[-1].content == result.reply
    assert win.current_id in win.sidebar.ids()
    assert "tok/s" in win.speedLabel.text() and "TTFT" in win.ttftLabel.text()
    assert win.cacheLabel.text().startswith("cache ")


def test_ttft_is_shown_when_the_first_token_comes(win, qtbot, monkeypatch):
    """The status line's TTFT is the wait just ended, shown as the reply starts, not at its end."""
    seen = []
    first, finished = win.view.first_token, win.view.reply_finished
    monkeypatch.setattr(win.view, "first_token",
                        lambda t: (first(t), seen.append(("first", win.generating, win.ttftLabel.text()))))
    monkeypatch.setattr(win.view, "reply_finished",
                        lambda r, st: (seen.append(("end", r.ttft_s)), finished(r, st)))
    result = send(win, qtbot, "Hi there")
    assert [k for k, *_ in seen] == ["first", "end"], seen
    assert seen[0][1] is True  # (while the reply was still being written)
    assert seen[0][2] == f"TTFT {result.ttft_s * 1000:.0f} ms" == win.ttftLabel.text()


def test_stop_mid_reply_keeps_the_text_marked_stopped(win, qtbot, data_dir):
    idle(win, qtbot)
    set_settings(win, max_tokens=100_000)
    try:
        win.input.setPlainText("Tell me a very long story")
        qtbot.mouseClick(win.sendButton, Qt.MouseButton.LeftButton)
        assert win.stopButton.isEnabled()
        qtbot.waitUntil(lambda: len(win.chat.messages()[-1].content) > 20, timeout=REPLY_TIMEOUT_MS)
        with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
            qtbot.keyClick(win.input, Qt.Key.Key_Escape)
    finally:
        set_settings(win, max_tokens=24)
    result = blocker.args[0]
    assert result.reason == "cancelled"
    last = win.chat.messages()[-1]
    assert last.status == "stopped" and last.content
    assert "stopped" in win.chat.widgets[-1].badge.text()
    row = stored(data_dir, win.current_id)[-1]
    assert row.status == "stopped" and row.content == last.content
    assert not win.stopButton.isEnabled() and win.sendButton.isEnabled()


def test_regenerate_and_edit_last_message(win, qtbot, data_dir):
    idle(win, qtbot)
    send(win, qtbot, "first question")
    n = len(win.chat.messages())
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS):
        qtbot.mouseClick(win.regenButton, Qt.MouseButton.LeftButton)
    msgs = win.chat.messages()
    assert len(msgs) == n and msgs[-1].role == "assistant" and msgs[-1].status == "done"
    # edit-and-resend: every user message has an Edit button (issue 23: an edit forks there)
    edit_buttons = [w.editButton.isVisibleTo(win) for w in win.chat.widgets]
    assert edit_buttons == [w.message.role == "user" for w in win.chat.widgets] and edit_buttons[n - 2]
    qtbot.mouseClick(win.chat.widgets[n - 2].editButton, Qt.MouseButton.LeftButton)
    assert win.input.toPlainText() == "first question"
    win.input.setPlainText("second version")
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(win.input, Qt.Key.Key_Return)
    msgs = win.chat.messages()
    assert len(msgs) == n and msgs[-2].content == "second version" and msgs[-2].role == "user"
    rows = stored(data_dir, win.current_id)
    assert [r.content for r in rows] == [m.content for m in msgs]
    # Copy puts the message's Markdown on the clipboard
    qtbot.mouseClick(win.chat.widgets[-2].copyButton, Qt.MouseButton.LeftButton)
    assert QApplication.clipboard().text() == "second version"


def test_gauge_updates_during_generation(win, qtbot):
    idle(win, qtbot)
    seen = []
    on(win.engine, StatsReady, lambda ev: seen.append((win.generating, ev.snapshot.stats.tokens_seen)))
    before = win.gauge.updates
    set_settings(win, max_tokens=100_000)
    try:
        win.input.setPlainText("count the tokens")
        win.send()
        qtbot.wait(1500)
        with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS):
            win.stop()
    finally:
        set_settings(win, max_tokens=24)
    during = [t for gen, t in seen if gen]
    assert len(during) >= 5, seen  # several updates a second while the reply was written
    assert during == sorted(during) and during[-1] > during[0]
    assert win.gauge.updates - before >= len(during)
    v = win.gauge.values
    plan = win.settingsPanel.applied_plan
    assert v.kv_bytes == plan.kv_bytes and v.capacity == plan.capacity
    assert v.rss_bytes and v.rss_bytes > 0 and v.weight_bytes and v.weight_bytes > 0
    assert len(win.gauge.history) >= 2
    assert "KV cache" in win.gauge.accessibleDescription()


def test_preview_equals_plan_memory(win, qtbot):
    panel = win.settingsPanel
    cfg = win.model_info.config
    try:
        panel.budgetPresetCombo.setCurrentIndex(panel.budgetPresetCombo.findData("custom"))
        for dtype, mib, window, sinks in (("int8", 11.5, 0, 4), ("bf16", 2.0, 100, 8), ("f32", 0.5, 0, 0),
                                          ("int8", 1.0, 64, 12)):
            panel.kvDtypeCombo.setCurrentIndex(panel.kvDtypeCombo.findData(dtype))
            panel.budgetSpin.setValue(mib)
            panel.sinkSpin.setValue(sinks)
            panel.windowSpin.setValue(window)
            want = plan_memory(cfg, kv_dtype=dtype, budget_bytes=int(round(mib * MIB)), window=window or None,
                               sinks=sinks)
            assert panel.preview_plan() == want
            text = panel.preview_text()
            for number in (want.capacity, want.sinks, want.window, want.bytes_per_position):
                assert f"{number:,}" in text, (number, text)
            # the window spin is capped by what the budget leaves after the sinks
            assert panel.windowSpin.maximum() == want.slots - want.sinks
        # auto sinks use the engine's count of the system prompt
        panel.sinkSpin.setValue(-1)
        assert panel.sinkSpin.text() == "auto (system prompt)"
        qtbot.waitUntil(lambda: panel.auto_sinks() is not None, timeout=10_000)
        assert panel.preview_plan().sinks == panel.auto_sinks()
        # sinks are capped so that the session's minimum window remains
        assert panel.sinkSpin.maximum() == panel.preview_plan().slots - MIN_WINDOW
    finally:
        panel.load(win.settings)
    assert panel.current() == win.settings  # Revert/load shows the applied settings again


def apply_and_wait(win, qtbot, **changes):
    panel = win.settingsPanel
    if "window" in changes:
        panel.windowSpin.setValue(changes["window"])
    if "kv_dtype" in changes:
        panel.kvDtypeCombo.setCurrentIndex(panel.kvDtypeCombo.findData(changes["kv_dtype"]))
    if "sinks" in changes:
        panel.sinkSpin.setValue(changes["sinks"])
    with expect(qtbot, win.engine, PlanApplied, REPLY_TIMEOUT_MS) as got:
        qtbot.mouseClick(panel.applyButton, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.applyStatus.text() != "Applying…", timeout=5000)
    return got[0].rebuilt, got[0].plan, got[0].note


def test_twenty_applies_in_the_window_give_their_memory_back(win, qtbot):
    """Issue 13 (9): every Apply added 20-50 MB in the window. Twenty Applies cycling windows and
    KV types, clicked in the settings panel, end within 10 MB of the first."""
    from engine.sysmem import rss_bytes, trim

    idle(win, qtbot)
    first = win.settings
    cycle = [(96, "int8"), (128, "bf16"), (160, "f32"), (112, "int8"), (144, "bf16"), (96, "f32")]
    rss = []
    try:
        for i in range(20):
            window, kv = cycle[i % len(cycle)]
            apply_and_wait(win, qtbot, window=window, kv_dtype=kv)
            qtbot.wait(20)
            trim()
            rss.append(rss_bytes())
    finally:
        win.settingsPanel.load(first)
        apply_and_wait(win, qtbot, window=first.window or 0, kv_dtype=first.kv_dtype)
    early, late = sorted(rss[:3])[1], sorted(rss[-3:])[1]  # medians of three: the allocator jitters
    assert late - early <= 10e6, [round((x - early) / 1e6, 1) for x in rss]


def test_budget_presets_auto_and_needle(win, qtbot):
    """Issue 21: the default budget is auto (sized to the model, shown greyed), Needle 2's 11.5 MiB
    is one preset away, and the preview says which rule chose the budget."""
    panel = win.settingsPanel
    combo = panel.budgetPresetCombo
    try:
        assert combo.currentData() == "auto" and not panel.budgetSpin.isEnabled()
        assert panel.current().kv_budget_mib == 0.0 and "Budget: auto: the trained context, 512 tokens" in panel.preview_text()
        assert panel.budgetSpin.value() == pytest.approx(panel.preview_plan().budget_bytes / MIB, abs=0.05)
        combo.setCurrentIndex(combo.findData("needle"))
        assert panel.current().kv_budget_mib == 11.5 and "Budget: 11.5 MiB (Needle 2)" in panel.preview_text()
        combo.setCurrentIndex(combo.findData("custom"))
        assert panel.budgetSpin.isEnabled()
        panel.budgetSpin.setValue(3.0)
        assert panel.current().kv_budget_mib == 3.0 and "Budget: set: 3 MiB" in panel.preview_text()
        panel.load(win.settings.replace(kv_budget_mib=11.5))
        assert combo.currentData() == "needle"
    finally:
        panel.load(win.settings)


def test_a_short_window_is_said_when_applied_with_a_way_back_to_auto(win, qtbot):
    """Issue 21: fewer than 1,024 tokens is said in plain words when the setting is applied, not only
    in the preview, with one click back to the auto budget."""
    idle(win, qtbot)
    first = win.settings
    try:
        apply_and_wait(win, qtbot, window=96)
        assert win.banner.isVisible() and "only the last 96 tokens" in win.banner.label.text()
        assert "forget" in win.banner.label.text() and win.banner.action.text() == "Use Auto memory"
        with expect(qtbot, win.engine, PlanApplied, REPLY_TIMEOUT_MS) as got:
            qtbot.mouseClick(win.banner.action, Qt.MouseButton.LeftButton)
        assert got[0].plan.capacity == win.model_info.config.context_length  # auto: all 512 it was trained on
        assert not win.banner.isVisible() and win.settings.window == 0 and win.settings.kv_budget_mib == 0.0
    finally:
        win.settingsPanel.load(first)
        apply_and_wait(win, qtbot, window=first.window or 0)


def test_apply_rebuilds_only_when_needed_and_says_so(win, qtbot, data_dir):
    idle(win, qtbot)
    rebuilt, plan, _ = apply_and_wait(win, qtbot, window=96)
    assert rebuilt and plan.window == 96
    said = win.settingsPanel.applyStatus.text()
    assert "rebuilt" in said.lower()
    # in plain words, as the preview says it ("slots", "sinks" are the Details view's terms)
    assert "~72 words of recent text" in said and "slot" not in said and "sink" not in said, said
    assert win.settings.window == 96
    assert json.loads((data_dir / "settings.json").read_text())["window"] == 96
    rebuilt, plan2, _ = apply_and_wait(win, qtbot)  # nothing changed
    assert not rebuilt and plan2 == plan
    assert "without rebuilding" in win.settingsPanel.applyStatus.text()


def test_a_sampling_change_is_used_by_the_next_reply_without_apply(win, qtbot, data_dir):
    """Max reply tokens set to 5, then Send: the reply is 5 tokens long, and the setting is
    saved. (Sampling sat under an Apply button placed with the memory settings: a user who set
    16 tokens and sent got 512, and the panel said nothing.) Revert does not take it back."""
    idle(win, qtbot)
    panel = win.settingsPanel
    before = panel.maxTokensSpin.value()
    try:
        panel.maxTokensSpin.setValue(5)
        qtbot.waitUntil(lambda: win.settings.max_tokens == 5, timeout=3000)
        assert json.loads((data_dir / "settings.json").read_text())["max_tokens"] == 5
        assert "next reply" in win.stageLabel.text()
        qtbot.mouseClick(panel.revertButton, Qt.MouseButton.LeftButton)
        assert panel.maxTokensSpin.value() == 5
        result = send(win, qtbot, "Count to twenty, please.")
        assert result.generated_tokens == 5 and result.reason == "max_tokens"
        panel.maxTokensSpin.setValue(6)  # and the open chat's settings (what its export names) follow
        qtbot.waitUntil(lambda: win.settings.max_tokens == 6, timeout=3000)
        with ConversationStore(default_db_path(data_dir)) as st:
            assert st.get_conversation(win.current_id).settings["max_tokens"] == 6
    finally:
        panel.maxTokensSpin.setValue(before)
        qtbot.waitUntil(lambda: win.settings.max_tokens == before, timeout=3000)


def test_evicted_messages_fade_with_a_boundary_marker(win, qtbot):
    idle(win, qtbot)
    win.new_conversation()
    apply_and_wait(win, qtbot, window=48)
    for i in range(4):
        send(win, qtbot, f"message number {i} with a few words")
    qtbot.waitUntil(lambda: win.chat.widgets[0].faded, timeout=10_000)
    faded = [w.faded for w in win.chat.widgets]
    assert faded[0] and not faded[-1]
    assert faded == sorted(faded, reverse=True)  # a faded prefix, then what the model sees
    assert win.chat.out_of_view > 0
    assert f"{win.chat.out_of_view:,} tokens out of view" in win.chat.boundary.text()
    assert win.chat.boundary.isVisible()
    first_seen = win.chat.boundary_index()
    assert first_seen is not None and all(faded[:first_seen]) and not any(faded[first_seen + 1:])
    stats = win.last_stats.stats
    assert stats.evicted_tokens > 0 and stats.cache_tokens <= stats.capacity
    text = QPalette.ColorRole.Text
    assert win.chat.widgets[0].body.views[0].palette().color(text) != \
        win.chat.widgets[-1].body.views[0].palette().color(text)
    assert "out of view" in win.chat.widgets[0].memoryLabel.text()


def test_pin_and_unpin_a_message(win, qtbot, data_dir):
    idle(win, qtbot)
    if not win.chat.widgets or not win.chat.widgets[0].faded:
        test_evicted_messages_fade_with_a_boundary_marker(win, qtbot)
    w0 = win.chat.widgets[0]
    sinks_before = win.last_stats.stats.sink_tokens
    tokens = next(m.tokens for m in win.last_stats.stats.messages if m.index == 0)
    qtbot.mouseClick(w0.pinButton, Qt.MouseButton.LeftButton)
    assert win.pinBar.isVisibleTo(win)  # the cost is previewed first; nothing changed yet
    assert not win.chat.messages()[0].pinned
    preview = win.pinBar.label.text()
    assert f"Sinks {sinks_before:,} → {sinks_before + tokens:,}" in preview, preview
    with expect(qtbot, win.engine, PinChanged, REPLY_TIMEOUT_MS):
        qtbot.mouseClick(win.pinBar.ok, Qt.MouseButton.LeftButton)
        said = win.stageLabel.text()  # at once, before the engine has re-read the chat
    assert said.startswith("Pinning ") and "reading the conversation again" in said, said

    def pinned_in_sinks():
        st = win.last_stats.stats
        pinned = sum(m.tokens for m in st.messages if m.pinned)
        system = sum(m.tokens for m in st.messages if m.index < 0)
        return pinned > 0 and st.sink_tokens == system + pinned > sinks_before

    # the message's tokens joined the sinks (re-encoded, so counted afresh), the window shrank
    qtbot.waitUntil(pinned_in_sinks, timeout=10_000)
    assert win.last_stats.stats.sink_tokens == sinks_before + tokens  # as the preview promised
    assert win.last_stats.stats.window < win.last_stats.stats.capacity - sinks_before
    # nothing was edited: the settings preview says the cache is as it is (it said "differs")
    qtbot.waitUntil(lambda: "same as the current cache" in win.settingsPanel.preview_text(), timeout=5000)
    assert win.chat.messages()[0].pinned and not win.chat.widgets[0].faded
    label = win.chat.widgets[0].memoryLabel
    assert "pinned" in label.text() and "sinks" not in label.text() and "attention sinks" in label.toolTip()
    assert stored(data_dir, win.current_id)[0].pinned
    # unpin (from the right-click menu this time) gives the space back
    menu = win.chat.widgets[0].context_menu()
    unpin = next(a for a in menu.actions() if a.text() == "Unpin")
    unpin.trigger()
    assert "Unpin" in win.pinBar.ok.text()
    with expect(qtbot, win.engine, PinChanged, REPLY_TIMEOUT_MS):
        qtbot.mouseClick(win.pinBar.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.last_stats.stats.sink_tokens == sinks_before, timeout=10_000)
    assert not win.chat.messages()[0].pinned and not stored(data_dir, win.current_id)[0].pinned


def test_a_refused_setting_leaves_the_working_one_in_force(win, qtbot, monkeypatch, data_dir):
    idle(win, qtbot)
    from engine.errors import SettingsError

    before = win.settings
    saved = (data_dir / "settings.json").read_text()

    def refuse(*a, **k):
        raise SettingsError("that window does not fit: at most 100 tokens")

    monkeypatch.setattr(win.engine.worker.session, "apply_plan", refuse)
    panel = win.settingsPanel
    panel.windowSpin.setValue(before.window + 32 if before.window else 64)
    with expect(qtbot, win.engine, Failed, REPLY_TIMEOUT_MS):
        qtbot.mouseClick(panel.applyButton, Qt.MouseButton.LeftButton)
    assert "Not applied" in panel.applyStatus.text() and "at most 100 tokens" in panel.applyStatus.text()
    assert win.settings == before and (data_dir / "settings.json").read_text() == saved
    assert "at most 100 tokens" in win.banner.label.text()
    win.banner.hide()
    monkeypatch.undo()
    panel.load(win.settings)


@pytest.mark.parametrize("where", ["before the turn", "while the prompt is read"])
def test_stop_before_the_first_token_keeps_the_question_for_regenerate(win, qtbot, data_dir, monkeypatch, where):
    idle(win, qtbot)
    n = len(win.chat.messages())
    # Hold the engine thread until the Stop below is in, so that it certainly comes before any
    # token (a bare send(); stop() raced the engine, which often answered first).
    worker = win.engine.worker
    entered, release = threading.Event(), threading.Event()

    def hold():
        entered.set()
        release.wait(REPLY_TIMEOUT_MS / 1000)  # (never for ever: a failed test must not hang the thread)

    if where == "before the turn":  # the worker's generate() asks _cancelled(request) before the stream
        cancelled = worker._cancelled

        def held(request):
            hold()
            return cancelled(request)

        monkeypatch.setattr(worker, "_cancelled", held)
    else:  # the session's stream began (clearing its stop flag), read the prompt and sent its first event
        stream = worker.session.stream

        def held_stream(text, **overrides):
            events = stream(text, **overrides)
            first = next(events)
            hold()
            yield first
            yield from events

        monkeypatch.setattr(worker.session, "stream", held_stream)
    win.input.setPlainText("a question stopped at once")
    try:
        with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
            win.send()
            qtbot.waitUntil(entered.is_set, timeout=REPLY_TIMEOUT_MS)  # the engine is on this turn...
            win.stop()  # ...and Stop comes before it has written a token
            release.set()
    finally:
        release.set()
    monkeypatch.undo()  # the Regenerate below is a real, unheld reply
    assert blocker.args[0].reason == "cancelled" and blocker.args[0].reply == ""
    msgs = win.chat.messages()
    assert len(msgs) == n + 1 and msgs[-1].role == "user"  # no empty reply bubble
    assert [r.role for r in stored(data_dir, win.current_id)][-1] == "user"
    assert win.regenButton.isEnabled()
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(win.regenButton, Qt.MouseButton.LeftButton)
    assert blocker.args[0].reason == "max_tokens"
    msgs = win.chat.messages()
    assert [m.role for m in msgs[-2:]] == ["user", "assistant"] and msgs[-1].content
    assert win.engine.worker._roles() == tuple(m.role for m in msgs)  # engine and window in step


# --------------------------------------------------------------------------- conversations


def test_conversation_list_rename_search_export_delete(win, qtbot, tmp_path, data_dir):
    idle(win, qtbot)
    cid = win.current_id
    assert cid is not None
    # rename in place (F2 edits the item; the edit is saved)
    item = win.sidebar.list.item(win.sidebar.ids().index(cid))
    item.setText("Renamed   chat ")
    qtbot.waitUntil(lambda: "Renamed chat" in win.sidebar.titles(), timeout=5000)
    with ConversationStore(default_db_path(data_dir)) as st:
        assert st.get_conversation(cid).title == "Renamed chat"
    win.sidebar.search.setText("number 2 with")
    qtbot.waitUntil(lambda: win.sidebar.ids() == [cid], timeout=5000)
    win.sidebar.search.setText("no conversation says this")
    qtbot.waitUntil(lambda: win.sidebar.ids() == [], timeout=5000)
    win.sidebar.search.clear()
    qtbot.waitUntil(lambda: cid in win.sidebar.ids(), timeout=5000)
    md = win.export_conversation(cid, "markdown", str(tmp_path / "chat.md"))
    text = open(md, encoding="utf-8").read()
    assert text.startswith("# Renamed chat") and "message number 2" in text
    js = json.loads(open(win.export_conversation(cid, "json", str(tmp_path / "chat.json"))).read())
    assert js["title"] == "Renamed chat" and js["settings"]["window"] == 48 and "plan" in js["settings"]
    # a new chat (Ctrl+N), then delete it
    qtbot.keyClick(win, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert win.current_id is None and not win.chat.messages() and win.input.hasFocus()
    send(win, qtbot, "a throwaway chat")
    tmp_id = win.current_id
    assert tmp_id != cid and tmp_id in win.sidebar.ids()
    win.delete_conversation(tmp_id, confirm=False)
    assert tmp_id not in win.sidebar.ids() and win.current_id is None and not win.chat.messages()
    win.sidebar.list.setCurrentRow(win.sidebar.ids().index(cid))
    qtbot.waitUntil(lambda: win.current_id == cid and len(win.chat.messages()) >= 8, timeout=5000)


def test_conversations_survive_a_restart(win, qtbot, tiny_bpe_gguf, data_dir):
    idle(win, qtbot)
    before = {c: [(m.role, m.content, m.status, m.pinned) for m in stored(data_dir, c)]
              for c in win.sidebar.ids()}
    assert any(st == "stopped" for msgs in before.values() for _, _, st, _ in msgs)
    second = make_window(tiny_bpe_gguf, data_dir)
    try:
        assert sorted(second.sidebar.ids()) == sorted(before)
        # the chat it reopened is the one highlighted in the list, and named in the title
        assert second.current_id is not None and second.sidebar.current_id() == second.current_id
        assert second.windowTitle().endswith("— Pinwheel") and second.windowTitle() != "New chat — Pinwheel"
        for cid, msgs in before.items():
            second.open_conversation(cid)
            shown = [(m.role, m.content, m.status, m.pinned) for m in second.chat.messages()]
            assert shown == msgs
        badges = [w.badge.text() for w in second.chat.widgets]
        assert second.chat.messages() and len(badges) == len(second.chat.messages())
        assert second.settings.window == win.settings.window  # settings persisted too
    finally:
        second.shutdown()
        second.close()
        second.deleteLater()


# --------------------------------------------------------------------------- errors


def test_broken_model_file_shows_a_message_and_the_window_stays_up(qtbot, tmp_path, tiny_bpe_gguf):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(tiny_bpe_gguf.read_bytes()[:4096])  # truncated
    w = make_window(bad, tmp_path / "data")
    try:
        qtbot.waitUntil(lambda: bool(w.errors), timeout=LOAD_TIMEOUT_MS)
        kind, message = w.errors[-1]
        assert kind == "engine" and "\n" not in message and message
        assert w.banner.isVisible() and message in w.banner.label.text()
        assert not w.model_ready and not w.sendButton.isEnabled()
        assert w.isVisible()
        w.input.setPlainText("typing still works")
        assert w.input.toPlainText() == "typing still works"
    finally:
        w.shutdown()
        w.close()


def _fail_next_reply(win, exc):
    session = win.engine.worker.session
    original = session.stream

    def broken(*a, **k):
        session.stream = original
        raise exc
        yield  # noqa: unreachable - makes this a generator like the real one

    session.stream = broken


@pytest.mark.parametrize("exc,kind", [(RuntimeError("boom in the forward pass"), "Engine error"),
                                      (MemoryError(), "Out of memory")])
def test_engine_exception_shows_a_message_and_keeps_the_chat(win, qtbot, data_dir, exc, kind):
    idle(win, qtbot)
    n = len(win.chat.messages())
    _fail_next_reply(win, exc)
    result = send(win, qtbot, "this reply will fail")
    assert result.reason == "error"
    assert win.banner.isVisible() and kind in win.banner.label.text()
    msgs = win.chat.messages()
    assert len(msgs) == n + 2 and msgs[-2].content == "this reply will fail" and msgs[-1].status == "error"
    assert stored(data_dir, win.current_id)[-1].status == "interrupted"
    win.banner.hide()
    result = send(win, qtbot, "and this one works")  # the app and the engine carry on
    assert result.reason == "max_tokens" and win.chat.messages()[-1].status == "done"


def test_full_disk_shows_a_message_and_keeps_the_chat(win, qtbot, monkeypatch):
    idle(win, qtbot)

    def full(*a, **k):
        raise StoreError("The disk is full: couldn't finish saving a message; free some disk space.", kind="full")

    monkeypatch.setattr(win.store, "append_message", full)
    n = len(win.chat.messages())
    send(win, qtbot, "saved nowhere")
    assert "disk is full" in win.banner.label.text()
    assert len(win.chat.messages()) == n + 2 and win.chat.messages()[-1].content
    win.banner.hide()


# --------------------------------------------------------------------------- safety


def test_messages_never_fetch_and_links_open_only_on_click(win, qtbot, monkeypatch):
    from app import main_window
    from app.chat_view import ChatMessage

    opened = []
    monkeypatch.setattr(main_window.QDesktopServices, "openUrl", lambda url: opened.append(url.toString()))
    idle(win, qtbot)
    w = win.chat.append(ChatMessage("assistant", "![x](http://example.invalid/t.png) "
                                                 "<img src='http://example.invalid/i.png'> "
                                                 "[site](https://example.org) [local](file:///etc/passwd)"))
    body = w.body.views[0]
    assert not body.openLinks() and not body.openExternalLinks()
    image = QTextDocument.ResourceType.ImageResource.value
    assert body.loadResource(image, QUrl("http://example.invalid/t.png")).isEmpty()
    assert body.loadResource(image, QUrl("file:///etc/passwd")).isEmpty()
    # what the document asks for (the images in the message) comes back empty as well
    assert body.document().resource(image, QUrl("http://example.invalid/t.png")) in (None, b"", QByteArray())
    assert "<img" in body.toPlainText()  # raw HTML is shown as text, not interpreted
    assert opened == []
    body.anchorClicked.emit(QUrl("https://example.org"))
    body.anchorClicked.emit(QUrl("file:///etc/passwd"))
    assert opened == ["https://example.org"]
    win.chat.remove_from(len(win.chat.widgets) - 1)


def test_long_markdown_is_rendered_in_chunks_that_read_the_same(qapp):
    from app.markdown_view import CHUNK_CHARS, MarkdownStack, chunk_sources, split_markdown

    para = "Some **bold** words and `code` in a paragraph that goes on. " * 3 + "\n\n"
    fence = "```python\nfor i in range(3):\n\n    print(i)\n```\n\n"  # a blank line inside the fence
    text = (para + fence) * 120
    cuts = split_markdown(text)
    assert cuts and all(CHUNK_CHARS <= b - a <= 2 * CHUNK_CHARS for a, b in zip([0, *cuts], cuts))
    for c in cuts:  # at blank lines, never inside a code block
        assert text[:c].count("```") % 2 == 0 and text[c - 2:c] == "\n\n"
    streamed = MarkdownStack()
    for n in range(0, len(text) + 97, 97):
        streamed.stream_markdown(text[:n])
    assert streamed.markdown_text() == text and len(streamed.views) > 1
    whole = MarkdownStack()
    whole.set_markdown(text)
    assert whole.toPlainText().replace("\n", "") == streamed.toPlainText().replace("\n", "")
    for stack in (streamed, whole):  # every fenced block in a view of its own, streamed or not
        code = [v for v in stack.views if v.is_code()]
        assert len(code) == 120 and all(v.toPlainText().strip() == "for i in range(3):\n\n    print(i)" for v in code)
    short = MarkdownStack()
    short.set_markdown(para)
    assert len(short.views) == 1 and "**" not in short.toPlainText()
    # no blank line at all (one long code block, one endless line): still cut, blocks reopened
    code = "```js\n" + "let x = 1;\n" * 2000 + "```\n"
    cuts = split_markdown(code)
    assert cuts and all(b - a <= 2 * CHUNK_CHARS for a, b in zip([0, *cuts], [*cuts, len(code)]))
    sources = chunk_sources(code, [0, *cuts, len(code)])
    assert all(src.lstrip().startswith("```") and src.rstrip().endswith("```") for src in sources)
    line = "word " * 3000
    assert all(b - a <= 2 * CHUNK_CHARS for a, b in zip([0, *split_markdown(line)], split_markdown(line)))
    streamed = MarkdownStack()
    for n in range(0, len(code) + 301, 301):
        streamed.stream_markdown(code[:n])
    assert streamed.markdown_text() == code and len(streamed.views) > 1
    assert all("let x = 1;" in v.toPlainText() and "```" not in v.toPlainText() for v in streamed.views)


def test_a_reasoning_block_shows_folded_and_opens_on_click(win, qtbot, monkeypatch):
    """Qwen3's <think>…</think>: one quoted line with a show link; the click opens it in place
    (nothing leaves the window), a second click folds it again; the stored text is unchanged."""
    from app import main_window
    from app.chat_view import ChatMessage

    opened = []
    monkeypatch.setattr(main_window.QDesktopServices, "openUrl", lambda url: opened.append(url.toString()))
    idle(win, qtbot)
    content = "<think>\nThe user greets me.\nI should greet back briefly.\n</think>\n\nHello **there**."
    w = win.chat.append(ChatMessage("assistant", content))
    text = w.body.toPlainText()
    assert "Thought for 9 words" in text and "Hello there." in text and "greets" not in text
    w.body.views[0].anchorClicked.emit(QUrl("pinwheel:thinking"))
    assert "The user greets me." in w.body.toPlainText() and "hide" in w.body.toPlainText()
    w.body.views[0].anchorClicked.emit(QUrl("pinwheel:thinking"))
    assert "greets" not in w.body.toPlainText()
    assert w.message.content == content and opened == []
    win.chat.remove_from(len(win.chat.widgets) - 1)


def test_preview_shows_the_local_and_global_split_of_a_sliding_window_model(qapp):
    """A Gemma 3 shape: the preview states both kinds of layers with their slots and bytes,
    and they add up to the plan's kv_bytes."""
    from app.memory_gauge import fmt_bytes
    from app.settings import AppSettings
    from app.settings_panel import SettingsPanel
    from engine.budget import layer_bytes_per_position
    from engine.config import GLOBAL, LOCAL, ModelConfig

    kinds = tuple(LOCAL if i % 6 < 5 else GLOBAL for i in range(26))
    cfg = ModelConfig("gemma3", 26, 1152, 4, 1, 256, 6912, 262144, 32768, layer_kinds=kinds, sliding_window=512)
    panel = SettingsPanel(AppSettings())
    panel.set_model_config(cfg)
    panel.sinkSpin.setValue(4)
    panel.refresh_preview()
    plan = panel.preview_plan()
    text = panel.preview_text()
    local = 22 * plan.local_slots * layer_bytes_per_position(cfg, plan.kv_dtype)
    assert f"4 global layers × {plan.capacity:,} slots ({fmt_bytes(plan.kv_bytes - local)})" in text, text
    assert f"22 sliding-window layers × {plan.local_slots:,} slots ({fmt_bytes(local)}; window 512)" in text, text
    assert "B/global slot" in text
    panel.deleteLater()


def test_a_bad_model_file_is_refused_and_the_working_model_keeps_serving(win, qtbot, tmp_path, data_dir):
    """Model → Open… a random file: one plain sentence, the old model answers the next message,
    the panel shows the file that serves, and Apply afterwards gets an answer (no hang)."""
    idle(win, qtbot)
    serving = win.model_path
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(os.urandom(1024))
    win.load_model(str(bad))
    qtbot.waitUntil(lambda: bool(win.errors) and win.model_ready, timeout=LOAD_TIMEOUT_MS)
    kind, message = win.errors[-1]
    assert "bad.gguf is not a GGUF model file" in message and "\\x" not in message and "\n" not in message
    assert win.model_path == serving and win.settingsPanel.modelEdit.text() == (serving or "")
    assert "Not applied" in win.settingsPanel.applyStatus.text()
    # a new chat's hint is the ready one, not the refused file's "Checking the model file…"
    assert win.chat.placeholder.text() == win.models._ready_text, win.chat.placeholder.text()
    win.banner.hide()
    result = send(win, qtbot, "still there?")
    assert result.reason == "max_tokens" and win.chat.messages()[-1].status == "done"


def test_weights_that_fail_after_the_checks_bring_the_previous_model_back(qtbot, tmp_path, tiny_bpe_gguf):
    """A file whose header and tensor table pass but whose data does not load: the previous
    model is loaded again and serves."""
    w = make_window(tiny_bpe_gguf, tmp_path / "data")
    try:
        qtbot.waitUntil(lambda: w.model_ready, timeout=LOAD_TIMEOUT_MS)
        worker = w.engine.worker
        real = worker._loader

        def flaky(path):
            if path and str(path).endswith("other.gguf"):
                raise MemoryError()
            return real(path)

        worker._loader, worker._checker = flaky, (lambda path: None)
        other = tmp_path / "other.gguf"
        other.write_bytes(tiny_bpe_gguf.read_bytes())
        w.load_model(str(other))
        qtbot.waitUntil(lambda: bool(w.errors), timeout=LOAD_TIMEOUT_MS)
        assert "Out of memory" in w.errors[-1][1] and "still using" in w.errors[-1][1]
        qtbot.waitUntil(lambda: w.model_ready and worker.session is not None, timeout=LOAD_TIMEOUT_MS)
        assert w.model_path == str(tiny_bpe_gguf)
    finally:
        w.shutdown()
        w.close()


def test_code_blocks_are_readable_while_streaming_and_long_lines_scroll_sideways(win, qtbot):
    """The code shading was blended from the streaming bubble's transparent base: solid black
    with dark text. And a code line wider than the window was cut off: now a code block is a
    view of its own whose lines stay whole and scroll sideways."""
    from app.chat_view import ChatMessage
    from app.theme import apply_theme

    idle(win, qtbot)
    apply_theme(QApplication.instance(), "light")  # with the packaged stylesheet, as the app runs
    w = win.chat.begin_stream(ChatMessage("assistant", "", status="streaming"))
    long_line = "print(" + ", ".join(f"value_{i}" for i in range(40)) + ")"
    w.message.content = "Here:\n\n```python\n" + long_line + "\n```\n"
    w.body.stream_markdown(w.display_text())
    qtbot.wait(50)
    assert [v.is_code() for v in w.body.views] == [False, True]  # "Here:" + label, then the code
    view = w.body.views[1]
    doc = view.document()
    block = doc.begin()
    while block.isValid() and "value_0" not in block.text():
        block = block.next()
    assert block.isValid()
    bg = block.blockFormat().background().color()
    assert bg.alpha() == 255 and bg.lightness() > 128 or win.palette().color(win.backgroundRole()).lightness() < 128, bg.name()
    text_color = view.palette().color(view.foregroundRole())
    assert abs(bg.lightness() - text_color.lightness()) > 100  # text readable on it
    assert block.layout().lineCount() == 1 and doc.idealWidth() > view.viewport().width()  # kept whole
    bar = view.horizontalScrollBar()
    assert bar.isVisible() and bar.maximum() > 0  # ...and reachable: it scrolls sideways
    assert view.height() >= doc.size().height() + bar.height() - 1  # the bar hides no line
    assert bar.value() == 0  # it opens at the start of its lines
    pos = QPointF(view.viewport().rect().center())

    def wheel(delta, mods=Qt.KeyboardModifier.NoModifier):
        ev = QWheelEvent(pos, view.viewport().mapToGlobal(pos), QPoint(), delta, Qt.MouseButton.NoButton, mods,
                         Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(view.viewport(), ev)
        return ev.isAccepted()

    assert not wheel(QPoint(0, -120)) and bar.value() == 0  # a plain wheel turn scrolls the chat
    assert wheel(QPoint(0, -120), Qt.KeyboardModifier.ShiftModifier) and bar.value() > 0  # Shift: sideways
    bar.setValue(bar.maximum())
    assert view.cursorForPosition(view.viewport().rect().center()).block().text() == long_line
    short = "Short:\n\n```\nx = 1\n```\n"
    w.message.content = short  # a block that fits has no bar
    w.body.stream_markdown(w.display_text())
    qtbot.wait(20)
    assert not w.body.views[1].horizontalScrollBar().isVisible()
    w.message.content = "Here:\n\n```python\n" + long_line + "\n```\n"
    w.body.stream_markdown(w.display_text())
    qtbot.wait(20)
    view = w.body.views[1]
    block = view.document().begin()
    while block.isValid() and "value_0" not in block.text():
        block = block.next()
    apply_theme(QApplication.instance(), "dark")  # and in dark: re-shaded, dark, still readable
    qtbot.wait(20)

    def link_colour(v):
        block = v.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                if it.fragment().charFormat().isAnchor():
                    return it.fragment().charFormat().foreground().color().name()
                it += 1
            block = block.next()

    # the label's Copy link takes the dark theme's light blue (Qt writes it into the text)
    assert link_colour(w.body.views[0]) == QApplication.palette().color(QPalette.ColorRole.Link).name() == "#6fa8ff"
    bg = block.blockFormat().background().color()
    assert bg.lightness() < 100 and QApplication.palette().color(QPalette.ColorRole.Text).lightness() > 180
    apply_theme(QApplication.instance(), "system")
    win.chat.end_stream("done")
    win.chat.remove_from(len(win.chat.messages()) - 1)


def test_at_800x600_the_chat_keeps_60_percent_and_panels_come_back_on_a_wide_screen(win, qtbot):
    idle(win, qtbot)
    before = win.size()
    try:
        win.resize(800, 600)
        qtbot.wait(50)
        assert win.centralWidget().widget(1).width() >= 0.6 * win.width()  # the chat column
        for w in (win.input, win.sendButton):
            assert w.isVisible() and w.visibleRegion().boundingRect().width() >= min(w.width(), 40)
        assert not win.sidePanel.isVisible() and not win.sidePanelAction.isChecked()
        win.sidePanelAction.trigger()  # asked for: it shows even here
        qtbot.wait(20)
        assert win.sidePanel.isVisible()
        win.sidePanelAction.trigger()
        assert not win.sidePanel.isVisible() and win.ui_state.show_side_panel is False
        win.set_panel("side", True)  # the user's wish is remembered...
        assert win.ui_state.show_side_panel is True
        win.resize(1920, 1080)
        qtbot.wait(50)
        assert win.sidePanel.isVisible() and win.sidebar.isVisible()
        # ...and on a wide screen the message column keeps a reading width
        m = win.chat._layout.contentsMargins()
        assert win.chat.viewport().width() - m.left() - m.right() <= 920 + 1
    finally:
        win.resize(before)


def test_menus_and_shortcuts(win, qtbot, monkeypatch):
    idle(win, qtbot)
    keys = {a.objectName(): a.shortcut().toString() for a in win.findChildren(QAction) if a.objectName()}
    assert keys["quitAction"] == "Ctrl+Q" and keys["newChatAction"] == "Ctrl+N"
    assert keys["searchAction"] == "Ctrl+F" and keys["settingsAction"] == "Ctrl+,"
    assert keys["shortcutsAction"] == "Ctrl+/"
    win.resize(1400, 900)
    qtbot.wait(20)
    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5000)
    win.input.setFocus()
    qtbot.keyClick(win.input, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)  # a real key press
    qtbot.waitUntil(lambda: win.sidebar.search.hasFocus(), timeout=2000)
    win.set_panel("conversations", False)
    qtbot.keyClick(win.input, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
    assert win.sidebar.isVisible() and win.ui_state.show_conversations
    listed = dict((t, k) for k, t in win.shortcut_list())
    assert listed["Quit"] == "Ctrl+Q" and "Stop the reply" in listed
    shown = []
    monkeypatch.setattr(main_window_module().QMessageBox, "information", lambda *a: shown.append(a[2]))
    win.shortcutsAction.trigger()
    assert shown and "Ctrl+Q" in shown[0] and "Search conversations" in shown[0]


def main_window_module():
    from app import main_window

    return main_window


def test_theme_menu_switches_the_palette_and_is_kept(win, qtbot, data_dir):
    from PySide6.QtWidgets import QApplication

    from app.settings import load_settings

    idle(win, qtbot)
    app = QApplication.instance()
    try:
        win.themeActions["dark"].trigger()
        assert app.palette().color(QPalette.ColorRole.Window).lightness() < 100
        assert app.palette().color(QPalette.ColorRole.Text).lightness() > 180
        assert load_settings(win.settings_path)[0].theme == "dark"
        win.themeActions["light"].trigger()
        assert app.palette().color(QPalette.ColorRole.Window).lightness() > 180
    finally:
        win.themeActions["system"].trigger()
    assert win.settings.theme == "system"


def test_the_window_modules_do_not_import_jax():
    """The GUI thread never imports JAX (seconds of start-up, and its threads): the constants the
    window needs live in engine.budget; the engine is imported in the engine thread only."""
    import subprocess
    import sys as _sys

    code = "import sys, app.main_window, app.gui; print('jax' in sys.modules, 'engine.session' in sys.modules)"
    r = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, QT_QPA_PLATFORM="offscreen"), cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout.split() == ["False", "False"], r.stdout


def test_sidebar_elides_dates_says_no_matches_and_names_a_new_chat(win, qtbot):
    idle(win, qtbot)
    side = win.sidebar
    long_title = "A very long conversation title that keeps going and going " * 3
    conv = win.store.create_conversation(long_title.strip(), {})
    try:
        win.refresh_conversations()
        k = side.ids().index(conv.id)
        item = side.list.item(k)
        assert item.data(WHEN_ROLE).startswith("today ")  # a date under each title
        assert side.list.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        side.search.setText("zzz-nothing-like-this")
        qtbot.waitUntil(lambda: side.list.count() == 1 and not side.ids(), timeout=3000)
        assert "No matches" in side.list.item(0).text()
        side.search.clear()
        qtbot.waitUntil(lambda: conv.id in side.ids(), timeout=3000)
        win.new_conversation()
        assert win.windowTitle() == "New chat — Pinwheel"
    finally:
        win.delete_conversation(conv.id, confirm=False)


def test_a_thousand_message_conversation_opens_fast_and_builds_older_ones_on_demand(qapp, qtbot):
    from app.chat_view import BUILT_TAIL, ChatMessage, ChatView

    view = ChatView()
    view.resize(800, 600)
    view.show()
    msgs = [ChatMessage("user" if i % 2 == 0 else "assistant", f"Message number {i}. " + "Some **markdown**. " * 8)
            for i in range(1000)]
    t0 = time.perf_counter()
    view.set_messages(msgs)
    qapp.processEvents()
    opened = time.perf_counter() - t0
    assert opened < 1.0, opened  # ~1.8 s when every message was built at once
    assert len(view.widgets) == BUILT_TAIL and view.offset == 1000 - BUILT_TAIL
    assert view.messages() == msgs and view.earlierButton.isVisible()
    assert view.widgets[0].message is msgs[view.offset]
    # an index is a message's place in the whole conversation, built or not
    pinned = []
    view.pinRequested.connect(lambda i, on: pinned.append(i))
    view.widgets[3].pinClicked.emit(view.widgets[3], True)
    assert pinned == [view.offset + 3]
    # scrolling to the top builds the next batch above, keeping the reader's place
    top = view.widgets[0]
    view.verticalScrollBar().setValue(0)
    qtbot.waitUntil(lambda: view.offset < 1000 - BUILT_TAIL, timeout=3000)
    assert top in view.widgets and view.widgets.index(top) > 0
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() > 0 and 0 <= top.y() - bar.value() < 100, timeout=3000)  # still in view
    assert view.messages() == msgs
    # removing from a message not built yet builds what it needs first
    view.remove_from(10)
    assert view.messages() == msgs[:10] and view.offset <= 10
    view.deleteLater()


def test_advanced_sampling_is_folded_away_until_asked_for(win, qtbot):
    panel = win.settingsPanel
    assert not panel.advancedBox.isVisibleTo(panel) and panel.temperatureSpin.isVisibleTo(panel)
    qtbot.mouseClick(panel.advancedToggle, Qt.MouseButton.LeftButton)
    assert panel.advancedBox.isVisibleTo(panel) and panel.topKSpin.isVisibleTo(panel)
    qtbot.mouseClick(panel.advancedToggle, Qt.MouseButton.LeftButton)
    assert not panel.topKSpin.isVisibleTo(panel)


def test_only_real_fenced_blocks_get_a_code_view(qapp):
    """A code view per block, by CommonMark's fence rule: a fence at a line's start, closed by
    the same character at least as long; ```` around ``` and ~~~ around ``` stay one block, and
    a fence inside a list item stays in its text."""
    from app.markdown_view import MarkdownStack, label_code_blocks

    def views(text):
        st = MarkdownStack()
        st.set_markdown(text)
        return [(v.is_code(), v.toPlainText().strip()) for v in st.views]

    assert views("````md\n```py\nx = 1\n```\n````\nafter") == [(True, "```py\nx = 1\n```"), (False, "after")]
    assert views("~~~\n```\nx\n```\n~~~\n") == [(True, "```\nx\n```")]
    listed = views("- ```sh\n  make\n  ```\n- then run it\n\nMore text")
    assert len(listed) == 1 and not listed[0][0] and "More text" in listed[0][1]
    assert views("Hi\n\n```python\nx = 1\n") == [(False, "Hi"), (True, "x = 1")]  # still streaming
    # the labels follow the same rule: one per block, inside its list item, Copy without the indent
    text, code = label_code_blocks("1. Build:\n   ```sh\n   make all\n   ```\n````md\n```py\nx = 1\n```\n````\n")
    assert code == ["make all", "```py\nx = 1\n```"]
    assert "\n   *sh* · [Copy](pinwheel:copy-code/0)\n   ```sh" in text and text.count("[Copy]") == 2


def test_code_blocks_show_their_language_and_copy_just_their_code(win, qtbot):
    from app.chat_view import ChatMessage

    idle(win, qtbot)
    content = "Two ways:\n\n```python\ndef f(s):\n    return s[::-1]\n```\n\nand\n\n```\nrev <<< \"$s\"\n```\n"
    w = win.chat.append(ChatMessage("assistant", content))
    text = w.body.toPlainText()
    assert "python · Copy" in text and "code · Copy" in text
    copied = []
    w.codeCopied.connect(copied.append)
    w.body.views[0].anchorClicked.emit(QUrl("pinwheel:copy-code/0"))
    assert QApplication.clipboard().text() == "def f(s):\n    return s[::-1]" == copied[0]
    w.body.views[0].anchorClicked.emit(QUrl("pinwheel:copy-code/1"))
    assert QApplication.clipboard().text() == 'rev <<< "$s"'
    assert w.message.content == content  # the label is the view's, not the message's
    win.chat.remove_from(len(win.chat.messages()) - 1)


def test_the_model_library_lists_what_fits_and_loads_a_choice(win, qtbot, tmp_path, tiny_bpe_gguf):
    from app.model_library import COLUMNS

    idle(win, qtbot)
    folder = tmp_path / "more-models"
    folder.mkdir()
    other = folder / "other-tiny.gguf"
    other.write_bytes(tiny_bpe_gguf.read_bytes())
    (folder / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 30)
    win.library_dirs = [str(folder)]
    serving = win.model_path
    try:
        win.libraryAction.trigger()
        dlg = win.library_dialog
        assert dlg is not None
        qtbot.waitUntil(lambda: bool(dlg.rows), timeout=LOAD_TIMEOUT_MS)
        names = [dlg.table.item(r, 0).text() for r in range(dlg.table.rowCount())]
        assert "other-tiny" in names and "broken" in names
        fits_col = COLUMNS.index("Fits?")
        row = names.index("other-tiny")
        assert dlg.table.item(row, fits_col).text() in ("fits", "tight — close other programs")
        assert dlg.table.item(names.index("broken"), fits_col).text().startswith("unreadable")
        dlg.search.setText("other")
        assert not dlg.table.isRowHidden(row) and dlg.table.isRowHidden(names.index("broken"))
        dlg.table.selectRow(row)
        assert dlg.loadButton.isEnabled()
        qtbot.mouseClick(dlg.loadButton, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: win.model_ready and win.model_info is not None
                        and Path(win.model_info.path) == other, timeout=LOAD_TIMEOUT_MS)
    finally:
        win.library_dirs = []
        if serving != win.model_path:
            win.load_model(serving)
            qtbot.waitUntil(lambda: win.model_ready, timeout=LOAD_TIMEOUT_MS)


def test_choosing_a_model_that_does_not_fit_asks_first_and_says_by_how_much(qapp, monkeypatch):
    from app import model_library
    from engine.library import ModelEntry

    dlg = model_library.ModelLibraryDialog(available=1_000_000_000)
    big = ModelEntry("/m/big.gguf", "big", "lmstudio", 4_000_000_000, arch="llama", supported=True,
                     total_bytes=3_000_000_000, weight_bytes=2_600_000_000, kv_bytes=12_000_000, fits="no")
    dlg.set_rows([big])
    asked, chosen = [], []
    monkeypatch.setattr(model_library.QMessageBox, "question",
                        lambda *a: asked.append(a[2]) or model_library.QMessageBox.StandardButton.No)
    dlg.chosen.connect(lambda path, e: chosen.append(path))
    dlg.table.selectRow(0)
    dlg.load_selected()
    assert asked and "big needs about" in asked[0] and "short" in asked[0]
    assert chosen == []
    monkeypatch.setattr(model_library.QMessageBox, "question",
                        lambda *a: model_library.QMessageBox.StandardButton.Yes)
    dlg.load_selected()
    assert chosen == ["/m/big.gguf"]
    assert dlg.table.item(0, model_library.COLUMNS.index("Fits?")).text() == "does not fit"


def test_the_library_shows_the_quantization_the_file_names(qapp, tmp_path):
    """Issue 21: a file whose general.file_type is Q4_K_M showed "Q8_0", its largest tensor's type."""
    from app import model_library
    from engine.library import describe
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "q4km.gguf", tensor_type="Q8_0", extra_metadata={"general.file_type": 15})
    dlg = model_library.ModelLibraryDialog(available=10**12)
    dlg.set_rows([describe(path)])
    assert dlg.table.item(0, model_library.COLUMNS.index("Quantization")).text() == "Q4_K_M"


def test_enter_while_the_model_loads_sends_once_it_is_ready(qtbot, tmp_path, tiny_bpe_gguf):
    w = make_window(tiny_bpe_gguf, tmp_path / "data")
    try:
        assert not w.model_ready
        w.settings = w.settings.replace(max_tokens=4)
        w.input.setPlainText("sent when ready")
        w.send()
        assert w.input.toPlainText() == "sent when ready" and w.sendButton.text() == "Queued"
        assert "as soon as the model is ready" in w.stageLabel.text()
        qtbot.waitUntil(lambda: any(m.content == "sent when ready" for m in w.chat.messages()), timeout=LOAD_TIMEOUT_MS)
        assert w.sendButton.text() == "Send" and w.input.toPlainText() == ""
        qtbot.waitUntil(lambda: not w.generating, timeout=LOAD_TIMEOUT_MS)
    finally:
        w.shutdown()
        w.close()


def test_enter_in_the_delete_dialog_keeps_the_conversation(win, qtbot):
    """Delete, then Enter out of habit: the dialog's default is No, the chat stays."""
    idle(win, qtbot)
    send(win, qtbot, "keep me")
    conv = win.current_id
    seen = []

    def answer():
        box = QApplication.activeModalWidget()
        seen.append((box.text(), box.defaultButton().text() if box.defaultButton() else None))
        QTest.keyClick(box, Qt.Key.Key_Return)

    QTimer.singleShot(200, answer)
    win.delete_conversation(conv)
    assert seen and "cannot be undone" in seen[0][0] and seen[0][1] in ("&No", "No"), seen
    assert win.current_id == conv and conv in win.sidebar.ids()


def test_the_preview_says_changed_only_when_a_setting_to_apply_is_edited(win, qtbot):
    """A version stepped to with other pins moves the plan, not the settings: the preview said
    "changed: Apply to use it" though no setting had been touched. An edited window says it."""
    idle(win, qtbot)
    panel = win.settingsPanel
    panel.load(panel.applied)
    assert "as now" in panel.previewLabel.text(), panel.previewLabel.text()
    try:
        panel.set_pinned_tokens(panel.pinned_tokens + 40)  # (what stepping to such a version sends)
        assert "as now" in panel.previewLabel.text() and "changed" not in panel.previewLabel.text()
        panel.set_pinned_tokens(panel.pinned_tokens - 40)
        panel.windowSpin.setValue(panel.windowSpin.value() + 32 if panel.windowSpin.value() else 64)
        assert "changed: Apply to use it" in panel.previewLabel.text()
        panel.temperatureSpin.setValue(panel.temperatureSpin.value() + 0.1)  # (sampling needs no Apply)
        panel.windowSpin.setValue(panel.applied.window)
        assert "as now" in panel.previewLabel.text()
    finally:
        panel.load(panel.applied)

