"""Exit paths: SIGTERM (a logout), SIGINT (Ctrl+C in the terminal) or sys.exit with the window
open, mid-reply, end the app cleanly: exit code 0, no Qt abort ("QThread: Destroyed while
thread is still running"), the reply so far kept and marked interrupted."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.store import ConversationStore, default_db_path

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("app_signal_child.py")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", ["TERM", "INT", "EXIT"])
def test_a_signal_mid_reply_exits_cleanly_and_keeps_the_reply(tiny_bpe_gguf, tmp_path, how):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    r = subprocess.run([sys.executable, str(CHILD), str(tiny_bpe_gguf), how], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=360)
    out, err = r.stdout, r.stderr
    assert "STREAMING" in out, (out, err[-2000:])
    assert r.returncode == 0, (r.returncode, err[-2000:])
    assert how == "EXIT" or "EXITED 0" in out  # sys.exit leaves through the interpreter's exit
    assert "QThread: Destroyed" not in err and "core dumped" not in err.lower()
    dbs = list((tmp_path / "data").rglob("*.sqlite*")) + list((tmp_path / "data").rglob("*.db"))
    assert dbs, list((tmp_path / "data").rglob("*"))
    with ConversationStore(default_db_path(dbs[0].parent)) as store:
        assert store.recovered_messages == 0  # closed cleanly: nothing left half-written
        convs = store.list_conversations()
        msgs = store.messages(convs[0].id)
    assert [(m.role, m.status) for m in msgs] == [("user", "done"), ("assistant", "interrupted")]
    assert msgs[-1].content
