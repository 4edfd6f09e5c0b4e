"""The engine thread: requests in, Qt signals out, Stop from the GUI thread (real engine, tiny model)."""
from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QThread  # noqa: E402

from app.engine_events import (AutoSinks, Failed, LoadFailed, ModelLoaded, PlanApplied,  # noqa: E402
                               ReplyFinished, StatsReady)
from app.engine_worker import EngineConfig, EngineController, describe_error  # noqa: E402
from tests.app.engine_waits import expect, on, on_tokens  # noqa: E402
from engine.budget import MIB  # noqa: E402
from engine.errors import ModelFileError, SettingsError  # noqa: E402

TIMEOUT_MS = 180_000
SAMPLING = {"seed": 3, "temperature": 0.8, "max_tokens": 32, "ignore_eos": True}


def test_describe_error_gives_one_line_and_a_kind():
    assert describe_error(ModelFileError("not a GGUF file:\n  bad magic")) == ("engine", "not a GGUF file: bad magic")
    kind, msg = describe_error(MemoryError())
    assert kind == "memory" and "Out of memory" in msg and "\n" not in msg
    kind, msg = describe_error(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate"))
    assert kind == "memory"
    kind, msg = describe_error(ValueError("x" * 2000))
    assert kind == "engine" and msg.startswith("Engine error (ValueError)") and len(msg) < 400


@pytest.fixture(scope="module")
def engine(qapp, tiny_bpe_gguf):
    ctl = EngineController()
    loaded = []
    on(ctl, ModelLoaded, lambda ev: loaded.append(ev.info))
    on(ctl, LoadFailed, lambda ev: loaded.append((ev.kind, ev.message)))
    try:
        ctl.load(str(tiny_bpe_gguf), EngineConfig(system="You are terse.", sampling=SAMPLING))
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not loaded and time.monotonic() < deadline:
            qapp.processEvents()
            time.sleep(0.005)
        assert loaded and not isinstance(loaded[0], tuple), loaded
        ctl.info = loaded[0]
        yield ctl
    finally:
        assert ctl.shutdown()


def run_reply(qtbot, engine, text="Hello there", kind="send", sampling=SAMPLING):
    pieces, threads, stats = [], set(), []

    def on_token(req, piece):
        threads.add(QThread.currentThread())
        pieces.append((req, piece))

    slots = [on_tokens(engine, on_token), on(engine, StatsReady, lambda ev: stats.append(ev.snapshot))]
    try:
        with expect(qtbot, engine, ReplyFinished, TIMEOUT_MS) as got:
            req = engine.generate(kind, text, sampling)
    finally:
        for slot in slots:
            engine.event.disconnect(slot)
    result = got[0].result
    assert result.request == req
    return result, [p for r, p in pieces if r == req], threads, stats


def test_load_reports_the_model_and_its_plan(engine):
    info = engine.info
    assert info.config.n_layers >= 1 and info.name and info.device == "cpu"
    s = engine.worker.session
    assert info.plan == s.plan and info.plan.sinks == len(s._system_ids) > 0  # auto sinks = the system turn
    assert engine.worker.thread() is engine.thread and engine.thread is not QThread.currentThread()


def test_reply_streams_as_events_in_the_gui_thread(qtbot, engine):
    result, pieces, threads, stats = run_reply(qtbot, engine)
    assert result.reason == "max_tokens" and result.generated_tokens == SAMPLING["max_tokens"]
    assert "".join(pieces) == result.reply
    assert len(pieces) > 1
    assert threads == {QThread.currentThread()}  # queued into the GUI thread, never a widget touched there
    assert stats and stats[-1].stats.tokens_seen > 0
    assert result.ttft_s is not None and result.decode_tok_s > 0


def test_stop_from_the_gui_thread_returns_at_once(qtbot, engine):
    got = []
    slot = on_tokens(engine, lambda r, p: got.append(r))
    long = {**SAMPLING, "max_tokens": 100_000}
    with expect(qtbot, engine, ReplyFinished, TIMEOUT_MS) as finished:
        req = engine.generate("send", "Tell me everything", long)
        qtbot.waitUntil(lambda: got.count(req) >= 5, timeout=TIMEOUT_MS)
        t0 = time.perf_counter()
        engine.cancel()
        assert time.perf_counter() - t0 < 0.01  # never waits for the engine thread
    engine.event.disconnect(slot)
    result = finished[0].result
    assert result.reason == "cancelled" and result.reply and result.generated_tokens < 100_000
    s = engine.worker.session
    assert s.messages[-1]["role"] == "assistant" and s.messages[-1].get("interrupted")
    # the stop does not leak into the next request
    result, *_ = run_reply(qtbot, engine, "Go on")
    assert result.reason == "max_tokens"


def test_stop_before_the_request_starts_cancels_it(qtbot, engine):
    n = len(engine.worker.session.messages)
    with expect(qtbot, engine, ReplyFinished, TIMEOUT_MS) as got:
        engine.generate("send", "never answered", SAMPLING)
        engine.cancel()
    result = got[0].result
    assert result.reason == "cancelled" and not result.reply
    # cancelled before it started (nothing happened) or during the prompt (the question stays)
    assert result.roles == tuple(m["role"] for m in engine.worker.session.messages)
    assert len(result.roles) in (n, n + 1)


def test_regenerate_and_edit(qtbot, engine):
    n = len(engine.worker.session.messages)
    run_reply(qtbot, engine, "Question one")
    result, *_ = run_reply(qtbot, engine, kind="regenerate", sampling={**SAMPLING, "seed": 99})
    msgs = engine.worker.session.messages
    assert len(msgs) == n + 2 and msgs[-1]["content"] == result.reply
    result, *_ = run_reply(qtbot, engine, "Question one, edited", kind="edit")
    msgs = engine.worker.session.messages
    assert len(msgs) == n + 2 and msgs[-2]["content"] == "Question one, edited"


def test_apply_says_whether_the_cache_was_rebuilt(qtbot, engine):
    base = EngineConfig(system="You are terse.", sampling=SAMPLING)
    for cfg, want_rebuilt, want_note in (
        (EngineConfig(system="You are terse.", window=64, sampling=SAMPLING), True, "reallocated"),
        (EngineConfig(system="You are terse.", window=64, sampling=SAMPLING), False, "unchanged"),
        (EngineConfig(system="Answer in French.", window=64, sampling=SAMPLING), None, None),
        (base, True, "reallocated"),
    ):
        with expect(qtbot, engine, PlanApplied, TIMEOUT_MS) as got:
            engine.apply(cfg)
        rebuilt, plan, note = got[0].rebuilt, got[0].plan, got[0].note
        if want_rebuilt is not None:
            assert (rebuilt, note) == (want_rebuilt, want_note), cfg
        assert plan == engine.worker.session.plan
        if cfg.window:
            assert plan.window <= 64
    assert engine.worker.session.system == "You are terse."


def test_auto_sinks_are_counted_in_the_engine_thread(qtbot, engine):
    def counted(text):
        with expect(qtbot, engine, AutoSinks, TIMEOUT_MS, check=lambda ev: ev.system == text) as got:
            engine.count_sinks(text)
        return got[0].tokens

    assert counted("You are terse.") == len(engine.worker.session._system_ids) > 4
    assert counted("") == 4  # no system prompt: StreamingLLM's 4 sinks
    longer = counted("You are terse. " * 20)
    assert longer > counted("You are terse.")


def test_errors_come_back_as_events(qtbot, engine):
    s = engine.worker.session
    with expect(qtbot, engine, Failed, TIMEOUT_MS) as got:
        engine.set_pinned(10_000, True)
    kind, message = got[0].kind, got[0].message
    assert kind == "engine" and "no message" in message
    # an impossible plan is refused with what would fit; the session keeps its plan
    before = s.plan
    with expect(qtbot, engine, Failed, TIMEOUT_MS) as got:
        engine.apply(EngineConfig(system="You are terse.", budget_bytes=-1 * MIB, sampling=SAMPLING))
    assert "budget" in got[0].message.lower() and s.plan == before
    with pytest.raises(SettingsError):
        engine.worker._sampling_from({"top_p": 0.0})


def test_a_broken_model_file_fails_cleanly(qtbot, qapp, tmp_path, tiny_bpe_gguf):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    ctl = EngineController()
    try:
        with expect(qtbot, ctl, LoadFailed, TIMEOUT_MS) as got:
            ctl.load(str(bad), EngineConfig())
        kind, message = got[0].kind, got[0].message
        assert kind == "engine" and message and "\n" not in message
        with expect(qtbot, ctl, ReplyFinished, TIMEOUT_MS) as got:
            ctl.generate("send", "hello", SAMPLING)
        assert got[0].result.reason == "error" and "No model" in got[0].result.error
    finally:
        assert ctl.shutdown()


def test_pyside_singleton_leak_is_guarded(tmp_path):
    """PySide6 6.12.0 on Python 3.11 drops a reference to None/True/False per call; without the
    guard in app/qt_compat.py a streaming session aborts the interpreter within a minute."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "leak.py"
    script.write_text(
        "import os, sys\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "import app.engine_worker\n"
        "from PySide6.QtCore import QObject, Signal\n"
        "from PySide6.QtWidgets import QApplication, QLabel\n"
        "qapp = QApplication([])\n"
        "class O(QObject):\n"
        "    s = Signal(int, str)\n"
        "    b = Signal(bool)\n"
        "o = O(); o.s.connect(lambda a, b: None); o.b.connect(lambda x: None)\n"
        "label = QLabel()\n"
        "for i in range(30000):\n"
        "    label.setText(str(i)); o.s.emit(i, 'x'); o.b.emit(i % 2 == 0)\n"
        "print('alive')\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "alive" in out.stdout, out.stderr[-2000:]


SWAP_PROBE = """
import json, sys
from app.engine_worker import EngineConfig, EngineWorker
from app.engine_events import LoadFailed, LoadRefused
from engine.sysmem import rss_bytes
w = EngineWorker()
failed = []
w.event.connect(lambda ev: failed.append(ev) if isinstance(ev, (LoadFailed, LoadRefused)) else None)
rss = []
for i, path in enumerate(sys.argv[1:]):  # the window's load (a swap from the second on), one short reply
    w.load(path, EngineConfig(), None)
    assert not failed, failed
    w.generate(i + 1, "send", "Hello there, how are you?", {"max_tokens": 8})
    rss.append(rss_bytes())
print(json.dumps(rss))
"""


def test_five_model_swaps_hold_what_a_fresh_start_holds(tmp_path, default_model_path):
    """Issue 21: a swap kept the old model's compiled steps (jit's caches are keyed by its config)
    and its frozen reference cycles. Five swaps between a tiny model and the default model, ending
    on the default model, through the worker's load (what the window's swap runs), hold at most 5%
    over a fresh process that loaded the default model once the same way (517 vs 476 MB measured
    before the fix, 488 after). Compared with a fresh process, not with engine.library's
    prediction: the worker imports Qt, which makes JAX's runtime ~30 MB larger, and has no window,
    whose share the prediction adds with the window."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.fixtures.tiny_gguf import write_tiny_gguf

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    swaps = [tiny] + [default_model_path, tiny] * 2 + [default_model_path]  # a first load, then five swaps

    def run(paths) -> list[int]:
        r = subprocess.run([sys.executable, "-c", SWAP_PROBE, *map(str, paths)], capture_output=True, text=True,
                           timeout=600, cwd=Path(__file__).resolve().parents[2])
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    run(swaps)  # fills the compile cache with both shapes: a shape's first compile holds ~30 MB more, once
    fresh = run([default_model_path])[0]
    rss = run(swaps)
    mb = [round(x / 1e6, 1) for x in rss]
    print(f"fresh start {fresh / 1e6:.1f} MB; after the first load and each swap {mb}")
    # What a swap must not do is hold more (the old model's steps and cycles); holding less than
    # the fresh process is no fault (a fresh clone read 399.6 against 420.7 MB: -5.0%), so the
    # lower side only checks the measurement saw a loaded model.
    assert 0.8 * fresh <= rss[-1] <= 1.05 * fresh, (round(fresh / 1e6, 1), mb)
