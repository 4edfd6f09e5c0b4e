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
        self.cancelled = 0

    def generate(self, kind, text="", sampling=None):
        self.requests.append((len(self.requests) + 1, kind, text, dict(sampling or {})))
        return len(self.requests)

    def load_history(self, messages):
        self.histories.append(list(messages))
        return 1000 + len(self.histories)

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


def test_regenerate_and_edit_replace_what_they_replace(ctl):
    ctl.send("question")
    ctl.on_token(1, "first answer")
    finish(ctl)
    ctl.regenerate()
    ctl.on_token(2, "second answer")
    finish(ctl)
    assert stored(ctl) == [("user", "question", "done"), ("assistant", "second answer", "done")]
    ctl.resend_edit(0, "question, edited")
    ctl.on_token(3, "third")
    finish(ctl)
    assert stored(ctl) == [("user", "question, edited", "done"), ("assistant", "third", "done")]
    assert ctl.engine.requests[-1][1:3] == ("edit", "question, edited")


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
