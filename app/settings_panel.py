"""The settings panel: model, device, memory plan, system prompt, sampling -- with a live preview.

While the user edits, the preview shows what ``engine.budget.plan_memory`` makes of the
values (slots, sinks, window, bytes) before anything is applied.  ``plan_memory`` is pure
Python, so calling it on every edit in the GUI thread costs microseconds.  The window spin
is capped by what the budget holds; sinks -1 means "auto (system prompt)", whose token count
the engine thread reports (:meth:`SettingsPanel.set_auto_sinks`).  For a hybrid model (Qwen3.5)
the preview leads with what it remembers: its DeltaNet layers' fixed summary of the whole chat
and how far back its attention layers see (app.memory_words).
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.budget import (AUTO_SINKS_WITHOUT_SYSTEM, MIB, MIN_SLOTS, MIN_WINDOW, NEEDLE_BUDGET, auto_budget,
                           budget_slots, plan_memory, short_window_warning)
from engine.config import GLOBAL
from engine.errors import SettingsError

from .memory_gauge import fmt_bytes, words, wrapped
from .memory_words import hybrid_memory, short_window_words
from .settings import AppSettings

# the settings that take effect on Apply (the sampling ones need none: samplingEdited)
APPLY_FIELDS = ("model_path", "device", "kv_dtype", "kv_budget_mib", "window", "sinks", "system_prompt")
BUDGET_PRESETS = (("Auto (fits the model)", "auto"), ("Needle 2: 11.5 MiB", "needle"), ("Custom", "custom"))
KV_LABELS = {"int8": "int8 + scales (smallest)", "bf16": "bf16", "f32": "f32 (exact, largest)"}
PLAIN_KV_LABELS = {"int8": "Compact (smallest)", "bf16": "Standard", "f32": "Exact (largest)"}
# (form label in plain words, in exact terms, what the tooltip explains)
MEMORY_ROWS = {
    "precision": ("Detail kept", "Precision",
                  "How precisely the conversation memory (the KV cache) is stored. int8 + scales: 8-bit numbers "
                  "with a scale per group, a quarter of f32's size, replies nearly the same; bf16: half of f32; "
                  "f32: exact, the largest."),
    "budget": ("Memory size", "Budget",
               "The KV cache's budget: how much memory the conversation memory may take. It is reserved once "
               "and never grows during a chat."),
    "window": ("Recent text", "Window",
               "The sliding window, in tokens (a token is about ¾ of a word): how much of the most recent "
               "conversation the model sees. Older text is forgotten, except what is always kept."),
    "sinks": ("Always kept", "Sinks",
              "Attention sinks: tokens at the start kept in memory for good. Auto keeps exactly your system "
              "prompt; pinned messages are added to them."),
}


PREVIEW_TERMS = ("<b>In exact terms</b>: the KV cache holds one <i>slot</i> per token. <i>Sinks</i> are tokens "
                 "kept for good (your system prompt, pinned messages); the <i>window</i> holds the most recent "
                 "tokens. <i>B/token</i>: the bytes one token takes in the cache; <i>Budget</i>: the memory the "
                 "cache may take, and the rule that chose it.")


def session_plan(config, kv_dtype: str, budget_bytes: int | None, window: int | None, sinks: int,
                 pinned: int = 0):
    """The plan a ChatSession runs with for these settings, `sinks` counting everything that is
    pinned (the system prompt or the chosen number, plus `pinned` tokens of pinned messages).
    Like the session, it keeps a window of at least MIN_WINDOW tokens. `budget_bytes` None is
    the auto budget, sized (as engine.session.session_plan sizes it) beside the sinks without
    the pinned messages: those take from the budget, as from any."""
    rule = None
    if budget_bytes is None:
        budget_bytes, rule = auto_budget(config, kv_dtype, max(sinks - pinned, 0))
    slots = budget_slots(config, kv_dtype, budget_bytes)
    return plan_memory(config, kv_dtype=kv_dtype, budget_bytes=budget_bytes, window=window or None,
                       sinks=max(0, min(sinks, slots - MIN_WINDOW)), budget_rule=rule)


def _named(widget: QWidget, name: str, accessible: str) -> QWidget:
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    return widget


class SettingsPanel(QWidget):
    applyRequested = Signal(object)  # AppSettings
    systemPromptEdited = Signal(str)  # (debounced) to count its tokens for "auto" sinks
    libraryRequested = Signal()  # the Library… button
    # (debounced) the sampling settings as edited, in force from the next reply with no Apply:
    # the Apply button sits with the memory settings, which do need the engine's work
    samplingEdited = Signal(dict)

    def __init__(self, settings: AppSettings, parent=None):
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self.config = None  # ModelConfig, once a model is loaded
        self.applied: AppSettings = settings
        self.applied_plan = None
        self._auto_sinks: dict[str, int] = {}
        self.pinned_tokens = 0  # tokens of pinned messages: they are sinks too
        self._loading = False
        self._busy = False
        self.details = False  # exact terms (KV cache, sinks, window) instead of plain words
        self._expert_preview = ""  # the preview in exact terms (shown with details, else its tooltip)

        # -- model and device --
        self.modelEdit = _named(QLineEdit(), "modelPathEdit", "Model file")
        self.modelEdit.setPlaceholderText("default: SmolLM2-135M-Instruct (Q4_1)")
        self.modelEdit.setReadOnly(True)
        self.browseButton = _named(QPushButton("Open…"), "modelBrowseButton", "Choose a model file")
        self.browseButton.clicked.connect(self._browse)
        self.libraryButton = _named(QPushButton("Library…"), "modelLibraryButton",
                                    "The models on this machine, and what each needs")
        self.libraryButton.setToolTip("Every GGUF model on this machine (other apps' folders too), what each "
                                      "needs in memory, and whether it fits")
        self.libraryButton.clicked.connect(lambda: self.libraryRequested.emit())
        self.deviceCombo = _named(QComboBox(), "deviceCombo", "Device")
        self.deviceCombo.addItem("CPU", "cpu")
        self.deviceCombo.setToolTip("GPU appears when JAX sees one; a change takes effect on the next model load")
        # the file's name on a line of its own (beside two buttons it showed "default:…")
        model_buttons = QHBoxLayout()
        model_buttons.addWidget(self.browseButton)
        model_buttons.addWidget(self.libraryButton)
        model_buttons.addStretch(1)

        # -- memory --
        self.kvDtypeCombo = _named(QComboBox(), "kvDtypeCombo", "KV cache precision")
        for key, label in PLAIN_KV_LABELS.items():
            self.kvDtypeCombo.addItem(label, key)
        self.kvDtypeCombo.setToolTip(wrapped(MEMORY_ROWS["precision"][2]))
        self.budgetPresetCombo = _named(QComboBox(), "budgetPresetCombo", "Memory budget")
        for label, key in BUDGET_PRESETS:
            self.budgetPresetCombo.addItem(label, key)
        self.budgetPresetCombo.setToolTip(
            "Auto: room for the last 4,096 tokens of the chat (or the model's whole trained context, if "
            "shorter), at most 10% of this machine's memory.\nNeedle 2: the fixed 11.5 MiB budget Pinwheel's "
            "memory design comes from; it suits a small model, and gives a 1-4B model only a few hundred "
            "tokens.\nCustom: a budget of your own.")
        self.budgetSpin = _named(QDoubleSpinBox(), "budgetSpin", "KV budget in MiB")
        self.budgetSpin.setRange(0.1, 1_048_576.0)
        self.budgetSpin.setDecimals(1)
        self.budgetSpin.setSingleStep(0.5)
        self.budgetSpin.setSuffix(" MiB")
        # one above the other: side by side they widened the panel past its dock (437 px)
        budget_row = QVBoxLayout()
        budget_row.setContentsMargins(0, 0, 0, 0)
        budget_row.addWidget(self.budgetPresetCombo)
        budget_row.addWidget(self.budgetSpin)
        self.windowSpin = _named(QSpinBox(), "windowSpin", "Window in tokens")
        self.windowSpin.setRange(0, 1_000_000)
        self.windowSpin.setSpecialValueText("largest that fits")
        self.windowSpin.setSuffix(" tokens")
        self.windowSpin.valueChanged.connect(lambda v: self.windowSpin.setSuffix(" token" if v == 1 else " tokens"))
        self.windowSpin.setSingleStep(32)
        self.sinkSpin = _named(QSpinBox(), "sinkSpin", "Sink tokens")
        self.sinkSpin.setRange(-1, 65_536)
        self.sinkSpin.setSpecialValueText("auto (system prompt)")
        self.systemPromptEdit = _named(QPlainTextEdit(), "systemPromptEdit", "System prompt")
        self.systemPromptEdit.setTabChangesFocus(True)
        self.systemPromptEdit.setFixedHeight(72)

        # -- sampling --
        self.temperatureSpin = self._dspin("temperatureSpin", "Temperature", 0, 5, 0.05, 2)
        self.topPSpin = self._dspin("topPSpin", "Top-p", 0.01, 1, 0.01, 2)
        self.minPSpin = self._dspin("minPSpin", "Min-p", 0, 0.99, 0.01, 2)
        self.topKSpin = _named(QSpinBox(), "topKSpin", "Top-k")
        self.topKSpin.setRange(0, 100_000)
        self.topKSpin.setSpecialValueText("off")
        self.repPenaltySpin = self._dspin("repetitionPenaltySpin", "Repetition penalty", 0.1, 10, 0.05, 2)
        self.maxTokensSpin = _named(QSpinBox(), "maxTokensSpin", "Maximum reply tokens")
        self.maxTokensSpin.setRange(1, 1_000_000)
        self.seedSpin = _named(QSpinBox(), "seedSpin", "Seed")
        self.seedSpin.setRange(-1, 2**31 - 1)
        self.seedSpin.setSpecialValueText("random")

        # -- preview and apply --
        self.previewLabel = _named(QLabel(), "planPreview", "Memory plan preview")
        self.previewLabel.setWordWrap(True)
        self.previewLabel.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.applyButton = _named(QPushButton("Apply"), "applyButton", "Apply settings")
        self.applyButton.setDefault(False)
        self.applyButton.clicked.connect(self.apply)
        self.revertButton = _named(QPushButton("Revert"), "revertButton", "Revert settings")
        self.revertButton.clicked.connect(lambda: self.load(self.applied))
        self.applyStatus = _named(QLabel(), "applyStatus", "Apply result")
        self.applyStatus.setWordWrap(True)

        model_box = QGroupBox("Model")
        f = QFormLayout(model_box)
        f.addRow("File", self.modelEdit)
        f.addRow("", model_buttons)
        f.addRow("Device", self.deviceCombo)
        self.memoryBox = mem_box = QGroupBox("Conversation memory")
        f = QFormLayout(mem_box)
        self.memoryLabels: dict[str, QLabel] = {}
        for key, field in (("precision", self.kvDtypeCombo), ("budget", budget_row), ("window", self.windowSpin),
                           ("sinks", self.sinkSpin)):
            label = QLabel(MEMORY_ROWS[key][0])
            label.setObjectName(f"{key}Label")
            label.setToolTip(wrapped(MEMORY_ROWS[key][2]))
            self.memoryLabels[key] = label
            f.addRow(label, field)
        f.addRow("System prompt", self.systemPromptEdit)
        f.addRow(self.previewLabel)
        samp_box = QGroupBox("Sampling")
        f = QFormLayout(samp_box)
        f.addRow("Temperature", self.temperatureSpin)
        f.addRow("Max reply tokens", self.maxTokensSpin)
        # the knobs few people touch, folded away under one toggle
        self.advancedToggle = QToolButton(text="Advanced sampling ▸")
        self.advancedToggle.setObjectName("advancedSamplingToggle")
        self.advancedToggle.setAccessibleName("Show advanced sampling settings")
        self.advancedToggle.setCheckable(True)
        self.advancedToggle.setAutoRaise(True)
        self.advancedBox = QWidget()
        self.advancedBox.setObjectName("advancedSampling")
        a = QFormLayout(self.advancedBox)
        a.setContentsMargins(0, 0, 0, 0)
        a.addRow("Top-p", self.topPSpin)
        a.addRow("Top-k", self.topKSpin)
        a.addRow("Min-p", self.minPSpin)
        a.addRow("Repetition penalty", self.repPenaltySpin)
        a.addRow("Seed", self.seedSpin)
        self.advancedBox.setVisible(False)

        def fold(shown: bool) -> None:
            self.advancedBox.setVisible(shown)
            self.advancedToggle.setText("Advanced sampling ▾" if shown else "Advanced sampling ▸")

        self.advancedToggle.toggled.connect(fold)
        f.addRow(self.advancedToggle)
        f.addRow(self.advancedBox)
        buttons = QHBoxLayout()
        buttons.addWidget(self.applyButton)
        buttons.addWidget(self.revertButton)
        buttons.addStretch(1)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(model_box)
        lay.addWidget(mem_box)
        lay.addLayout(buttons)
        lay.addWidget(self.applyStatus)
        lay.addWidget(samp_box)
        lay.addStretch(1)

        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(250)
        self._prompt_timer.timeout.connect(lambda: self.systemPromptEdited.emit(self.system_prompt()))
        for sig in (self.kvDtypeCombo.currentIndexChanged, self.budgetSpin.valueChanged,
                    self.windowSpin.valueChanged, self.sinkSpin.valueChanged):
            sig.connect(self.refresh_preview)
        self.budgetPresetCombo.currentIndexChanged.connect(self._preset_changed)
        self.systemPromptEdit.textChanged.connect(self._prompt_changed)
        self._sampling_timer = QTimer(self)
        self._sampling_timer.setSingleShot(True)
        self._sampling_timer.setInterval(300)
        self._sampling_timer.timeout.connect(self._sampling_taken)
        for box in (self.temperatureSpin, self.topPSpin, self.topKSpin, self.minPSpin, self.repPenaltySpin,
                    self.maxTokensSpin, self.seedSpin):
            box.valueChanged.connect(lambda *_: None if self._loading else self._sampling_timer.start())
        self._wheel_scrolls_the_panel()
        self.load(settings)

    def set_details(self, on: bool) -> None:
        """The memory settings in exact terms (on) or plain words (off): labels, choices, preview."""
        self.details = on
        self.memoryBox.setTitle("Memory (KV cache)" if on else "Conversation memory")
        for key, label in self.memoryLabels.items():
            label.setText(MEMORY_ROWS[key][1 if on else 0])
        names = KV_LABELS if on else PLAIN_KV_LABELS
        for i in range(self.kvDtypeCombo.count()):
            self.kvDtypeCombo.setItemText(i, names[self.kvDtypeCombo.itemData(i)])
        self.refresh_preview()

    def _wheel_scrolls_the_panel(self) -> None:
        """A wheel turn over a spin or combo box scrolls the panel, not the value (Sinks went
        from "auto" to 9 under a scroll): only a box the user has focused takes it, and a wheel
        no longer focuses one."""
        for box in self.findChildren(QWidget):
            if isinstance(box, (QAbstractSpinBox, QComboBox)):
                box.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
                box.installEventFilter(self)

    def eventFilter(self, obj, e):  # noqa: N802
        if e.type() == QEvent.Type.Wheel and isinstance(obj, (QAbstractSpinBox, QComboBox)) and not obj.hasFocus():
            e.ignore()  # on to the scroll area around the panel
            return True
        return super().eventFilter(obj, e)

    def _dspin(self, name: str, label: str, lo: float, hi: float, step: float, decimals: int) -> QDoubleSpinBox:
        s = _named(QDoubleSpinBox(), name, label)
        s.setRange(lo, hi)
        s.setSingleStep(step)
        s.setDecimals(decimals)
        return s

    # -- values ----------------------------------------------------------------------

    def load(self, s: AppSettings) -> None:
        """Show `s` in the widgets (no signal storm: the preview is refreshed once)."""
        self._loading = True
        try:
            self.modelEdit.setText(s.model_path)
            i = self.deviceCombo.findData(s.device)
            self.deviceCombo.setCurrentIndex(max(i, 0))
            self.kvDtypeCombo.setCurrentIndex(max(self.kvDtypeCombo.findData(s.kv_dtype), 0))
            self._show_budget(s.kv_budget_mib)
            self.sinkSpin.setValue(s.sinks)
            self.windowSpin.setValue(s.window)
            if self.systemPromptEdit.toPlainText() != s.system_prompt:
                self.systemPromptEdit.setPlainText(s.system_prompt)
            self.temperatureSpin.setValue(s.temperature)
            self.topPSpin.setValue(s.top_p)
            self.topKSpin.setValue(s.top_k)
            self.minPSpin.setValue(s.min_p)
            self.repPenaltySpin.setValue(s.repetition_penalty)
            self.maxTokensSpin.setValue(s.max_tokens)
            self.seedSpin.setValue(s.seed)
        finally:
            self._loading = False
        self.refresh_preview()

    def system_prompt(self) -> str:
        return self.systemPromptEdit.toPlainText()

    def _sampling_taken(self) -> None:
        """The sampling boxes' values are in force now: Revert leaves them, the window saves them."""
        fields = self.current().sampling_fields()
        self.applied = self.applied.replace(**fields)
        self.samplingEdited.emit(fields)

    def current(self) -> AppSettings:
        """The settings as edited (not yet applied)."""
        return self.applied.replace(
            model_path=self.modelEdit.text(),
            device=self.deviceCombo.currentData() or "cpu",
            kv_dtype=self.kvDtypeCombo.currentData(),
            kv_budget_mib=self.budget_mib(),
            window=self.windowSpin.value(),
            sinks=self.sinkSpin.value(),
            system_prompt=self.system_prompt(),
            temperature=round(self.temperatureSpin.value(), 4),
            top_p=round(self.topPSpin.value(), 4),
            top_k=self.topKSpin.value(),
            min_p=round(self.minPSpin.value(), 4),
            repetition_penalty=round(self.repPenaltySpin.value(), 4),
            max_tokens=self.maxTokensSpin.value(),
            seed=self.seedSpin.value(),
        )

    # -- the budget: a preset, or a size of the user's own ----------------------------

    def _show_budget(self, mib: float) -> None:
        """Show a saved budget (0 = auto) as its preset, or as a custom size."""
        key = "auto" if mib == 0 else "needle" if int(round(mib * MIB)) == NEEDLE_BUDGET else "custom"
        self.budgetPresetCombo.setCurrentIndex(self.budgetPresetCombo.findData(key))
        if key != "auto":
            self.budgetSpin.setValue(mib)
        self.budgetSpin.setEnabled(key == "custom")

    def _preset_changed(self, *_) -> None:
        key = self.budgetPresetCombo.currentData()
        if key == "needle":
            self.budgetSpin.setValue(NEEDLE_BUDGET / MIB)
        # "custom" starts from the size on show (auto's, when coming from auto), to edit from there
        self.budgetSpin.setEnabled(key == "custom")
        self.refresh_preview()

    def budget_mib(self) -> float:
        """The budget as the settings store it: 0 for auto."""
        key = self.budgetPresetCombo.currentData()
        if key == "auto":
            return 0.0
        return NEEDLE_BUDGET / MIB if key == "needle" else round(self.budgetSpin.value(), 3)

    def budget_bytes(self) -> int | None:
        """The edited budget in bytes; None for auto (sized to the model)."""
        mib = self.budget_mib()
        return int(round(mib * MIB)) if mib else None

    def set_devices(self, devices: list[str]) -> None:
        want = self.applied.device
        self.deviceCombo.blockSignals(True)
        self.deviceCombo.clear()
        for d in devices:
            self.deviceCombo.addItem(d.upper(), d)
        i = self.deviceCombo.findData(want)
        self.deviceCombo.setCurrentIndex(max(i, 0))
        self.deviceCombo.blockSignals(False)

    def set_model_config(self, config) -> None:
        self.config = config
        self.refresh_preview()

    def set_auto_sinks(self, system_prompt: str, tokens: int) -> None:
        """The engine counted the rendered system turn: that is what "auto" pins."""
        self._auto_sinks[system_prompt] = tokens
        if len(self._auto_sinks) > 64:
            self._auto_sinks.pop(next(iter(self._auto_sinks)))
        self.refresh_preview()

    def auto_sinks(self) -> int | None:
        """Sinks "auto" pins for the edited system prompt (None until the engine counted it)."""
        text = self.system_prompt()
        if not text:
            return AUTO_SINKS_WITHOUT_SYSTEM
        return self._auto_sinks.get(text)

    def set_pinned_tokens(self, tokens: int) -> None:
        if tokens != self.pinned_tokens:
            self.pinned_tokens = tokens
            self.refresh_preview()

    def _prompt_changed(self) -> None:
        if not self._loading:
            self._prompt_timer.start()
        self.refresh_preview()

    # -- preview ---------------------------------------------------------------------

    def sinks_for_plan(self) -> int | None:
        """Sinks as chosen (auto: the system prompt's tokens), before pinned messages."""
        s = self.sinkSpin.value()
        return self.auto_sinks() if s < 0 else s

    def preview_plan(self):
        """The plan the edited values give (what Apply will run with); raises SettingsError."""
        if self.config is None:
            return None
        sinks = self.sinks_for_plan()
        if sinks is None:  # auto, still being counted: the current count is the best guess
            sinks = self.applied_plan.sinks - self.pinned_tokens if self.applied_plan else AUTO_SINKS_WITHOUT_SYSTEM
        return session_plan(self.config, self.kvDtypeCombo.currentData(), self.budget_bytes(),
                            self.windowSpin.value() or None, sinks + self.pinned_tokens, self.pinned_tokens)

    def refresh_preview(self, *_):
        if self._loading:
            return
        if self.config is None:
            self._expert_preview = ""
            self.previewLabel.setText("The plan appears here once the model has loaded.")
            return
        dtype = self.kvDtypeCombo.currentData()
        try:
            plan = self.preview_plan()
            slots = budget_slots(self.config, dtype, plan.budget_bytes)
        except SettingsError as exc:
            self._expert_preview = ""
            self.previewLabel.setText(f"⚠ {exc}")
            self.applyButton.setEnabled(False)
            return
        if self.budget_bytes() is None:  # auto: show the size it chose (greyed: not editable)
            self.budgetSpin.blockSignals(True)
            self.budgetSpin.setValue(plan.budget_bytes / MIB)
            self.budgetSpin.blockSignals(False)
        # sinks leave the session's minimum window; the window can use what the sinks leave
        self.sinkSpin.setMaximum(max(slots - MIN_WINDOW - self.pinned_tokens, 0))
        cap = max(slots - plan.sinks, 1)
        if self.windowSpin.maximum() != cap:
            self.windowSpin.blockSignals(True)
            self.windowSpin.setMaximum(cap)
            self.windowSpin.blockSignals(False)
        self.applyButton.setEnabled(not self._busy)
        floor = plan.kv_bytes > plan.budget_bytes  # below the smallest cache: the budget holds fewer
        parts = []
        if self.sinkSpin.value() < 0:
            parts.append("system prompt" if self.auto_sinks() is not None else "system prompt: counting…")
        if self.pinned_tokens:
            parts.append(f"{self.pinned_tokens:,} pinned")
        sink_note = f" ({', '.join(parts)})" if parts else ""
        same = self._same_as_applied(plan)
        change = "" if same is None else \
            "<br><i>same as the current cache</i>" if same else "<br><b>differs from the current cache</b>"
        hybrid = hybrid_memory(plan, self.config)
        per = "global slot" if getattr(plan, "local_layers", 0) else "token"
        if hybrid is not None:
            per += " (attention layers)"
        self._expert_preview = (
            f"<b>{plan.capacity:,} slots</b> = {plan.sinks:,} sink{'s' if plan.sinks != 1 else ''}{sink_note}"
            f" + {plan.window:,} window"
            f" ({'the smallest cache' if floor else 'budget holds'} {plan.slots:,})<br>"
            f"{plan.bytes_per_position:,} B/{per}"
            f" · KV {fmt_bytes(plan.kv_bytes)} of {fmt_bytes(plan.budget_bytes)}<br>"
            f"Budget: {plan.budget_rule}{self._state_note(plan, hybrid)}{self._split_note(plan)}"
            f"{self._floor_note(plan)}{self._short_note(plan)}{change}")
        if self.details:
            self.previewLabel.setText(self._expert_preview)
            self.previewLabel.setToolTip(PREVIEW_TERMS)
        else:
            self.previewLabel.setText(self._plain_preview(plan, floor))
            self.previewLabel.setToolTip(f"{PREVIEW_TERMS}<br><br>{self._expert_preview}")

    def _plain_preview(self, plan, floor: bool) -> str:
        """The plan in a non-expert's words: what the model sees, what it always keeps, the memory."""
        kept = []
        if self.sinkSpin.value() < 0 and self.system_prompt():
            kept.append("your system prompt")
        elif plan.sinks:
            kept.append(f"the first {words(plan.sinks - self.pinned_tokens)} words")
        if self.pinned_tokens:
            kept.append("your pinned messages")
        hybrid = hybrid_memory(plan, self.config)
        lines = [f"Recent text the model sees: <b>{words(plan.window)} words</b>" if hybrid is None else
                 # the words: what it summarises, and how far back it reads word for word
                 hybrid.sentence(plan.window, bold=True),
                 f"Always kept: {' and '.join(kept) if kept else 'nothing'}",
                 f"Memory: {fmt_bytes(plan.kv_bytes)}{' (the smallest possible)' if floor else ''}"]
        if hybrid is not None and hybrid.snapshot_bytes:  # copies of the summary, beside the cache
            lines[2] += f", and up to {fmt_bytes(hybrid.snapshot_bytes)} more for quick edits"
        if getattr(plan, "local_layers", 0) and plan.local_slots < plan.capacity:  # (else they see it all)
            lines.append(f"Most layers see only the last {words(plan.local_slots)} words, which keeps them small")
        if self.applied_plan is not None:  # (on the memory's line: the panel must fit 800 px)
            lines[2] += " · <b>changed: Apply to use it</b>" if self._edited() else " · <i>as now</i>"
        return "<br>".join(lines) + self._short_note(plan)

    def _edited(self) -> bool:
        """Whether a setting that needs Apply differs from the one in force. (Not the plan: pins
        move it too, as a version stepped to with other pins does, and Apply is not what those
        need: the next reply reads them in.)"""
        cur, applied = self.current(), self.applied
        return any(getattr(cur, k) != getattr(applied, k) for k in APPLY_FIELDS)

    def _same_as_applied(self, plan) -> bool | None:
        """Whether `plan` is the cache in force (None before any is)."""
        a = self.applied_plan
        return None if a is None else (plan.kv_dtype, plan.sinks, plan.window) == (a.kv_dtype, a.sinks, a.window)

    def _short_note(self, plan) -> str:
        warning = short_window_words(short_window_warning(plan, self.config.context_length),
                                     hybrid_memory(plan, self.config))
        return f"<br>⚠ {warning}" if warning else ""

    @staticmethod
    def _floor_note(plan) -> str:
        """A budget below the smallest cache is not silently exceeded: say what it costs."""
        if plan.kv_bytes <= plan.budget_bytes:
            return ""
        smallest = plan.slots * plan.bytes_per_position + getattr(plan, "state_bytes", 0)  # (a hybrid's state too)
        return (f"<br>⚠ the smallest cache is {MIN_SLOTS} slots = {fmt_bytes(smallest)}"
                f": this budget is below it, so the cache takes {fmt_bytes(plan.kv_bytes)}")

    @staticmethod
    def _state_note(plan, hybrid) -> str:
        """A hybrid's fixed state (in the KV bytes) and its snapshots (beside them), exactly."""
        if hybrid is None:
            return ""
        note = f"<br>{hybrid.sentence(plan.window, plain=False)}"
        note += f"<br>state {fmt_bytes(hybrid.state_bytes)} (in the KV above)"
        if hybrid.snapshot_bytes:
            note += f" · snapshots for edits ≤ {fmt_bytes(hybrid.snapshot_bytes)} beside it"
        return note

    def _split_note(self, plan) -> str:
        """Sliding-window layers (Gemma 3, 4) hold only what they can see; say so, with the bytes.
        The global layers are those that hold a cache of their own (bytes_per_position is theirs);
        Gemma 4's shared layers read an earlier layer's and hold none."""
        if not getattr(plan, "local_layers", 0):
            return ""
        c = self.config
        glob = plan.capacity * plan.bytes_per_position
        local = plan.kv_bytes - glob - getattr(plan, "state_bytes", 0)
        owning = c.cache_layers(GLOBAL) if hasattr(c, "cache_layers") else c.global_layers
        layers = lambda n, kind: f"{n} {kind} layer{'s' if n != 1 else ''}"  # noqa: E731
        note = (f"<br>{layers(owning, 'global')} × {plan.capacity:,} slots ({fmt_bytes(glob)}) + "
                f"{layers(plan.local_layers, 'sliding-window')} × {plan.local_slots:,} slots "
                f"({fmt_bytes(local)}; window {c.sliding_window:,})")
        shared = getattr(plan, "shared_kv_layers", 0)
        if shared:
            note += f" + {layers(shared, 'shared')} reading an earlier layer's cache (0 B)"
        return note

    def preview_text(self) -> str:
        """The preview in exact terms (slots, sinks, window, bytes), whichever words are shown."""
        return self._expert_preview or self.previewLabel.text()

    # -- actions ---------------------------------------------------------------------

    def set_busy(self, busy: bool) -> None:
        """While a reply is generated, Apply waits (the preview keeps working)."""
        self._busy = busy
        self.refresh_preview()

    def apply(self) -> None:
        if self._sampling_timer.isActive():  # a sampling box changed just now: in force first
            self._sampling_timer.stop()
            self._sampling_taken()
        s = self.current()
        problems = s.validate()
        if problems:
            self.applyStatus.setText("⚠ " + problems[0])
            return
        try:
            self.preview_plan()
        except SettingsError as exc:
            self.applyStatus.setText(f"⚠ {exc}")
            return
        self.applyStatus.setText("Applying…")
        self.applyRequested.emit(s)

    def applied_ok(self, settings: AppSettings, plan, message: str) -> None:
        self.applied = settings
        self.applied_plan = plan
        self.applyStatus.setText(message)
        self.refresh_preview()

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", self.modelEdit.text(),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.modelEdit.setText(path)  # loaded on Apply, with the other settings
            self.applyStatus.setText("Apply to load this model.")


__all__ = ["SettingsPanel", "session_plan"]
