"""Find in the open conversation: every match of the search text marked, one of them current.

The conversation search (the sidebar's box) finds which conversations hold the text; once one
is open, this marks where: each match in the messages' rendered text gets a highlight (Qt's
extra selections: the documents themselves are not changed), the current one in the theme's
selection colour, and stepping (F3, Shift+F3, Enter on the open conversation) scrolls the chat
to it. Matching ignores case, as the store's search does.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtGui import QColor, QPalette, QTextCursor, QTextFormat
from PySide6.QtWidgets import QTextEdit

MATCH_COLOR = QColor(255, 200, 0, 110)  # a marker's yellow, translucent: reads on light and dark


@dataclass
class Match:
    view: object  # the MarkdownView that shows it
    start: int
    end: int


class ChatFinder:
    """Marks `query` in a ChatView's messages; `step()` moves the current match."""

    def __init__(self, chat):
        self.chat = chat
        self.query = ""
        self.matches: list[Match] = []
        self.current = -1

    def find(self, query: str) -> int:
        """Mark every match of `query` (none for ""); returns how many. Nothing is current yet."""
        self.clear()
        self.query = query.strip()
        if not self.query:
            return 0
        if self.chat.offset:  # older messages are built on demand: a match may be among them
            self.chat.show_earlier(self.chat.offset)
        for w in self.chat.widgets:
            for view in w.body.views:
                cursor = view.document().find(self.query, 0)
                while not cursor.isNull():
                    self.matches.append(Match(view, cursor.selectionStart(), cursor.selectionEnd()))
                    cursor = view.document().find(self.query, cursor)
        self._mark()
        return len(self.matches)

    def refresh(self) -> None:
        """Mark the same text again, the same match current (without scrolling to it): after a
        theme switch re-renders the messages, the old marks point into text that was replaced."""
        if not self.query:
            return
        current = self.current
        self.find(self.query)
        if 0 <= current < len(self.matches):
            self.current = current
            self._mark()

    def step(self, forward: bool = True) -> int:
        """Make the next (or previous) match current, wrapping, and scroll the chat to it;
        returns its index (-1 when there is none)."""
        if not self.matches:
            return -1
        n = len(self.matches)
        self.current = (self.current + (1 if forward else -1)) % n if self.current >= 0 else (0 if forward else n - 1)
        self._mark()
        self._scroll_to(self.matches[self.current])
        return self.current

    def clear(self) -> None:
        views = {id(m.view): m.view for m in self.matches}
        self.matches, self.current, self.query = [], -1, ""
        for view in views.values():
            try:
                view.setExtraSelections([])
            except RuntimeError:  # its message was removed meanwhile
                pass

    def status(self) -> str:
        """What the status bar says: "Match 2 of 5 for “cat” (F3: next, Shift+F3: previous)"."""
        if not self.query:
            return ""
        if not self.matches:
            return f"No match for “{self.query}” in this conversation's text"
        at = f"Match {self.current + 1} of {len(self.matches)}" if self.current >= 0 else \
            f"{len(self.matches)} match{'es' if len(self.matches) != 1 else ''}"
        return f"{at} for “{self.query}” (F3: next, Shift+F3: previous)"

    def _mark(self) -> None:
        by_view: dict[int, list] = {}
        views = {}
        current = self.matches[self.current] if self.current >= 0 else None
        for m in self.matches:
            sel = QTextEdit.ExtraSelection()
            sel.cursor = QTextCursor(m.view.document())
            sel.cursor.setPosition(m.start)
            sel.cursor.setPosition(m.end, QTextCursor.MoveMode.KeepAnchor)
            if m is current:
                pal = m.view.palette()
                sel.format.setBackground(pal.color(QPalette.ColorRole.Highlight))
                sel.format.setForeground(pal.color(QPalette.ColorRole.HighlightedText))
            else:
                sel.format.setBackground(MATCH_COLOR)
            sel.format.setProperty(QTextFormat.Property.FullWidthSelection, False)
            by_view.setdefault(id(m.view), []).append(sel)
            views[id(m.view)] = m.view
        for key, view in views.items():
            view.setExtraSelections(by_view[key])

    def _scroll_to(self, m: Match) -> None:
        cursor = QTextCursor(m.view.document())
        cursor.setPosition(m.start)
        rect = m.view.cursorRect(cursor)
        at = m.view.mapTo(self.chat.widget(), rect.center())
        self.chat.ensureVisible(at.x(), at.y(), 0, self.chat.viewport().height() // 3)


class ChatSearch:
    """The sidebar's search carried into the open conversation: its matches marked when a
    result opens, stepped through with F3 / Shift+F3 / Enter, kept as messages come and go.
    Acts on the window's sidebar, status line, message box and open conversation."""

    def __init__(self, win, finder: ChatFinder):
        self.win = win
        self.finder = finder

    def _text(self) -> str:
        return self.win.sidebar.search.text()

    def _say(self, text: str) -> None:
        if text:
            self.win.stageLabel.setText(text)

    def find(self) -> None:
        """Mark the search box's text in the open conversation, the first match current."""
        if self.finder.find(self._text()):
            self.finder.step()
        self._say(self.finder.status())

    def query_changed(self) -> None:
        """The list was refreshed: a new search text is marked in the open conversation too."""
        if self._text().strip() != self.finder.query:
            self.find()

    def opened(self) -> None:
        """A conversation opened: from a search, show where it matches."""
        if self._text().strip():
            self.find()

    def step(self, forward: bool = True) -> None:
        """The next (or previous) match, scrolled to."""
        if not self.finder.query and self._text().strip():
            self.finder.find(self._text())
        self.finder.step(forward)
        self._say(self.finder.status() or "Nothing to find: type in the search box (Ctrl+F)")

    def messages_changed(self) -> None:
        """Messages came or went: the marks follow (the current one starts over)."""
        if self.finder.query:
            self.finder.find(self.finder.query)

    def activated(self, conversation_id: int) -> None:
        """Enter on a conversation: open it; on the open one, the next match (or the message box)."""
        w = self.win
        if conversation_id != w.current_id:
            w.open_conversation(conversation_id)
        elif self.finder.matches:
            self.step()
        else:
            w.input.setFocus()
