"""Pinwheel's main window: conversations | chat | memory gauge + settings.

The window owns the conversation store (``app.store``, SQLite) and an
:class:`~app.engine_worker.EngineController` whose thread owns the ChatSession; it never calls
the engine itself.  Every finished message is in the store before the next request starts; a
reply is saved as ``streaming`` while it grows (at most once a second) and finished as
``done`` / ``stopped`` / ``interrupted``, so Stop, an engine error or a crash keeps it.

Errors (a bad model file, an engine exception, out of memory, a full disk) appear in a banner
at the top of the chat; nothing modal, nothing lost, the window stays usable.

This file lays the window out and wires it; the work is done elsewhere: the conversation in
app.chat_controller (through window_view), the model in model_loading, Apply in
settings_application, the engine's events in engine_news, the stats in stats_view, the panels'
fit in window_fit, the menus in window_menus; the widgets are chat_pane, side_panel,
status_line, pin_bar and conversation_list.
"""
from __future__ import annotations

import atexit
import gc
import html
import logging
import os
import weakref
from pathlib import Path

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox, QSplitter

from .about import about_text, app_icon  # noqa: F401  (about_text: callers import it from here too)
from .chat_controller import ChatController
from .chat_find import ChatFinder, ChatSearch
from .chat_pane import ChatPane
from .chat_view import PLACEHOLDER
from .conversation_files import export_conversation, import_conversation
from .conversation_list import ConversationSidebar
from .copying import copy_last_reply, copy_message
from .engine_events import ReplyResult, StatsSnapshot
from .engine_news import EngineNews
from .engine_worker import EngineConfig, EngineController
from .folders import model_folder
from .model_loading import ModelLoading
from .pin_bar import pin_preview
from .settings import AppSettings, default_settings_path, load_settings
from .settings_application import SettingsApplication
from .side_panel import SidePanel
from .stats_view import show_cache, show_plan, show_stats
from .status_line import StatusLine
from .store import ConversationStore, StoreError, default_data_dir, default_db_path
from .tab_order import chain_tabs
from .theme import choose_theme
from .ui_state import UiState
from .window_fit import FIRST_SIZE, PanelFit, fit_to_screen
from .window_menus import build_menus, shortcut_list
from .window_view import WindowView, message_name

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
        self.ui_state_path = self.settings_path.parent / "ui_state.json"
        self.ui_state = UiState.load(self.ui_state_path)
        self.panels = PanelFit(self)  # which side panels show at the window's width
        self._fitted = False  # fitted to its screen (on the first show)

        self.last_stats: StatsSnapshot | None = None
        self.editing_index: int | None = None
        #: extra SamplingParams fields for every reply (e.g. {"ignore_eos": True}); tests and tools
        self.sampling_overrides: dict = {}
        self.library_dirs: list[str] = []  # folders the model library looks in besides the apps' own
        # which model serves and loading another; applying the settings panel's values (both Qt-free)
        self.models = ModelLoading(self, str(model_path) if model_path else (self.settings.model_path or None),
                                   PLACEHOLDER, lambda fn: QTimer.singleShot(0, fn))
        self.applier = SettingsApplication(self)

        self._build_ui()
        self._open_store()
        self.engine = EngineController(self)
        # the conversation itself (messages, the reply in progress, the store) lives in a Qt-free
        # controller; this window shows it and forwards what the user does
        self.view = WindowView(self)
        self.controller = ChatController(
            self.store, self.engine, self.view,
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
        self.models.start(history)
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
        self.sidebar.activated.connect(lambda cid: self.search.activated(cid))

        self._center = pane = ChatPane()
        for name in ("banner", "chat", "pinBar", "editBar", "input", "sendButton", "stopButton", "regenButton"):
            setattr(self, name, getattr(pane, name))
        self.chat.pinRequested.connect(self.request_pin)
        self.chat.copyRequested.connect(self.copy_message)
        self.chat.editRequested.connect(self.start_edit)
        self.chat.continueRequested.connect(lambda _i: self.continue_reply())
        self.chat.versionRequested.connect(self.show_version)
        self.chat.linkClicked.connect(self.open_link)
        self.finder = ChatFinder(self.chat)
        self.search = ChatSearch(self, self.finder)
        self.pinBar.confirmed.connect(self.set_pinned)
        self.input.submitted.connect(self.send)
        self.sendButton.clicked.connect(self.send)
        self.stopButton.clicked.connect(self.stop)
        self.regenButton.clicked.connect(self.regenerate)

        self.sidePanel = SidePanel(self.settings, self.ui_state.memory_details)
        self.sidePanel.detailsToggled.connect(lambda on: self.ui_state.remember(self.ui_state_path, memory_details=on))
        self.gauge, self.settingsPanel = self.sidePanel.gauge, self.sidePanel.settingsPanel
        self.settingsPanel.applyRequested.connect(self.apply_settings)
        self.settingsPanel.samplingEdited.connect(self.applier.sampling_edited)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("mainSplitter")
        split.addWidget(self.sidebar)
        split.addWidget(pane)
        split.addWidget(self.sidePanel)
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
        self.chat.changed.connect(lambda: self.search.messages_changed())
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
        self.news = EngineNews(self)
        self.engine.event.connect(self._on_engine_event)  # arrives in this (the GUI) thread
        self.settingsPanel.systemPromptEdited.connect(self.engine.count_sinks)
        self.settingsPanel.libraryRequested.connect(self.open_library)

    def _on_engine_event(self, ev) -> None:
        """Everything the engine thread says, queued to this (the GUI) thread: the window is the
        connection's receiver; app.engine_news sends each event on."""
        self.news.dispatch(ev)

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
    current_id = property(lambda self: self.controller.current_id)
    reply = property(lambda self: self.controller.reply)
    generating = property(lambda self: self.controller.generating)

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
        return message_name(self.chat.messages(), index)

    def history_dicts(self) -> list[dict]:
        """The conversation as the engine takes it (a failed reply that wrote nothing is left out)."""
        return self.controller.history()

    # ------------------------------------------------------------------ the model (app.model_loading)

    model_ready = property(lambda self: self.models.ready)
    model_info = property(lambda self: self.models.info)
    model_path = property(lambda self: self.models.path)  # the file asked for (None: the default)
    library_dialog = property(lambda self: self.models.library_dialog)

    def open_library(self) -> None:
        self.models.open_library()

    def load_model(self, path: str | None) -> None:
        self.models.load(path)

    def choose_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", model_folder(),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.load_model(path)

    # ------------------------------------------------------------------ chatting

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or self.generating:
            return
        if not self.model_ready:
            self.models.queue_send()
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

    def _on_token(self, request: int, text: str, ttft_s: float | None = None) -> None:
        current = self.controller.on_token(request, text) if text else self.controller.in_progress(request)
        if current and ttft_s is not None:  # the wait is over: said now, not when the reply ends
            self.view.first_token(ttft_s)

    def _on_reply_finished(self, result: ReplyResult) -> None:
        status = self.controller.on_reply_finished(result)
        if status is None:  # not the reply in progress (a stale one)
            return
        self._save_timer.stop()
        self.view.reply_finished(result, status)
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

    def copy_message(self, index: int) -> None:
        copy_message(self, index)

    def copy_last_reply(self) -> None:
        copy_last_reply(self)

    def open_link(self, url: QUrl) -> None:
        """Links in messages open only on a click, and only web/mail links, in the system browser."""
        if url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)
        else:
            self.stageLabel.setText(f"Not opening {url.toString()[:80]}: only http(s) and mailto links open")

    # ------------------------------------------------------------------ memory view

    def _on_stats(self, snap: StatsSnapshot) -> None:
        self.last_stats = snap
        show_stats(self, snap)

    def _update_cache_label(self, tokens: int, capacity: int) -> None:
        show_cache(self, tokens, capacity)

    def show_plan(self, plan) -> None:
        """The plan in force, in the gauge and (a hybrid's words) the chat."""
        show_plan(self, plan)

    def request_pin(self, index: int, pinned: bool) -> None:
        """A message's Pin: the bar asks, with what it costs, before anything changes."""
        ready = self.model_ready and self.model_info is not None and self.last_stats is not None
        text, ok = pin_preview(self.last_stats.stats if ready else None, self.model_info.config if ready else None,
                               self.settings, index, pinned, self.message_name(index))
        self.pinBar.ask(index, pinned, text, ok)

    def set_pinned(self, index: int, pinned: bool) -> None:
        # said at once: the engine reads the conversation into the cache again first, which on a
        # long chat takes seconds, and the message's button changes only when it is done
        name = self.message_name(index)
        self.stageLabel.setText(f"{'Pinning' if pinned else 'Unpinning'} {name}: reading the conversation again…")
        self.engine.set_pinned(index, pinned)

    def _on_pin_changed(self, index: int, pinned: bool) -> None:
        if not self.controller.set_pinned(index, pinned):
            return
        self.chat.refresh(index)
        name = self.message_name(index)
        self.stageLabel.setText(f"{name[0].upper()}{name[1:]} {'pinned' if pinned else 'unpinned'}")

    # ------------------------------------------------------------------ settings (app.settings_application)

    def apply_settings(self, s: AppSettings) -> None:
        self.applier.apply(s)

    def use_auto_memory(self) -> None:
        self.applier.use_auto_memory()

    def save_conversation_settings(self) -> None:
        """The open conversation keeps the settings (and plan) it runs with, for its export."""
        if self.current_id is not None:
            self._store(self.store.set_conversation_settings, self.current_id, self._conversation_settings())

    # ------------------------------------------------------------------ conversations

    def refresh_conversations(self) -> None:
        query = self.sidebar.search.text()
        convs = self._store(self.store.list_conversations, query) or []
        self.sidebar.set_conversations(convs, self.current_id)
        self.search.query_changed()

    def find_next(self, forward: bool = True) -> None:
        self.search.step(forward)

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
        self.search.opened()  # (from a search: where it matches)
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
            # No is the default: Enter, pressed out of habit, must not delete a whole chat for good
            buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
            answer = QMessageBox.question(self, "Delete conversation", f"Delete “{title}” and all its messages? "
                                          "This cannot be undone.", buttons, QMessageBox.StandardButton.No)
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
        return export_conversation(self, conversation_id, fmt, path)

    def import_conversation(self, path: str | None = None) -> int | None:
        return import_conversation(self, path)

    # ------------------------------------------------------------------ menus and layout

    def _chain_tabs(self) -> None:
        chain_tabs(self)

    def _build_menus(self) -> None:
        build_menus(self)
        self._fit_panels()

    def shortcut_list(self) -> list[tuple[str, str]]:
        return shortcut_list(self)

    def show_shortcuts(self) -> None:
        rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>&nbsp;&nbsp;{html.escape(t)}</td></tr>"
                       for k, t in self.shortcut_list())
        QMessageBox.information(self, "Keyboard shortcuts", f"<table>{rows}</table>")

    def focus_search(self) -> None:
        self.set_panel("conversations", True)
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def focus_settings(self) -> None:
        self.set_panel("side", True)
        self.settingsPanel.setFocus()
        self.sidePanel.ensureWidgetVisible(self.settingsPanel)

    def set_panel(self, which: str, shown: bool) -> None:
        self.panels.set_panel(which, shown)

    def _fit_panels(self) -> None:
        self.panels.fit()

    def resizeEvent(self, e):  # noqa: N802
        super().resizeEvent(e)
        self.panels.resized(e.oldSize().width(), e.size().width())

    def showEvent(self, e):  # noqa: N802
        if not self._fitted:  # the first show: its screen is known now, and a restored geometry set
            self._fitted = True
            self.fit_to_screen()
        super().showEvent(e)

    def fit_to_screen(self) -> None:
        fit_to_screen(self)

    def set_theme(self, name: str) -> None:
        choose_theme(self, name)
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
            self.ui_state.remember(self.ui_state_path, quit_notice_seen=True)
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
