"""kill -9 the real app in the middle of a reply, then restart it: every finished message is
there, and the partial reply is kept and marked interrupted (issue: conversations survive)."""
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.store import ConversationStore, default_db_path
from tests.fixtures.processes import reap, sigkill

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("app_crash_child.py")


def _latest_assistant(db: Path):
    """(status, content) of the newest assistant row, read-only (never recovers anything)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return None
    try:
        return conn.execute("SELECT status, content FROM messages WHERE role = 'assistant' "
                            "ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _line(p, prefix: str, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise AssertionError(f"child exited ({p.poll()}): {p.stderr.read()[-2000:]}")
        if line.startswith(prefix):
            return line[len(prefix):].strip()
        assert not line.startswith(("ERROR", "TIMEOUT")), line
    raise AssertionError(f"no {prefix!r} line")


@pytest.mark.timeout(400)
def test_sigkill_during_generation_then_restart(tiny_bpe_gguf, tmp_path, qapp):
    data = tmp_path / "data"
    db = default_db_path(data)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, str(CHILD), str(tiny_bpe_gguf), str(data)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = json.loads(_line(p, "REPLY "))
        _line(p, "STREAMING")
        # wait until the app has saved part of the second reply, then kill it mid-stream
        deadline = time.monotonic() + 60
        row = None
        while time.monotonic() < deadline:
            row = _latest_assistant(db)
            if row and row[0] == "streaming" and len(row[1]) > 0:
                break
            time.sleep(0.05)
        assert row and row[0] == "streaming" and row[1], row
        seen = row[1]
        sigkill(p)
    finally:
        reap(p)

    with ConversationStore(db) as store:
        assert store.recovered_messages == 1
        msgs = store.messages(first["conversation"])
    assert [(m.role, m.status) for m in msgs] == [
        ("user", "done"), ("assistant", "done"), ("user", "done"), ("assistant", "interrupted")]
    assert [m.content for m in msgs[:3]] == ["first question", first["reply"], "second question"]
    partial = msgs[3].content
    assert partial.startswith(seen), (seen, partial)  # what was saved before the kill, or more

    # restart: the window reopens that conversation, the cut reply shown as interrupted
    from app import MainWindow

    win = MainWindow(model_path=tiny_bpe_gguf, data_dir=data)
    try:
        assert win.current_id == first["conversation"]
        shown = win.chat.messages()
        assert [(m.role, m.status) for m in shown] == [(m.role, m.status) for m in msgs]
        assert shown[-1].content == partial
    finally:
        win.shutdown()
        win.close()
        win.deleteLater()
