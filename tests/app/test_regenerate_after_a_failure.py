"""QA of Gemma 4 / Qwen3.5 in the window: Regenerate after a Regenerate that failed.

Stop during a Regenerate's re-read made the engine fail (qwen3.5-0.8b: "Engine error
(IndexError)"), leaving an empty failed version of the reply. Regenerate again dropped that
version, which showed the one it had replaced again in the store, and stored the new reply after
that older reply instead of as another version of it: the window showed question -> new reply,
but the store held question -> old reply -> new reply, two replies in a row once reopened.
"""
from __future__ import annotations

from tests.app.test_chat_controller import ctl, finish, stored  # noqa: F401  (the fixture)


def test_regenerate_after_a_failed_regenerate_is_another_version(ctl):  # noqa: F811
    ctl.send("q")
    finish(ctl, reply="v1")
    ctl.regenerate()
    finish(ctl, reason="error", reply="", error="IndexError: index 1 is out of bounds")
    assert [(m.content, m.status) for m in ctl.messages][-1] == ("", "error")
    ctl.regenerate()
    finish(ctl, reply="v2")
    assert stored(ctl) == [("user", "q", "done"), ("assistant", "v2", "done")]
    assert [(m.content, m.version, m.versions) for m in ctl.messages] == [("q", 1, 1), ("v2", 2, 2)]
    ctl.open(ctl.current_id)  # what a restart shows: the same
    assert [(m.role, m.content, m.version, m.versions) for m in ctl.messages] == [
        ("user", "q", 1, 1), ("assistant", "v2", 2, 2)]
    assert ctl.show_version(1, -1) and ctl.messages[-1].content == "v1"
    assert len(ctl.messages) == 2


def test_regenerate_after_a_failure_stopped_before_its_first_token_shows_the_old_reply(ctl):  # noqa: F811
    ctl.send("q")
    finish(ctl, reply="v1")
    ctl.regenerate()
    finish(ctl, reason="error", reply="", error="boom")
    ctl.regenerate()
    ctl.stop()
    finish(ctl, reason="cancelled", reply="")
    assert stored(ctl) == [("user", "q", "done"), ("assistant", "v1", "done")]
    assert [(m.content, m.versions) for m in ctl.messages] == [("q", 1), ("v1", 1)]
