"""The engine's thread: one ChatSession, driven from the GUI through queued signals.

Why a QObject moved to a QThread (and not qasync)
-------------------------------------------------
Every engine call -- loading the GGUF, the first XLA compile, prefill, each decode step,
re-encoding a stored conversation -- is blocking JAX/numpy work.  With qasync we would still
have to push each of those into a thread-pool executor, and we would add a second event loop to
reason about.  A QObject living in its own QThread gives us exactly what the session needs:

* one thread owns the ChatSession (which is not thread-safe, apart from ``cancel()`` and
  ``stats()``), so no locks are needed around it;
* requests from the GUI (load, send, regenerate, apply a plan, pin ...) arrive as queued
  signals and run one at a time, in the order the user made them;
* results go back over one queued ``event(object)`` signal carrying app.engine_events objects
  (the session's own Token / PrefillProgress wrapped with their request), so nothing here ever
  touches a widget and the window has one place where the engine's news arrives.

The one call that must not wait in that queue is Stop: :meth:`EngineWorker.cancel` is called
directly from the GUI thread and only sets flags that the engine thread reads between tokens
(``ChatSession.cancel()`` is documented thread-safe).

Token text is *not* batched here: every piece is emitted as it comes (a queued event is cheap)
and the chat view coalesces them with a ~30 Hz timer, so the repaint rate does not depend on
how fast the model is.  Stats go out as the session yields them (every 0.2 s while it writes)
and after every request.
"""
from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine.budget import AUTO_SINKS_WITHOUT_SYSTEM
from engine.events import Done, PrefillProgress, Rebuilt, Stats, Token

from .engine_events import (AutoSinks, CacheRebuilt, DevicesFound, Failed, HistoryLoaded, LibraryListed, LoadFailed,
                            LoadProgress, LoadRefused, ModelInfo, ModelLoaded, PinChanged, PlanApplied, ReplyEvent,
                            ReplyFinished, ReplyResult, StatsReady, StatsSnapshot)

log = logging.getLogger(__name__)

ENGINE_NICE = 5  # the engine thread's nice value (the GUI thread keeps 0)


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs from the settings panel (plain values, no Qt)."""

    kv_dtype: str = "int8"
    budget_bytes: int | None = None  # None: auto, sized to the model (engine.budget.auto_budget)
    window: int | None = None  # None / 0: as large as the budget allows
    sinks: int | str = "auto"  # "auto": the system prompt
    system: str = ""
    device: str = "cpu"
    sampling: dict[str, Any] = field(default_factory=dict)

    def plan_args(self) -> dict[str, Any]:
        return {"kv_dtype": self.kv_dtype, "budget_bytes": self.budget_bytes,
                "window": self.window or None}


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(kind, one-line message) for anything the engine or the store can raise."""
    from engine.errors import PinwheelError

    if isinstance(exc, MemoryError):
        return "memory", ("Out of memory: the model or the KV cache did not fit. Lower the KV "
                          "budget or close other programs; your conversation is kept.")
    if isinstance(exc, PinwheelError):
        return "engine", " ".join(str(exc).split()) or type(exc).__name__
    text = " ".join(str(exc).split())
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        return "memory", f"Out of memory on the device: {text[:200]}"
    return "engine", f"Engine error ({type(exc).__name__}): {text[:300]}"


def _default_loader(path: str | None):
    """(model, resolved path); the engine is imported here, in the engine thread."""
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model

    resolved = locate_model(path)
    return load_model(resolved), str(resolved)


def _default_checker(path: str | None) -> None:
    """Check a model file without loading its weights (raises what loading would raise)."""
    from engine.gguf_loader import check_model_file
    from engine.model_locator import locate_model

    check_model_file(locate_model(path))


def _select_device(name: str):
    """Make `name` ("cpu" / "gpu") JAX's default device (the CPU when there is no such device)."""
    import jax

    try:
        dev = jax.devices(name)[0]
    except RuntimeError:
        dev = jax.devices("cpu")[0]
    jax.config.update("jax_default_device", dev)
    return dev


class EngineWorker(QObject):
    """Lives in the engine thread; every slot runs there, one at a time."""

    event = Signal(object)  # an app.engine_events object: everything the window hears

    def __init__(self, loader: Callable[[str | None], tuple[Any, str]] | None = None,
                 checker: Callable[[str | None], None] | None = None):
        super().__init__()
        self._loader = loader or _default_loader
        self._checker = checker or (_default_checker if loader is None else (lambda path: None))
        self._loaded: tuple[str | None, Any] | None = None  # (path asked for, config) of the model in service
        self.model = None
        self.session = None
        self.config: EngineConfig | None = None
        self._device = None
        self._cancel_upto = 0  # requests with an id <= this are cancelled (set from any thread)
        self._cancel_lock = threading.Lock()
        self._token_times: deque[float] = deque(maxlen=256)
        self._niced = False

    def _lower_priority(self) -> None:
        """Nice the engine thread (Linux: per thread) so the GUI thread wins the CPU when both
        want it; XLA's CPU worker threads are started from here and inherit it.  An idle GUI
        costs the engine nothing."""
        if self._niced or not hasattr(os, "setpriority"):
            return
        self._niced = True
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ENGINE_NICE)
        except OSError as exc:  # not allowed / not supported: fine, just less smooth
            log.info("could not lower the engine thread's priority: %s", exc)

    # ------------------------------------------------------------------ any thread

    def cancel(self, upto: int) -> None:
        """Stop request `upto` and everything queued before it.  Called from the GUI thread."""
        with self._cancel_lock:
            self._cancel_upto = max(self._cancel_upto, upto)
        session = self.session
        if session is not None:
            session.cancel()

    def _cancelled(self, request: int) -> bool:
        with self._cancel_lock:
            return request <= self._cancel_upto

    # ------------------------------------------------------------------ helpers

    def base_plan(self, cfg: EngineConfig):
        """The plan handed to ChatSession: budget, precision and the user's window.

        Sinks are 0 here on purpose: the session adds its own (the system prompt or the number
        the user chose, plus pinned messages) and shrinks the window to keep the budget.
        """
        from engine.session import session_plan

        return session_plan(self.model, system=cfg.system or None, sinks=cfg.sinks, **cfg.plan_args())

    def system_tokens(self, system: str) -> int:
        """What "auto" sinks pin for `system`: its rendered turn, or 4 tokens without one."""
        s = self.session
        if not system:
            return AUTO_SINKS_WITHOUT_SYSTEM
        return s.count_sink_tokens(system)

    @staticmethod
    def _sampling_from(values: dict):
        from engine.sampler import SamplingParams

        known = set(SamplingParams.__dataclass_fields__)
        return SamplingParams(**{k: v for k, v in values.items() if k in known and v is not None}).validate()

    def _roles(self) -> tuple[str, ...]:
        return tuple(m["role"] for m in self.session.messages) if self.session is not None else ()

    def _device_bytes(self) -> int | None:
        dev = self._device
        if dev is None or getattr(dev, "platform", "cpu") == "cpu":
            return None
        try:
            return int((dev.memory_stats() or {}).get("bytes_in_use", 0)) or None
        except Exception:  # noqa: BLE001 - not every backend reports memory
            return None

    def _emit_stats(self, stats=None) -> None:
        if self.session is None:
            return
        now = time.monotonic()
        if stats is None:
            stats = self.session.stats()
        recent = [t for t in self._token_times if now - t <= 1.0]
        tok_s = 0.0
        if len(recent) >= 2:
            tok_s = (len(recent) - 1) / max(recent[-1] - recent[0], 1e-6)
        self.event.emit(StatsReady(StatsSnapshot(stats, now, tok_s, self._device_bytes())))

    # ------------------------------------------------------------------ slots

    @Slot()
    def probe_devices(self) -> None:
        """Which devices JAX sees (asked here: importing/initialising JAX can take a second)."""
        self._lower_priority()
        try:
            import jax

            found = []
            for d in jax.devices():
                p = "gpu" if d.platform in ("gpu", "cuda", "rocm") else d.platform
                if p not in found:
                    found.append(p)
            if "cpu" not in found:
                found.append("cpu")
        except Exception:  # noqa: BLE001 - no usable backend: offer the CPU
            found = ["cpu"]
        self.event.emit(DevicesFound(tuple(found)))

    @Slot(object, object, object)
    def load(self, path: str | None, cfg: EngineConfig, history: list[dict] | None) -> None:
        """Read the model, allocate the cache, compile once; then restore `history`.

        While a model serves, another file is checked (header, metadata, tensors) before the
        working one is let go: a file that fails is refused (loadRefused) and the chat goes on.
        If the weights then fail to load after all, the previous model is loaded again."""
        self._lower_priority()
        previous = self._loaded if self.model is not None else None
        if previous is not None:
            try:
                self.event.emit(LoadProgress("Checking the model file…", 0, 4))
                self._checker(path)
            except Exception as exc:  # noqa: BLE001 - the working model stays
                log.info("model file refused: %s", exc)
                self.event.emit(LoadRefused(*describe_error(exc)))
                return
        failure = self._load_now(path, cfg, history)
        if failure is None:
            return
        if previous is None:
            self.event.emit(LoadFailed(*failure))
            return
        self.event.emit(LoadRefused(*failure))  # the window keeps the chat going on the previous model
        again = self._load_now(previous[0], previous[1], history)
        if again is not None:
            self.event.emit(LoadFailed(*again))

    def _load_now(self, path: str | None, cfg: EngineConfig, history: list[dict] | None) -> tuple[str, str] | None:
        """Load; returns None, or (kind, message) of the failure (nothing is loaded then)."""
        t0 = time.monotonic()
        self._release()
        try:
            self.event.emit(LoadProgress("Reading the model file…", 0, 4))
            self._device = _select_device(cfg.device)
            model, resolved = self._loader(path)
            self.event.emit(LoadProgress("Allocating the KV cache…", 1, 4))
            self.model = model
            self.config = cfg
            session = self._new_session(cfg)
            self.event.emit(LoadProgress("Preparing the model…" if session.decoder.compiled_before()
                                   else "Compiling for this machine (first run only)…", 2, 4))
            session.warmup()  # compile the prefill and decode steps now, not at the first message
            self.session = session
            if history:
                self.event.emit(LoadProgress("Reading the conversation…", 3, 4))
                session.load_history(history)
                session.resync()
            # JAX, the weights and the compiled steps are hundreds of thousands of long-lived
            # objects; a full GC pass over them holds the GIL for ~50-120 ms, a visible stall of
            # the GUI thread.  Move them out of the collector's sight (after a cheap pass over the
            # young generations), so later full passes only walk what the chat creates.
            gc.collect(1)
            gc.freeze()
            self.event.emit(LoadProgress("Ready", 4, 4))
            name = getattr(model, "name", "") or os.path.basename(resolved)
            tpl = model.chat_template
            builtin = getattr(tpl, "builtin", None) or ""
            self.event.emit(ModelLoaded(ModelInfo(resolved, name, model.config,
                                            getattr(self._device, "platform", cfg.device),
                                            session.plan, time.monotonic() - t0, builtin,
                                            tpl.why if builtin else "", (tpl.load_error or "") if builtin else "")))
            self.event.emit(AutoSinks(cfg.system, self.system_tokens(cfg.system)))
            self._emit_stats()
            self._loaded = (path, cfg)
            return None
        except Exception as exc:  # noqa: BLE001 - MemoryError included: the app must stay up
            log.warning("model load failed:\n%s", traceback.format_exc())
            self.session = None
            self.model = None
            return describe_error(exc)

    def _release(self) -> None:
        """Let go of the model in service and of what it left in the process, before the next
        one is read (issue 21: five swaps held ~40 MB more than a fresh start of the model in use)."""
        held = self.model is not None or self.session is not None
        self.session = None
        self.model = None
        self._loaded = None
        if not held:
            return
        from engine import forward
        from engine.sysmem import trim

        # Loading froze the old model's objects (gc.freeze in _load_now): the ones in reference cycles
        # (its chat template's Jinja environment, the session's closures) are freed only by a
        # collection that sees them again. One full pass now, in a load that takes seconds anyway.
        gc.unfreeze()
        # jit keeps every step compiled for the old model (its config is a static argument) for
        # good: ~30 of the ~40 MB. The new model's steps come back from the compiled-step store.
        forward.forget_compiled()
        trim()  # collect, and hand the freed heap back to the system

    def _new_session(self, cfg: EngineConfig):
        from engine.session import ChatSession

        return ChatSession(self.model, self.base_plan(cfg), system=cfg.system or None,
                           sampling=self._sampling_from(cfg.sampling), sinks=cfg.sinks)

    @Slot(int, str, str, object)
    def generate(self, request: int, kind: str, text: str, sampling: dict | None) -> None:
        """kind: "send" (text = the user's message), "regenerate", "edit" (text = new message),
        "continue" (the last reply goes on where it stopped)."""
        if self.session is None:
            self.event.emit(ReplyFinished(ReplyResult(request, "error", "", error="No model is loaded.")))
            return
        session = self.session
        if self._cancelled(request):
            self.event.emit(ReplyFinished(ReplyResult(request, "cancelled", "", roles=self._roles())))
            return
        pieces: list[str] = []
        self._token_times.clear()
        try:
            overrides = dict(sampling or {})
            self._sampling_from(overrides)  # a bad value fails here, with one clear line
            if kind == "send":
                events = session.stream(text, **overrides)
            elif kind == "regenerate":
                events = session.regenerate(**overrides)
            elif kind == "edit":
                events = session.edit_last(text, **overrides)
            elif kind == "continue":
                events = session.continue_reply(**overrides)
            else:
                raise ValueError(f"unknown request {kind!r}")
            done = None
            for ev in events:
                if isinstance(ev, Token):
                    if ev.text:
                        self._token_times.append(time.monotonic())
                        pieces.append(ev.text)
                    if ev.text or ev.ttft_s is not None:  # (the first token's wait, even with no text yet)
                        self.event.emit(ReplyEvent(request, ev))
                elif isinstance(ev, Stats):
                    self._emit_stats(ev.stats)
                elif isinstance(ev, PrefillProgress):
                    self.event.emit(ReplyEvent(request, ev))
                elif isinstance(ev, Done):
                    done = ev
                elif isinstance(ev, Rebuilt):
                    self.event.emit(CacheRebuilt(ev.tokens, ev.seconds))
                if self._cancelled(request):
                    session.cancel()  # a Stop that came before the stream had started
            if done is None:
                result = ReplyResult(request, "cancelled", "".join(pieces))
            else:
                result = ReplyResult(request, done.reason, done.reply, done.generated_tokens,
                                     done.prompt_tokens, done.decode_tok_s, done.prefill_tok_s,
                                     done.ttft_s, reply_tokens=done.reply_tokens)
        except Exception as exc:  # noqa: BLE001 - shown in the window; the chat is kept
            log.warning("generation failed:\n%s", traceback.format_exc())
            result = ReplyResult(request, "error", "".join(pieces), len(pieces),
                                 error=describe_error(exc)[1])
        self._token_times.clear()
        self.event.emit(ReplyFinished(replace(result, roles=self._roles())))
        self._emit_stats()

    @Slot(object)
    def apply_config(self, cfg: EngineConfig) -> None:
        """New memory / system prompt / sampling settings; the cache is reallocated only when
        its size or precision changes, re-read only when what it must hold changed."""
        if self.session is None:  # every request gets an answer: never leave "Applying…" up
            self.config = cfg
            self.event.emit(Failed("engine", "No model is loaded: open a GGUF model file first."))
            return
        try:
            s = self.session
            s.sampling = self._sampling_from(cfg.sampling)
            before = (s.plan, s.system)
            rebuilt = bool(s.apply_plan(self.base_plan(cfg), sinks=cfg.sinks, system=cfg.system))
            if rebuilt:
                s.warmup()  # a new cache shape: its steps compiled or loaded now, not at the next reply
            self.config = cfg
            if rebuilt:
                note = "reallocated"
            elif before != (s.plan, s.system):
                note = "re-read"
            else:
                note = "unchanged"
            self.event.emit(PlanApplied(rebuilt, s.plan, note))
            self.event.emit(AutoSinks(cfg.system, self.system_tokens(cfg.system)))
        except Exception as exc:  # noqa: BLE001 - shown in the window
            log.warning("apply failed:\n%s", traceback.format_exc())
            self.event.emit(Failed(*describe_error(exc)))
        self._emit_stats()

    @Slot(int, bool)
    def set_pinned(self, index: int, pinned: bool) -> None:
        """Pin or unpin conversation message `index` (re-encodes the cache, bounded)."""
        if self.session is None:
            return
        try:
            self.session.set_pinned(index, pinned)
            self.event.emit(PinChanged(index, pinned))
        except Exception as exc:  # noqa: BLE001 - shown in the window
            self.event.emit(Failed(*describe_error(exc)))
        self._emit_stats()

    @Slot(int, object)
    def load_history(self, request: int, messages: list[dict]) -> None:
        """Another conversation: re-encode it now (bounded by the cache size) so the memory view
        is right at once and the next message only prefills itself."""
        if self.session is None:
            return
        try:
            if messages:
                self.session.load_history(messages)
                self.session.resync()
            else:  # a new chat: a fresh session (same cache shape, nothing to compile)
                self.session = None
                self.session = self._new_session(self.config)
        except Exception as exc:  # noqa: BLE001 - shown in the window
            self.event.emit(Failed(*describe_error(exc)))
        self.event.emit(HistoryLoaded(request))
        self._emit_stats()

    @Slot(int, object)
    def select_history(self, request: int, messages: list[dict]) -> None:
        """Another version of the conversation is shown: the session takes it without re-reading
        (the next reply re-encodes, bounded, unless the cache already holds it)."""
        if self.session is not None:
            try:
                self.session.select_history(messages)
            except Exception as exc:  # noqa: BLE001 - shown in the window
                self.event.emit(Failed(*describe_error(exc)))
        self.event.emit(HistoryLoaded(request))
        self._emit_stats()

    @Slot(int, object, object)
    def list_models(self, request: int, extra_dirs: list, cfg: EngineConfig) -> None:
        """The model library for the window (here: it reads headers from disk and imports the
        engine, neither of which the GUI thread does)."""
        try:
            from engine.library import library

            rows = library(extra_dirs or (), kv_dtype=cfg.kv_dtype, budget_bytes=cfg.budget_bytes,
                           window=cfg.window or None)
        except Exception as exc:  # noqa: BLE001 - shown in the dialog
            log.warning("listing models failed:\n%s", traceback.format_exc())
            self.event.emit(Failed(*describe_error(exc)))
            rows = []
        self.event.emit(LibraryListed(request, tuple(rows)))

    @Slot(str)
    def count_sinks(self, system: str) -> None:
        """How many tokens "auto" sinks pin for `system` (for the settings preview)."""
        if self.session is None:
            return
        try:
            self.event.emit(AutoSinks(system, self.system_tokens(system)))
        except Exception as exc:  # noqa: BLE001 - only a preview (a broken template shows on Apply)
            log.info("counting the system prompt failed: %s", exc)


ABANDONED: list = []  # controllers whose thread was still busy at shutdown (see shutdown)
_LIVE: "weakref.WeakSet[EngineController]" = weakref.WeakSet()


@atexit.register
def _stop_engines_at_exit() -> None:
    """The interpreter is exiting with a window still open (a script's sys.exit, an uncaught
    error): stop every engine thread first, or Qt aborts the process destroying a running
    QThread. One stuck in a compile cannot be stopped: leave without destructors then."""
    for controller in list(_LIVE):
        try:
            controller.shutdown(wait_ms=3000)
        except RuntimeError:  # its Qt objects are already gone
            pass
    if ABANDONED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class EngineController(QObject):
    """GUI-thread side: owns the engine thread, turns method calls into queued requests, and
    re-emits the worker's signals from the GUI thread.

    Connect to the controller's signals, not the worker's: a Python callable connected to a
    worker signal would run in the engine thread (its context is the sender), while the
    controller lives in the GUI thread, so the worker -> controller hop is a queued connection
    and everything connected to the controller runs in the GUI thread.
    """

    event = Signal(object)  # the worker's events, re-emitted in the GUI thread

    _load = Signal(object, object, object)
    _generate = Signal(int, str, str, object)
    _apply = Signal(object)
    _pin = Signal(int, bool)
    _history = Signal(int, object)
    _select = Signal(int, object)
    _probe = Signal()
    _count = Signal(str)
    _list = Signal(int, object, object)

    def __init__(self, parent: QObject | None = None, loader=None, checker=None):
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("pinwheel-engine")
        self.worker = EngineWorker(loader, checker)
        self.worker.moveToThread(self.thread)
        self.worker.event.connect(self.event)
        self._load.connect(self.worker.load)
        self._generate.connect(self.worker.generate)
        self._apply.connect(self.worker.apply_config)
        self._pin.connect(self.worker.set_pinned)
        self._history.connect(self.worker.load_history)
        self._select.connect(self.worker.select_history)
        self._probe.connect(self.worker.probe_devices)
        self._count.connect(self.worker.count_sinks)
        self._list.connect(self.worker.list_models)
        self._next = 0
        self.thread.start()
        _LIVE.add(self)

    def _request(self) -> int:
        self._next += 1
        return self._next

    def load(self, path: str | None, cfg: EngineConfig, history: list[dict] | None = None) -> None:
        self._load.emit(path, cfg, history)

    def generate(self, kind: str, text: str = "", sampling: dict | None = None) -> int:
        req = self._request()
        self._generate.emit(req, kind, text, sampling)
        return req

    def load_history(self, messages: list[dict]) -> int:
        req = self._request()
        self._history.emit(req, messages)
        return req

    def select_history(self, messages: list[dict]) -> int:
        req = self._request()
        self._select.emit(req, messages)
        return req

    def apply(self, cfg: EngineConfig) -> None:
        self._apply.emit(cfg)

    def set_pinned(self, index: int, pinned: bool) -> None:
        self._pin.emit(index, pinned)

    def probe_devices(self) -> None:
        self._probe.emit()

    def count_sinks(self, system: str) -> None:
        self._count.emit(system)

    def list_models(self, extra_dirs: list, cfg: EngineConfig) -> int:
        req = self._request()
        self._list.emit(req, list(extra_dirs), cfg)
        return req

    def cancel(self) -> None:
        """Stop the reply being generated and any queued before now (returns at once)."""
        self.worker.cancel(self._next)

    def shutdown(self, wait_ms: int = 5000) -> bool:
        """Stop the engine thread. A thread busy in a long uninterruptible call (loading or
        compiling the model) is not waited for: destroying a running QThread aborts the
        process, so it is parked in ABANDONED and run_gui ends the process with os._exit once
        the store is closed (every finished message is already committed)."""
        self.cancel()
        self.thread.quit()
        if self.thread.wait(wait_ms):
            return True
        ABANDONED.append(self)
        return False
