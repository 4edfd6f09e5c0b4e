"""The conversation logic without a window: app.chat_controller over a real store, a fake
engine and a view that records what it is told. No Qt, no model: these run in milliseconds."""
from __future__ import annotations

import pytest

from app.chat_controller import ChatController, title_for
from app.engine_events import ReplyResult
from app.store import ConversationStore


class FakeEngine:
    def __init__(self):
        self.requests: list[tuple[int, str, str, dict]] = []
        self.histories: list[list[dict]] = []
        self.selected: list[list[dict]] = []
        self.cancelled = 0

    def generate(self, kind, text="", sampling=None):
        self.requests.append((len(self.requests) + 1, kind, text, dict(sampling or {})))
        return len(self.requests)

    def load_history(self, messages):
        self.histories.append(list(messages))
        return 1000 + len(self.histories)

    def select_history(self, messages):
        self.selected.append(list(messages))
        return 2000 + len(self.selected)

    def cancel(self):
        self.cancelled += 1


class RecordingView:
    def __init__(self):
        self.calls: list[tuple] = []
        self.errors: list[tuple[str, str]] = []

    def __getattr__(self, name):
        def record(*args):
            if name == "error":
                self.errors.append(args)
            self.calls.append((name, *args))
        return record

    def names(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def ctl(tmp_path):
    store = ConversationStore(tmp_path / "c.db")
    c = ChatController(store, FakeEngine(), RecordingView(), sampling=lambda: {"temperature": 0.2},
                       conversation_settings=lambda: {"kv_dtype": "int8"})
    yield c
    store.close()


def finish(ctl, reason="max_tokens", reply=None, roles=None, error=""):
    r = ctl.reply
    text = "".join(r.parts) if reply is None else reply
    return ctl.on_reply_finished(ReplyResult(r.request, reason, text, generated_tokens=len(r.parts), error=error,
                                             roles=roles))


def stored(ctl):
    return [(m.role, m.content, m.status) for m in ctl.store.messages(ctl.current_id)]


def test_send_creates_a_chat_streams_and_stores_the_reply(ctl):
    ctl.send("What is the capital of France? " * 3)
    conv = ctl.store.get_conversation(ctl.current_id)
    assert conv.title == title_for("What is the capital of France? " * 3) and conv.title.endswith("…")
    assert ctl.engine.requests == [(1, "send", "What is the capital of France? " * 3, {"temperature": 0.2})]
    assert stored(ctl) == [("user", "What is the capital of France? " * 3, "done"), ("assistant", "", "streaming")]
    assert ctl.on_token(1, "Paris") and ctl.on_token(1, ".")
    assert not ctl.on_token(99, "stale")  # another request's token is not this reply's
    ctl.save_partial()
    assert stored(ctl)[-1] == ("assistant", "Paris.", "streaming")  # a crash now loses nothing
    assert finish(ctl) == "done"
    assert stored(ctl)[-1] == ("assistant", "Paris.", "done") and not ctl.generating
    assert [m.content for m in ctl.messages] == ["What is the capital of France? " * 3, "Paris."]
    v = ctl.view.names()
    assert v.index("add_message") < v.index("begin_reply") < v.index("reply_text") < v.index("end_reply")
    assert "conversations_changed" in v


def test_a_stale_result_changes_nothing(ctl):
    ctl.send("hi")
    assert ctl.on_reply_finished(ReplyResult(42, "max_tokens", "other")) is None
    assert ctl.generating


def test_stop_before_the_first_token_keeps_the_question_only(ctl):
    ctl.send("never answered")
    ctl.stop()
    assert ctl.engine.cancelled == 1
    assert finish(ctl, reason="cancelled", reply="") == "stopped"
    assert stored(ctl) == [("user", "never answered", "done")]
    assert [m.role for m in ctl.messages] == ["user"]
    ctl.regenerate()  # Regenerate answers it
    assert ctl.engine.requests[-1][1] == "regenerate" and [m.role for m in ctl.messages] == ["user", "assistant"]


def test_regenerate_and_edit_keep_every_version(ctl):
    ctl.send("question")
    ctl.on_token(1, "first answer")
    finish(ctl)
    ctl.regenerate()
    ctl.on_token(2, "second answer")
    finish(ctl)
    assert stored(ctl) == [("user", "question", "done"), ("assistant", "second answer", "done")]
    assert (ctl.messages[-1].version, ctl.messages[-1].versions) == (2, 2)
    ctl.resend_edit(0, "question, edited")
    ctl.on_token(3, "third")
    finish(ctl)
    assert stored(ctl) == [("user", "question, edited", "done"), ("assistant", "third", "done")]
    assert ctl.engine.requests[-1][1:3] == ("send", "question, edited")
    assert ctl.engine.selected[-1] == []  # the engine was taken back to the fork's start first
    assert len(ctl.store.all_messages(ctl.current_id)) == 5  # nothing was thrown away


def test_a_failed_reply_keeps_its_text_and_resyncs_the_engine(ctl):
    ctl.send("go")
    ctl.on_token(1, "half a rep")
    assert finish(ctl, reason="error", reply="", roles=("user",), error="boom") == "error"
    assert stored(ctl)[-1] == ("assistant", "half a rep", "interrupted")
    assert ctl.engine.histories[-1] == ctl.history()  # the engine's history was unlike ours: re-read


def test_leaving_mid_reply_keeps_it_interrupted(ctl):
    ctl.send("a long one")
    ctl.on_token(1, "so far")
    ctl.finish_now("interrupted")
    assert stored(ctl)[-1] == ("assistant", "so far", "interrupted") and not ctl.generating


def test_a_reply_cut_off_by_a_quit_can_be_continued_after_a_restart(ctl):
    """An "interrupted" reply (a quit, a crash or a signal mid-reply, read back from the store)
    is written on with Continue, as a stopped one is; it had no Continue button."""
    ctl.send("a long one")
    ctl.on_token(1, "so far")
    ctl.finish_now("interrupted")
    conv = ctl.current_id
    ctl.new()
    ctl.open(conv, send_to_engine=True)  # (as a restart opens it)
    assert ctl.messages[-1].status == "interrupted" and ctl.can_continue()
    assert ctl.continue_reply() and ctl.engine.requests[-1][1] == "continue"
    ctl.on_token(2, " and more.")
    assert ctl.on_reply_finished(ReplyResult(2, "eos", "so far and more.")) == "done"
    assert stored(ctl)[-1] == ("assistant", "so far and more.", "done")


def test_open_new_and_delete(ctl):
    ctl.send("first chat")
    ctl.on_token(1, "reply")
    finish(ctl)
    first = ctl.current_id
    ctl.new()
    assert ctl.current_id is None and ctl.messages == [] and ctl.engine.histories[-1] == []
    ctl.send("second chat")
    finish(ctl, reply="r2")
    history = ctl.open(first, send_to_engine=True)
    assert [m["content"] for m in history] == ["first chat", "reply"] and ctl.engine.histories[-1] == history
    ctl.delete(first)  # the open one: a new chat takes its place
    assert ctl.current_id is None and ctl.store.get_conversation(first) is None


def test_pins_are_recorded(ctl):
    ctl.send("pin me")
    finish(ctl, reply="ok")
    assert ctl.set_pinned(0, True) and ctl.store.messages(ctl.current_id)[0].pinned
    assert not ctl.set_pinned(5, True)


def test_a_store_failure_is_shown_and_the_chat_goes_on(ctl, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ctl.store, "append_message", full)
    ctl.send("disk is full")
    assert ctl.view.errors and "No space left" in ctl.view.errors[0][0]
    assert [m.content for m in ctl.messages] == ["disk is full", ""] and ctl.generating  # shown, answered
    ctl.on_token(1, "still works")
    assert finish(ctl) == "done" and ctl.messages[-1].content == "still works"


def test_editing_a_middle_message_forks_and_the_old_branch_is_kept(ctl):
    for i, q in enumerate(["one", "two", "three"]):
        ctl.send(q)
        finish(ctl, reply=f"answer {q}")
    ctl.resend_edit(2, "TWO")  # the second question
    finish(ctl, reply="answer TWO")
    assert [m.content for m in ctl.messages] == ["one", "answer one", "TWO", "answer TWO"]
    assert ctl.engine.selected[-1] == ctl.history()[:2]
    assert (ctl.messages[2].version, ctl.messages[2].versions) == (2, 2)
    assert ctl.show_version(2, -1)  # back to the old branch, all of it
    assert [m.content for m in ctl.messages] == ["one", "answer one", "two", "answer two", "three", "answer three"]
    assert ctl.engine.selected[-1] == ctl.history()
    assert not ctl.show_version(2, -1)  # no version before the first
    reopened = ConversationStore(ctl.store.path)
    try:  # the version shown is kept in the store
        assert [m.content for m in reopened.messages(ctl.current_id)][2:] == ["two", "answer two", "three", "answer three"]
    finally:
        reopened.close()
    assert ctl.show_version(2, +1)
    assert [m.content for m in ctl.messages][2:] == ["TWO", "answer TWO"]


def test_regenerate_twice_and_step_between_the_versions(ctl):
    ctl.send("q")
    finish(ctl, reply="v1")
    for v in ("v2", "v3"):
        ctl.regenerate()
        finish(ctl, reply=v)
    assert [(m.content, m.version, m.versions) for m in ctl.messages][-1] == ("v3", 3, 3)
    assert ctl.show_version(1, -1) and ctl.messages[-1].content == "v2"
    assert ctl.show_version(1, -1) and ctl.messages[-1].content == "v1"
    assert not ctl.show_version(1, -1)
    assert ctl.view.calls[-1][0] == "replace_messages_from" and ctl.view.calls[-1][1] == 1
    ctl.open(ctl.current_id)  # what a restart shows
    assert [(m.content, m.version, m.versions) for m in ctl.messages][-1] == ("v1", 1, 3)
    # a regenerate stopped before its first token shows the version it was to replace again
    ctl.regenerate()
    ctl.stop()
    finish(ctl, reason="cancelled", reply="")
    assert [(m.content, m.version, m.versions) for m in ctl.messages][-1] == ("v1", 1, 3)
    assert ctl.engine.selected[-1] == ctl.history()


def test_continue_extends_the_same_message(ctl):
    ctl.send("write a lot")
    ctl.on_token(1, "It was a dark")
    assert finish(ctl, reason="max_tokens") == "done"
    assert ctl.messages[-1].cut_short and ctl.can_continue()
    assert ctl.store.messages(ctl.current_id)[-1].meta["cut_short"] is True
    assert ctl.continue_reply()
    assert ctl.engine.requests[-1][1] == "continue" and ctl.view.calls[-1][0] == "resume_reply"
    assert stored(ctl)[-1] == ("assistant", "It was a dark", "streaming")
    ctl.on_token(2, " and stormy night.")
    ctl.save_partial()
    assert stored(ctl)[-1] == ("assistant", "It was a dark and stormy night.", "streaming")
    assert ctl.on_reply_finished(ReplyResult(2, "eos", "It was a dark and stormy night.")) == "done"
    assert stored(ctl) == [("user", "write a lot", "done"), ("assistant", "It was a dark and stormy night.", "done")]
    assert not ctl.messages[-1].cut_short and not ctl.can_continue()
    # an engine error after a few new tokens keeps the old text and the new
    ctl.messages[-1].meta["cut_short"] = True
    ctl.continue_reply()
    ctl.on_token(3, " More")
    ctl.on_reply_finished(ReplyResult(3, "error", " More", error="boom"))
    assert stored(ctl)[-1] == ("assistant", "It was a dark and stormy night. More", "interrupted")


def test_each_reply_records_the_model_that_wrote_it(ctl):
    model = {"model": {"name": "SmolLM2-360M", "sampling": {"temperature": 0.2}}}
    ctl.reply_meta = lambda: model
    ctl.send("hi")
    finish(ctl, reply="hello")
    assert ctl.messages[-1].meta["model"]["name"] == "SmolLM2-360M"
    assert ctl.store.messages(ctl.current_id)[-1].meta["model"] == model["model"]
    assert ctl.store.messages(ctl.current_id)[0].meta == {}  # the user's message has no model


def test_import_of_an_export_gives_the_same_messages(ctl, tmp_path):
    ctl.send("first")
    finish(ctl, reply="reply one")
    ctl.set_pinned(0, True)
    ctl.regenerate()
    finish(ctl, reply="reply two")
    for fmt, text in (("json", ctl.store.export_json(ctl.current_id, all_versions=True)),
                      ("md", ctl.store.export_markdown(ctl.current_id))):
        path = tmp_path / f"chat.{fmt}"
        path.write_text(text, encoding="utf-8")
        new_id = ctl.import_file(path)
        assert new_id is not None and new_id != ctl.current_id, ctl.view.errors
        got = [(m.role, m.content, m.status, m.pinned) for m in ctl.store.messages(new_id)]
        assert got == [(m.role, m.content, m.status, m.pinned) for m in ctl.store.messages(ctl.current_id)]
        assert ctl.store.get_conversation(new_id).title == "first"
    # the JSON export carried the other version too
    assert len(ctl.store.all_messages(new_id - 1)) == 3


@pytest.mark.parametrize("content, said", [
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file"),
    (b"{not json", "not valid JSON"),
    (b'{"format": "something-else"}', "not a Pinwheel conversation export"),
    (b'{"format": "pinwheel-conversation", "version": 9, "messages": []}', "newer Pinwheel"),
    (b'{"format": "pinwheel-conversation", "messages": [{"role": "wizard", "content": "x"}]}', "role"),
    (b'{"format": "pinwheel-conversation", "messages": [{"role": "user", "content": 5}]}', "no text"),
    (b'{"format": "pinwheel-conversation", "messages": []}', "no messages"),
    (b"# Notes\n\nsome text without headings\n", "no messages in the form"),
])
def test_a_bad_import_file_says_why_in_plain_words(ctl, tmp_path, content, said):
    path = tmp_path / ("bad.md" if content.startswith(b"#") else "bad.json")
    path.write_bytes(content)
    before = ctl.store.list_conversations()
    assert ctl.import_file(path) is None
    (message, kind), = ctl.view.errors
    assert said in message and path.name in message and "\n" not in message and kind == "import"
    assert ctl.store.list_conversations() == before  # nothing half-imported


def test_import_keeps_markdown_headings_inside_code_blocks_as_text(ctl, tmp_path):
    path = tmp_path / "code.md"
    path.write_text("# Code chat\n\n## User\n\nshow me\n\n## Assistant · stopped\n\n```md\n## User\n```\n",
                    encoding="utf-8")
    cid = ctl.import_file(path)
    got = [(m.role, m.content, m.status) for m in ctl.store.messages(cid)]
    assert got == [("user", "show me", "done"), ("assistant", "```md\n## User\n```", "stopped")]


def test_a_failed_empty_reply_is_replaced_not_kept_as_a_version(ctl):
    ctl.send("q")
    finish(ctl, reason="error", reply="", error="boom")
    ctl.regenerate()
    finish(ctl, reply="an answer")
    assert stored(ctl) == [("user", "q", "done"), ("assistant", "an answer", "done")]
    assert ctl.messages[-1].versions == 1 and len(ctl.store.all_messages(ctl.current_id)) == 2
