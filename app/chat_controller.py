"""The conversation under the window, without Qt: which chat is open, its messages, the reply in
progress and its request id, and every write to the store.

`ChatController` is the model the window renders (in the spirit of napari's Qt-free viewer
model under its `_qt` window): the window forwards what the user does (send, stop,
regenerate, edit, continue, step versions, open, import, new, delete) and what the engine
reports (tokens, the end of a reply), and shows what the controller tells its `view` (a
`ChatViewPort`). The engine is any object with `generate(kind, text, sampling) -> request id`,
`load_history(messages) -> request id`, `select_history(messages) -> request id` and `cancel()`
(the window's EngineController; a fake in tests). The store is app.store's.

A conversation is a tree (see app.store): Regenerate adds another version of the last reply
and an edit another version of the question, each leaving the old ones in place; the
controller holds the branch shown, and stepping ‹ › to another version shows that one's branch
(the engine is told lazily: it re-reads only when the next reply needs it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from .conversation_import import ImportProblem, read_conversation
from .store import LAST, StoreError

TITLE_CHARS = 48
# what a reply's end becomes in the store ("error": the reply is kept, marked interrupted)
STORE_STATUS = {"done": "done", "stopped": "stopped", "interrupted": "interrupted", "error": "interrupted"}
# a reply that ended before its end and can be written on: stopped, or cut off by a quit, a
# crash or a signal (kept "interrupted" in the store)
CONTINUABLE = ("stopped", "interrupted")


@dataclass
class ChatMessage:
    role: str
    content: str
    status: str = "done"  # done | streaming | stopped | interrupted | error
    pinned: bool = False
    store_id: int | None = None
    meta: dict = field(default_factory=dict)  # the model that wrote it; whether it was cut short
    version: int = 1  # which of its versions (1-based) ...
    versions: int = 1  # ... of how many
    parent_id: int | None = None  # the stored message it follows

    @property
    def cut_short(self) -> bool:
        """The reply stopped at the reply-length limit (Continue writes more)."""
        return bool(self.meta.get("cut_short"))


@dataclass
class Reply:
    """The reply being written: its request, its message, the text so far."""

    request: int
    message: ChatMessage
    parts: list[str] = field(default_factory=list)
    saved_len: int = 0  # how much of it the store has
    base: str = ""  # the text it had before (Continue extends a reply)
    replaces: int | None = None  # the version shown before it (Regenerate), shown again if it comes to nothing

    def text(self) -> str:
        return self.base + "".join(self.parts)


class ChatViewPort(Protocol):
    """What the controller asks of the window."""

    def show_messages(self, messages: list[ChatMessage]) -> None: ...  # the whole chat, afresh
    def add_message(self, message: ChatMessage) -> None: ...
    def remove_messages_from(self, index: int) -> None: ...
    def begin_reply(self, message: ChatMessage) -> None: ...
    def resume_reply(self, message: ChatMessage) -> None: ...  # the last message streams on (Continue)
    def replace_messages_from(self, index: int, messages: list[ChatMessage]) -> None: ...  # another version
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


def _shown(m) -> ChatMessage:
    """A stored message (app.store.Message) as the chat shows it."""
    return ChatMessage(m.role, m.content, m.status, m.pinned, m.id, dict(m.meta), m.version, m.versions, m.parent_id)


class ChatController:
    def __init__(self, store, engine, view: ChatViewPort, sampling: Callable[[], dict],
                 conversation_settings: Callable[[], dict], reply_meta: Callable[[], dict] | None = None):
        self.store = store
        self.engine = engine
        self.view = view
        self.sampling = sampling  # the SamplingParams fields for the next reply
        self.conversation_settings = conversation_settings  # what a new chat records
        self.reply_meta = reply_meta or dict  # what a new reply records: the model writing it
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
        """Answer the last user message again: a new version of its reply (the old ones are kept,
        a step away with ‹ ›)."""
        parent, replaces = LAST, None
        if self.messages and self.messages[-1].role == "assistant":
            last = self.messages[-1]
            if last.store_id is None or not last.content:  # never stored, or nothing in it: not a version
                # ...but it was one of the question's replies: the new one follows the same question.
                # (By default it followed the store's shown branch, where deleting this one had shown
                # the version it replaced again: after a Regenerate that failed, the next reply was
                # stored after that older reply, two replies in a row once the chat was reopened.)
                if last.store_id is not None and last.parent_id is not None:
                    parent = last.parent_id
                self._remove_from(len(self.messages) - 1)
            else:
                parent, replaces = last.parent_id, last.store_id
                del self.messages[-1]
                self.view.remove_messages_from(len(self.messages))
        self._begin_reply("regenerate", parent=parent)
        self.reply.replaces = replaces

    def resend_edit(self, index: int, text: str) -> None:
        """User message `index`, edited: the conversation forks there. The edit is a new version
        of the message; the old one keeps what followed it (‹ › steps back to that branch)."""
        old = self.messages[index]
        if old.store_id is None:
            self._remove_from(index)
            parent = LAST
        else:
            parent = old.parent_id
            del self.messages[index:]
            self.view.remove_messages_from(index)
        self.history_request = self.engine.select_history(self.history())  # the fork's start (lazy)
        self._add_user_message(text, parent=parent)
        self._begin_reply("send", text)

    def continue_reply(self) -> bool:
        """Write more of the last reply (cut short at the length limit, or stopped): the same
        message grows from where it ended."""
        m = self.messages[-1] if self.messages else None
        if not self.can_continue():
            return False
        m.status = "streaming"
        if m.store_id is not None:
            self.safe(self.store.restart_message, m.store_id)
        self.reply = Reply(self.engine.generate("continue", "", self.sampling()), m, base=m.content,
                           saved_len=len(m.content))
        self.view.resume_reply(m)
        return True

    def can_continue(self) -> bool:
        m = self.messages[-1] if self.messages else None
        return (not self.generating and m is not None and m.role == "assistant" and bool(m.content)
                and (m.cut_short or m.status in CONTINUABLE))

    def show_version(self, index: int, step: int) -> bool:
        """Step message `index` to its previous (-1) or next (+1) version: that version's branch
        is shown, here, in the view, in the store (kept across restarts) and, lazily, in the engine."""
        if self.generating or not 0 <= index < len(self.messages):
            return False
        m = self.messages[index]
        if m.store_id is None or m.versions < 2:
            return False
        versions = self.safe(self.store.versions, m.store_id) or []
        k = next((i for i, v in enumerate(versions) if v.id == m.store_id), None)
        if k is None or not 0 <= k + step < len(versions):
            return False
        self.safe(self.store.show_version, versions[k + step].id)
        self._reload_from(index)
        self.history_request = self.engine.select_history(self.history())
        return True

    def _reload_from(self, index: int) -> None:
        """The store's shown branch from message `index` on replaces what is shown there."""
        rows = self.safe(self.store.messages, self.current_id) if self.current_id is not None else None
        if rows is None:
            return
        shown = [_shown(m) for m in rows if m.role != "system"]
        self.messages[index:] = shown[index:]
        self.view.replace_messages_from(index, self.messages[index:])

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
        self.messages = [_shown(m) for m in rows if m.role != "system"]
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

    def import_file(self, path) -> int | None:
        """A conversation from an export file, as a new chat; returns its id (None: the view was
        told, in plain words, why not). The file's text is checked, never run."""
        try:
            imported = read_conversation(path)
        except ImportProblem as exc:
            self.view.error(str(exc), "import")
            return None
        conv = self.safe(self.store.import_conversation, imported.title, imported.settings, imported.messages)
        if conv is None:
            return None
        self.view.conversations_changed()
        return conv.id

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

    def _stored(self, role: str, text: str, status: str = "done", meta: dict | None = None, parent=LAST):
        """Save a new message after `parent` (default: the last one shown); None on a failure."""
        if self.current_id is None:
            return None
        return self.safe(self.store.append_message, self.current_id, role, text, status=status, meta=meta,
                         parent_id=parent)

    def _add_user_message(self, text: str, parent=LAST) -> None:
        """Show the user's message and save it (a store failure shows, the message stays)."""
        stored = self._stored("user", text, parent=parent)
        m = _shown(stored) if stored else ChatMessage("user", text)
        self.messages.append(m)
        self.view.add_message(m)

    def _begin_reply(self, kind: str, text: str = "", parent=LAST) -> None:
        meta = self.reply_meta()
        stored = self._stored("assistant", "", "streaming", meta, parent)
        msg = _shown(stored) if stored else ChatMessage("assistant", "", status="streaming", meta=dict(meta))
        self.messages.append(msg)
        # (the engine's answer comes back as a queued event, never before this returns)
        self.reply = Reply(self.engine.generate(kind, text, self.sampling()), msg)
        self.view.begin_reply(msg)

    def _remove_from(self, index: int) -> None:
        """Drop message `index` and everything after it, here, in the view and in the store."""
        message = self.messages[index]
        if self.current_id is not None and message.store_id is not None:
            self.safe(self.store.delete_message, message.store_id)
        del self.messages[index:]
        self.view.remove_messages_from(index)

    def in_progress(self, request: int) -> bool:
        """Whether `request` is the reply in progress (not a stale one)."""
        return self.reply is not None and request == self.reply.request

    def on_token(self, request: int, text: str) -> bool:
        """A piece of the reply; False when it belongs to no reply in progress (a stale one)."""
        if not self.in_progress(request):
            return False
        r = self.reply
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
        text = r.text()
        if len(text) != r.saved_len:
            r.saved_len = len(text)
            self.safe(self.store.update_message, r.message.store_id, text)

    def on_reply_finished(self, result) -> str | None:
        """The engine's end of a reply (an app.engine_events.ReplyResult): record it. Returns the
        message's final status, or None when the result is not for the reply in progress."""
        r = self.reply
        if r is None or result.request != r.request:
            return None
        self.reply = None
        failed = result.reason == "error"
        content = result.reply if result.reply or not failed else r.text()
        if r.base and not content.startswith(r.base):  # (a Continue that failed before its first token)
            content = r.text()
        status = "error" if failed else ("stopped" if result.reason == "cancelled" else "done")
        r.message.content = content
        r.message.status = status
        r.message.meta["cut_short"] = result.reason == "max_tokens"
        self.view.end_reply(status, content)
        reloaded = False
        if status == "stopped" and not content:
            # stopped before the first token: nothing to keep; the user message stays (Regenerate
            # answers it), or the version it was to replace is shown again
            index = len(self.messages) - 1
            self._remove_from(index)
            if r.replaces is not None:
                self.safe(self.store.show_version, r.replaces)
            self._reload_from(index)
            reloaded = len(self.messages) > index
        elif r.message.store_id is not None:
            self.safe(self.store.finish_message, r.message.store_id, STORE_STATUS[status], content,
                      {"cut_short": r.message.cut_short})
        history = self.history()
        if reloaded:  # the engine's empty reply is not the version shown again
            self.history_request = self.engine.select_history(history)
        elif result.roles is not None and tuple(m["role"] for m in history) != result.roles:
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
        content = r.text()
        r.message.content = content
        r.message.status = status
        self.view.end_reply(status, content)
        if r.message.store_id is not None:
            self.safe(self.store.finish_message, r.message.store_id, status, content)


__all__ = ["ChatController", "ChatMessage", "ChatViewPort", "Reply", "title_for"]
