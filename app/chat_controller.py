"""The conversation under the window, without Qt: which chat is open, its messages, the reply in
progress and its request id, and every write to the store.

`ChatController` is the model the window renders (in the spirit of napari's Qt-free viewer
model under its `_qt` window): the window forwards what the user does (send, stop,
regenerate, edit, open, new, delete) and what the engine reports (tokens, the end of a reply),
and shows what the controller tells its `view` (a `ChatViewPort`). The engine is any object
with `generate(kind, text, sampling) -> request id`, `load_history(messages) -> request id` and
`cancel()` (the window's EngineController; a fake in tests). The store is app.store's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from .store import StoreError

TITLE_CHARS = 48
# what a reply's end becomes in the store ("error": the reply is kept, marked interrupted)
STORE_STATUS = {"done": "done", "stopped": "stopped", "interrupted": "interrupted", "error": "interrupted"}


@dataclass
class ChatMessage:
    role: str
    content: str
    status: str = "done"  # done | streaming | stopped | interrupted | error
    pinned: bool = False
    store_id: int | None = None


@dataclass
class Reply:
    """The reply being written: its request, its message, the text so far."""

    request: int
    message: ChatMessage
    parts: list[str] = field(default_factory=list)
    saved_len: int = 0  # how much of it the store has


class ChatViewPort(Protocol):
    """What the controller asks of the window."""

    def show_messages(self, messages: list[ChatMessage]) -> None: ...  # the whole chat, afresh
    def add_message(self, message: ChatMessage) -> None: ...
    def remove_messages_from(self, index: int) -> None: ...
    def begin_reply(self, message: ChatMessage) -> None: ...
    def reply_text(self, text: str) -> None: ...
    def end_reply(self, status: str, content: str) -> None: ...
    def status(self, text: str) -> None: ...
    def error(self, message: str, kind: str) -> None: ...
    def title(self, text: str) -> None: ...
    def conversations_changed(self) -> None: ...


def title_for(text: str) -> str:
    """A new chat's title: its first message on one line, cut to TITLE_CHARS."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1] + "…"


class ChatController:
    def __init__(self, store, engine, view: ChatViewPort, sampling: Callable[[], dict],
                 conversation_settings: Callable[[], dict]):
        self.store = store
        self.engine = engine
        self.view = view
        self.sampling = sampling  # the SamplingParams fields for the next reply
        self.conversation_settings = conversation_settings  # what a new chat records
        self.current_id: int | None = None
        self.messages: list[ChatMessage] = []
        self.reply: Reply | None = None
        self.history_request = 0

    # --- the store, never fatal -------------------------------------------------------------

    def safe(self, fn, *args, **kwargs):
        """Call the store; a failure (full disk, read-only folder) is shown, the chat goes on."""
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            self.view.error(str(exc), "store")
        except (OSError, ValueError) as exc:
            self.view.error(f"Couldn't save the conversation: {exc}", "store")
        return None

    @property
    def generating(self) -> bool:
        return self.reply is not None

    def history(self) -> list[dict]:
        """The conversation as the engine takes it (a failed reply that wrote nothing is left out)."""
        return [{"role": m.role, "content": m.content, "pinned": m.pinned, "interrupted": m.status != "done"}
                for m in self.messages if m.content or m.status not in ("error", "interrupted")]

    # --- what the user does -------------------------------------------------------------------

    def send(self, text: str) -> None:
        """A new user message (a new chat is created with the first one), then its reply."""
        if self.current_id is None:
            conv = self.safe(self.store.create_conversation, title_for(text), self.conversation_settings())
            if conv is not None:
                self.current_id = conv.id
                self.view.title(f"{conv.title} — Pinwheel")
                self.view.conversations_changed()
        self._add_user_message(text)
        self._begin_reply("send", text)

    def regenerate(self) -> None:
        """Answer the last user message again (its reply, if any, is replaced)."""
        if self.messages and self.messages[-1].role == "assistant":
            self._remove_from(len(self.messages) - 1)
        self._begin_reply("regenerate")

    def resend_edit(self, index: int, text: str) -> None:
        """The last user message, edited: it and what followed are replaced, then answered."""
        self._remove_from(index)
        self._add_user_message(text)
        self._begin_reply("edit", text)

    def stop(self) -> None:
        if self.generating:
            self.view.status("Stopping…")
            self.engine.cancel()

    def set_pinned(self, index: int, pinned: bool) -> bool:
        """The engine pinned (or unpinned) message `index`: record it."""
        if not 0 <= index < len(self.messages):
            return False
        m = self.messages[index]
        m.pinned = pinned
        if m.store_id is not None:
            self.safe(self.store.set_pinned, m.store_id, pinned)
        return True

    # --- conversations ------------------------------------------------------------------------

    def open(self, conversation_id: int, send_to_engine: bool = True) -> list[dict] | None:
        """Show a stored conversation (and read it into the model); returns its history."""
        rows = self.safe(self.store.messages, conversation_id)
        if rows is None:
            return None
        self.current_id = conversation_id
        self.messages = [ChatMessage(m.role, m.content, m.status, m.pinned, m.id) for m in rows if m.role != "system"]
        self.view.show_messages(self.messages)
        conv = self.safe(self.store.get_conversation, conversation_id)
        self.view.title(f"{conv.title} — Pinwheel" if conv else "Pinwheel")
        history = self.history()
        if send_to_engine:
            self.history_request = self.engine.load_history(history)
            self.view.status("Reading the conversation into the model…")
        return history

    def new(self) -> None:
        self.current_id = None
        self.messages = []
        self.view.show_messages(self.messages)
        self.view.title("New chat — Pinwheel")
        self.view.conversations_changed()
        self.history_request = self.engine.load_history([])

    def rename(self, conversation_id: int, title: str) -> None:
        self.safe(self.store.rename_conversation, conversation_id, title)
        if conversation_id == self.current_id:
            self.view.title(f"{title} — Pinwheel")

    def delete(self, conversation_id: int) -> None:
        if conversation_id == self.current_id:
            self.finish_now()
            self.new()
        self.safe(self.store.delete_conversation, conversation_id)
        self.view.conversations_changed()

    # --- the reply in progress ----------------------------------------------------------------

    def _add_user_message(self, text: str) -> None:
        """Show the user's message and save it (a store failure shows, the message stays)."""
        stored = self.safe(self.store.append_message, self.current_id, "user", text) \
            if self.current_id is not None else None
        m = ChatMessage("user", text, store_id=stored.id if stored else None)
        self.messages.append(m)
        self.view.add_message(m)

    def _begin_reply(self, kind: str, text: str = "") -> None:
        msg = ChatMessage("assistant", "", status="streaming")
        stored = self.safe(self.store.append_message, self.current_id, "assistant", "", status="streaming") \
            if self.current_id is not None else None
        msg.store_id = stored.id if stored else None
        self.messages.append(msg)
        # (the engine's answer comes back as a queued event, never before this returns)
        self.reply = Reply(self.engine.generate(kind, text, self.sampling()), msg)
        self.view.begin_reply(msg)

    def _remove_from(self, index: int) -> None:
        """Drop message `index` and everything after it, here, in the view and in the store."""
        message = self.messages[index]
        if self.current_id is not None and message.store_id is not None:
            stored = self.safe(self.store.get_message, message.store_id)
            if stored is not None:
                self.safe(self.store.delete_messages_from, self.current_id, stored.position)
        del self.messages[index:]
        self.view.remove_messages_from(index)

    def on_token(self, request: int, text: str) -> bool:
        """A piece of the reply; False when it belongs to no reply in progress (a stale one)."""
        r = self.reply
        if r is None or request != r.request:
            return False
        if not r.parts:
            self.view.status("Writing…")
        r.parts.append(text)
        self.view.reply_text(text)
        return True

    def save_partial(self) -> None:
        """Write what the reply has so far (the window calls this every second or so: a crash
        loses at most that)."""
        r = self.reply
        if r is None or r.message.store_id is None:
            return
        n = sum(map(len, r.parts))
        if n != r.saved_len:
            r.saved_len = n
            self.safe(self.store.update_message, r.message.store_id, "".join(r.parts))

    def on_reply_finished(self, result) -> str | None:
        """The engine's end of a reply (an app.engine_events.ReplyResult): record it. Returns the
        message's final status, or None when the result is not for the reply in progress."""
        r = self.reply
        if r is None or result.request != r.request:
            return None
        self.reply = None
        failed = result.reason == "error"
        content = result.reply if result.reply or not failed else "".join(r.parts)
        status = "error" if failed else ("stopped" if result.reason == "cancelled" else "done")
        r.message.content = content
        r.message.status = status
        self.view.end_reply(status, content)
        if status == "stopped" and not content:
            # stopped before the first token: nothing to keep; the user message stays (Regenerate answers it)
            self._remove_from(len(self.messages) - 1)
        elif r.message.store_id is not None:
            self.safe(self.store.finish_message, r.message.store_id, STORE_STATUS[status], content)
        history = self.history()
        if result.roles is not None and tuple(m["role"] for m in history) != result.roles:
            # a failure or an early stop left the engine's history unlike the window's: re-read it
            self.history_request = self.engine.load_history(history)
        self.view.conversations_changed()
        return status

    def finish_now(self, status: str = "stopped") -> None:
        """Leaving a conversation mid-reply: keep what was written, marked `status` (stopped;
        interrupted when the app itself is closing)."""
        r = self.reply
        if r is None:
            return
        self.reply = None
        content = "".join(r.parts)
        r.message.content = content
        r.message.status = status
        self.view.end_reply(status, content)
        if r.message.store_id is not None:
            self.safe(self.store.finish_message, r.message.store_id, status, content)


__all__ = ["ChatController", "ChatMessage", "ChatViewPort", "Reply", "title_for"]
