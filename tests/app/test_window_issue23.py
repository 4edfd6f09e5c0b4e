"""Issue 23 (items 4, 5, 7, 8): highlighted code, finding conversations by keyboard, plain words,
a narrow window. Each checked on the real widgets (offscreen), found by objectName.

One window on a data folder seeded with three conversations (one with a Python code block)
serves the module; the tests that close a window or need a fresh one build their own.
"""
from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt, QUrl  # noqa: E402
from PySide6.QtGui import QAction, QGuiApplication, QPalette  # noqa: E402
from PySide6.QtWidgets import (QApplication, QLineEdit, QListWidget, QPushButton, QScrollArea,  # noqa: E402
                               QTableWidget, QTextBrowser, QToolButton, QWidget)

from app.store import ConversationStore, default_db_path  # noqa: E402

LOAD_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 60_000
CODE = "def greet(name):\n    return 'hello ' + name  # a comment"
CODE_REPLY = f"Here is a function:\n\n```python\n{CODE}\n```\n\nCall it with a name."
TITLES = ("Python greeting", "Shopping list", "Weather talk")


def seed(data_dir) -> dict[str, int]:
    """Three conversations, newest last: the list shows Weather, Shopping, Python."""
    ids = {}
    with ConversationStore(default_db_path(data_dir)) as st:
        c = st.create_conversation(TITLES[0])
        st.append_message(c.id, "user", "Write a greeting function")
        st.append_message(c.id, "assistant", CODE_REPLY)
        ids[TITLES[0]] = c.id
        time.sleep(0.01)
        c = st.create_conversation(TITLES[1])
        st.append_message(c.id, "user", "apples, pears and more apples")
        st.append_message(c.id, "assistant", "Apples twice: do you want many apples?")
        ids[TITLES[1]] = c.id
        time.sleep(0.01)
        c = st.create_conversation(TITLES[2])
        st.append_message(c.id, "user", "Is it raining?")
        st.append_message(c.id, "assistant", "I cannot see outside.")
        ids[TITLES[2]] = c.id
    return ids


def wait_until(pred, timeout_ms: int) -> None:
    app = QApplication.instance()
    deadline = time.monotonic() + timeout_ms / 1000
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        app.processEvents()
        time.sleep(0.005)


def close(win) -> None:
    win.shutdown()
    win.close()
    win.deleteLater()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    data = tmp_path_factory.mktemp("pinwheel-issue23")
    return data, seed(data)


@pytest.fixture(scope="module")
def win(qapp, tiny_bpe_gguf, seeded):
    from app import MainWindow

    w = MainWindow(model_path=tiny_bpe_gguf, data_dir=seeded[0])
    w.show()
    wait_until(lambda: w.model_ready or w.errors, LOAD_TIMEOUT_MS)
    assert w.model_ready, w.errors
    yield w
    close(w)


def set_theme(win, name: str) -> None:
    win.findChild(QAction, f"theme{name.capitalize()}Action").trigger()
    QApplication.processEvents()
    QApplication.processEvents()  # (views re-render a moment after the palette change)


def open_titled(win, qtbot, ids, title: str) -> None:
    win.open_conversation(ids[title])
    qtbot.waitUntil(lambda: win.current_id == ids[title], timeout=5000)


def views(win) -> list[QTextBrowser]:
    """The message bodies' text views of the open conversation (not those of one just left,
    which Qt deletes later)."""
    chat = win.findChild(QScrollArea, "chatView")
    return [v for w in chat.widgets for v in w.findChildren(QTextBrowser)]


def colours(view, word: str) -> set[str]:
    """The foreground colours set on the characters of `word` in `view` ("" for the default)."""
    doc = view.document()
    at = doc.toPlainText().index(word)
    found = set()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            f = it.fragment()
            if f.position() <= at < f.position() + f.length():
                brush = f.charFormat().foreground()
                found.add(brush.color().name() if brush.style() != Qt.BrushStyle.NoBrush else "")
            it += 1
        block = block.next()
    return found


# --------------------------------------------------------------------------- 4. highlighting


def test_code_blocks_are_coloured_in_the_light_and_the_dark_theme(win, qtbot, seeded):
    open_titled(win, qtbot, seeded[1], TITLES[0])
    seen = {}
    try:
        for theme in ("light", "dark"):
            set_theme(win, theme)
            code = [v for v in views(win) if "def greet" in v.toPlainText()]
            assert len(code) == 1
            view = code[0]
            # whole lines, scrolling sideways, as before
            assert view.lineWrapMode() == QTextBrowser.LineWrapMode.NoWrap
            keyword, string = colours(view, "def"), colours(view, "'hello '")
            assert len(keyword) == 1 and "" not in keyword, keyword  # a colour of its own
            assert keyword != string
            window = QApplication.palette().color(QPalette.ColorRole.Window)
            from PySide6.QtGui import QColor

            kw = QColor(next(iter(keyword)))
            assert abs(kw.lightness() - window.lightness()) > 60, (theme, kw.name())  # reads on its background
            seen[theme] = keyword
            # the text around the block is not coloured
            assert colours([v for v in views(win) if "Call it" in v.toPlainText()][0], "Call it") <= {""}
        assert seen["light"] != seen["dark"]  # each theme its own colours
    finally:
        set_theme(win, "system")


def test_copying_a_message_or_a_code_block_says_so_on_the_spot(win, qtbot, seeded):
    open_titled(win, qtbot, seeded[1], TITLES[0])
    chat = win.findChild(QScrollArea, "chatView")
    copy = [b for w in chat.widgets for b in w.findChildren(QToolButton) if b.text() == "Copy"][-1]
    qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == CODE_REPLY
    assert copy.text() == "Copied ✓"
    qtbot.waitUntil(lambda: copy.text() == "Copy", timeout=3000)  # brief: it goes back

    label = [v for v in views(win) if "python · Copy" in v.toPlainText()][0]
    label.anchorClicked.emit(QUrl("pinwheel:copy-code/0"))  # what a click on the link emits
    assert QGuiApplication.clipboard().text() == CODE
    assert "python · Copied ✓" in label.toPlainText()
    qtbot.waitUntil(lambda: "python · Copy" in label.toPlainText() and "Copied" not in label.toPlainText(),
                    timeout=3000)


# --------------------------------------------------------------------------- 5. keyboard


def test_a_shortcut_focuses_the_conversation_list_and_the_arrows_move_in_it(win, qtbot, seeded):
    ids = seeded[1]
    open_titled(win, qtbot, ids, TITLES[2])  # the first row
    win.input.setFocus()
    lst = win.findChild(QListWidget, "conversationList")
    action = win.findChild(QAction, "focusConversationsAction")
    assert action.shortcut().toString() == "Ctrl+Shift+B"
    assert win.findChild(QAction, "conversationsAction").shortcut().toString() == "Ctrl+B"  # still hide/show
    action.trigger()
    assert lst.hasFocus() and lst.currentRow() == 0
    qtbot.keyClick(lst, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: win.current_id == ids[TITLES[1]], timeout=5000)
    qtbot.keyClick(lst, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: win.current_id == ids[TITLES[0]], timeout=5000)
    qtbot.keyClick(lst, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: win.current_id == ids[TITLES[1]], timeout=5000)
    qtbot.keyClick(lst, Qt.Key.Key_Return)  # on the open one, with nothing to find: to the message box
    assert win.input.hasFocus()
    # hidden with Ctrl+B, the shortcut shows it again
    win.findChild(QAction, "conversationsAction").trigger()
    assert not lst.isVisible()
    action.trigger()
    assert lst.isVisible() and lst.hasFocus()


@pytest.mark.parametrize("key", [Qt.Key.Key_Down, Qt.Key.Key_Return])
def test_down_or_enter_in_the_search_box_move_into_the_results_without_opening_one(win, qtbot, seeded, key):
    ids = seeded[1]
    win.new_conversation()
    search = win.findChild(QLineEdit, "conversationSearch")
    lst = win.findChild(QListWidget, "conversationList")
    win.findChild(QAction, "searchAction").trigger()
    assert search.hasFocus()
    qtbot.keyClicks(search, "apples")
    qtbot.keyClick(search, key)
    try:
        assert lst.hasFocus()
        assert lst.currentItem() is not None and lst.currentItem().text() == TITLES[1]  # the one result
        QApplication.processEvents()
        assert win.current_id is None  # nothing opened yet
        qtbot.keyClick(lst, Qt.Key.Key_Return)  # Enter opens it
        qtbot.waitUntil(lambda: win.current_id == ids[TITLES[1]], timeout=5000)
    finally:
        search.clear()
        qtbot.waitUntil(lambda: len(win.sidebar.ids()) == 3, timeout=5000)


def test_tab_from_the_search_box_does_not_open_the_first_result(win, qtbot, seeded):
    win.new_conversation()
    search = win.findChild(QLineEdit, "conversationSearch")
    search.setFocus()
    qtbot.keyClick(search, Qt.Key.Key_Tab)
    QApplication.processEvents()
    assert win.findChild(QListWidget, "conversationList").hasFocus()
    assert win.current_id is None


def test_the_search_is_marked_in_the_open_conversation_and_f3_steps_through_it(win, qtbot, seeded):
    ids = seeded[1]
    search = win.findChild(QLineEdit, "conversationSearch")
    lst = win.findChild(QListWidget, "conversationList")
    win.new_conversation()
    search.setFocus()
    qtbot.keyClicks(search, "apples")
    qtbot.keyClick(search, Qt.Key.Key_Down)
    qtbot.keyClick(lst, Qt.Key.Key_Return)
    try:
        qtbot.waitUntil(lambda: win.current_id == ids[TITLES[1]], timeout=5000)
        # "apples" twice in the question, "Apples" and "apples" in the reply: four marks
        marks = [(v, s) for v in views(win) for s in v.extraSelections()]
        assert len(marks) == 4
        assert all(s.cursor.selectedText().lower() == "apples" for _v, s in marks)
        highlight = QApplication.palette().color(QPalette.ColorRole.Highlight)

        def current() -> list[str]:
            return [f"{v.toPlainText()[:10]}@{s.cursor.selectionStart()}" for v, s in
                    ((v, s) for v in views(win) for s in v.extraSelections())
                    if s.format.background().color() == highlight]

        first = current()
        assert len(first) == 1 and "Match 1 of 4" in win.stageLabel.text()
        win.findChild(QAction, "findNextAction").trigger()  # F3
        assert len(current()) == 1 and current() != first and "Match 2 of 4" in win.stageLabel.text()
        qtbot.keyClick(lst, Qt.Key.Key_Return)  # Enter on the open conversation: the next one too
        assert "Match 3 of 4" in win.stageLabel.text()
        win.findChild(QAction, "findPreviousAction").trigger()  # Shift+F3
        assert "Match 2 of 4" in win.stageLabel.text()
        assert win.findChild(QAction, "findNextAction").shortcut().toString() == "F3"
        # a theme switch renders the messages again: the marks follow the new text
        set_theme(win, "dark")
        QApplication.processEvents()
        marks = [s for v in views(win) for s in v.extraSelections()]
        assert len(marks) == 4 and all(s.cursor.selectedText().lower() == "apples" for s in marks)
    finally:
        set_theme(win, "system")
        search.clear()
        qtbot.waitUntil(lambda: len(win.sidebar.ids()) == 3, timeout=5000)
    QApplication.processEvents()
    assert not [s for v in views(win) for s in v.extraSelections()]  # the marks go with the search


def test_down_from_the_library_filter_selects_the_first_row(qtbot):
    from types import SimpleNamespace

    from app.model_library import ModelLibraryDialog

    dlg = ModelLibraryDialog()
    qtbot.addWidget(dlg)
    row = dict(arch="llama", params=135e6, quant="Q4_1", file_bytes=90e6, context_length=8192, source="Pinwheel",
               total_bytes=200e6, supported=True, fits="fits", note="")
    dlg.set_rows([SimpleNamespace(name=n, path=f"/m/{n}.gguf", **row) for n in ("alpha", "beta", "gamma")])
    dlg.show()
    search = dlg.findChild(QLineEdit, "librarySearch")
    table = dlg.findChild(QTableWidget, "libraryTable")
    search.setFocus()
    qtbot.keyClicks(search, "a")  # all three contain an "a"; the sorted table's first row shown
    qtbot.keyClick(search, Qt.Key.Key_Down)
    assert dlg.focusWidget() is table
    assert [i.row() for i in table.selectedItems()][:1] == [0]
    assert dlg.findChild(QPushButton, "libraryLoadButton").isEnabled()
    chosen = []
    dlg.chosen.connect(lambda path, _e: chosen.append(path))
    qtbot.keyClick(table, Qt.Key.Key_Down)
    qtbot.keyClick(table, Qt.Key.Key_Return)
    assert chosen == [table.item(1, 0).data(Qt.ItemDataRole.UserRole)]


# --------------------------------------------------------------------------- 8. layout


def test_the_window_can_be_480_px_wide_with_the_side_panels_giving_way(win, qtbot):
    # what the default model shows in the status bar (the test model's name is short)
    win.findChild(QWidget, "statusModel").setText("SmolLM2-135M-Instruct.Q4_1")
    win.findChild(QWidget, "statusCache").setText("cache 1,234 / 4,128")
    win.resize(1280, 800)
    for name in ("conversationsAction", "sidePanelAction"):  # both panels open, as a user may have them
        action = win.findChild(QAction, name)
        if not action.isChecked():
            action.trigger()
    QApplication.processEvents()
    assert win.findChild(QWidget, "conversationSidebar").isVisible() and win.sidePanel.isVisible()
    try:
        assert win.minimumSizeHint().width() <= 480 and win.minimumWidth() <= 480
        win.resize(480, 800)
        qtbot.waitUntil(lambda: win.width() == 480, timeout=3000)
        assert not win.findChild(QWidget, "conversationSidebar").isVisible()
        assert not win.findChild(QScrollArea, "sidePanel").isVisible()
        send = win.findChild(QPushButton, "sendButton")
        right = send.mapTo(win, send.rect().topRight()).x()
        assert send.isVisible() and right <= 480  # the Send button on screen
        assert win.findChild(QWidget, "statusModel").isVisible()  # the model's name stays longest
        # asked for at this width, a panel shows, and the window widens to hold it
        win.findChild(QAction, "sidePanelAction").trigger()
        QApplication.processEvents()
        assert win.sidePanel.isVisible() and win.sidePanel.width() >= win.sidePanel.minimumWidth()
        assert win.width() >= win.centralWidget().minimumSizeHint().width()
    finally:
        win.resize(1280, 800)
        QApplication.processEvents()


def test_apply_is_in_view_at_1280_by_800(win, qtbot):
    """On a 1280x800 screen the window's inside is about 1280x752 (a title bar, a panel)."""
    win.resize(1280, 752)
    qtbot.waitUntil(lambda: win.width() == 1280 and win.height() == 752, timeout=3000)
    win.findChild(QAction, "sidePanelAction").trigger() if not win.sidePanelAction.isChecked() else None
    QApplication.processEvents()
    panel = win.findChild(QScrollArea, "sidePanel")
    apply = win.findChild(QPushButton, "applyButton")
    assert panel.isVisible()
    bottom = apply.mapTo(panel.viewport(), apply.rect().bottomLeft()).y()
    try:
        assert bottom <= panel.viewport().height(), (bottom, panel.viewport().height())
    finally:
        win.resize(1280, 800)


def test_in_the_dark_theme_the_users_messages_stand_out_from_the_replies(win, qtbot, seeded):
    open_titled(win, qtbot, seeded[1], TITLES[0])
    try:
        set_theme(win, "dark")
        messages = win.findChild(QScrollArea, "chatView").widgets
        user = [m for m in messages if m.property("role") == "user"][0]
        reply = [m for m in messages if m.property("role") == "assistant"][0]

        def background(w) -> str:
            shown = w if w.autoFillBackground() else w.parentWidget()  # a reply shows what is behind it
            while not shown.autoFillBackground() and shown.parentWidget() is not None:
                shown = shown.parentWidget()
            return shown.palette().color(shown.backgroundRole()).name()

        assert background(user) != background(reply)
    finally:
        set_theme(win, "system")


def test_ctrl_q_during_a_reply_says_the_partial_reply_is_kept_first(qtbot, tmp_path, tiny_bpe_gguf):
    from app import MainWindow

    w = MainWindow(model_path=tiny_bpe_gguf, data_dir=tmp_path / "data")
    w.show()
    try:
        qtbot.waitUntil(lambda: w.model_ready or bool(w.errors), timeout=LOAD_TIMEOUT_MS)
        w.sampling_overrides = {"seed": 7, "ignore_eos": True}
        w.settings = w.settings.replace(max_tokens=100_000)
        w.input.setPlainText("Tell me a long story")
        qtbot.keyClick(w.input, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: w.generating and bool(w.reply and w.reply.parts), timeout=REPLY_TIMEOUT_MS)
        quit_action = w.findChild(QAction, "quitAction")
        quit_action.trigger()  # Ctrl+Q
        assert w.isVisible() and w.generating  # not yet: first it says what happens
        notice = w.findChild(QWidget, "errorBanner")
        assert notice.isVisible()
        assert "keeps the part of the reply written so far" in w.findChild(QWidget, "errorText").text()
        assert "partial reply is kept" in w.stageLabel.text()
        quit_action.trigger()  # the second Ctrl+Q quits
        qtbot.waitUntil(lambda: not w.isVisible(), timeout=5000)
    finally:
        close(w)
    # once said, never again: the next window quits at once mid-reply
    w = MainWindow(model_path=tiny_bpe_gguf, data_dir=tmp_path / "data")
    try:
        assert w.ui_state.quit_notice_seen
    finally:
        close(w)


# --------------------------------------------------------------------------- 7. plain words


def tooltip_at(widget, y: int) -> str:
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QToolTip

    QToolTip.hideText()
    at = QPoint(20, y)
    QApplication.sendEvent(widget, QHelpEvent(QHelpEvent.Type.ToolTip, at, widget.mapToGlobal(at)))
    return QToolTip.text()


def test_the_gauge_and_the_settings_speak_plain_words_with_the_exact_terms_one_click_away(win, qtbot):
    from PySide6.QtWidgets import QComboBox, QLabel

    win.resize(1280, 800)
    if not win.sidePanelAction.isChecked():
        win.findChild(QAction, "sidePanelAction").trigger()
    gauge = win.findChild(QWidget, "memoryGauge")
    toggle = win.findChild(QToolButton, "memoryDetailsToggle")
    window_label = win.findChild(QLabel, "windowLabel")
    sinks_label = win.findChild(QLabel, "sinksLabel")
    kv = win.findChild(QComboBox, "kvDtypeCombo")
    preview = win.findChild(QLabel, "planPreview")
    assert not toggle.isChecked()
    assert toggle.nextInFocusChain() is gauge  # one Tab away from the gauge it switches
    # plain words first
    labels = [label for label, _v, _t in gauge.rows()]
    assert "Forgotten so far" in labels and "Pinwheel's memory use" in labels
    assert not {"Tokens evicted", "Process RSS"} & set(labels)
    assert gauge.accessibleDescription().startswith("Conversation memory")
    assert (window_label.text(), sinks_label.text()) == ("Recent text", "Always kept")
    assert kv.currentText() in ("Compact (smallest)", "Standard", "Exact (largest)")
    from PySide6.QtGui import QTextDocumentFragment

    text = QTextDocumentFragment.fromHtml(preview.text()).toPlainText()  # as read, markup aside
    assert "Recent text the model sees: ~" in text and " words" in text and "Always kept: " in text
    assert "slots" not in text and "sink" not in text
    # the exact terms in tooltips that explain them
    assert "sliding window" in window_label.toolTip() and "token" in window_label.toolTip()
    assert "Attention sinks" in sinks_label.toolTip()
    assert "slots" in preview.toolTip() and "In exact terms" in preview.toolTip()
    gauge.grab()  # painted: each row's place is known
    lh = gauge.fontMetrics().height()
    assert "KV cache" in tooltip_at(gauge, 4 + lh // 2)  # the first row, "Conversation memory"
    rows_tip = [tooltip_at(gauge, y) for y in range(0, gauge.height(), max(lh // 2, 1))]
    assert any("Process RSS" in t for t in rows_tip) and any("evicted" in t for t in rows_tip)
    # one click: the expert view
    qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
    try:
        assert toggle.isChecked()
        labels = [label for label, _v, _t in gauge.rows()]
        assert "Tokens evicted" in labels and "Process RSS" in labels
        assert (window_label.text(), sinks_label.text()) == ("Window", "Sinks")
        assert "slots" in preview.text() and "Budget:" in preview.text()
        assert kv.findText("int8 + scales (smallest)") >= 0
        assert win.ui_state.memory_details  # remembered
    finally:
        qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
    assert not toggle.isChecked() and window_label.text() == "Recent text"


def test_the_pin_bar_says_what_pinning_does_in_plain_words_first(win, qtbot, seeded):
    from PySide6.QtWidgets import QLabel

    open_titled(win, qtbot, seeded[1], TITLES[1])
    qtbot.waitUntil(lambda: win.last_stats is not None and any(m.index == 0 for m in win.last_stats.stats.messages),
                    timeout=REPLY_TIMEOUT_MS)
    pin = win.findChild(QScrollArea, "chatView").widgets[0].pinButton
    qtbot.mouseClick(pin, Qt.MouseButton.LeftButton)
    label = win.findChild(QLabel, "pinPreview")
    try:
        assert label.isVisible()
        text = label.text()
        plain = text.index("It will always be kept in view; the recent text the model sees goes from ~")
        assert plain < text.index("(Sinks ")  # the exact terms come after the plain words
        assert "attention sinks" in label.toolTip()
    finally:
        win.findChild(QPushButton, "pinCancelButton").click()


def at_1280_with_both_panels(win, qtbot):
    """The default 1280x800 window, light theme (Fusion and the stylesheet: the widths a desktop
    shows), with the settings-and-memory panel and the conversation list both asked for."""
    set_theme(win, "light")
    win.resize(1280, 800)
    qtbot.waitUntil(lambda: win.width() == 1280, timeout=3000)
    win.set_panel("side", True)
    win.set_panel("conversations", True)


def test_at_1280_both_panels_stay_when_the_search_is_opened(win, qtbot):
    """With the stylesheet the conversation list is a few pixels wider than its nominal 200 px;
    Ctrl+F (which asks for the list) hid the settings-and-memory panel at the default 1280 px."""
    try:
        at_1280_with_both_panels(win, qtbot)
        win.resize(1279, 800)  # a shrink forgets what was asked for at this width
        win.resize(1280, 800)
        QApplication.processEvents()
        assert win.sidePanel.isVisible() and win.sidebar.isVisible()
        win.findChild(QAction, "searchAction").trigger()  # Ctrl+F
        QApplication.processEvents()
        assert win.sidePanel.isVisible() and win.sidebar.isVisible()
    finally:
        set_theme(win, "system")
