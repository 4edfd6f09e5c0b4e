"""The model library dialog: every GGUF on this machine (Pinwheel's folder and other apps'),
what each needs in memory with the current plan, and whether it fits; choosing one loads it.

It shows what the engine thread listed (engine.library, through the controller's
`list_models` and a LibraryListed event): the window never reads model files itself.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from .memory_gauge import fmt_bytes

COLUMNS = ("Name", "Family", "Parameters", "Quantization", "File", "Context", "From", "Needs", "Fits?")
VERDICT_WORDS = {"fits": "fits", "tight": "tight — close other programs", "no": "does not fit"}
VERDICT_COLORS = {"fits": "#2e8b57", "tight": "#c77c00", "no": "#c0392b"}
PATH_ROLE = Qt.ItemDataRole.UserRole


class _Sorted(QTableWidgetItem):
    """A cell that sorts by a number (bytes, parameters) while it shows words."""

    def __init__(self, text: str, key):
        super().__init__(text)
        self.key = key

    def __lt__(self, other):  # noqa: D105
        if isinstance(other, _Sorted) and isinstance(self.key, (int, float)) and isinstance(other.key, (int, float)):
            return self.key < other.key
        return super().__lt__(other)


def _count(n) -> str:
    if not n:
        return "—"
    return f"{n / 1e9:.1f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


class ModelLibraryDialog(QDialog):
    """objectName ``modelLibrary``; `chosen(path, entry)` when the user picks a model."""

    chosen = Signal(str, object)

    def __init__(self, parent=None, available: int | None = None):
        super().__init__(parent)
        self.setObjectName("modelLibrary")
        self.setWindowTitle("Model library")
        self.resize(980, 520)
        self.rows: list = []
        self.available = available
        self.status = QLabel("Looking for models…")
        self.status.setWordWrap(True)
        self.search = QLineEdit()
        self.search.setObjectName("librarySearch")
        self.search.setPlaceholderText("Search models…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter)
        self.search.installEventFilter(self)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("libraryTable")
        self.table.setAccessibleName("Models on this machine")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setSortingEnabled(True)
        self.table.doubleClicked.connect(lambda *_: self.load_selected())
        buttons = QDialogButtonBox()
        self.loadButton = buttons.addButton("Load", QDialogButtonBox.ButtonRole.AcceptRole)
        self.loadButton.setObjectName("libraryLoadButton")
        self.loadButton.setEnabled(False)
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.loadButton.clicked.connect(self.load_selected)
        self.table.itemSelectionChanged.connect(self._selection)
        note = QLabel("<i>Needs</i> = the weights as Pinwheel holds them + the KV cache of your current memory "
                      "setting + the runtime. It does not grow during a chat. Files stay where they are.")
        note.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.addWidget(self.status)
        lay.addWidget(self.search)
        lay.addWidget(self.table, 1)
        lay.addWidget(note)
        lay.addWidget(buttons)

    def set_rows(self, rows) -> None:
        self.rows = list(rows)
        t = self.table
        t.setSortingEnabled(False)
        t.setRowCount(0)
        for e in self.rows:
            r = t.rowCount()
            t.insertRow(r)
            name = QTableWidgetItem(e.name)
            name.setData(PATH_ROLE, e.path)
            name.setToolTip(e.path)
            cells = [name, QTableWidgetItem(e.arch or "?"), _Sorted(_count(e.params), e.params or 0),
                     QTableWidgetItem(e.quant or "—"), _Sorted(fmt_bytes(e.file_bytes), e.file_bytes),
                     _Sorted(f"{e.context_length:,}" if e.context_length else "—", e.context_length or 0),
                     QTableWidgetItem(e.source), _Sorted(fmt_bytes(e.total_bytes) if e.total_bytes else "—",
                                                         e.total_bytes or 0)]
            fit = QTableWidgetItem(VERDICT_WORDS.get(e.fits, "") if e.supported else e.note)
            if e.supported and e.fits in VERDICT_COLORS:
                fit.setForeground(QColor(VERDICT_COLORS[e.fits]))
            cells.append(fit)
            muted = t.palette().color(t.foregroundRole())
            muted.setAlphaF(0.55)
            for c, item in enumerate(cells):
                if not e.supported:  # listed, so people see why it is not offered
                    item.setForeground(muted)
                t.setItem(r, c, item)
        t.setSortingEnabled(True)
        t.resizeColumnsToContents()
        t.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        runnable = sum(e.supported for e in self.rows)
        self.status.setText(f"{len(self.rows)} model file{'s' if len(self.rows) != 1 else ''} found, {runnable} "
                            "Pinwheel can run (Pinwheel's models folder, LM Studio, Jan, GPT4All, Ollama, "
                            "llama.cpp's cache, the Hugging Face cache)." if self.rows else
                            "No GGUF models found on this machine.")
        self._filter(self.search.text())

    def eventFilter(self, obj, e):  # noqa: N802
        """Down in the filter box selects the first row shown (and moves there): from there the
        arrows and Enter pick a model without the mouse."""
        if obj is self.search and e.type() == QEvent.Type.KeyPress and e.key() == Qt.Key.Key_Down:
            self.select_first_row()
            return True
        return super().eventFilter(obj, e)

    def select_first_row(self) -> None:
        row = next((r for r in range(self.table.rowCount()) if not self.table.isRowHidden(r)), None)
        if row is not None:
            self.table.selectRow(row)
            self.table.setCurrentCell(row, 0)
            self.table.setFocus()

    def keyPressEvent(self, e):  # noqa: N802
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.table.hasFocus():
            self.load_selected()  # (the dialog's default button would be "Load" anyway; say so)
            return
        super().keyPressEvent(e)

    def _filter(self, text: str) -> None:
        q = text.strip().lower()
        for r in range(self.table.rowCount()):
            hay = " ".join(self.table.item(r, c).text().lower() for c in (0, 1, 3, 6))
            self.table.setRowHidden(r, bool(q) and q not in hay)

    def _entry(self, row: int):
        path = self.table.item(row, 0).data(PATH_ROLE)
        return next((e for e in self.rows if e.path == path), None)

    def _selection(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        e = self._entry(rows.pop()) if len(rows) == 1 else None
        self.loadButton.setEnabled(bool(e and e.supported))

    def load_selected(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        if len(rows) != 1:
            return
        e = self._entry(rows.pop())
        if e is None or not e.supported:
            return
        if e.fits == "no":
            short = e.total_bytes - (self.available or 0)
            answer = QMessageBox.question(
                self, "This model may not fit",
                f"{e.name} needs about {fmt_bytes(e.total_bytes)}; this machine has "
                f"{fmt_bytes(self.available)} available now ({fmt_bytes(short)} short). Load it anyway? "
                "If it does not load, the model you have now keeps working.")
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.chosen.emit(e.path, e)
        self.accept()
