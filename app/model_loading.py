"""Which model serves the chat, and loading another: at start, from Open model…, the model
library or the settings panel.

The engine thread loads; this follows its news (progress, loaded, failed, refused) and shows it:
a progress bar and stage text while loading, the model's name, device and plan once loaded,
and a banner with a way out when a file fails. A file that fails its checks while another model
serves is *refused*: the serving model stays, and so does its path. A message sent while the
model loads is queued and goes once it is ready.

Qt-free: it acts on the window through the attributes and methods named here (status,
settingsPanel, chat, gauge, engine, show_error ...), the way :mod:`app.window_view` does; `later`
runs a function once the event loop is free (the window passes a zero-delay timer).
"""
from __future__ import annotations

from pathlib import Path

_LAST = object()  # start(): the file asked for last


class ModelLoading:
    def __init__(self, win, path: str | None, ready_text: str, later):
        self.win = win
        self.path = path  # the file asked for (None: the default model)
        self.serving_path = path  # the file of the model that serves (kept if another is refused)
        self.ready = False
        self.info = None  # the engine's ModelLoaded info of the serving model
        self.send_when_ready = False  # Enter pressed while the model was loading
        self.library_dialog = None
        self._library_request = 0
        self._ready_text = ready_text  # the chat's placeholder once a model is ready
        self._later = later

    # -- loading ---------------------------------------------------------------------

    def start(self, history: list[dict] | None, settings=None, path=_LAST) -> None:
        """Load `path` (default: the file asked for last) with `settings` (default: the window's),
        the conversation's `history` read into its cache."""
        w = self.win
        if path is not _LAST:
            self.path = path
        self.ready = False
        w.loadProgress.setRange(0, 0)
        w.loadProgress.show()
        w.stageLabel.setText("Loading the model…")
        if self.path and not (settings or w.settings).model_path:  # --model: not the default's name
            w.settingsPanel.modelEdit.setPlaceholderText(f"{Path(self.path).name} (loading…)")
        w._update_actions()
        w.engine.load(self.path, w.engine_config(settings), history)

    def load(self, path: str | None) -> None:
        """Load another model file (in the engine thread); the conversation stays."""
        w = self.win
        w.stop()
        w.banner.hide()
        settings = w.applier.hold(w.settings.replace(model_path=path or ""))  # kept once it loads
        w.settingsPanel.modelEdit.setText(path or "")
        self.start(w.history_dicts(), settings, path=path)

    def queue_send(self) -> None:
        """Enter while the model loads: not dropped, not silently ignored; it goes once ready."""
        self.send_when_ready = True
        self.win.stageLabel.setText("Your message will be sent as soon as the model is ready.")
        self.win.sendButton.setText("Queued")

    def _unqueue(self) -> None:
        self.send_when_ready = False
        self.win.sendButton.setText("Send")

    # -- the engine's news -------------------------------------------------------------

    def on_progress(self, stage: str, done: int, total: int) -> None:
        w = self.win
        w.stageLabel.setText(stage)
        w.chat.placeholder.setText(f"{stage}\nYou can type, and read old conversations, meanwhile.")
        if total:
            w.loadProgress.setRange(0, total)
            w.loadProgress.setValue(done)
        else:
            w.loadProgress.setRange(0, 0)

    def on_loaded(self, info) -> None:
        w = self.win
        self.ready, self.info, self.serving_path = True, info, self.path
        w.loadProgress.hide()
        w.stageLabel.setText(f"Model ready in {info.load_s:.1f} s")
        self._show_template(info)
        w.chat.placeholder.setText(self._ready_text)
        panel = w.settingsPanel
        if w.applier.pending is not None:  # loaded with new settings from the panel
            note = w.applier.adopt_pending()
            panel.applied_ok(w.settings, info.plan, f"Model loaded in {info.load_s:.1f} s.{note}")
        if not w.settings.model_path:
            panel.modelEdit.setPlaceholderText(f"default: {Path(info.path).name}")
        w.modelLabel.setText(Path(info.path).stem)  # the file people chose; the GGUF's own name below
        w.modelLabel.setToolTip(f"{info.name}\n{info.path}")
        w.deviceLabel.setText(info.device.upper())
        panel.applied_plan = info.plan
        panel.set_model_config(info.config)
        w.show_plan(info.plan)
        w._update_cache_label(info.plan.sinks, info.plan.capacity)
        w._update_actions()
        w.applier.warn_if_short(info.plan)
        w.status.fit()  # the model's name and device are in: which labels fit now
        w.modelReady.emit()
        if self.send_when_ready:
            self._unqueue()
            self._later(w.send)

    def _show_template(self, info) -> None:
        """A file without a working chat template chats in a built-in turn format: say which and
        why, in the status bar, with what it may mean in the tooltip."""
        w = self.win
        name = getattr(info, "template", "")
        if not name:
            w.status.show_template("")
            return
        lacks = "its chat template does not work" if info.template_error else "it has no chat template"
        short = "the file's chat template fails" if info.template_error else "the file has no chat template"
        w.stageLabel.setText(f"{w.stageLabel.text()} · {short}")  # short: the status bar is narrow
        if info.template_error:
            hint = f"The file's own template: {info.template_error}"
        else:
            hint = "A file without a chat template may be a base model: its replies may not follow a conversation."
        w.status.show_template(  # which one (the tooltip says why)
            f"built-in {name} format", f"This model file's turns are written in Pinwheel's built-in {name} format "
            f"({info.template_why}), because {lacks}.\n{hint}")

    def on_failed(self, kind: str, message: str) -> None:
        w = self.win
        self.ready = False
        if self.send_when_ready:  # the message stays in the box, unsent
            self._unqueue()
        w.loadProgress.hide()
        w.stageLabel.setText("No model loaded")
        w.chat.placeholder.setText("No model is loaded: open a GGUF model file (File → Open model…), or pick one "
                                   "you already have from File → Model library… (Ctrl+Shift+O).")
        w.modelLabel.setText("no model")
        w.applier.refused(message)
        w._update_actions()
        w.show_error(message, kind, ("Model library…", self.open_library))

    def on_refused(self, kind: str, message: str) -> None:
        """Another model file failed its checks (or its weights): the model that was serving
        goes on serving (the engine keeps it, or loads it again), and the chat stays."""
        w = self.win
        self.path = self.serving_path
        w.applier.refused(message)
        w.settingsPanel.modelEdit.setText(self.path or "")
        w.settingsPanel.applyStatus.setText(f"⚠ Not applied: {message}")
        self.ready = self.info is not None
        w.loadProgress.hide()
        name = Path(self.info.path).stem if self.info is not None else "the previous model"
        w.stageLabel.setText(f"Still using {name}")
        if self.ready:  # (the checks' progress had replaced the empty chat's hint)
            w.chat.placeholder.setText(self._ready_text)
        w._update_actions()
        w.show_error(f"{message} — still using {name}.", kind, ("Open another…", w.choose_model))

    # -- the model library ---------------------------------------------------------------

    def open_library(self) -> None:
        """File → Model library: the models on this machine, listed in the engine thread, and
        what each needs with the current memory setting; choosing one loads it (the model in
        use keeps serving if it fails)."""
        import psutil

        from .model_library import ModelLibraryDialog  # (the dialog is Qt's: imported when opened)

        w = self.win
        dlg = ModelLibraryDialog(w, available=psutil.virtual_memory().available)
        dlg.chosen.connect(lambda path, _entry: self.load(path))
        self.library_dialog = dlg
        self._library_request = w.engine.list_models(w.library_dirs, w.engine_config())
        dlg.finished.connect(lambda *_: setattr(self, "library_dialog", None))
        dlg.open()

    def on_library_listed(self, ev) -> None:
        dlg = self.library_dialog
        if dlg is not None and ev.request == self._library_request:
            dlg.set_rows(ev.rows)
