"""Applying the settings panel's values: sent to the engine thread, kept once it has taken them.

Settings are applied in two steps so that a refused setting leaves the working one in force:
`apply` sends them (as a model load when the model file or device changes, else as a new memory
plan), and they become the window's settings, saved to settings.json, only when the engine
answers that it took them (`adopt_pending`, called on PlanApplied or ModelLoaded). A refusal
(`refused`) drops them and says why beside Apply.

Qt-free: it acts on the window through the attributes and methods named here (settings,
settingsPanel, engine, show_error ...), the way :mod:`app.window_view` does.
"""
from __future__ import annotations

from engine.budget import short_window_warning
from engine.errors import PinwheelError

from .memory_gauge import fmt_bytes
from .memory_words import approx_words as words, hybrid_memory, short_window_words
from .settings import AppSettings, save_settings


class SettingsApplication:
    def __init__(self, win):
        self.win = win
        self.pending: AppSettings | None = None  # sent to the engine, not yet taken

    def apply(self, s: AppSettings) -> None:
        """Apply edited settings in the engine thread (a model load where the file, the device,
        or the lack of any model, asks for one)."""
        w = self.win
        self.hold(s)
        no_model = not w.model_ready and not w.loadProgress.isVisible()  # none loaded, none loading
        if no_model or (s.model_path or None) != (w.settings.model_path or None) or s.device != w.settings.device:
            w.settingsPanel.applyStatus.setText("Loading the model with the new settings…")
            w.stop()
            w.models.start(w.history_dicts(), s, path=s.model_path or None)
            return
        w.engine.apply(w.engine_config(s))

    def hold(self, s: AppSettings) -> AppSettings:
        """`s` goes to the engine with a model load: kept once the model has loaded with it."""
        self.pending = s
        return s

    def adopt_pending(self) -> str:
        """The engine took the pending settings: keep and save them; returns a note for the user."""
        w = self.win
        s, self.pending = self.pending, None
        if s is None:
            return ""
        # the theme is the View menu's: the panel's copy of it dates from the panel's last
        # Apply, and wrote a theme picked since back over it (in settings.json too)
        # the sampling boxes are the window's own too: in force as edited, whatever Apply carried
        w.settings = s.replace(theme=w.settings.theme, **w.settings.sampling_fields())
        try:
            save_settings(w.settings, w.settings_path)
        except PinwheelError as exc:
            w.show_error(str(exc), "store")
            return " (in force for this session; they could not be saved)"
        return ""

    def sampling_edited(self, fields: dict) -> None:
        """A sampling box changed: used from the next reply and saved, with no Apply."""
        w = self.win
        if w.settings.sampling_fields() == fields:
            return
        w.settings = w.settings.replace(**fields)  # (an Apply on its way keeps them: adopt_pending)
        try:
            save_settings(w.settings, w.settings_path)
        except PinwheelError as exc:
            w.show_error(str(exc), "store")
        w.save_conversation_settings()  # (the open chat's export names the settings it runs with)
        w.stageLabel.setText("Sampling changed: the next reply uses it")

    def refused(self, message: str) -> None:
        """The engine (or the model file) refused the pending settings: the old ones stay."""
        if self.pending is not None:
            self.pending = None
            self.win.settingsPanel.applyStatus.setText(f"⚠ Not applied: {message}")

    def warn_if_short(self, plan) -> None:
        """Said when the model loads or a setting is applied, not only inside the preview: a
        window this short forgets within a few messages."""
        info = self.win.model_info
        warning = short_window_words(short_window_warning(plan, info.config.context_length if info else None),
                                     hybrid_memory(plan, info.config if info else None))
        if warning:
            self.win.show_error(warning, "warning", ("Use Auto memory", self.use_auto_memory))

    def use_auto_memory(self) -> None:
        """The auto budget, with no window cap of the user's: what a new user gets."""
        w = self.win
        s = w.settings.replace(kv_budget_mib=0.0, window=0)
        w.settingsPanel.load(s)
        w.banner.hide()
        w.settingsPanel.applyStatus.setText("Applying…")  # a rebuild can take a while: say it is under way
        w.stageLabel.setText("Applying the auto memory budget…")
        self.apply(s)

    def on_engine_failed(self, kind: str, message: str) -> None:
        self.refused(message)  # (when settings were on their way, the engine refused them)
        self.win.show_error(message, kind)

    def on_plan_applied(self, rebuilt: bool, plan, note: str) -> None:
        w = self.win
        if w.settingsPanel.details:  # the exact terms, as the panel's preview uses them
            shape = f"{plan.capacity:,} slots ({plan.sinks:,} sinks + {plan.window:,} window), {fmt_bytes(plan.kv_bytes)}"
        else:
            info = w.model_info
            hybrid = hybrid_memory(plan, info.config if info else None)
            shape = (f"the model sees {words(plan.window)} words of recent text" if hybrid is None
                     else hybrid.sentence(plan.window)) + f", using {fmt_bytes(plan.kv_bytes)}"
        if rebuilt:
            what = f"Memory rebuilt: {shape}; the conversation was read into it again."
        elif note == "re-read":
            what = f"Applied without rebuilding the memory ({shape}); the conversation was re-read into it."
        else:
            what = "Applied without rebuilding the memory: it already fits these settings."
        what += self.adopt_pending()
        w.settingsPanel.applied_ok(w.settings, plan, what)
        w.stageLabel.setText("Memory rebuilt" if rebuilt else "Settings applied")  # ("Applying…" is over)
        w.show_plan(plan)
        self.warn_if_short(plan)
        w.save_conversation_settings()
