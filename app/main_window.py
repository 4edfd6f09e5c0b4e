"""Pinwheel's main window: conversations | chat | memory gauge + settings.

The window owns the conversation store (``app.store``, SQLite) and an
:class:`~app.engine_worker.EngineController` whose thread owns the ChatSession; it never calls
the engine itself.  Every finished message is in the store before the next request starts; a
reply is saved as ``streaming`` while it grows (at most once a second) and finished as
``done`` / ``stopped`` / ``interrupted``, so Stop, an engine error or a crash keeps it.

Errors (a bad model file, an engine exception, out of memory, a full disk) appear in a banner
at the top of the chat; nothing modal, nothing lost, the window stays usable.
"""
from __future__ import annotations

import atexit
import dataclasses
import gc
import html
import logging
import os
import weakref
from pathlib import Path

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, QMargins, QPoint, QRect, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QActionGroup, QDesktopServices, QGuiApplication, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.errors import PinwheelError
from engine.budget import MIN_WINDOW, short_window_warning

from .chat_find import ChatFinder
from .chat_view import PLACEHOLDER, ChatView, MessageMemoryView
from .conversation_list import ConversationSidebar
from .feedback import flash
from . import engine_events as E
from .chat_controller import ChatController
from .engine_events import ReplyResult, StatsSnapshot
from .engine_worker import EngineConfig, EngineController
from .memory_gauge import fmt_bytes
from .settings import AppSettings, default_settings_path, load_settings, save_settings
from .settings_panel import session_plan
from .side_panel import SIDE_PANEL_WIDTH, SidePanel
from .status_line import StatusLine
from .theme import THEMES
from .ui_state import UiState
from .store import ConversationStore, StoreError, default_data_dir, default_db_path

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000  # a streaming reply is written to the store at most this often
_OPEN_WINDOWS: "weakref.WeakSet[MainWindow]" = weakref.WeakSet()


@atexit.register
def _close_windows_at_exit() -> None:
    """The interpreter exits with a window open: save the reply in flight and stop the engine
    (runs before engine_worker's own exit hook: atexit runs in reverse order of import)."""
    for win in list(_OPEN_WINDOWS):
        try:
            win.shutdown()
        except RuntimeError:  # its Qt objects are already gone
            pass
CHAT_SHARE = 0.6  # the chat keeps at least this share of the window's width; side panels give way
CONVERSATIONS_WIDTH = 200
FIRST_SIZE = QSize(1280, 800)  # the first window, where its screen has room for it
# A window's frame is unknown until the window manager has framed it (X11 does so after the
# window is shown): until then, leave room for a title bar and borders as most draw them.
FRAME_GUESS = QMargins(8, 40, 8, 8)


def fit_rect(want: QRect, avail: QRect, frame: QMargins, minimum: QSize) -> QRect:
    """`want` (a window's geometry, frame excluded) fitted with its `frame` into `avail`: no
    larger than the room there, no smaller than `minimum` where the room allows, and moved no
    further than it must be to lie inside."""
    inner = avail.marginsRemoved(frame)
    room = inner.size().expandedTo(QSize(1, 1))
    size = want.size().boundedTo(room).expandedTo(minimum.boundedTo(room))
    x = max(inner.left(), min(want.x(), inner.left() + room.width() - size.width()))
    y = max(inner.top(), min(want.y(), inner.top() + room.height() - size.height()))
    return QRect(QPoint(x, y), size)

# store status <- what the window shows


def app_icon() -> QIcon:
    try:
        from .desktop_integration import app_icon as packaged_icon

        return packaged_icon()
    except (ImportError, OSError, ValueError):  # no packaged icons: Qt's default
        return QIcon()


class MessageInput(QPlainTextEdit):
    """Enter (or Ctrl+Enter) sends, Shift+Enter starts a new line."""

    submitted = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("messageInput")
        self.setAccessibleName("Message")
        self.setPlaceholderText("Message Pinwheel — Enter sends, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 12)

    def keyPressEvent(self, e):  # noqa: N802
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = e.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                return
            if not mods & ~(Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.KeypadModifier):
                self.submitted.emit()
                return
        super().keyPressEvent(e)


class Banner(QFrame):
    """An inline message at the top of the chat (errors, notices); dismissible."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setAccessibleName("Error message")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setObjectName("errorText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action = QPushButton()
        self.action.setVisible(False)
        close = QToolButton(text="✕")
        close.setAccessibleName("Dismiss message")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.action)
        lay.addWidget(close)
        self.hide()
        self._action_slot = None

    def show_message(self, text: str, kind: str = "error", action: tuple[str, object] | None = None) -> None:
        colors = {"error": ("#7a1d1d", "#fde8e8"), "memory": ("#7a1d1d", "#fde8e8"),
                  "store": ("#7a1d1d", "#fde8e8"), "notice": ("#1d4e7a", "#e8f1fd"),
                  "warning": ("#6b4a00", "#fff3d1")}
        fg, bg = colors.get(kind, colors["error"])
        if self.palette().color(self.backgroundRole()).lightness() < 128:
            fg, bg = bg, fg
        self.setStyleSheet(f"QFrame#errorBanner {{ background: {bg}; border: 1px solid {fg}; border-radius: 4px; }}"
                           f" QFrame#errorBanner QLabel {{ color: {fg}; }}")
        icon = "ⓘ " if kind == "notice" else "⚠ "
        self.label.setText(icon + text)
        if self._action_slot is not None:
            self.action.clicked.disconnect(self._action_slot)
            self._action_slot = None
        if action:
            self.action.setText(action[0])
            self._action_slot = action[1]
            self.action.clicked.connect(self._action_slot)
        self.action.setVisible(bool(action))
        self.show()


class PinBar(QFrame):
    """Preview of what pinning/unpinning a message costs, with Confirm / Cancel."""

    confirmed = Signal(int, bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("pinBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setObjectName("pinPreview")
        self.label.setWordWrap(True)
        self.ok = QPushButton("Pin")
        self.ok.setObjectName("pinConfirmButton")
        self.cancel = QPushButton("Cancel")
        self.cancel.setObjectName("pinCancelButton")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.ok)
        lay.addWidget(self.cancel)
        self.ok.clicked.connect(self._confirm)
        self.cancel.clicked.connect(self.hide)
        self.pending: tuple[int, bool] | None = None
        self.hide()

    def ask(self, index: int, pinned: bool, text: str, possible: bool) -> None:
        self.pending = (index, pinned)
        self.label.setText(text)
        self.ok.setText("Pin" if pinned else "Unpin")
        self.ok.setAccessibleName(f"{'Pin' if pinned else 'Unpin'} message {index + 1}")
        self.ok.setEnabled(possible)
        self.show()
        (self.ok if possible else self.cancel).setFocus()

    def _confirm(self) -> None:
        if self.pending is not None:
            index, pinned = self.pending
            self.pending = None
            self.hide()
            self.confirmed.emit(index, pinned)


class _WindowView:
    """The window as the controller's ChatViewPort: what to show, in widgets."""

    def __init__(self, win: "MainWindow"):
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


class MainWindow(QMainWindow):
    """``MainWindow(model_path=None, data_dir=None)``: the default model and the user's data
    folder when not given; `data_dir` holds ``conversations.db`` and ``settings.json``."""

    modelReady = Signal()
    replyFinished = Signal(object)  # ReplyResult, after the window has recorded it

    def __init__(self, model_path: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
                 parent=None):
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("Pinwheel")
        self.setWindowIcon(app_icon())
        self.errors: list[tuple[str, str]] = []  # (kind, message) shown so far, for tests/logs
        _OPEN_WINDOWS.add(self)
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.settings_path = (self.data_dir / "settings.json") if data_dir is not None else default_settings_path()
        self.settings, notices = load_settings(self.settings_path)
        self.model_path = str(model_path) if model_path else (self.settings.model_path or None)
        self._serving_model_path = self.model_path  # the file of the model that serves (kept if another is refused)
        self.ui_state_path = self.settings_path.parent / "ui_state.json"
        self.ui_state = UiState.load(self.ui_state_path)
        self._forced = {"conversations": False, "side": False}  # opened by the user at a tight width
        self._fitted = False  # fitted to its screen (on the first show)

        self.model_ready = False
        self.model_info = None
        self.last_stats: StatsSnapshot | None = None
        self.editing_index: int | None = None
        self._pending_settings: AppSettings | None = None  # sent to the engine, not yet taken
        #: extra SamplingParams fields for every reply (e.g. {"ignore_eos": True}); tests and tools
        self.sampling_overrides: dict = {}
        self.library_dirs: list[str] = []  # folders the model library looks in besides the apps' own
        self._send_when_ready = False  # Enter pressed while the model was loading
        self.library_dialog = None
        self._library_request = 0

        self._build_ui()
        self._open_store()
        self.engine = EngineController(self)
        # the conversation itself (messages, the reply in progress, the store) lives in a Qt-free
        # controller; this window shows it and forwards what the user does
        self.controller = ChatController(
            self.store, self.engine, _WindowView(self),
            sampling=lambda: {**self.settings.sampling_kwargs(), **self.sampling_overrides},
            conversation_settings=self._conversation_settings, reply_meta=self._reply_meta)
        self._connect_engine()
        for n in notices:
            self.show_error(n, "notice")

        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(lambda: self.controller.save_partial())

        self.refresh_conversations()
        ids = self.sidebar.ids()
        history = []
        if ids:
            history = self._open_conversation(ids[0], send_to_engine=False)
        # Everything imported so far (Qt, JAX, numpy: ~10^5 long-lived objects) leaves the garbage
        # collector's view: a full pass over them holds the GIL for ~0.1 s, a visible hitch, and
        # they never become garbage.  The engine thread does the same once the model is loaded.
        gc.freeze()
        self._start_load(history)
        self.engine.probe_devices()
        self._update_actions()

    # ------------------------------------------------------------------ construction

    def _build_ui(self) -> None:
        self.sidebar = ConversationSidebar()
        self.sidebar.selected.connect(self.open_conversation)
        self.sidebar.newRequested.connect(self.new_conversation)
        self.sidebar.renameRequested.connect(self.rename_conversation)
        self.sidebar.deleteRequested.connect(self.delete_conversation)
        self.sidebar.exportRequested.connect(self.export_conversation)
        self.sidebar.searchChanged.connect(lambda _t: self.refresh_conversations())
        self.sidebar.activated.connect(self._on_conversation_activated)

        self.banner = Banner()
        self.chat = ChatView()
        self.chat.pinRequested.connect(self.request_pin)
        self.chat.copyRequested.connect(self.copy_message)
        self.chat.editRequested.connect(self.start_edit)
        self.chat.continueRequested.connect(lambda _i: self.continue_reply())
        self.chat.versionRequested.connect(self.show_version)
        self.chat.linkClicked.connect(self.open_link)
        self.finder = ChatFinder(self.chat)
        self.pinBar = PinBar()
        self.pinBar.confirmed.connect(self.set_pinned)

        self.editBar = QLabel()
        self.editBar.setObjectName("editBar")
        self.editBar.setVisible(False)

        self.input = MessageInput()
        self.input.submitted.connect(self.send)
        self.sendButton = QPushButton("Send")
        self.sendButton.setObjectName("sendButton")
        self.sendButton.setAccessibleName("Send message")
        self.sendButton.setToolTip("Send (Enter or Ctrl+Enter)")
        self.sendButton.clicked.connect(self.send)
        self.stopButton = QPushButton("Stop")
        self.stopButton.setObjectName("stopButton")
        self.stopButton.setAccessibleName("Stop the reply")
        self.stopButton.setToolTip("Stop the reply (Esc)")
        self.stopButton.clicked.connect(self.stop)
        self.regenButton = QPushButton("Regenerate")
        self.regenButton.setObjectName("regenerateButton")
        self.regenButton.setAccessibleName("Regenerate the last reply")
        self.regenButton.setToolTip("Answer the last message again (Ctrl+R)")
        self.regenButton.clicked.connect(self.regenerate)
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.sendButton)
        buttons.addWidget(self.stopButton)
        buttons.addWidget(self.regenButton)
        buttons.addStretch(1)
        input_row = QHBoxLayout()
        input_row.addWidget(self.input, 1)
        input_row.addLayout(buttons)

        self._center = center = QWidget()
        c = QVBoxLayout(center)
        c.setContentsMargins(4, 4, 4, 4)
        c.addWidget(self.banner)
        c.addWidget(self.chat, 1)
        c.addWidget(self.pinBar)
        c.addWidget(self.editBar)
        c.addLayout(input_row)

        self.sidePanel = SidePanel(self.settings, self.ui_state.memory_details)
        self.sidePanel.detailsToggled.connect(self._remember_details)
        self.gauge, self.settingsPanel = self.sidePanel.gauge, self.sidePanel.settingsPanel
        self.settingsPanel.applyRequested.connect(self.apply_settings)
        right = self.sidePanel

        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("mainSplitter")
        split.addWidget(self.sidebar)
        split.addWidget(center)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setStretchFactor(2, 0)
        split.setSizes([210, 640, 340])
        split.setChildrenCollapsible(False)
        self.setCentralWidget(split)

        self.status = StatusLine(self.statusBar())
        for name in ("loadProgress", "stageLabel", "modelLabel", "deviceLabel", "speedLabel", "ttftLabel",
                     "cacheLabel", "templateLabel"):
            setattr(self, name, getattr(self.status, name))

        self._build_menus()

        # keyboard (the menus' shortcuts are on their actions)
        QShortcut(QKeySequence("Ctrl+Return"), self, self.send)
        QShortcut(QKeySequence("Ctrl+Enter"), self, self.send)
        QShortcut(QKeySequence("Escape"), self, self._escape)
        QShortcut(QKeySequence("Ctrl+R"), self, self.regenerate)
        QShortcut(QKeySequence("Ctrl+L"), self, self.input.setFocus)
        QShortcut(QKeySequence("Ctrl+Shift+C"), self, self.copy_last_reply)
        self.chat.changed.connect(self._chain_tabs)
        self.chat.changed.connect(self._find_again)
        self._chain_tabs()
        self.resize(FIRST_SIZE)  # (fitted to the screen when first shown: fit_to_screen)
        self.input.setFocus()

    def _open_store(self) -> None:
        try:
            self.store = ConversationStore(default_db_path(self.data_dir))
            if self.store.recovered_messages:
                self.show_error(f"{self.store.recovered_messages} reply(ies) cut short by a crash were kept "
                                "and marked interrupted.", "notice")
        except StoreError as exc:
            self.store = ConversationStore(":memory:")
            self.show_error(f"{exc} Conversations will not be saved this session.", "store")

    def _connect_engine(self) -> None:
        self._handler_table = None
        self.engine.event.connect(self._on_engine_event)  # arrives in this (the GUI) thread
        self.settingsPanel.systemPromptEdited.connect(self.engine.count_sinks)
        self.settingsPanel.libraryRequested.connect(self.open_library)

    # ------------------------------------------------------------------ the engine's news

    def _on_engine_event(self, ev) -> None:
        """Everything the engine thread says comes here, one app.engine_events object at a time."""
        if self._handler_table is None:
            self._handler_table = self._event_handlers()
        handler = self._handler_table.get(type(ev))
        if handler is None:
            log.warning("unhandled engine event %r", ev)
            return
        handler(ev)

    def _event_handlers(self) -> dict:
        from engine.events import PrefillProgress, Token  # (pure dataclasses: no JAX)

        def reply(ev: E.ReplyEvent) -> None:
            if isinstance(ev.event, Token):
                self._on_token(ev.request, ev.event.text)
            elif isinstance(ev.event, PrefillProgress):
                self._on_prefill(ev.request, ev.event.done, ev.event.total)

        return {
            E.LoadProgress: lambda ev: self._on_load_progress(ev.stage, ev.done, ev.total),
            E.ModelLoaded: lambda ev: self._on_model_loaded(ev.info),
            E.LoadFailed: lambda ev: self._on_load_failed(ev.kind, ev.message),
            E.LoadRefused: lambda ev: self._on_load_refused(ev.kind, ev.message),
            E.DevicesFound: lambda ev: self.settingsPanel.set_devices(list(ev.devices)),
            E.ReplyEvent: reply,
            E.StatsReady: lambda ev: self._on_stats(ev.snapshot),
            E.ReplyFinished: lambda ev: self._on_reply_finished(ev.result),
            E.PlanApplied: lambda ev: self._on_plan_applied(ev.rebuilt, ev.plan, ev.note),
            E.PinChanged: lambda ev: self._on_pin_changed(ev.index, ev.pinned),
            E.Failed: lambda ev: self._on_engine_failed(ev.kind, ev.message),
            E.AutoSinks: lambda ev: self.settingsPanel.set_auto_sinks(ev.system, ev.tokens),
            E.HistoryLoaded: lambda ev: self._on_history_loaded(ev.request),
            E.LibraryListed: self._on_library_listed,
            E.CacheRebuilt: lambda ev: self.stageLabel.setText(
                f"Re-read {ev.tokens:,} tokens of the conversation in {ev.seconds:.1f} s"),
        }

    # ------------------------------------------------------------------ helpers

    def engine_config(self, s: AppSettings | None = None) -> EngineConfig:
        s = s or self.settings
        return EngineConfig(kv_dtype=s.kv_dtype, budget_bytes=s.budget_bytes, window=s.window_arg,
                            sinks=s.sinks_arg, system=s.system_prompt, device=s.device,
                            sampling=s.sampling_kwargs())

    def show_error(self, message: str, kind: str = "error", action=None) -> None:
        self.errors.append((kind, message))
        log.info("%s: %s", kind, message)
        self.banner.show_message(message, kind, action)

    def _store(self, fn, *args, **kwargs):
        """Call the store; a failure (full disk, read-only folder) becomes a banner, not a crash."""
        return self.controller.safe(fn, *args, **kwargs)

    # the conversation's state is the controller's
    @property
    def current_id(self) -> int | None:
        return self.controller.current_id

    @property
    def reply(self):
        return self.controller.reply

    @property
    def generating(self) -> bool:
        return self.controller.generating

    def _update_actions(self) -> None:
        busy = self.generating
        self.sendButton.setEnabled(self.model_ready and not busy)
        self.sendButton.setToolTip("Send (Enter or Ctrl+Enter)" if self.model_ready else
                                   "Waiting for the model to load (you can type meanwhile)")
        self.stopButton.setEnabled(busy)
        msgs = self.chat.messages()
        self.regenButton.setEnabled(self.model_ready and not busy and bool(msgs))
        self.settingsPanel.set_busy(busy)
        self.chat.set_busy(busy)

    def message_name(self, index: int) -> str:
        """How the status line names a message: whose it is and how it starts, never an index
        the user cannot see ("your message “What is…”")."""
        msgs = self.chat.messages()
        if not 0 <= index < len(msgs):
            return "the message"
        m = msgs[index]
        words = " ".join(m.content.split())
        head = words if len(words) <= 28 else words[:27] + "…"
        who = "your message" if m.role == "user" else "the reply"
        return f"{who} “{head}”" if head else who

    def history_dicts(self) -> list[dict]:
        """The conversation as the engine takes it (a failed reply that wrote nothing is left out)."""
        return self.controller.history()

    # ------------------------------------------------------------------ model loading

    def _start_load(self, history: list[dict] | None, settings: AppSettings | None = None) -> None:
        self.model_ready = False
        self.loadProgress.setRange(0, 0)
        self.loadProgress.show()
        self.stageLabel.setText("Loading the model…")
        if self.model_path and not (settings or self.settings).model_path:  # --model: not the default's name
            self.settingsPanel.modelEdit.setPlaceholderText(f"{Path(self.model_path).name} (loading…)")
        self._update_actions()
        self.engine.load(self.model_path, self.engine_config(settings), history)

    def _on_load_progress(self, stage: str, done: int, total: int) -> None:
        self.stageLabel.setText(stage)
        self.chat.placeholder.setText(f"{stage}\nYou can type, and read old conversations, meanwhile.")
        if total:
            self.loadProgress.setRange(0, total)
            self.loadProgress.setValue(done)
        else:
            self.loadProgress.setRange(0, 0)

    def _on_model_loaded(self, info) -> None:
        self.model_ready = True
        self.model_info = info
        self._serving_model_path = self.model_path
        self.loadProgress.hide()
        self.stageLabel.setText(f"Model ready in {info.load_s:.1f} s")
        self._show_template(info)
        self.chat.placeholder.setText(PLACEHOLDER)
        if self._pending_settings is not None:  # loaded with new settings from the panel
            note = self._adopt_pending_settings()
            self.settingsPanel.applied_ok(self.settings, info.plan, f"Model loaded in {info.load_s:.1f} s.{note}")
        if not self.settings.model_path:
            self.settingsPanel.modelEdit.setPlaceholderText(f"default: {Path(info.path).name}")
        self.modelLabel.setText(Path(info.path).stem)  # the file people chose; the GGUF's own name below
        self.modelLabel.setToolTip(f"{info.name}\n{info.path}")
        self.deviceLabel.setText(info.device.upper())
        self.settingsPanel.applied_plan = info.plan
        self.settingsPanel.set_model_config(info.config)
        self.gauge.set_plan(info.plan)
        self._update_cache_label(info.plan.sinks, info.plan.capacity)
        self._update_actions()
        self._warn_if_short(info.plan)
        self.status.fit()  # the model's name and device are in: which labels fit now
        self.modelReady.emit()
        if self._send_when_ready:
            self._send_when_ready = False
            self.sendButton.setText("Send")
            QTimer.singleShot(0, self.send)

    def _show_template(self, info) -> None:
        """A file without a working chat template chats in a built-in turn format: say which and
        why, in the status bar, with what it may mean in the tooltip."""
        name = getattr(info, "template", "")
        if not name:
            self.status.show_template("")
            return
        lacks = "its chat template does not work" if info.template_error else "it has no chat template"
        short = "the file's chat template fails" if info.template_error else "the file has no chat template"
        self.stageLabel.setText(f"{self.stageLabel.text()} · {short}")  # short: the status bar is narrow
        if info.template_error:
            hint = f"The file's own template: {info.template_error}"
        else:
            hint = "A file without a chat template may be a base model: its replies may not follow a conversation."
        self.status.show_template(  # which one (the tooltip says why)
            f"built-in {name} format", f"This model file's turns are written in Pinwheel's built-in {name} format "
            f"({info.template_why}), because {lacks}.\n{hint}")

    def _on_load_failed(self, kind: str, message: str) -> None:
        self.model_ready = False
        if self._send_when_ready:  # the message stays in the box, unsent
            self._send_when_ready = False
            self.sendButton.setText("Send")
        self.loadProgress.hide()
        self.stageLabel.setText("No model loaded")
        self.chat.placeholder.setText("No model is loaded: open a GGUF model file (File → Open model…), or pick one "
                                      "you already have from File → Model library… (Ctrl+Shift+O).")
        self.modelLabel.setText("no model")
        if self._pending_settings is not None:
            self._pending_settings = None
            self.settingsPanel.applyStatus.setText(f"⚠ Not applied: {message}")
        self._update_actions()
        self.show_error(message, kind, ("Model library…", self.open_library))

    def _on_load_refused(self, kind: str, message: str) -> None:
        """Another model file failed its checks (or its weights): the model that was serving
        goes on serving (the engine keeps it, or loads it again), and the chat stays."""
        self.model_path = self._serving_model_path
        self._pending_settings = None
        self.settingsPanel.modelEdit.setText(self.model_path or "")
        self.settingsPanel.applyStatus.setText(f"⚠ Not applied: {message}")
        self.model_ready = self.model_info is not None
        self.loadProgress.hide()
        name = Path(self.model_info.path).stem if self.model_info is not None else "the previous model"
        self.stageLabel.setText(f"Still using {name}")
        self._update_actions()
        self.show_error(f"{message} — still using {name}.", kind, ("Open another…", self.choose_model))

    def open_library(self) -> None:
        """File → Model library: the models on this machine, listed in the engine thread, and
        what each needs with the current memory setting; choosing one loads it (the model in
        use keeps serving if it fails)."""
        import psutil

        from .model_library import ModelLibraryDialog

        dlg = ModelLibraryDialog(self, available=psutil.virtual_memory().available)
        dlg.chosen.connect(lambda path, _entry: self.load_model(path))
        self.library_dialog = dlg
        self._library_request = self.engine.list_models(self.library_dirs, self.engine_config())
        dlg.finished.connect(lambda *_: setattr(self, "library_dialog", None))
        dlg.open()

    def _on_library_listed(self, ev) -> None:
        dlg = self.library_dialog
        if dlg is not None and ev.request == self._library_request:
            dlg.set_rows(ev.rows)

    def choose_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", model_folder(),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.load_model(path)

    def load_model(self, path: str | None) -> None:
        """Load another model file (in the engine thread); the conversation stays."""
        self.stop()
        self.banner.hide()
        self.model_path = path
        self._pending_settings = self.settings.replace(model_path=path or "")  # kept once it loads
        self.settingsPanel.modelEdit.setText(path or "")
        self._start_load(self.history_dicts(), self._pending_settings)

    # ------------------------------------------------------------------ chatting

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or self.generating:
            return
        if not self.model_ready:
            # not dropped, not silently ignored: it goes as soon as the model is ready
            self._send_when_ready = True
            self.stageLabel.setText("Your message will be sent as soon as the model is ready.")
            self.sendButton.setText("Queued")
            return
        if self.editing_index is not None:
            self._resend_edit(text)
            return
        self.input.clear()
        self.controller.send(text)

    def _conversation_settings(self) -> dict:
        d = self.settings.to_dict()
        plan = self.settingsPanel.applied_plan
        if plan is not None:
            d["plan"] = plan.to_dict()
        return d

    def stop(self) -> None:
        self.controller.stop()

    def _escape(self) -> None:
        if self.generating:
            self.stop()
        elif self.editing_index is not None:
            self.cancel_edit()
        elif self.pinBar.isVisible():
            self.pinBar.hide()

    def _on_prefill(self, request: int, done: int, total: int) -> None:
        if self.reply and request == self.reply.request and total:
            self.stageLabel.setText(f"Reading the prompt… {done}/{total} tokens")

    def _on_token(self, request: int, text: str) -> None:
        self.controller.on_token(request, text)

    def _on_reply_finished(self, result: ReplyResult) -> None:
        status = self.controller.on_reply_finished(result)
        if status is None:  # not the reply in progress (a stale one)
            return
        self._save_timer.stop()
        failed = status == "error"
        if failed:
            self.show_error(result.error or "The reply failed.", "engine")
            self.stageLabel.setText("The reply failed; the conversation is kept")
        else:
            if result.decode_tok_s:
                self.speedLabel.setText(f"{result.decode_tok_s:.1f} tok/s")
            if result.ttft_s is not None:
                self.ttftLabel.setText(f"TTFT {result.ttft_s * 1000:.0f} ms")
            self.stageLabel.setText(f"{'Stopped after' if status == 'stopped' else 'Reply:'} "
                                    f"{result.generated_tokens} tokens")
            self.status.fit()  # the speed's text changed width
        self._update_actions()
        self.replyFinished.emit(result)

    def regenerate(self) -> None:
        """Answer the last user message again (its reply, if any, is replaced)."""
        if self.generating or not self.model_ready or not self.controller.messages:
            return
        self.controller.regenerate()

    def start_edit(self, index: int) -> None:
        msgs = self.chat.messages()
        if self.generating or index >= len(msgs) or msgs[index].role != "user":
            return
        self.editing_index = index
        self.input.setPlainText(msgs[index].content)
        self.editBar.setText(f"Editing {self.message_name(index)}: Enter sends it as a new version (what followed "
                             "stays with the old one, a ‹ step away), Esc cancels.")
        self.editBar.show()
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self.editing_index = None
        self.editBar.hide()
        self.input.clear()

    def _resend_edit(self, text: str) -> None:
        index = self.editing_index
        self.editing_index = None
        self.editBar.hide()
        self.input.clear()
        self.controller.resend_edit(index, text)

    def continue_reply(self) -> None:
        """Continue: the last reply, cut short or stopped, goes on in the same message."""
        if self.model_ready and not self.controller.continue_reply():
            self.stageLabel.setText("Only the last reply, cut short or stopped, can be continued")

    def show_version(self, index: int, step: int) -> None:
        if self.controller.show_version(index, step):
            m = self.controller.messages[index]
            self.stageLabel.setText(f"Version {m.version} of {m.versions}")
            self._update_actions()

    def _reply_meta(self) -> dict:
        from .reply_label import reply_meta

        sampling = {**self.settings.sampling_kwargs(), **self.sampling_overrides}
        return reply_meta(self.model_info if self.model_ready else None, sampling, self.settingsPanel.applied_plan)

    def import_conversation(self, path: str | None = None) -> int | None:
        """File → Import conversation: a Pinwheel export (JSON or Markdown) becomes a new chat."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import a conversation", documents_folder(),
                                                  "Pinwheel exports (*.json *.md);;All files (*)")
            if not path:
                return None
        conversation_id = self.controller.import_file(path)
        if conversation_id is not None:
            self.open_conversation(conversation_id)
            self.stageLabel.setText(f"Imported {Path(path).name}")
        return conversation_id

    def copy_message(self, index: int) -> None:
        QGuiApplication.clipboard().setText(self.chat.messages()[index].content)
        self.stageLabel.setText(f"Copied {self.message_name(index)}")
        if index >= self.chat.offset:  # (a message not built yet has no button to show it)
            flash(self.chat.widgets[index - self.chat.offset].copyButton)

    def copy_last_reply(self) -> None:
        msgs = self.chat.messages()
        for i in range(len(msgs) - 1, -1, -1):
            if msgs[i].role == "assistant":
                self.copy_message(i)
                return

    def open_link(self, url: QUrl) -> None:
        """Links in messages open only on a click, and only web/mail links, in the system browser."""
        if url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)
        else:
            self.stageLabel.setText(f"Not opening {url.toString()[:80]}: only http(s) and mailto links open")

    # ------------------------------------------------------------------ memory view

    def _on_stats(self, snap: StatsSnapshot) -> None:
        self.last_stats = snap
        s = snap.stats
        self.gauge.set_snapshot(snap)
        per = {}
        system_tokens = pinned_tokens = 0
        for mm in s.messages:
            if mm.index < 0:  # the system prompt: part of the sinks
                system_tokens += int(mm.tokens_in_cache)
                continue
            per[mm.index] = MessageMemoryView(int(mm.tokens), int(mm.tokens_in_cache), bool(mm.pinned))
            if mm.pinned:
                pinned_tokens += int(mm.tokens)
        if not getattr(s, "system_in_sinks", True):  # (Gemma folds it into the first turn)
            system_tokens = 0
        elif not system_tokens and self.settings.system_prompt and not s.messages:
            system_tokens = max(int(s.sink_tokens) - pinned_tokens, 0)  # pinned before the first turn feeds it
        self.chat.set_memory(per, int(s.sink_tokens), system_tokens)
        if not self.generating:  # a reply's own tokens are never pinned: skip the work while streaming
            plan = self.settingsPanel.applied_plan
            if plan is not None and (plan.sinks, plan.window) != (int(s.sink_tokens), int(s.window)):
                # a pin (or a new system prompt) moved tokens into the sinks: that is the cache now,
                # so the preview compares against it ("same as the current cache" after a pin)
                self.settingsPanel.applied_plan = dataclasses.replace(plan, sinks=int(s.sink_tokens),
                                                                      window=int(s.window))
                self.settingsPanel.refresh_preview()
            self.settingsPanel.set_pinned_tokens(pinned_tokens)  # (refreshes the preview if they changed)
        self._update_cache_label(int(s.cache_tokens), int(s.capacity))
        if self.generating and snap.tok_s:
            self.speedLabel.setText(f"{snap.tok_s:.1f} tok/s")

    def _update_cache_label(self, tokens: int, capacity: int) -> None:
        self.cacheLabel.setText(f"cache {tokens:,} / {capacity:,}")

    def pin_preview(self, index: int, pinned: bool) -> tuple[str, bool]:
        """What pinning (or unpinning) message `index` would do to the plan, before doing it."""
        if not self.model_ready or self.model_info is None or self.last_stats is None:
            return "The model is not ready yet; try again in a moment.", False
        stats = self.last_stats.stats
        mm = next((m for m in stats.messages if m.index == index), None)
        if mm is None:
            return "This message's size is not known yet; try again in a moment.", False
        tokens = int(mm.tokens)
        wanted = stats.sink_tokens + tokens if pinned else stats.sink_tokens - tokens
        s = self.settings
        try:
            # pins come out of the running cache's budget (an auto budget is not re-sized for them)
            new = session_plan(self.model_info.config, s.kv_dtype, stats.budget_bytes, s.window_arg, wanted)
        except PinwheelError as exc:
            return f"Can't pin {self.message_name(index)} ({tokens:,} tokens): {exc}", False
        verb = "Pin" if pinned else "Unpin"
        text = (f"{verb} {self.message_name(index)} ({tokens:,} tokens)? Sinks {stats.sink_tokens:,} → {new.sinks:,}, "
                f"window {stats.window:,} → {new.window:,}; KV {fmt_bytes(new.kv_bytes)} of "
                f"{fmt_bytes(new.budget_bytes)} budget.")
        if pinned and new.sinks < wanted:
            text += (f" Only {new.sinks - stats.sink_tokens:,} of its tokens fit in the sinks (the window keeps "
                     f"at least {MIN_WINDOW} tokens).")
        if pinned and mm.tokens_in_cache < mm.tokens:
            text += " It has left the window, so it will be read again."
        return text, True

    def request_pin(self, index: int, pinned: bool) -> None:
        text, ok = self.pin_preview(index, pinned)
        self.pinBar.ask(index, pinned, text, ok)

    def set_pinned(self, index: int, pinned: bool) -> None:
        self.engine.set_pinned(index, pinned)

    def _on_pin_changed(self, index: int, pinned: bool) -> None:
        if not self.controller.set_pinned(index, pinned):
            return
        self.chat.refresh(index)
        name = self.message_name(index)
        self.stageLabel.setText(f"{name[0].upper()}{name[1:]} {'pinned' if pinned else 'unpinned'}")

    # ------------------------------------------------------------------ settings

    def apply_settings(self, s: AppSettings) -> None:
        """Apply edited settings in the engine thread; they are kept (and saved) once the
        engine has taken them, so a refused setting leaves the working one in force."""
        self._pending_settings = s
        no_model = not self.model_ready and not self.loadProgress.isVisible()  # none loaded, none loading
        if no_model or (s.model_path or None) != (self.settings.model_path or None) or s.device != self.settings.device:
            self.model_path = s.model_path or None
            self.settingsPanel.applyStatus.setText("Loading the model with the new settings…")
            self.stop()
            self._start_load(self.history_dicts(), s)
            return
        self.engine.apply(self.engine_config(s))

    def _adopt_pending_settings(self) -> str:
        """The engine took the pending settings: keep and save them; returns a note for the user."""
        s, self._pending_settings = self._pending_settings, None
        if s is None:
            return ""
        # the theme is the View menu's: the panel's copy of it dates from the panel's last
        # Apply, and wrote a theme picked since back over it (in settings.json too)
        self.settings = s.replace(theme=self.settings.theme)
        try:
            save_settings(self.settings, self.settings_path)
        except PinwheelError as exc:
            self.show_error(str(exc), "store")
            return " (in force for this session; they could not be saved)"
        return ""

    def _warn_if_short(self, plan) -> None:
        """Said when the model loads or a setting is applied, not only inside the preview: a
        window this short forgets within a few messages."""
        warning = short_window_warning(plan, self.model_info.config.context_length if self.model_info else None)
        if warning:
            self.show_error(warning, "warning", ("Use Auto memory", self.use_auto_memory))

    def use_auto_memory(self) -> None:
        """The auto budget, with no window cap of the user's: what a new user gets."""
        s = self.settings.replace(kv_budget_mib=0.0, window=0)
        self.settingsPanel.load(s)
        self.banner.hide()
        self.settingsPanel.applyStatus.setText("Applying…")  # a rebuild can take a while: say it is under way
        self.stageLabel.setText("Applying the auto memory budget…")
        self.apply_settings(s)

    def _on_engine_failed(self, kind: str, message: str) -> None:
        if self._pending_settings is not None:  # the engine refused the new settings
            self._pending_settings = None
            self.settingsPanel.applyStatus.setText(f"⚠ Not applied: {message}")
        self.show_error(message, kind)

    def _on_plan_applied(self, rebuilt: bool, plan, note: str) -> None:
        shape = f"{plan.capacity:,} slots ({plan.sinks:,} sinks + {plan.window:,} window), {fmt_bytes(plan.kv_bytes)}"
        if rebuilt:
            what = f"Cache rebuilt: {shape}; the conversation was read into it again."
        elif note == "re-read":
            what = f"Applied without rebuilding the cache ({shape}); the conversation was re-read into it."
        else:
            what = "Applied without rebuilding the cache: it already fits these settings."
        what += self._adopt_pending_settings()
        self.settingsPanel.applied_ok(self.settings, plan, what)
        self.stageLabel.setText("Cache rebuilt" if rebuilt else "Settings applied")  # ("Applying…" is over)
        self.gauge.set_plan(plan)
        self._warn_if_short(plan)
        if self.current_id is not None:
            self._store(self.store.set_conversation_settings, self.current_id, self._conversation_settings())

    # ------------------------------------------------------------------ conversations

    def refresh_conversations(self) -> None:
        query = self.sidebar.search.text()
        convs = self._store(self.store.list_conversations, query) or []
        self.sidebar.set_conversations(convs, self.current_id)
        if query.strip() != self.finder.query:
            self.find_in_chat()

    def find_in_chat(self) -> None:
        """Mark the search box's text in the open conversation, the first match current."""
        if self.finder.find(self.sidebar.search.text()):
            self.finder.step()
        text = self.finder.status()
        if text:
            self.stageLabel.setText(text)

    def find_next(self, forward: bool = True) -> None:
        """F3 / Shift+F3 (and Enter on the open conversation): the next or previous match."""
        if not self.finder.query and self.sidebar.search.text().strip():
            self.finder.find(self.sidebar.search.text())
        self.finder.step(forward)
        self.stageLabel.setText(self.finder.status() or "Nothing to find: type in the search box (Ctrl+F)")

    def _find_again(self) -> None:
        """Messages came or went: the marks follow (the current one starts over)."""
        if self.finder.query:
            self.finder.find(self.finder.query)

    def _on_conversation_activated(self, conversation_id: int) -> None:
        """Enter on a conversation: open it; on the open one, the next match (or the message box)."""
        if conversation_id != self.current_id:
            self.open_conversation(conversation_id)
        elif self.finder.matches:
            self.find_next()
        else:
            self.input.setFocus()

    def focus_conversations(self) -> None:
        """View → Go to the conversation list: the list shown and focused, arrows move in it."""
        self.set_panel("conversations", True)
        self.sidebar.focus_list()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.current_id:
            return
        self.stop()
        self._finish_reply_now()
        self._open_conversation(conversation_id, send_to_engine=True)

    def _open_conversation(self, conversation_id: int, send_to_engine: bool) -> list[dict]:
        self.cancel_edit()
        self.pinBar.hide()
        history = self.controller.open(conversation_id, send_to_engine)
        if history is None:
            return []
        self.sidebar.select(conversation_id)  # highlighted, whoever opened it (a click, a restart)
        self._update_actions()
        if self.sidebar.search.text().strip():  # opened from a search: show where it matches
            self.find_in_chat()
        return history

    def _on_history_loaded(self, request: int) -> None:
        if request == self.controller.history_request and not self.generating:
            self.stageLabel.setText(self.finder.status() or "Conversation ready")  # (a search's matches stay said)

    def _finish_reply_now(self, status: str = "stopped") -> None:
        """Leaving a conversation mid-reply: keep what was written, marked `status` (stopped;
        interrupted when the app itself is closing)."""
        self._save_timer.stop()
        self.controller.finish_now(status)

    def new_conversation(self) -> None:
        self.stop()
        self._finish_reply_now()
        self.cancel_edit()
        self.pinBar.hide()
        self.controller.new()
        self.sidebar.list.clearSelection()
        self.input.setFocus()
        self._update_actions()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.controller.rename(conversation_id, title)
        QTimer.singleShot(0, self.refresh_conversations)

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        if confirm:
            conv = self._store(self.store.get_conversation, conversation_id)
            title = conv.title if conv else "this conversation"
            answer = QMessageBox.question(self, "Delete conversation", f"Delete “{title}” and all its messages?")
            if answer != QMessageBox.StandardButton.Yes:
                return
        if conversation_id == self.current_id:
            self.stop()
            self._save_timer.stop()
            self.cancel_edit()
            self.pinBar.hide()
        self.controller.delete(conversation_id)
        self._update_actions()

    def export_conversation(self, conversation_id: int, fmt: str, path: str | None = None) -> str | None:
        ext = "md" if fmt == "markdown" else "json"
        if path is None:
            conv = self._store(self.store.get_conversation, conversation_id)
            name = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in (conv.title if conv else "chat"))
            path, _ = QFileDialog.getSaveFileName(self, "Export conversation",
                                                  str(Path(documents_folder()) / f"{name.strip() or 'chat'}.{ext}"),
                                                  "Markdown (*.md)" if ext == "md" else "JSON (*.json)")
            if not path:
                return None
        # JSON carries every version (its "messages" are the branch shown); Markdown the branch shown
        text = self._store(self.store.export_markdown, conversation_id) if ext == "md" else \
            self._store(self.store.export_json, conversation_id, all_versions=True)
        if text is None:
            return None
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.show_error(f"Couldn't write {path}: {exc.strerror or exc}", "store")
            return None
        self.stageLabel.setText(f"Exported to {path}")
        return path

    # ------------------------------------------------------------------ menus and layout

    def _chain_tabs(self) -> None:
        """Tab goes: the message box and its buttons, the chat and each message's buttons, the
        conversations, the memory gauge, then the settings (not every message button after
        twenty settings fields)."""
        order = [self.input, self.sendButton, self.stopButton, self.regenButton, self.chat]
        for w in self.chat.widgets:
            order += w.buttons()
        sb = self.sidebar
        order += [sb.search, sb.list, sb.newButton, sb.renameButton, sb.deleteButton, sb.exportButton,
                  self.gauge, self.settingsPanel.modelEdit]
        for a, b in zip(order, order[1:]):
            QWidget.setTabOrder(a, b)

    def _build_menus(self) -> None:
        def action(menu, text, slot, keys=None, name=""):
            a = menu.addAction(text)
            a.triggered.connect(slot)
            if keys is not None:
                a.setShortcut(QKeySequence(keys))
            a.setObjectName(name)
            return a

        mb = self.menuBar()
        file_menu = mb.addMenu("&File")
        self.newChatAction = action(file_menu, "&New chat", self.new_conversation, "Ctrl+N", "newChatAction")
        self.openModelAction = action(file_menu, "&Open model…", self.choose_model, "Ctrl+O", "openModelAction")
        self.libraryAction = action(file_menu, "Model &library…", self.open_library, "Ctrl+Shift+O",
                                    "modelLibraryAction")
        self.importAction = action(file_menu, "&Import conversation…", lambda: self.import_conversation(),
                                   "Ctrl+I", "importAction")
        file_menu.addSeparator()
        self.quitAction = action(file_menu, "&Quit", self.request_quit, QKeySequence.StandardKey.Quit, "quitAction")
        if self.quitAction.shortcut().isEmpty():  # no platform binding: the usual one
            self.quitAction.setShortcut(QKeySequence("Ctrl+Q"))

        view = mb.addMenu("&View")
        self.searchAction = action(view, "&Search conversations", self.focus_search,
                                   QKeySequence.StandardKey.Find, "searchAction")
        self.conversationsAction = action(view, "&Conversations", lambda on: self.set_panel("conversations", on),
                                          "Ctrl+B", "conversationsAction")
        self.focusListAction = action(view, "&Go to the conversation list", self.focus_conversations,
                                      "Ctrl+Shift+B", "focusConversationsAction")
        self.findNextAction = action(view, "Find &next in the chat", lambda: self.find_next(), "F3", "findNextAction")
        self.findPreviousAction = action(view, "Find &previous in the chat", lambda: self.find_next(False),
                                         "Shift+F3", "findPreviousAction")
        self.sidePanelAction = action(view, "Settings and &memory", lambda on: self.set_panel("side", on),
                                      "Ctrl+Shift+M", "sidePanelAction")
        for a in (self.conversationsAction, self.sidePanelAction):
            a.setCheckable(True)
        self.settingsAction = action(view, "Sett&ings…", self.focus_settings, "Ctrl+,", "settingsAction")
        theme_menu = view.addMenu("&Theme")
        group = QActionGroup(self)
        self.themeActions = {}
        for name in THEMES:
            a = theme_menu.addAction(name.capitalize())
            a.setCheckable(True)
            a.setObjectName(f"theme{name.capitalize()}Action")
            a.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            group.addAction(a)
            self.themeActions[name] = a
        self.themeActions.get(self.settings.theme, self.themeActions["system"]).setChecked(True)

        help_menu = mb.addMenu("&Help")
        self.shortcutsAction = action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, "Ctrl+/",
                                      "shortcutsAction")
        action(help_menu, "&About Pinwheel", self.show_about, "F1", "aboutAction")
        self._fit_panels()

    def shortcut_list(self) -> list[tuple[str, str]]:
        """(keys, what) for Help → Keyboard shortcuts (and its test)."""
        rows = [(a.shortcut().toString(QKeySequence.SequenceFormat.NativeText), a.text().replace("&", ""))
                for a in (self.newChatAction, self.openModelAction, self.libraryAction, self.quitAction, self.searchAction,
                          self.conversationsAction, self.focusListAction, self.findNextAction, self.findPreviousAction,
                          self.sidePanelAction, self.settingsAction, self.shortcutsAction)]
        return rows + [("Enter / Ctrl+Enter", "Send"), ("Shift+Enter", "New line"), ("Esc", "Stop the reply"),
                       ("Ctrl+R", "Regenerate the last reply"), ("Ctrl+L", "Go to the message box"),
                       ("Ctrl+Shift+C", "Copy the last reply"), ("F1", "About Pinwheel")]

    def show_shortcuts(self) -> None:
        rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>&nbsp;&nbsp;{html.escape(t)}</td></tr>"
                       for k, t in self.shortcut_list())
        QMessageBox.information(self, "Keyboard shortcuts", f"<table>{rows}</table>")

    def focus_search(self) -> None:
        self.set_panel("conversations", True)
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def _remember_details(self, on: bool) -> None:
        self.ui_state.memory_details = on
        self.ui_state.save(self.ui_state_path)

    def focus_settings(self) -> None:
        self.set_panel("side", True)
        self.settingsPanel.setFocus()
        self.sidePanel.ensureWidgetVisible(self.settingsPanel)

    def set_panel(self, which: str, shown: bool) -> None:
        """Show or hide a side panel at the user's request (remembered). A panel asked for
        shows even where the width is tight; one that does not fit hides on its own."""
        if which == "conversations":
            self.ui_state.show_conversations = shown
        else:
            self.ui_state.show_side_panel = shown
        self._forced[which] = shown
        self.ui_state.save(self.ui_state_path)
        self._fit_panels()

    def _fit_panels(self) -> None:
        """Each panel shows when the user wants it and it leaves the chat at least 60% of the
        window (or the user asked for it at this width): the side panel goes first."""
        if not hasattr(self, "conversationsAction"):
            return
        width = max(self.width(), 1)
        conv_w = max(self.sidebar.minimumSizeHint().width(), CONVERSATIONS_WIDTH)
        want_conv, want_side = self.ui_state.show_conversations, self.ui_state.show_side_panel
        side = want_side and (self._forced["side"] or width - SIDE_PANEL_WIDTH - (conv_w if want_conv else 0)
                              >= CHAT_SHARE * width)
        conv = want_conv and (self._forced["conversations"]
                              or width - conv_w - (SIDE_PANEL_WIDTH if side else 0) >= CHAT_SHARE * width)
        self.sidebar.setVisible(conv)
        self.sidePanel.setVisible(side)
        self.status.fit(width)
        # The panels' own widths never hold the window wide: a narrower window is let through,
        # and they give way above. One the user asked for at this width widens the window.
        split = self.centralWidget()
        split.setMinimumWidth(self._center.minimumSizeHint().width())
        need = split.minimumSizeHint().width()
        if need > width and (self._forced["side"] or self._forced["conversations"]):
            self.resize(need, self.height())
        for a, on in ((self.conversationsAction, conv), (self.sidePanelAction, side)):
            a.blockSignals(True)
            a.setChecked(on)
            a.blockSignals(False)

    def resizeEvent(self, e):  # noqa: N802
        super().resizeEvent(e)
        old, new = e.oldSize().width(), e.size().width()
        if old > 0 and new < old:  # shrinking: a panel the user opened at this width may go again
            self._forced = {k: False for k in self._forced}
        self._fit_panels()

    def showEvent(self, e):  # noqa: N802
        if not self._fitted:  # the first show: its screen is known now, and a restored geometry set
            self._fitted = True
            self.fit_to_screen()
        super().showEvent(e)

    def fit_to_screen(self) -> None:
        """The window, frame included, inside its screen's available area: at QT_SCALE_FACTOR=2
        on a 1920x1080 screen the first window was 2560x1600 pixels, Send and the title bar's
        buttons off the screen. Its minimum size gives way only where the screen is smaller."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        geo, outer = self.geometry(), self.frameGeometry()
        frame = QMargins(geo.left() - outer.left(), geo.top() - outer.top(),
                         outer.right() - geo.right(), outer.bottom() - geo.bottom())
        minimum = self.minimumSize().expandedTo(self.minimumSizeHint())
        fitted = fit_rect(geo, screen.availableGeometry(), FRAME_GUESS if frame.isNull() else frame, minimum)
        # a screen smaller than the minimum wins (in that direction only: the layout keeps the other)
        if fitted.width() < minimum.width():
            self.setMinimumWidth(fitted.width())
        if fitted.height() < minimum.height():
            self.setMinimumHeight(fitted.height())
        if self.testAttribute(Qt.WidgetAttribute.WA_Moved):  # placed (a restored geometry): kept on screen
            self.setGeometry(fitted)
        else:  # the window manager places it
            self.resize(fitted.size())

    def set_theme(self, name: str) -> None:
        """View → Theme: applied at once and kept in the settings file."""
        from PySide6.QtWidgets import QApplication

        from app.theme import apply_theme

        self.settings = self.settings.replace(theme=name)
        try:
            save_settings(self.settings, self.settings_path)
        except OSError as exc:
            self.show_error(f"Couldn't save the theme: {exc.strerror or exc}", "store")
        app = QApplication.instance()
        if app is not None:
            apply_theme(app, name)
        self.themeActions[name].setChecked(True)
        self.stageLabel.setText(f"Theme: {name}")
        QTimer.singleShot(0, self.finder.refresh)  # once the messages have re-rendered in the theme

    def show_about(self) -> None:
        QMessageBox.about(self, "About Pinwheel", about_text(self.modelLabel.text()))

    # ------------------------------------------------------------------ shutdown

    def changeEvent(self, e):  # noqa: N802
        if e.type() == QEvent.Type.PaletteChange:
            self.gauge.update()
        super().changeEvent(e)

    def request_quit(self) -> None:
        """File → Quit (Ctrl+Q). Mid-reply, the first time ever, it says what happens to the reply
        and waits for a second Ctrl+Q: quitting at once looked like losing it."""
        if self.generating and not self.ui_state.quit_notice_seen:
            self.ui_state.quit_notice_seen = True
            self.ui_state.save(self.ui_state_path)
            self.show_error("Quitting keeps the part of the reply written so far (marked “interrupted”). "
                            "Press Ctrl+Q again to quit.", "notice", ("Quit now", self.close))
            self.stageLabel.setText("Ctrl+Q again quits; the partial reply is kept")
            return
        self.close()

    def closeEvent(self, e):  # noqa: N802
        self.shutdown()
        super().closeEvent(e)

    def shutdown(self) -> None:
        """Stop generation, keep the partial reply, stop the engine thread, close the store."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        _OPEN_WINDOWS.discard(self)
        self.engine.cancel()
        self._finish_reply_now("interrupted")
        self.engine.shutdown()
        self.store.close()


def documents_folder() -> str:
    """Where a file dialog opens: the user's documents (or home), never the working folder."""
    from PySide6.QtCore import QStandardPaths

    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return docs if docs and Path(docs).is_dir() else str(Path.home())


def model_folder() -> str:
    """Open model…: the user's models folder when there is one, else the documents."""
    from engine.model_locator import user_models_dir

    d = user_models_dir()
    return str(d) if d.is_dir() else documents_folder()


def about_text(model: str = "") -> str:
    """The About box: the one version number (engine/version.py) and what is running."""
    from app.identity import get_version

    lines = [
        f"<h3>Pinwheel {get_version()}</h3>",
        "<p>Offline chat with a local language model on a bounded KV cache: pinned sink "
        "tokens plus a sliding window, so memory stays constant however long you chat.</p>",
    ]
    if model:
        lines.append(f"<p>Model: {html.escape(model)}</p>")
    lines.append("<p>Apache-2.0 licence.</p>")
    return "".join(lines)

