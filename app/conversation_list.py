"""The conversations sidebar: search, list, new / rename / delete / export.

It holds no data of its own: the window gives it ``app.store.Conversation`` rows and acts on
its signals (the store is the only place a chat lives).
"""
from __future__ import annotations

import time

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QFontMetrics, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QStyle,
    QStyledItemDelegate,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

ID_ROLE = Qt.ItemDataRole.UserRole
WHEN_ROLE = Qt.ItemDataRole.UserRole + 1  # "today 14:05", "2026-11-30 09:12"


def _when(ts: float) -> str:
    t = time.localtime(ts)
    if time.strftime("%Y-%m-%d", t) == time.strftime("%Y-%m-%d"):
        return time.strftime("today %H:%M", t)
    return time.strftime("%Y-%m-%d %H:%M", t)


class _TitleAndDate(QStyledItemDelegate):
    """Each row: the title, elided to the width, and under it when the chat was last active, in
    a smaller, quieter type. Renaming edits the title line only, at the height of its text."""

    def sizeHint(self, option, index):  # noqa: N802
        fm = QFontMetrics(option.font)
        return QSize(option.rect.width(), fm.height() + self._small_h(option) + 10)

    @staticmethod
    def _small_font(option):
        f = option.font
        f.setPointSizeF(max(f.pointSizeF() * 0.85, 6.0))
        return f

    def _small_h(self, option) -> int:
        return QFontMetrics(self._small_font(option)).height()

    def paint(self, painter, option, index):
        self.initStyleOption(option, index)
        title, when = option.text, index.data(WHEN_ROLE) or ""
        option.text = ""
        style = option.widget.style() if option.widget else QStyle()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, option, painter, option.widget)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        r = option.rect.adjusted(6, 4, -6, -4)
        fm = QFontMetrics(option.font)
        painter.save()
        painter.setPen(option.palette.color(role))
        painter.setFont(option.font)
        painter.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(title, Qt.TextElideMode.ElideRight, r.width()))
        if when:
            small = self._small_font(option)
            painter.setFont(small)
            c = option.palette.color(role)
            c.setAlphaF(0.65)
            painter.setPen(c)
            painter.drawText(QRect(r.left(), r.top() + fm.height(), r.width(), self._small_h(option)),
                             Qt.AlignmentFlag.AlignVCenter, when)
        painter.restore()

    def updateEditorGeometry(self, editor, option, index):  # noqa: N802
        fm = QFontMetrics(option.font)
        r = option.rect
        editor.setGeometry(QRect(r.left() + 2, r.top() + 1, r.width() - 4, max(fm.height() + 8, r.height() - 2)))


class ConversationSidebar(QWidget):
    selected = Signal(int)  # conversation id
    newRequested = Signal()
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    exportRequested = Signal(int, str)  # id, "markdown" | "json"
    searchChanged = Signal(str)
    activated = Signal(int)  # Enter (or a double click) on a conversation: open it, or find on in it

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("conversationSidebar")
        self.search = QLineEdit()
        self.search.setObjectName("conversationSearch")
        self.search.setAccessibleName("Search conversations")
        self.search.setPlaceholderText("Search conversations…")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)  # F2 renames
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemChanged.connect(self._item_edited)
        self.list.itemActivated.connect(self._item_activated)
        self.list.installEventFilter(self)
        self.list.setItemDelegate(_TitleAndDate(self.list))
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # long titles elide
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)

        self.newButton = self._button("New", "newChatButton", "New chat (Ctrl+N)", self.newRequested.emit)
        self.renameButton = self._button("Rename", "renameChatButton", "Rename the chat (F2)", self.rename_current)
        self.deleteButton = self._button("Delete", "deleteChatButton", "Delete the chat (Delete)",
                                         self._delete_current)
        self.exportButton = self._button("Export", "exportChatButton", "Export the chat", None)
        menu = QMenu(self.exportButton)
        menu.addAction("As Markdown…", lambda: self._export("markdown"))
        menu.addAction("As JSON…", lambda: self._export("json"))
        self.exportButton.setMenu(menu)
        self.exportButton.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)

        delete = QAction(self.list)
        delete.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self._delete_current)
        self.list.addAction(delete)

        # New beside the search box and the rest below the list: the list then fits in 200 px,
        # so at the default 1280 px both side panels leave the chat its 60% (one row of four
        # buttons made it ~270 px and the memory panel had to go).
        top = QHBoxLayout()
        top.setSpacing(2)
        top.addWidget(self.search, 1)
        top.addWidget(self.newButton)
        row = QHBoxLayout()
        row.setSpacing(2)
        for b in (self.renameButton, self.deleteButton, self.exportButton):
            row.addWidget(b)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.list, 1)
        lay.addLayout(row)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(150)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.search.text()))
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.search.installEventFilter(self)
        self._filling = False

    def eventFilter(self, obj, e):  # noqa: N802
        """Down or Enter in the search box go to the results; the list, focused with no row
        current, makes its first row current without opening it (Qt's own focus-in made it
        current, and so opened it: Tab from the search box loaded the first result)."""
        if obj is self.search and e.type() == QEvent.Type.KeyPress and not e.modifiers() & ~(
                Qt.KeyboardModifier.KeypadModifier):
            if e.key() in (Qt.Key.Key_Down, Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.focus_list()
                return True
        if obj is self.list and e.type() == QEvent.Type.FocusIn and self.list.currentItem() is None:
            self._select_quietly(self._first_row())
        return super().eventFilter(obj, e)

    def focus_list(self) -> None:
        """Keyboard focus to the list, a row current (the open one, else the first result)."""
        if self._search_timer.isActive():  # typed a moment ago: the list shows these results first
            self._search_timer.stop()
            self.searchChanged.emit(self.search.text())
        if self.list.currentItem() is None:
            self._select_quietly(self._first_row())
        self.list.setFocus()

    def _first_row(self):
        for k in range(self.list.count()):
            if self.list.item(k).data(ID_ROLE) is not None:
                return self.list.item(k)
        return None

    def _select_quietly(self, item) -> None:
        if item is None:
            return
        self._filling = True
        try:
            self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def _item_activated(self, item) -> None:
        if item is not None and item.data(ID_ROLE) is not None:
            self.activated.emit(item.data(ID_ROLE))

    def _button(self, text, name, tip, slot) -> QToolButton:
        b = QToolButton(text=text)
        b.setObjectName(name)
        b.setAccessibleName(tip.split(" (")[0])
        b.setToolTip(tip)
        if slot is not None:
            b.clicked.connect(lambda *_: slot())
        return b

    # -- content ---------------------------------------------------------------------

    def set_conversations(self, conversations, current_id: int | None) -> None:
        self._filling = True
        self.list.blockSignals(True)
        try:
            self.list.clear()
            for c in conversations:
                item = QListWidgetItem(c.title)
                item.setData(ID_ROLE, c.id)
                item.setData(WHEN_ROLE, _when(c.updated_at))
                item.setToolTip(f"{c.title}\nlast activity {_when(c.updated_at)}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if c.id == current_id:
                    self.list.setCurrentItem(item)
            query = self.search.text().strip()
            if not conversations and query:  # say so, rather than show an empty list
                item = QListWidgetItem(f"No matches for “{query}”")
                item.setFlags(Qt.ItemFlag.NoItemFlags)
                item.setData(ID_ROLE, None)
                self.list.addItem(item)
        finally:
            self.list.blockSignals(False)
            self._filling = False

    def select(self, conversation_id: int) -> None:
        """Highlight a conversation without announcing it (the window opened it already)."""
        for k in range(self.list.count()):
            item = self.list.item(k)
            if item.data(ID_ROLE) == conversation_id:
                self._filling = True
                try:
                    self.list.setCurrentItem(item)
                finally:
                    self._filling = False
                return

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else item.data(ID_ROLE)

    def ids(self) -> list[int]:
        return [i for i in (self.list.item(k).data(ID_ROLE) for k in range(self.list.count())) if i is not None]

    def titles(self) -> list[str]:
        return [self.list.item(k).text() for k in range(self.list.count()) if self.list.item(k).data(ID_ROLE) is not None]

    # -- actions ---------------------------------------------------------------------

    def _current_changed(self, item, _prev) -> None:
        if item is not None and not self._filling and item.data(ID_ROLE) is not None:
            self.selected.emit(item.data(ID_ROLE))

    def rename_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    def _item_edited(self, item: QListWidgetItem) -> None:
        if not self._filling:
            title = " ".join(item.text().split()) or "Untitled"
            self.renameRequested.emit(item.data(ID_ROLE), title)

    def _delete_current(self) -> None:
        cid = self.current_id()
        if cid is not None:
            self.deleteRequested.emit(cid)

    def _export(self, fmt: str) -> None:
        cid = self.current_id()
        if cid is not None:
            self.exportRequested.emit(cid, fmt)

    def _menu(self, pos) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        self.list.setCurrentItem(item)
        m = QMenu(self)
        m.addAction("Rename", self.rename_current)
        m.addAction("Export as Markdown…", lambda: self._export("markdown"))
        m.addAction("Export as JSON…", lambda: self._export("json"))
        m.addSeparator()
        m.addAction("Delete", self._delete_current)
        m.exec(self.list.viewport().mapToGlobal(pos))
