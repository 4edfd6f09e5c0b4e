"""Issue 23, items 1, 2, 3 and 6, through the window's real widgets (offscreen) with the real
engine and the tiny random-weight model: Continue, versions and forks, the model label, Import."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QAction  # noqa: E402
from PySide6.QtWidgets import QLabel, QToolButton, QWidget  # noqa: E402

from app.engine_events import CacheRebuilt, PinChanged, StatsReady  # noqa: E402
from app.store import ConversationStore, default_db_path  # noqa: E402
from tests.app.engine_waits import expect, on  # noqa: E402

LOAD_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 60_000
GREEDY = {"seed": 7, "ignore_eos": True, "temperature": 0.0}
# wild sampling: the random-weight model's versions of a reply differ (greedy, it repeats itself)
VARIED = {"ignore_eos": True, "temperature": 5.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.5}


def make_window(model_path, data_dir, qtbot):
    from app import MainWindow

    win = MainWindow(model_path=model_path, data_dir=data_dir)
    win.show()
    qtbot.waitUntil(lambda: win.model_ready or any(k != "notice" for k, _ in win.errors), timeout=LOAD_TIMEOUT_MS)
    assert win.model_ready, win.errors
    return win


def close(win) -> None:
    win.shutdown()
    win.close()
    win.deleteLater()


@pytest.fixture
def win(qtbot, tiny_bpe_gguf, tmp_path):
    w = make_window(tiny_bpe_gguf, tmp_path / "data", qtbot)
    w.sampling_overrides = dict(GREEDY, max_tokens=8)
    yield w
    close(w)


def send(win, qtbot, text: str):
    win.input.setFocus()
    win.input.setPlainText(text)
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(win.input, Qt.Key.Key_Return)
    return blocker.args[0]


def click(win, qtbot, button):
    assert button.isVisibleTo(win) and button.isEnabled(), button.objectName()
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


def tokens_seen(win, qtbot) -> int:
    """The cache's count once the engine has reported after the last reply."""
    seen = []
    slot = on(win.engine, StatsReady, lambda ev: seen.append(ev.snapshot.stats.tokens_seen))
    try:
        win.engine.select_history(win.controller.history())  # (a no-op for the session; it reports stats)
        qtbot.waitUntil(lambda: bool(seen), timeout=REPLY_TIMEOUT_MS)
    finally:
        win.engine.event.disconnect(slot)
    return seen[-1]


def stored(win):
    return [(m.role, m.content, m.status) for m in win.store.messages(win.current_id)]


def shown(win):
    return [(m.role, m.content, m.status) for m in win.chat.messages()]


# --------------------------------------------------------------------------- 1. Continue


def test_a_cut_reply_says_so_and_continue_extends_the_same_message(win, qtbot):
    first = send(win, qtbot, "Tell me a story")
    assert first.reason == "max_tokens"
    reply = win.chat.widgets[-1]
    assert "cut short" in reply.badge.text() and "Max reply tokens" in reply.badge.toolTip()
    assert "cut short (Continue writes more)" in win.stageLabel.text()
    button = reply.findChild(QToolButton, "continueButton")
    assert button.isVisibleTo(win)
    rebuilt = []
    slot = on(win.engine, CacheRebuilt, rebuilt.append)
    result = click(win, qtbot, button)
    win.engine.event.disconnect(slot)
    assert not rebuilt  # the same cache: nothing was read again
    assert len(win.chat.widgets) == 2 and win.chat.widgets[-1] is reply  # the same message grew
    assert result.generated_tokens == 8 and result.reply_tokens == 16 and result.prompt_tokens == 1
    assert reply.message.content == result.reply and result.reply.startswith(first.reply)
    assert stored(win) == shown(win) and len(stored(win)) == 2
    continued = tokens_seen(win, qtbot)
    # one reply of 16 tokens, in a new chat, gives the same text and the same cache
    qtbot.keyClick(win.input, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    win.sampling_overrides = dict(GREEDY, max_tokens=16)
    longer = send(win, qtbot, "Tell me a story")
    assert longer.reply == result.reply and longer.generated_tokens == result.reply_tokens
    assert tokens_seen(win, qtbot) == continued
    # a reply that ended on its own offers no Continue
    assert not win.chat.widgets[-1].continueButton.isVisibleTo(win) or win.chat.widgets[-1].message.cut_short


# --------------------------------------------------------------------------- 2. versions


def test_regenerate_twice_step_between_versions_and_restart(qtbot, tiny_bpe_gguf, tmp_path):
    data = tmp_path / "data"
    win = make_window(tiny_bpe_gguf, data, qtbot)
    try:
        win.sampling_overrides = {"ignore_eos": True, "temperature": 1.5, "max_tokens": 6}
        send(win, qtbot, "Name a colour")
        for _ in range(2):
            click(win, qtbot, win.regenButton)
        reply = win.chat.widgets[-1]
        label = reply.findChild(QLabel, "versionLabel")
        assert label.isVisibleTo(win) and label.text() == "3/3"
        versions = [m.content for m in win.store.versions(reply.message.store_id)]
        assert len(versions) == 3
        prev = reply.findChild(QToolButton, "previousVersionButton")
        assert not reply.findChild(QToolButton, "nextVersionButton").isEnabled()
        prev.setFocus()
        qtbot.keyClick(prev, Qt.Key.Key_Space)  # keyboard: the stepper keeps the focus as it steps
        qtbot.keyClick(win.focusWidget(), Qt.Key.Key_Space)
        reply = win.chat.widgets[-1]
        assert reply.versionLabel.text() == "1/3" and reply.message.content == versions[0]
        assert win.focusWidget() is reply.nextVersionButton  # (‹ is disabled at the first version)
        qtbot.mouseClick(reply.nextVersionButton, Qt.MouseButton.LeftButton)
        assert win.chat.widgets[-1].versionLabel.text() == "2/3"
        assert win.chat.messages()[-1].content == versions[1]
        cid = win.current_id
    finally:
        close(win)
    again = make_window(tiny_bpe_gguf, data, qtbot)  # a restart: the versions and the one shown are kept
    try:
        assert again.current_id == cid
        reply = again.chat.widgets[-1]
        assert reply.versionLabel.text() == "2/3" and reply.message.content == versions[1]
        assert [m.content for m in again.store.versions(reply.message.store_id)] == versions
    finally:
        close(again)


def test_the_cache_follows_the_version_shown_and_stepping_back_re_reads_nothing(win, qtbot):
    win.sampling_overrides = dict(VARIED, max_tokens=6)
    send(win, qtbot, "Pick a number")
    click(win, qtbot, win.regenButton)  # the cache now holds version 2
    rebuilt = []
    slot = on(win.engine, CacheRebuilt, rebuilt.append)
    try:
        reply = win.chat.widgets[-1]
        qtbot.mouseClick(reply.prevVersionButton, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(win.chat.widgets[-1].nextVersionButton, Qt.MouseButton.LeftButton)
        result = send(win, qtbot, "Another")
        assert not rebuilt and result.prompt_tokens < 40  # back to what the cache holds: only the new turn
        session = win.engine.worker.session
        assert [m["content"] for m in session.messages] == [c for _, c, _ in shown(win)]
        qtbot.mouseClick(win.chat.widgets[1].prevVersionButton, Qt.MouseButton.LeftButton)  # version 1
        assert win.chat.widgets[1].versionLabel.text() == "1/2"
        assert len({v.content for v in win.store.versions(win.chat.messages()[1].store_id)}) == 2
        assert not rebuilt  # nothing read yet
        send(win, qtbot, "And now?")
        assert rebuilt  # a version the cache does not hold: re-encoded for the next reply
        assert [m["content"] for m in session.messages] == [c for _, c, _ in shown(win)]
    finally:
        win.engine.event.disconnect(slot)


def test_pin_works_after_stepping_to_a_version_the_cache_does_not_hold(win, qtbot):
    """QA B1: after Ctrl+R and ‹, Pin said "This message's size is not known yet" for good (the
    engine knew sizes only for the version it last read) and the cache count was the old one's."""
    from PySide6.QtWidgets import QPushButton

    win.sampling_overrides = dict(VARIED, max_tokens=6)
    send(win, qtbot, "Pick a colour")
    win.input.setFocus()
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(win.input, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    reply = win.chat.widgets[-1]
    assert reply.findChild(QLabel, "versionLabel").text() == "2/2"
    # (the stats of the step itself: a reply's last stats may still be on their way)
    with expect(qtbot, win.engine, StatsReady, REPLY_TIMEOUT_MS, lambda ev: ev.snapshot.stats.reread_pending) as got:
        qtbot.mouseClick(reply.findChild(QToolButton, "previousVersionButton"), Qt.MouseButton.LeftButton)
    assert win.chat.widgets[-1].findChild(QLabel, "versionLabel").text() == "1/2"
    stats = got[0].snapshot.stats
    # the count follows the version shown, and says the cache takes it at the next reply (the
    # window shows stats on its repaint tick, so the label may change a moment after the event)
    label = win.findChild(QLabel, "statusCache")
    qtbot.waitUntil(lambda: "next reply" in label.text(), timeout=REPLY_TIMEOUT_MS)
    assert label.text().startswith(f"cache {sum(m.tokens for m in stats.messages):,} /"), label.text()
    pin = win.chat.widgets[0].findChild(QToolButton, "pinButton")
    qtbot.mouseClick(pin, Qt.MouseButton.LeftButton)
    bar, ok = win.findChild(QWidget, "pinBar"), win.findChild(QPushButton, "pinConfirmButton")
    text = win.findChild(QLabel, "pinPreview").text()
    assert bar.isVisible() and ok.isEnabled(), text
    assert "not known" not in text and "read into the model" in text
    with expect(qtbot, win.engine, PinChanged, REPLY_TIMEOUT_MS):
        qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)
    assert win.chat.messages()[0].pinned and win.store.messages(win.current_id)[0].pinned
    assert win.chat.widgets[0].findChild(QToolButton, "pinButton").text() == "Unpin"
    session = win.engine.worker.session  # the pin read the version shown into the cache
    assert [m["content"] for m in session.messages] == [c for _, c, _ in shown(win)]
    qtbot.waitUntil(lambda: "next reply" not in win.findChild(QLabel, "statusCache").text(), timeout=REPLY_TIMEOUT_MS)


def test_editing_a_middle_message_forks_and_the_old_branch_is_kept(win, qtbot):
    for q in ("first question", "second question", "third question"):
        send(win, qtbot, q)
    before = shown(win)
    middle = win.chat.widgets[2]
    assert middle.editButton.isVisibleTo(win) and middle.message.content == "second question"
    qtbot.mouseClick(middle.editButton, Qt.MouseButton.LeftButton)
    assert win.input.toPlainText() == "second question"
    win.input.setPlainText("second question, edited")
    with qtbot.waitSignal(win.replyFinished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(win.input, Qt.Key.Key_Return)
    after = shown(win)
    assert after[:2] == before[:2] and after[2] == ("user", "second question, edited", "done") and len(after) == 4
    assert stored(win) == after
    edited = win.chat.widgets[2]
    assert edited.versionLabel.text() == "2/2"
    qtbot.mouseClick(edited.prevVersionButton, Qt.MouseButton.LeftButton)
    assert shown(win) == before  # the old branch, whole
    assert stored(win) == before
    # the engine follows the branch shown: the next reply answers this conversation
    send(win, qtbot, "fourth question")
    assert [m["content"] for m in win.engine.worker.session.messages[:-1]] == [c for _, c, _ in shown(win)[:-1]]


# --------------------------------------------------------------------------- 3. the model label


def test_each_reply_is_labelled_with_the_model_that_wrote_it(win, qtbot, tiny_bpe_gguf, tmp_path):
    send(win, qtbot, "hello")
    first = win.chat.widgets[-1]
    label = first.findChild(QLabel, "messageModel")
    assert label.isVisibleTo(win) and tiny_bpe_gguf.stem in label.text()
    tip = label.toolTip()
    assert "temperature 0.0" in tip and "max reply tokens 8" in tip and "always kept" in tip
    assert not win.chat.widgets[-2].modelLabel.isVisibleTo(win)  # the user's message has none
    other = tmp_path / "other-model.gguf"
    shutil.copy(tiny_bpe_gguf, other)
    with qtbot.waitSignal(win.modelReady, timeout=LOAD_TIMEOUT_MS):
        win.load_model(str(other))
    send(win, qtbot, "hello again")
    assert "other-model" in win.chat.widgets[-1].modelLabel.text()
    assert tiny_bpe_gguf.stem in win.chat.widgets[1].modelLabel.text()  # the first reply keeps its own
    meta = win.store.messages(win.current_id)[-1].meta["model"]
    assert meta["name"] == "other-model" and meta["sampling"]["max_tokens"] == 8


# --------------------------------------------------------------------------- 6. Import


def test_import_of_an_export_gives_the_same_messages_and_bad_files_are_refused(win, qtbot, tmp_path):
    win.sampling_overrides = {"ignore_eos": True, "temperature": 1.5, "max_tokens": 8}
    send(win, qtbot, "What is **Markdown**?")
    click(win, qtbot, win.regenButton)
    first_id, messages = win.current_id, shown(win)
    for fmt, name in (("json", "chat.json"), ("markdown", "chat.md")):
        path = win.export_conversation(first_id, fmt, str(tmp_path / name))
        assert path
        new_id = win.import_conversation(path)
        assert new_id not in (None, first_id) and win.current_id == new_id
        if fmt == "json":
            assert shown(win) == messages
        else:  # (Markdown keeps no blank lines around a message's text)
            assert [(r, c.strip("\n"), st) for r, c, st in shown(win)] == [(r, c.strip("\n"), st) for r, c, st in messages]
        assert new_id in win.sidebar.ids()
    exported = json.loads((tmp_path / "chat.json").read_text())
    assert len(exported["versions"]) == 3  # JSON carries every version; its "messages" the branch shown
    assert len(win.store.all_messages(win.current_id - 1)) == 3
    assert win.findChild(QAction, "importAction").shortcut().toString() == "Ctrl+I"
    bad = tmp_path / "notes.json"
    bad.write_text('{"format": "pinwheel-conversation", "messages": [{"role": "root", "content": "rm -rf /"}]}')
    count = len(win.sidebar.ids())
    assert win.import_conversation(str(bad)) is None
    assert win.banner.isVisible() and "notes.json" in win.banner.label.text() and "role" in win.banner.label.text()
    assert len(win.sidebar.ids()) == count and win.isVisible()


def test_a_database_of_the_old_schema_opens_with_its_chats(qtbot, tiny_bpe_gguf, tmp_path):
    from tests.app.test_store import make_v2

    data = tmp_path / "data"
    make_v2(default_db_path(data))
    win = make_window(tiny_bpe_gguf, data, qtbot)
    try:
        win.open_conversation(1)
        assert [c for _, c, _ in shown(win)] == ["q1", "a1", "q2", "a2"]
        assert not any(w.prevVersionButton.isVisibleTo(win) for w in win.chat.widgets)
    finally:
        close(win)
    with ConversationStore(default_db_path(data)) as st:
        assert [m.content for m in st.messages(2)] == ["only"]


def test_a_reply_header_with_every_marker_gives_way_in_a_narrow_window(qapp):
    from app.chat_view import ChatMessage, ChatView

    def header_width(name: str) -> int:
        view = ChatView()
        meta = {"model": {"name": name, "sampling": {}}, "cut_short": True}
        view.set_messages([ChatMessage("user", "q", versions=3, version=2, store_id=1),
                           ChatMessage("assistant", "a", "stopped", meta=meta, versions=3, version=3, store_id=2)])
        reply = view.widgets[-1]
        assert reply.continueButton.isVisibleTo(view) and reply.versionLabel.text() == "3/3"
        assert reply.modelLabel.text() == f"· {name}"  # (elided only on screen)
        return reply.minimumSizeHint().width()

    # a long model name, the badges and the stepper do not widen the chat: their labels end in "…"
    short, long = header_width("Qwen2.5-Coder-14B"), header_width("Qwen2.5-Coder-14B-Instruct-Q4_K_M-imatrix" * 4)
    assert long == short and long <= 480
