"""The conversations sidebar: search, list, new / rename / delete / export.

It holds no data of its own: the window gives it ``app.store.Conversation`` rows and acts on
its signals (the store is the only place a chat lives).
"""
from __future__ import annotations

import time

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
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


def _when(ts: float) -> str:
    t = time.localtime(ts)
    if time.strftime("%Y-%m-%d", t) == time.strftime("%Y-%m-%d"):
        return time.strftime("today %H:%M", t)
    return time.strftime("%Y-%m-%d %H:%M", t)


class ConversationSidebar(QWidget):
    selected = Signal(int)  # conversation id
    newRequested = Signal()
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    exportRequested = Signal(int, str)  # id, "markdown" | "json"
    searchChanged = Signal(str)

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

        row = QHBoxLayout()
        row.setSpacing(2)
        for b in (self.newButton, self.renameButton, self.deleteButton, self.exportButton):
            row.addWidget(b)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.search)
        lay.addWidget(self.list, 1)
        lay.addLayout(row)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(150)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.search.text()))
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self._filling = False

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
                item.setToolTip(f"{c.title}\nlast activity {_when(c.updated_at)}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if c.id == current_id:
                    self.list.setCurrentItem(item)
        finally:
            self.list.blockSignals(False)
            self._filling = False

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else item.data(ID_ROLE)

    def ids(self) -> list[int]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    # -- actions ---------------------------------------------------------------------

    def _current_changed(self, item, _prev) -> None:
        if item is not None and not self._filling:
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
