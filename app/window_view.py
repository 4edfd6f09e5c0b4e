"""The window as the chat controller's ChatViewPort (app.chat_controller): what the Qt-free
controller asks to show, done in the window's widgets. Duck-typed on the window: no import of
it, so imports flow one way (main_window -> window_view)."""
from __future__ import annotations


class WindowView:
    """The window as the controller's ChatViewPort: what to show, in widgets."""

    def __init__(self, win):
        self.win = win

    def show_messages(self, messages) -> None:
        self.win.chat.set_messages(messages)

    def add_message(self, message) -> None:
        self.win.chat.append(message)

    def remove_messages_from(self, index: int) -> None:
        self.win.chat.remove_from(index)

    def begin_reply(self, message) -> None:
        w = self.win
        w.chat.begin_stream(message)
        w.stageLabel.setText("Thinking…" if w.model_ready else "Waiting for the model to load…")
        w._save_timer.start()
        w._update_actions()

    def resume_reply(self, message) -> None:
        w = self.win
        w.chat.resume_stream(message)
        w.stageLabel.setText("Continuing the reply…")
        w._save_timer.start()
        w._update_actions()

    def replace_messages_from(self, index: int, messages) -> None:
        self.win.chat.replace_from(index, messages)

    def reply_text(self, text: str) -> None:
        self.win.chat.append_stream(text)

    def end_reply(self, status: str, content: str) -> None:
        self.win.chat.end_stream(status, content)

    def status(self, text: str) -> None:
        self.win.stageLabel.setText(text)

    def error(self, message: str, kind: str) -> None:
        self.win.show_error(message, kind)

    def title(self, text: str) -> None:
        self.win.setWindowTitle(text)

    def conversations_changed(self) -> None:
        self.win.refresh_conversations()

    def first_token(self, ttft_s: float) -> None:
        self.win.ttftLabel.setText(ttft_text(ttft_s))
        self.win.status.fit()  # (its text changed width)

    def reply_finished(self, result, status: str) -> None:
        """A reply ended (`status`: done, stopped, error ...): its speed, or why it failed."""
        w = self.win
        if status == "error":
            w.show_error(result.error or "The reply failed.", "engine")
            w.stageLabel.setText("The reply failed; the conversation is kept")
            return
        if result.decode_tok_s:
            w.speedLabel.setText(f"{result.decode_tok_s:.1f} tok/s")
        if result.ttft_s is not None:
            w.ttftLabel.setText(ttft_text(result.ttft_s))  # (the first token's, said again)
        text = f"{'Stopped after' if status == 'stopped' else 'Reply:'} {result.generated_tokens} tokens"
        if result.reason == "max_tokens":  # said where the eye is after a reply, not only in its badge
            text += ", cut short (Continue writes more)"
        w.stageLabel.setText(text)
        w.status.fit()  # the speed's text changed width


def ttft_text(ttft_s: float) -> str:
    """The status line's wait for a reply's first token: shown as it comes, and at the end."""
    return f"TTFT {ttft_s * 1000:.0f} ms"


def message_name(messages, index: int) -> str:
    """How the status line names a message: whose it is and how it starts, never an index the
    user cannot see ("your message “What is…”")."""
    if not 0 <= index < len(messages):
        return "the message"
    m = messages[index]
    words = " ".join(m.content.split())
    head = words if len(words) <= 28 else words[:27] + "…"
    who = "your message" if m.role == "user" else "the reply"
    return f"{who} “{head}”" if head else who
