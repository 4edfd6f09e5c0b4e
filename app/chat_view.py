"""The chat pane: one widget per message, the streaming reply, and what the model still sees.

Each message is a small frame (role, status badges, the model that wrote a reply, a ‹ 1/3 ›
stepper between its versions, Continue / Edit / Pin / Copy buttons) over a
:class:`~app.markdown_view.MarkdownStack`.  Messages whose tokens have all left the KV window
are drawn faded, and the one message the window cuts has the start it no longer sees faded; a
marker sits at the boundary ("N tokens out of view"); pinned messages (their
tokens are sinks) carry a "pinned" marker.  For a hybrid model (:meth:`ChatView.set_hybrid`) the
marker and the faded messages say that the text is out of the attention window but still
carried in the DeltaNet layers' summary, not that the model no longer sees it.  The streamed
reply is coalesced: :meth:`ChatView.append_stream` only appends to a buffer, and a ~30 Hz timer
re-renders the one growing message.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .chat_controller import CONTINUABLE, ChatMessage  # noqa: F401 (ChatMessage: the chat's message; re-exported)
from .elided_label import ElidedLabel
from .memory_gauge import wrapped
from .memory_words import HybridMemory
from .reply_label import label_text, label_tooltip
from .markdown_view import (COPY_CODE_LINK, SINGLE_VIEW_CHARS, THINKING_LINK, MarkdownStack, blend, fold_thinking,
                            label_code_blocks)


def tokens(n: int) -> str:
    return f"{n:,} token{'s' if n != 1 else ''}"


BUILT_TAIL = 80  # messages built when a conversation opens (the newest); older ones on demand
BATCH = 100  # older messages built at a time
READING_WIDTH = 920  # px: the widest the message column gets
FLUSH_MS = 33  # ~30 Hz: how often streamed text reaches the screen
PLACEHOLDER = ("Say hello — Enter sends, Shift+Enter starts a new line.\n"
               "Other models on this machine: File → Model library… (Ctrl+Shift+O).")

ROLE_TITLES = {"user": "You", "assistant": "Assistant", "system": "System"}
STATUS_BADGES = {
    "streaming": "● writing…",
    "stopped": "■ stopped",
    "interrupted": "⚠ interrupted",
    "error": "⚠ failed",
}
CUT_BADGE = "✂ cut short"
CUT_TIP = ("The reply reached the “Max reply tokens” setting and stopped mid-way. Continue writes more of "
           "the same reply; a larger limit in the settings lets the next ones run longer.")


@dataclass(frozen=True)
class MessageMemoryView:
    """How much of one message the model still sees (from SessionStats.messages)."""

    tokens: int
    in_cache: int
    pinned: bool

    @property
    def faded(self) -> bool:
        return not self.pinned and self.tokens > 0 and self.in_cache <= 0

    @property
    def partial(self) -> bool:
        return not self.pinned and 0 < self.in_cache < self.tokens


class MessageWidget(QFrame):
    pinClicked = Signal(object, bool)  # self, wanted state
    copyClicked = Signal(object)
    editClicked = Signal(object)
    continueClicked = Signal(object)
    versionClicked = Signal(object, int)  # self, -1 (previous) or +1 (next)
    linkClicked = Signal(QUrl)
    codeCopied = Signal(str)  # a code block's Copy link put this on the clipboard

    def __init__(self, message: ChatMessage, parent=None):
        super().__init__(parent)
        self.message = message
        self.memory: MessageMemoryView | None = None
        self.hybrid: HybridMemory | None = None  # the model's summary of the whole chat (a hybrid's)
        self.setObjectName("message")
        self.setProperty("role", message.role)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAutoFillBackground(message.role == "user")
        if message.role == "user":
            self.setBackgroundRole(QPalette.ColorRole.AlternateBase)

        self.roleLabel = QLabel(ROLE_TITLES.get(message.role, message.role))
        f = self.roleLabel.font()
        f.setBold(True)
        self.roleLabel.setFont(f)
        self.badge = ElidedLabel()  # (these three give way in a narrow window: ends in "…")
        self.badge.setObjectName("messageBadge")
        self.memoryLabel = ElidedLabel()
        self.memoryLabel.setObjectName("messageMemory")
        small = QFont(self.memoryLabel.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        self.memoryLabel.setFont(small)
        self.badge.setFont(small)
        self.modelLabel = ElidedLabel()  # which model wrote this reply (settings on hover)
        self.modelLabel.setObjectName("messageModel")
        self.modelLabel.setFont(small)
        self.prevVersionButton = QToolButton(text="‹")
        self.prevVersionButton.setObjectName("previousVersionButton")
        self.prevVersionButton.clicked.connect(lambda: self.versionClicked.emit(self, -1))
        self.versionLabel = QLabel()
        self.versionLabel.setObjectName("versionLabel")
        self.versionLabel.setFont(small)
        self.nextVersionButton = QToolButton(text="›")
        self.nextVersionButton.setObjectName("nextVersionButton")
        self.nextVersionButton.clicked.connect(lambda: self.versionClicked.emit(self, +1))
        self.continueButton = QToolButton(text="Continue")
        self.continueButton.setObjectName("continueButton")
        self.continueButton.setToolTip("Write more of this reply, from where it stopped")
        self.continueButton.clicked.connect(lambda: self.continueClicked.emit(self))
        self.continueButton.setVisible(False)

        self.pinButton = QToolButton(text="Pin")
        self.pinButton.setObjectName("pinButton")
        self.pinButton.setCheckable(True)
        self.pinButton.setToolTip("Pin: keep this message's tokens in the sinks so the model always sees it")
        self.pinButton.clicked.connect(lambda checked: self._pin_clicked(checked))
        self.copyButton = QToolButton(text="Copy")
        self.copyButton.setToolTip("Copy this message as Markdown")
        self.copyButton.clicked.connect(lambda: self.copyClicked.emit(self))
        self.editButton = QToolButton(text="Edit")
        self.editButton.setToolTip("Edit this message and send it again (the conversation forks here; "
                                   "‹ › steps back to the old version)")
        self.editButton.clicked.connect(lambda: self.editClicked.emit(self))
        self.editButton.setVisible(False)
        for b in (self.pinButton, self.copyButton, self.editButton, self.continueButton, self.prevVersionButton,
                  self.nextVersionButton):
            b.setAutoRaise(True)
            b.setFocusPolicy(Qt.FocusPolicy.TabFocus)

        # The buttons sit on the header's line, or on a line of their own below it where the chat
        # is too narrow for both (fit_header): on one line, a reply with ‹ 2/2 ›, Continue, Pin and
        # Copy needed 469 px, wider than the chat at 800 px with the memory panel (451 px) or at the
        # narrowest window (472 px), so its Copy button, its text and the out-of-view divider
        # were cut off at the right (the chat never scrolls sideways).
        self.headButtons = QWidget(self)
        self.headButtons.setObjectName("messageButtons")
        buttons = QHBoxLayout(self.headButtons)
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.setSpacing(8)
        for b in (self.prevVersionButton, self.versionLabel, self.nextVersionButton, self.continueButton,
                  self.editButton, self.pinButton, self.copyButton):
            buttons.addWidget(b)
        self.head = head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.setSpacing(8)
        head.addWidget(self.roleLabel)
        head.addWidget(self.modelLabel)
        head.addWidget(self.badge)
        head.addWidget(self.memoryLabel)
        head.addStretch(1)
        head.addWidget(self.headButtons)
        self.avail: int | None = None  # the width the chat gives a message (set by the ChatView)

        self.body = MarkdownStack(self)
        self.show_thinking = False
        self._code_blocks: list[str] = []  # the code of each fenced block, for its Copy link
        self.body.linkClicked.connect(self._link)
        self.body.menuRequested.connect(lambda at: self.context_menu().exec(at))
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(lambda p: self.context_menu().exec(self.mapToGlobal(p)))
        self.body.setAccessibleName(f"{self.roleLabel.text()} message")

        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(2)
        lay.addLayout(head)
        lay.addWidget(self.body)
        self.refresh()

    def _pin_clicked(self, checked: bool) -> None:
        # The button shows the real state; the window decides after previewing the cost.
        self.pinButton.setChecked(self.message.pinned)
        self.pinClicked.emit(self, checked)

    def context_menu(self) -> QMenu:
        """Right-click: pin/unpin (its cost is previewed before anything changes), copy, edit."""
        menu = QMenu(self)
        selection = self.body.selected_text()
        if selection:
            menu.addAction("Copy selection", lambda: QGuiApplication.clipboard().setText(selection))
        pin = menu.addAction("Unpin" if self.message.pinned else "Pin: always keep in view",
                             lambda: self._pin_clicked(not self.message.pinned))
        pin.setEnabled(self.pinButton.isEnabled())
        menu.addAction("Copy message", lambda: self.copyClicked.emit(self))
        if self.editButton.isVisibleTo(self):
            menu.addAction("Edit and resend", lambda: self.editClicked.emit(self))
        if self.continueButton.isVisibleTo(self):
            menu.addAction("Continue this reply", lambda: self.continueClicked.emit(self))
        return menu

    def buttons(self) -> list[QToolButton]:
        """Its buttons in Tab order."""
        return [self.prevVersionButton, self.nextVersionButton, self.continueButton, self.editButton,
                self.pinButton, self.copyButton]

    def set_index(self, index: int) -> None:
        who = ROLE_TITLES.get(self.message.role, self.message.role)
        self.prevVersionButton.setAccessibleName(f"Previous version of message {index + 1} ({who})")
        self.nextVersionButton.setAccessibleName(f"Next version of message {index + 1} ({who})")
        self.continueButton.setAccessibleName(f"Continue message {index + 1}")
        self.pinButton.setAccessibleName(f"Pin message {index + 1} ({who})")
        self.copyButton.setAccessibleName(f"Copy message {index + 1} ({who})")
        self.editButton.setAccessibleName(f"Edit message {index + 1} and resend")

    def display_text(self) -> str:
        """The message as shown: a reasoning block folded unless the user opened it, each code
        block labelled with its language and a Copy link."""
        text, self._code_blocks = label_code_blocks(fold_thinking(self.message.content, self.show_thinking))
        return text

    def _link(self, url) -> None:
        link = url.toString()
        if link == THINKING_LINK:  # the fold's own show/hide link
            self.show_thinking = not self.show_thinking
            self.body.set_markdown(self.display_text())
            return
        if link.startswith(COPY_CODE_LINK):  # a code block's Copy: its code, not the Markdown
            try:
                code = self._code_blocks[int(link[len(COPY_CODE_LINK):])]
            except (ValueError, IndexError):
                return
            QGuiApplication.clipboard().setText(code)
            self.codeCopied.emit(code)
            return
        self.linkClicked.emit(url)

    @property
    def faded(self) -> bool:
        return bool(self.memory and self.memory.faded)

    def refresh(self, render: bool = True) -> None:
        """Re-render text (unless `render` is False), status and memory markers."""
        m = self.message
        if render:
            self.body.set_markdown(self.display_text() if m.content or m.status != "done" else "*(empty)*")
        badges = []
        if m.status in STATUS_BADGES:
            badges.append(STATUS_BADGES[m.status])
        if m.cut_short and m.status != "streaming":
            badges.append(CUT_BADGE)
        self.badge.setText("  ".join(badges))
        self.badge.setToolTip(CUT_TIP if m.cut_short else "")
        self.badge.setVisible(bool(badges))
        label = label_text(m.meta) if m.role == "assistant" else ""
        self.modelLabel.setText(f"· {label}" if label else "")
        self.modelLabel.setToolTip(label_tooltip(m.meta) if label else "")
        self.modelLabel.setVisible(bool(label))
        many = m.versions > 1
        for w in (self.prevVersionButton, self.versionLabel, self.nextVersionButton):
            w.setVisible(many)
        if many:
            self.versionLabel.setText(f"{m.version}/{m.versions}")
            self.versionLabel.setAccessibleName(f"Version {m.version} of {m.versions}")
            self.prevVersionButton.setEnabled(m.version > 1)
            self.nextVersionButton.setEnabled(m.version < m.versions)
        self.pinButton.setChecked(m.pinned)
        self.pinButton.setText("Unpin" if m.pinned else "Pin")
        self.pinButton.setEnabled(m.status != "streaming")
        self._refresh_memory()
        self.fit_header()

    def one_line_width(self) -> int:
        """The narrowest this message can be with its buttons on the header's line (the labels
        elided as far as they go), whichever line they are on now."""
        m = self.layout().contentsMargins()
        shown = [w for w in (self.roleLabel, self.modelLabel, self.badge, self.memoryLabel, self.headButtons)
                 if not w.isHidden()]
        return (m.left() + m.right() + sum(w.minimumSizeHint().width() for w in shown)
                + self.head.spacing() * (len(shown) - 1))

    def buttons_below(self) -> bool:
        """Whether the buttons are on a line of their own, below the header's labels."""
        return self.head.indexOf(self.headButtons) < 0

    def fit_header(self, avail: int | None = None) -> None:
        """The buttons on the header's line where `avail` (the chat's width for a message) has
        room for them, else on a line of their own below it, right-aligned."""
        if avail is not None:
            self.avail = avail
        if self.avail is None:
            return
        below = self.avail < self.one_line_width()
        if below == self.buttons_below():
            return
        lay = self.layout()
        if below:
            self.head.removeWidget(self.headButtons)
            lay.insertWidget(1, self.headButtons, 0, Qt.AlignmentFlag.AlignRight)
        else:
            lay.removeWidget(self.headButtons)
            self.head.addWidget(self.headButtons)

    def _refresh_memory(self) -> None:
        mem, m = self.memory, self.message
        tip = ""
        if m.pinned:  # plain words first; the term in the tooltip (issue 23's plain words)
            text = "◆ pinned: always kept in view"
            tip = ("Pinned: the model keeps this message in view however long the conversation runs. It is held "
                   "with your system prompt among the attention sinks, the few tokens the memory never lets go of.")
        elif mem is None:
            text = ""
        elif mem.faded:
            text = f"out of view ({mem.tokens:,} tokens)" if self.hybrid is None else \
                f"summary only ({mem.tokens:,} tokens)"  # (short: a narrow chat elides the header)
            tip = "" if self.hybrid is None else wrapped(self.hybrid.out_of_view_tip())
        elif mem.partial:
            text = f"partly out of view: last {mem.in_cache:,} of {mem.tokens:,} tokens seen"
            if self.hybrid is not None:
                tip = wrapped(self.hybrid.out_of_view_tip())
        else:
            text = ""
        self.memoryLabel.setText(text)
        self.memoryLabel.setToolTip(tip)
        self.memoryLabel.setVisible(bool(text))
        # a message cut by the window: its start, which the model no longer sees, fades in place
        cut = mem is not None and mem.partial and not m.pinned
        self.body.set_unseen(1 - mem.in_cache / mem.tokens if cut else 0.0)
        faded = self.faded
        if self.property("faded") != faded:
            self.setProperty("faded", faded)
            self.body.set_faded(faded)
            self._style_role()

    def _style_role(self) -> None:
        """The role line in the theme's text colour (inherited), or faded towards the window
        for a message out of view: only that one colour is set, so a theme switch shows."""
        if not self.faded:
            self.roleLabel.setPalette(QPalette())  # inherit everything
            return
        base = self.parentWidget().palette() if self.parentWidget() else self.palette()
        pal = QPalette()
        pal.setColor(QPalette.ColorRole.WindowText, blend(base.color(QPalette.ColorRole.WindowText),
                                                         base.color(QPalette.ColorRole.Window), 0.6))
        self.roleLabel.setPalette(pal)

    def changeEvent(self, e):  # noqa: N802
        if e.type() == QEvent.Type.ApplicationPaletteChange and self.faded:
            self._style_role()  # the faded colour is blended from the theme: blend it again
        super().changeEvent(e)

    def set_memory(self, memory: MessageMemoryView | None, hybrid: HybridMemory | None = None) -> None:
        if memory != self.memory or hybrid != self.hybrid:
            self.memory, self.hybrid = memory, hybrid
            self._refresh_memory()


class ChatView(QScrollArea):
    """objectName ``chatView``: the conversation, newest at the bottom."""

    pinRequested = Signal(int, bool)
    copyRequested = Signal(int)
    editRequested = Signal(int)
    continueRequested = Signal(int)
    versionRequested = Signal(int, int)  # message index, -1 / +1
    linkClicked = Signal(QUrl)
    changed = Signal()  # messages were added or removed (the window re-chains the Tab order)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._inner = QWidget()
        self._inner.setObjectName("chatViewContents")
        self._layout = QVBoxLayout(self._inner)
        self._layout.setContentsMargins(8, 8, 8, 8)
        self._layout.setSpacing(6)
        self.sinkLabel = QLabel()
        self.sinkLabel.setObjectName("sinkLabel")
        self.sinkLabel.setWordWrap(True)
        self.sinkLabel.setVisible(False)
        self.boundary = QLabel()
        self.boundary.setObjectName("evictionBoundary")
        self.boundary.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.boundary.setWordWrap(True)  # one line forced a narrow chat wider than its view
        self.boundary.setAccessibleName("Out of view boundary")
        self.boundary.setVisible(False)
        self.placeholder = QLabel(PLACEHOLDER)
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setObjectName("chatPlaceholder")
        # A long conversation opens with its newest messages built; the older ones are built
        # a batch at a time when the user scrolls up to them (or clicks this).
        self.earlierButton = QPushButton()
        self.earlierButton.setObjectName("earlierMessagesButton")
        self.earlierButton.setFlat(True)
        self.earlierButton.setVisible(False)
        self.earlierButton.clicked.connect(lambda: self.show_earlier())
        self._layout.addWidget(self.sinkLabel)
        self._layout.addWidget(self.earlierButton)
        self._layout.addWidget(self.placeholder)
        self._layout.addStretch(1)
        self.setWidget(self._inner)
        self.widgets: list[MessageWidget] = []  # the built tail of the conversation
        self._earlier: list[ChatMessage] = []  # the messages before it, not built yet
        self._memory_args: tuple | None = None  # the last set_memory call, for widgets built later
        self._keep = None  # (widget, its offset from the top of the view) to hold while a batch lays out
        self.out_of_view = 0  # tokens of shown messages the model no longer sees
        self.hybrid: HybridMemory | None = None  # a hybrid model's summary of the whole chat (set_hybrid)
        self._boundary: int | None = None  # first message below the "out of view" marker
        self._faded_above = False  # whole messages above the marker are out of view
        self._cut = False  # the message below the marker is cut: its start is out of view
        self._stream: MessageWidget | None = None
        self._refocus = None  # the Continue button to give the focus back to when its reply ends
        self._pending: list[str] = []
        self._stick = True
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush)
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scroll)
        bar.rangeChanged.connect(self._on_range)
        self._style_boundary()

    # -- reading width ----------------------------------------------------------------

    def resizeEvent(self, e):  # noqa: N802
        """On a wide window the messages keep a comfortable reading width, centred."""
        super().resizeEvent(e)
        side = max(8, (self.viewport().width() - READING_WIDTH) // 2)
        m = self._layout.contentsMargins()
        if m.left() != side:
            self._layout.setContentsMargins(side, m.top(), side, m.bottom())
        self._fit_headers()

    def viewportEvent(self, e):  # noqa: N802
        if e.type() == QEvent.Type.Resize:  # (the scroll bar came or went: the messages' width did too)
            QTimer.singleShot(0, self._fit_headers)
        return super().viewportEvent(e)

    def message_width(self) -> int:
        """The width the chat gives each message: its view, less the reading margins."""
        m = self._layout.contentsMargins()
        return self.viewport().width() - m.left() - m.right()

    def _fit_headers(self) -> None:
        """Each message's buttons on its header's line, or below it where the chat is narrow."""
        width = self.message_width()
        for w in self.widgets:
            w.fit_header(width)

    # -- scrolling --------------------------------------------------------------------

    def _on_scroll(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - 24
        if value == 0 and self._earlier and bar.maximum() > 0:  # reached the top: build the next batch
            QTimer.singleShot(0, self.show_earlier)

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._keep is not None:  # older messages were just built above: stay where the reader is
            anchor, dy = self._keep
            self.verticalScrollBar().setValue(anchor.y() - dy)
            return
        if self._stick:
            self.verticalScrollBar().setValue(hi)

    def scroll_to_bottom(self) -> None:
        self._stick = True
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    def changeEvent(self, e):  # noqa: N802
        if e.type() == QEvent.Type.PaletteChange:
            self._style_boundary()
        super().changeEvent(e)

    def _style_boundary(self) -> None:
        pal = self.palette()
        mid = pal.color(QPalette.ColorRole.Mid).name()
        hl = pal.color(QPalette.ColorRole.Highlight).name()
        self.boundary.setStyleSheet(
            f"QLabel#evictionBoundary {{ border-top: 2px dashed {mid}; border-bottom: 2px dashed {mid};"
            f" padding: 4px; color: {hl}; font-weight: bold; }}")

    # -- messages ---------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Messages before the first built widget: message index = offset + widget index."""
        return len(self._earlier)

    def messages(self) -> list[ChatMessage]:
        return self._earlier + [w.message for w in self.widgets]

    def set_messages(self, messages: list[ChatMessage]) -> None:
        self.flush()
        self._stream = None
        self._flush_timer.stop()
        for w in self.widgets:
            self._layout.removeWidget(w)
            w.deleteLater()
        self.widgets = []
        self._boundary = None
        self._memory_args = None
        self.out_of_view = 0
        self.boundary.setVisible(False)
        messages = list(messages)
        lazy = len(messages) > BUILT_TAIL + BATCH // 5
        self._earlier = messages[:-BUILT_TAIL] if lazy else []
        self.setUpdatesEnabled(False)
        try:
            for m in messages[len(self._earlier):]:
                self._add(m)
        finally:
            self.setUpdatesEnabled(True)
        self._after_change()
        self.scroll_to_bottom()

    def show_earlier(self, n: int = 0) -> int:
        """Build the next `n` (default: a batch of) older messages above the built ones, keeping
        what the user looks at where it is. Returns how many were built."""
        n = min(max(n, BATCH), self.offset)
        if n <= 0:
            return 0
        bar = self.verticalScrollBar()
        anchor = self.widgets[0] if self.widgets else None  # what the reader sees stays put
        dy = anchor.y() - bar.value() if anchor is not None else 0
        batch, self._earlier = self._earlier[-n:], self._earlier[:-n]
        first = self._layout.indexOf(self.widgets[0]) if self.widgets else self._layout.count() - 1
        built = []
        self.setUpdatesEnabled(False)
        try:
            for k, m in enumerate(batch):
                built.append(self._add(m, at=first + k))
        finally:
            self.setUpdatesEnabled(True)
        self.widgets[:0] = built
        self._after_change()
        if self._memory_args is not None:
            self.set_memory(*self._memory_args)
        self._stick = False
        if anchor is not None:  # as the range grows (layout runs later), keep the anchor in place
            self._keep = (anchor, dy)
            QTimer.singleShot(500, lambda: setattr(self, "_keep", None))
        return n

    def append(self, message: ChatMessage) -> MessageWidget:
        w = self._add(message)
        self._after_change()
        self.scroll_to_bottom()
        return w

    def _add(self, message: ChatMessage, at: int | None = None) -> MessageWidget:
        """A widget for `message`, at layout position `at` (default: last, before the stretch;
        appended to self.widgets then)."""
        w = MessageWidget(message, self._inner)
        w.pinClicked.connect(self._on_pin)
        w.copyClicked.connect(lambda wid: self.copyRequested.emit(self._index_of(wid)))
        w.editClicked.connect(lambda wid: self.editRequested.emit(self._index_of(wid)))
        w.continueClicked.connect(lambda wid: self.continueRequested.emit(self._index_of(wid)))
        w.versionClicked.connect(lambda wid, step: self.versionRequested.emit(self._index_of(wid), step))
        w.linkClicked.connect(self.linkClicked)
        if at is None:
            self._layout.insertWidget(self._layout.count() - 1, w)  # before the trailing stretch
            self.widgets.append(w)
        else:
            self._layout.insertWidget(at, w)
        return w

    def _index_of(self, widget: "MessageWidget") -> int:
        return self.offset + self.widgets.index(widget)

    def _on_pin(self, widget: MessageWidget, wanted: bool) -> None:
        self.pinRequested.emit(self._index_of(widget), wanted)

    def remove_from(self, index: int) -> None:
        """Drop message `index` and every later one."""
        if index < self.offset:
            self.show_earlier(self.offset - index)
        local = index - self.offset
        if self._stream is not None and self._stream in self.widgets[local:]:
            self._flush_timer.stop()
            self._pending.clear()
            self._stream = None
        for w in self.widgets[local:]:
            self._layout.removeWidget(w)
            w.deleteLater()
        del self.widgets[local:]
        self._after_change()

    def refresh(self, index: int) -> None:
        if index >= self.offset:  # a message not built yet renders when it is
            self.widgets[index - self.offset].refresh()

    def _after_change(self) -> None:
        self.placeholder.setVisible(not self.widgets and not self._earlier)
        n = self.offset
        self.earlierButton.setVisible(n > 0)
        if n:
            self.earlierButton.setText(f"▲ {n:,} earlier message{'s' if n != 1 else ''} (scroll up, or click)")
        for i, w in enumerate(self.widgets):
            w.set_index(n + i)
            w.editButton.setVisible(w.message.role == "user")  # any question can be edited: it forks there
        self._show_continue()
        self._place_boundary()
        self.changed.emit()

    def _show_continue(self) -> None:
        """Continue sits on the last reply, where it was cut short, stopped or interrupted."""
        for k, w in enumerate(self.widgets):
            m = w.message
            w.continueButton.setVisible(k == len(self.widgets) - 1 and m.role == "assistant" and bool(m.content)
                                        and m.status != "streaming" and (m.cut_short or m.status in CONTINUABLE))
        self._fit_headers()  # (Edit and Continue come and go: the header's width with them)

    def set_busy(self, busy: bool) -> None:
        """While a reply is written, nothing that changes the conversation is offered."""
        for w in self.widgets:
            for b in (w.continueButton, w.editButton, w.prevVersionButton, w.nextVersionButton):
                b.setEnabled(not busy and (b not in (w.prevVersionButton, w.nextVersionButton)
                                           or self._step_possible(w, b)))

    @staticmethod
    def _step_possible(w: MessageWidget, b) -> bool:
        m = w.message
        return m.version > 1 if b is w.prevVersionButton else m.version < m.versions

    def replace_from(self, index: int, messages: list[ChatMessage]) -> None:
        """Another version is shown from message `index` on: its widgets replace those there,
        the reader's place and a focused ‹ › kept (a keyboard user steps on)."""
        focus = QApplication.focusWidget()
        local = index - self.offset
        old = self.widgets[local] if 0 <= local < len(self.widgets) else None
        held = None
        if old is not None and focus in (old.prevVersionButton, old.nextVersionButton):
            held = focus.objectName()
        bar = self.verticalScrollBar()
        value, stick = bar.value(), self._stick
        self.remove_from(index)
        self.setUpdatesEnabled(False)
        try:
            for m in messages:
                self._add(m)
        finally:
            self.setUpdatesEnabled(True)
        self._after_change()
        if self._memory_args is not None:
            self.set_memory(*self._memory_args)
        self._stick = stick
        if not stick:
            bar.setValue(value)
        if held and 0 <= local < len(self.widgets):
            w = self.widgets[local]
            b = w.findChild(QToolButton, held)
            (b if b is not None and b.isEnabled() else
             (w.nextVersionButton if w.nextVersionButton.isEnabled() else w.prevVersionButton)).setFocus()

    # -- streaming --------------------------------------------------------------------

    def begin_stream(self, message: ChatMessage) -> MessageWidget:
        self.flush()
        message.status = "streaming"
        w = self.append(message)
        self._stream = w
        self._pending.clear()
        self._flush_timer.start()
        return w

    def resume_stream(self, message: ChatMessage) -> MessageWidget | None:
        """Continue: the last message streams on (its text so far stays as it is)."""
        self.flush()
        if not self.widgets or self.widgets[-1].message is not message:
            return None
        w = self.widgets[-1]
        # Continue hides while the reply grows: a keyboard user gets it back when it ends
        self._refocus = w.continueButton if w.continueButton.hasFocus() else None
        message.status = "streaming"
        w.refresh(render=False)
        self._show_continue()
        self._stream = w
        self._pending.clear()
        self._flush_timer.start()
        self.scroll_to_bottom()
        return w

    def append_stream(self, text: str) -> None:
        """Cheap: called for every token; the timer puts the text on screen."""
        if self._stream is not None:
            self._pending.append(text)

    def flush(self) -> None:
        w = self._stream
        if w is None or not self._pending:
            return
        w.message.content += "".join(self._pending)
        self._pending.clear()
        w.body.stream_markdown(w.display_text())

    def end_stream(self, status: str, content: str | None = None) -> ChatMessage | None:
        w = self._stream
        self._flush_timer.stop()
        if w is None:
            return None
        self.flush()
        self._stream = None
        if content is not None and content != w.message.content:
            w.message.content = content
            w.body.stream_markdown(w.display_text())
        w.message.status = status
        # a short reply becomes one document (exact Markdown, selectable as a whole); a long one
        # keeps its streamed chunks rather than paying a full re-render in one go
        w.refresh(render=len(w.message.content) <= SINGLE_VIEW_CHARS)
        self._show_continue()
        button, self._refocus = self._refocus, None
        if button is w.continueButton and button.isVisible():
            button.setFocus()
        return w.message

    # -- memory markers ---------------------------------------------------------------

    def set_memory(self, per_message: dict[int, MessageMemoryView], sink_tokens: int | None = None,
                   system_tokens: int = 0) -> None:
        """Mark what the model still sees.  `system_tokens`: how many sinks are the system prompt.

        Eviction goes oldest first, so the conversation reads: a faded prefix (pinned messages
        excepted), at most one message cut by the window, then what the model sees.  The walk
        below finds that boundary; a later message missing a token (the reply's last sampled
        token is fed with the next turn) is not "out of view".
        """
        self._memory_args = (per_message, sink_tokens, system_tokens)
        out = 0
        boundary = 0  # index of the first message the model (partly) sees
        self._faded_above = self._cut = False
        for i in range(self.offset + len(self.widgets)):
            mem = per_message.get(i)
            boundary = i
            if mem is None or mem.pinned:
                continue
            if mem.faded:
                out += mem.tokens
                boundary = i + 1
                self._faded_above = True
                continue
            if mem.partial:
                out += mem.tokens - mem.in_cache
                self._cut = True
            break
        for k, w in enumerate(self.widgets):
            i = self.offset + k
            mem = per_message.get(i)
            if mem is not None and mem.partial and i != boundary:
                mem = MessageMemoryView(mem.tokens, mem.tokens, mem.pinned)  # not cut by the window
            w.set_memory(mem, self.hybrid)
        if sink_tokens is not None:
            parts = []
            if system_tokens:
                parts.append(f"your system prompt ({tokens(system_tokens)})")
            pinned = sum(1 for m in self.messages() if m.pinned)
            if pinned:
                parts.append(f"{pinned} pinned message{'s' if pinned > 1 else ''}")
            what = " and ".join(parts) if parts else f"the start of the chat ({tokens(sink_tokens)})"
            self.sinkLabel.setText(f"◆ Always remembered: {what}")
            self.sinkLabel.setToolTip(
                f"{tokens(sink_tokens)} pinned as attention sinks: the model always sees them, however long "
                "the conversation gets; the rest of the chat lives in a sliding window of recent tokens.")
            self.sinkLabel.setVisible(sink_tokens > 0)
        self.out_of_view = out
        self._boundary = boundary if out > 0 else None
        self._place_boundary()

    def _place_boundary(self) -> None:
        local = None if self._boundary is None else self._boundary - self.offset
        if local is None or local < 0 or local > len(self.widgets) or not self.widgets:
            self.boundary.setVisible(False)  # (among messages not built yet: nothing to mark)
            return
        faded = [what for what, shown in (("the faded part above", self._faded_above or not self._cut),
                                          ("the faded start of the message below", self._cut)) if shown]
        # (no-break spaces hold each ▲ to its word: a narrow chat wrapped the last one onto a line of its own)
        if self.hybrid is None:
            self.boundary.setText(
                f"▲\u00a0{self.out_of_view:,} tokens out of view — the model no longer sees "
                f"{' and '.join(faded)}\u00a0▲")
            self.boundary.setToolTip("")
        else:  # out of the attention window, but the DeltaNet layers still carry a summary of it
            self.boundary.setText(f"▲\u00a0{self.out_of_view:,} tokens out of the attention window — the model "
                                  "keeps only a summary of the faded text\u00a0▲")
            self.boundary.setToolTip(wrapped(self.hybrid.out_of_view_tip()))
        anchor = self.widgets[local] if local < len(self.widgets) else None
        want = self._layout.indexOf(anchor) if anchor is not None else self._layout.count() - 1  # before the stretch
        if self._layout.indexOf(self.boundary) != want - 1:
            self._layout.removeWidget(self.boundary)
            want = self._layout.indexOf(anchor) if anchor is not None else self._layout.count() - 1
            self._layout.insertWidget(want, self.boundary)
        self.boundary.setVisible(True)


    def set_hybrid(self, hybrid: HybridMemory | None) -> None:
        """The model's memory changed kind (another model, another plan): redo the words."""
        if hybrid == self.hybrid:
            return
        self.hybrid = hybrid
        if self._memory_args is not None:
            self.set_memory(*self._memory_args)

    def boundary_index(self) -> int | None:
        """Index of the first message below the boundary marker (None when nothing is out of view)."""
        return self._boundary
