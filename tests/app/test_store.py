"""Tests for app/store.py: the SQLite conversation store."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.store import (  # noqa: E402
    SCHEMA_VERSION,
    Conversation,
    ConversationStore,
    Message,
    StoreError,
    default_data_dir,
    default_db_path,
)
from engine.errors import PinwheelError  # noqa: E402
from tests.fixtures.processes import reap, sigkill  # noqa: E402

CHILD = Path(__file__).with_name("store_crash_child.py")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "conversations.db"


@pytest.fixture
def store(db: Path):
    s = ConversationStore(db)
    yield s
    s.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def assert_one_line(err: Exception) -> None:
    text = str(err)
    assert text and "\n" not in text and len(text) < 400, text


# --------------------------------------------------------------------------- basics


def test_pragmas_and_schema_version(store: ConversationStore, db: Path):
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    assert set(cols) == {"id", "conversation_id", "parent_id", "shown", "position", "role", "content", "status",
                         "pinned", "created_at", "meta_json"}
    cols = [r[1] for r in conn.execute("PRAGMA table_info(conversations)")]
    assert set(cols) == {"id", "title", "created_at", "updated_at", "settings_json"}


def test_create_get_rename_delete(store: ConversationStore):
    c = store.create_conversation()
    assert isinstance(c, Conversation) and c.title == "New chat" and c.settings == {}
    assert store.get_conversation(c.id) == c
    store.rename_conversation(c.id, "Trip to Oslo")
    assert store.get_conversation(c.id).title == "Trip to Oslo"
    store.append_message(c.id, "user", "hi")
    store.delete_conversation(c.id)
    assert store.get_conversation(c.id) is None
    assert store.messages(c.id) == []
    # the messages went with it (ON DELETE CASCADE)
    assert store._conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    store.delete_conversation(c.id)  # deleting twice is harmless
    with pytest.raises(StoreError) as e:
        store.rename_conversation(c.id, "gone")
    assert e.value.kind == "missing"
    assert_one_line(e.value)


def test_list_newest_activity_first(store: ConversationStore):
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    c = store.create_conversation("c")
    assert [x.id for x in store.list_conversations()] == [c.id, b.id, a.id]
    time.sleep(0.002)
    store.append_message(a.id, "user", "bump")
    assert [x.id for x in store.list_conversations()] == [a.id, c.id, b.id]
    assert store.get_conversation(a.id).updated_at > a.updated_at


def test_search_title_and_content_ignoring_case(store: ConversationStore):
    a = store.create_conversation("Recipes")
    b = store.create_conversation("Work")
    c = store.create_conversation("Misc")
    store.append_message(b.id, "user", "Schedule the QUARTERLY review")
    store.append_message(c.id, "assistant", "Die Straße ist lang; ÄPFEL sind rot")
    assert [x.id for x in store.list_conversations("recipes")] == [a.id]
    assert [x.id for x in store.list_conversations("quarterly")] == [b.id]
    assert [x.id for x in store.list_conversations("äpfel")] == [c.id]  # beyond ASCII
    assert [x.id for x in store.list_conversations("STRASSE")] == [c.id]  # casefold
    assert {x.id for x in store.list_conversations("r")} == {a.id, b.id, c.id}
    assert store.list_conversations("nothing like this") == []
    assert len(store.list_conversations("   ")) == 3
    assert store.list_conversations("%") == [] and store.list_conversations("_") == []


def test_messages_roundtrip_and_positions(store: ConversationStore):
    c = store.create_conversation("t")
    m0 = store.append_message(c.id, "system", "be brief")
    m1 = store.append_message(c.id, "user", "héllo \N{PILE OF POO}\n  two lines", pinned=True,
                              meta={"tokens": 7})
    m2 = store.append_message(c.id, "assistant", "hi", status="stopped")
    assert isinstance(m1, Message)
    assert [m.position for m in (m0, m1, m2)] == [0, 1, 2]
    got = store.messages(c.id)
    assert got == [m0, m1, m2]
    assert got[1].content == "héllo \N{PILE OF POO}\n  two lines"
    assert got[1].pinned is True and got[0].pinned is False
    assert got[1].meta == {"tokens": 7}
    assert got[2].status == "stopped"
    assert store.get_message(m1.id) == m1
    assert store.get_message(10_000) is None


def test_bad_arguments_are_value_errors(store: ConversationStore):
    c = store.create_conversation()
    with pytest.raises(ValueError, match="role"):
        store.append_message(c.id, "wizard", "x")
    with pytest.raises(ValueError, match="status"):
        store.append_message(c.id, "user", "x", status="sleeping")
    m = store.append_message(c.id, "assistant", "", status="streaming")
    with pytest.raises(ValueError, match="status"):
        store.finish_message(m.id, "streaming")
    assert len(store.messages(c.id)) == 1


def test_append_to_missing_conversation(store: ConversationStore):
    with pytest.raises(StoreError) as e:
        store.append_message(999, "user", "x")
    assert e.value.kind == "missing" and isinstance(e.value, PinwheelError)
    for call in (lambda: store.update_message(999, "x"), lambda: store.finish_message(999),
                 lambda: store.set_pinned(999, True), lambda: store.set_conversation_settings(999, {})):
        with pytest.raises(StoreError):
            call()


def test_streaming_reply_lifecycle(store: ConversationStore):
    c = store.create_conversation()
    store.append_message(c.id, "user", "q")
    r = store.append_message(c.id, "assistant", "", status="streaming")
    for text in ("Hel", "Hello", "Hello, wor"):
        store.update_message(r.id, text)
        got = store.get_message(r.id)
        assert (got.content, got.status) == (text, "streaming")
    store.finish_message(r.id, "done", content="Hello, world")
    got = store.get_message(r.id)
    assert (got.content, got.status) == ("Hello, world", "done")
    r2 = store.append_message(c.id, "assistant", "partial", status="streaming")
    store.finish_message(r2.id, status="stopped")
    assert store.get_message(r2.id).status == "stopped"
    assert store.get_message(r2.id).content == "partial"


def test_pin_and_delete_from(store: ConversationStore):
    c = store.create_conversation()
    ms = [store.append_message(c.id, "user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(6)]
    store.set_pinned(ms[1].id, True)
    assert [m.pinned for m in store.messages(c.id)] == [False, True, False, False, False, False]
    store.set_pinned(ms[1].id, False)
    assert not any(m.pinned for m in store.messages(c.id))
    assert store.delete_messages_from(c.id, 3) == 3
    assert [m.content for m in store.messages(c.id)] == ["m0", "m1", "m2"]
    again = store.append_message(c.id, "assistant", "regenerated")
    assert again.position == 3
    assert store.delete_messages_from(c.id, 10) == 0


def test_settings_and_exports(store: ConversationStore):
    memory = {"kv_dtype": "int8", "kv_budget_mib": 11.5, "window": 2048, "sinks": -1}
    c = store.create_conversation("Memory test", settings={"kv_dtype": "f32"})
    assert store.get_conversation(c.id).settings == {"kv_dtype": "f32"}
    store.set_conversation_settings(c.id, memory)
    assert store.get_conversation(c.id).settings == memory
    store.append_message(c.id, "user", "What's 2+2?")
    store.append_message(c.id, "assistant", "4 — obviously", pinned=True)
    s = store.append_message(c.id, "assistant", "half a repl", status="streaming")
    store.finish_message(s.id, "interrupted")

    doc = json.loads(store.export_json(c.id))
    assert doc["title"] == "Memory test"
    assert doc["settings"] == memory
    assert [(m["role"], m["content"], m["status"], m["pinned"]) for m in doc["messages"]] == [
        ("user", "What's 2+2?", "done", False),
        ("assistant", "4 — obviously", "done", True),
        ("assistant", "half a repl", "interrupted", False),
    ]
    md = store.export_markdown(c.id)
    assert md.startswith("# Memory test\n")
    assert "What's 2+2?" in md and "4 — obviously" in md
    assert "## Assistant · pinned" in md and "## Assistant · interrupted" in md
    assert md.index("What's 2+2?") < md.index("4 — obviously") < md.index("half a repl")
    with pytest.raises(StoreError):
        store.export_json(12345)


def test_closed_store(db: Path):
    s = ConversationStore(db)
    s.close()
    s.close()
    with pytest.raises(StoreError) as e:
        s.list_conversations()
    assert e.value.kind == "closed"
    with ConversationStore(db) as s2:
        s2.create_conversation()
    with pytest.raises(StoreError):
        s2.create_conversation()


def test_default_paths(monkeypatch, tmp_path: Path):
    import platformdirs

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == platformdirs.user_data_path("pinwheel", appauthor=False)
    if sys.platform.startswith("linux"):
        assert default_data_dir() == tmp_path / "xdg" / "pinwheel"
    assert default_db_path(tmp_path) == tmp_path / "conversations.db"
    assert default_db_path() == default_data_dir() / "conversations.db"


def test_modules_do_not_import_qt_or_jax():
    code = ("import sys, app.store, app.settings; "
            "bad = [m for m in ('PySide6', 'jax', 'jaxlib') if m in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout


# --------------------------------------------------------------------------- migration

V1_DDL = [
    """CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, settings_json TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE messages (id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
        created_at REAL NOT NULL, meta_json TEXT NOT NULL DEFAULT '{}',
        UNIQUE (conversation_id, position))""",
    "CREATE INDEX conversations_by_update ON conversations(updated_at)",
]


def make_v1(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    for stmt in V1_DDL:
        conn.execute(stmt)
    conn.execute("INSERT INTO conversations VALUES (1, 'old chat', 100.0, 200.0, '{\"window\": 64}')")
    conn.executemany("INSERT INTO messages (conversation_id, position, role, content, created_at) "
                     "VALUES (1, ?, ?, ?, 150.0)",
                     [(0, "user", "old question"), (1, "assistant", "old answer")])
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def columns(conn: sqlite3.Connection, table: str) -> dict:
    return {r[1]: (r[2].upper(), r[3], r[4], r[5]) for r in conn.execute(f"PRAGMA table_info({table})")}


def test_v1_database_is_migrated_in_place(tmp_path: Path):
    old = tmp_path / "old.db"
    make_v1(old)
    with ConversationStore(old) as s:
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conv = s.get_conversation(1)
        assert (conv.title, conv.created_at, conv.settings) == ("old chat", 100.0, {"window": 64})
        msgs = s.messages(1)
        assert [(m.role, m.content, m.status, m.pinned) for m in msgs] == [
            ("user", "old question", "done", False), ("assistant", "old answer", "done", False)]
        # the new columns work on the migrated file
        s.set_pinned(msgs[0].id, True)
        r = s.append_message(1, "assistant", "", status="streaming")
        assert r.position == 2
        with pytest.raises(sqlite3.IntegrityError):  # CHECK constraint came along
            s._conn.execute("UPDATE messages SET status = 'bogus' WHERE id = ?", (r.id,))
        migrated_msgs, migrated_convs = columns(s._conn, "messages"), columns(s._conn, "conversations")
        migrated_idx = {r[0] for r in s._conn.execute("SELECT name FROM sqlite_master WHERE type='index' "
                                                      "AND name NOT LIKE 'sqlite_%'")}
    with ConversationStore(tmp_path / "fresh.db") as fresh:
        assert columns(fresh._conn, "messages") == migrated_msgs
        assert columns(fresh._conn, "conversations") == migrated_convs
        assert {r[0] for r in fresh._conn.execute("SELECT name FROM sqlite_master WHERE type='index' "
                                                  "AND name NOT LIKE 'sqlite_%'")} == migrated_idx
        c = fresh.create_conversation()
        m = fresh.append_message(c.id, "user", "x")
        with pytest.raises(sqlite3.IntegrityError):
            fresh._conn.execute("UPDATE messages SET status = 'bogus' WHERE id = ?", (m.id,))
    assert integrity(old) == "ok"


def test_failed_migration_leaves_v1_untouched(tmp_path: Path, monkeypatch):
    import app.store as store_mod

    old = tmp_path / "old.db"
    make_v1(old)

    def broken(conn):
        conn.execute("ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT 'done'")
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setitem(store_mod.MIGRATIONS, 1, broken)
    with pytest.raises(StoreError) as e:
        ConversationStore(old)
    assert e.value.kind == "full"
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "status" not in columns(conn, "messages")
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    conn.close()


def test_newer_schema_is_refused_untouched(tmp_path: Path):
    p = tmp_path / "future.db"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE conversations (id INTEGER PRIMARY KEY)")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    before = digest(p)
    with pytest.raises(StoreError) as e:
        ConversationStore(p)
    assert e.value.kind == "newer" and "newer" in str(e.value)
    assert_one_line(e.value)
    assert digest(p) == before


# --------------------------------------------------------------------------- damaged files


def test_not_a_database_is_refused_untouched(tmp_path: Path):
    p = tmp_path / "conversations.db"
    p.write_bytes(b"this is not sqlite\n" * 500)
    before = digest(p)
    with pytest.raises(StoreError) as e:
        ConversationStore(p)
    assert e.value.kind == "corrupt"
    assert isinstance(e.value, PinwheelError)
    assert_one_line(e.value)
    assert str(p) in str(e.value) and "move it aside" in str(e.value)
    assert digest(p) == before


def test_foreign_sqlite_file_is_refused_untouched(tmp_path: Path):
    p = tmp_path / "other.db"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.commit()
    conn.close()
    before = digest(p)
    with pytest.raises(StoreError) as e:
        ConversationStore(p)
    assert e.value.kind == "corrupt" and "invoices" in str(e.value)
    assert digest(p) == before


def test_damaged_pages_raise_store_error(tmp_path: Path):
    p = tmp_path / "c.db"
    with ConversationStore(p) as s:
        for k in range(3):
            c = s.create_conversation(f"c{k}")
            for _ in range(20):
                s.append_message(c.id, "user", "hello " * 50)
    data = bytearray(p.read_bytes())
    assert len(data) > 8192
    data[4096:] = b"\xa5" * (len(data) - 4096)  # keep the header page, trash the rest
    p.write_bytes(bytes(data))
    with pytest.raises(StoreError) as e:
        s = ConversationStore(p)
        s.list_conversations()
        s.messages(1)
    assert e.value.kind == "corrupt"
    assert_one_line(e.value)


# --------------------------------------------------------------------------- full disk


def test_full_disk_rolls_back_and_keeps_data(store: ConversationStore, db: Path):
    c = store.create_conversation("kept")
    store.append_message(c.id, "user", "first")
    r = store.append_message(c.id, "assistant", "partial answer", status="streaming")
    before_conv = store.get_conversation(c.id)
    before_msgs = store.messages(c.id)
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")  # the "disk" is now full

    big = "x" * 200_000
    with pytest.raises(StoreError) as e:
        store.append_message(c.id, "user", big)
    assert e.value.kind == "full" and "disk is full" in str(e.value)
    assert_one_line(e.value)
    with pytest.raises(StoreError) as e:
        store.update_message(r.id, big)
    assert e.value.kind == "full"
    # nothing half-written: the conversation's updated_at didn't move either
    assert not store._conn.in_transaction
    assert store.get_conversation(c.id) == before_conv
    assert store.messages(c.id) == before_msgs
    # small writes that fit still work, and after space is freed big ones do too
    store.update_message(r.id, "partial answer, a bit more")
    store._conn.execute("PRAGMA max_page_count = 1073741823")
    store.append_message(c.id, "user", big)
    store.close()
    assert integrity(db) == "ok"
    with ConversationStore(db) as again:
        got = again.messages(c.id)
        assert [m.content for m in got] == ["first", "partial answer, a bit more", big]


def test_failure_mid_transaction_rolls_back_every_statement(store: ConversationStore, db: Path):
    c = store.create_conversation()
    store.append_message(c.id, "user", "kept")
    # append_message = INSERT message, then UPDATE conversation; make the 2nd statement fail
    # (SQLite itself only undoes the failed statement, not the INSERT before it)
    store._conn.execute("CREATE TEMP TRIGGER boom BEFORE UPDATE OF updated_at ON conversations "
                        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    with pytest.raises(StoreError) as e:
        store.append_message(c.id, "user", "half-saved")
    assert "injected failure" in str(e.value)
    assert_one_line(e.value)
    assert not store._conn.in_transaction
    store._conn.execute("DROP TRIGGER boom")
    store.append_message(c.id, "user", "next")
    assert [m.content for m in store.messages(c.id)] == ["kept", "next"]
    assert [m.position for m in store.messages(c.id)] == [0, 1]


def test_sqlite_full_error_code_is_recognised(store: ConversationStore):
    # the mapping relies on the error code, not only on the English message
    exc = sqlite3.OperationalError("something else")
    exc.sqlite_errorcode = 13  # SQLITE_FULL
    assert store._translate(exc, "saving").kind == "full"
    exc.sqlite_errorcode = 8 | (3 << 8)  # SQLITE_READONLY_ROLLBACK (an extended code)
    assert store._translate(exc, "saving").kind == "readonly"


# --------------------------------------------------------------------------- read-only


def test_read_only_open_reads_and_refuses_writes(db: Path):
    with ConversationStore(db) as s:
        c = s.create_conversation("ro")
        s.append_message(c.id, "user", "kept")
        live = s.append_message(c.id, "assistant", "half", status="streaming")
    before = digest(db)
    # read_only=True opens with sqlite's mode=ro: this proves that every write path
    # turns SQLite's refusal into a StoreError, not that the OS blocks writes
    # (see the unprivileged-user test below for real permissions).
    with ConversationStore(db, read_only=True) as ro:
        assert [m.content for m in ro.messages(c.id)] == ["kept", "half"]
        assert ro.get_message(live.id).status == "streaming"  # no recovery on a read-only open
        for call in (lambda: ro.create_conversation(), lambda: ro.append_message(c.id, "user", "x"),
                     lambda: ro.update_message(live.id, "x"), lambda: ro.delete_conversation(c.id)):
            with pytest.raises(StoreError) as e:
                call()
            assert e.value.kind == "readonly"
            assert_one_line(e.value)
        # even with the Python-side guard bypassed, SQLite's refusal becomes a StoreError
        ro.read_only = False
        with pytest.raises(StoreError) as e:
            ro.append_message(c.id, "user", "x")
        assert e.value.kind == "readonly" and "read-only" in str(e.value)
    assert digest(db) == before
    with pytest.raises(StoreError) as e:
        ConversationStore(db.with_name("missing.db"), read_only=True)
    assert e.value.kind == "missing"
    assert not db.with_name("missing.db").exists()


def _run_as_nobody(fn) -> list[str]:
    """Run fn() in a forked child with uid/gid 65534; return the lines it produced."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            out = fn()
            os.write(w, json.dumps(out).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(w, json.dumps([f"CHILD FAILED {type(exc).__name__}: {exc}"]).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'["CHILD SAID NOTHING"]')


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0,
                    reason="needs root to drop to an unprivileged user")
def test_real_read_only_folder_as_unprivileged_user():
    # A root-owned 0755 folder is genuinely read-only for uid 65534: the kernel refuses.
    base = Path(tempfile.mkdtemp(prefix="pinwheel-ro-"))
    try:
        os.chmod(base, 0o755)
        folder = base / "data"
        folder.mkdir(mode=0o755)
        existing = folder / "existing.db"
        with ConversationStore(existing) as s:
            c = s.create_conversation("precious")
            s.append_message(c.id, "user", "keep me")
        before = digest(existing)

        def attempt():
            out = []
            for target in (folder / "new.db", existing, base / "sub" / "dir" / "new.db"):
                try:
                    ConversationStore(target).close()
                    out.append(f"{target.name}: OPENED")
                except StoreError as e:
                    out.append(f"{target.name}: {e.kind}: {e}")
            return out

        lines = _run_as_nobody(attempt)
        assert len(lines) == 3, lines
        for line in lines:
            assert ": readonly: " in line, line
            assert "permission" in line or "read-only" in line or "not writable" in line, line
        assert digest(existing) == before
        assert not (folder / "new.db").exists() and not (base / "sub").exists()
        with ConversationStore(existing) as s:
            assert [m.content for m in s.messages(c.id)] == ["keep me"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- several instances


def test_two_stores_interleaved_writes(db: Path):
    a = ConversationStore(db)
    b = ConversationStore(db)
    try:
        conv = a.create_conversation("shared")
        assert b.get_conversation(conv.id) == conv
        expected = []
        for i in range(30):
            s, tag = (a, "a") if i % 2 == 0 else (b, "b")
            m = s.append_message(conv.id, "user", f"{tag}{i}")
            expected.append(f"{tag}{i}")
            assert m.position == i
        r = a.append_message(conv.id, "assistant", "", status="streaming")
        b.update_message(r.id, "from b")
        a.finish_message(r.id, "done")
        expected.append("from b")
        assert [m.content for m in a.messages(conv.id)] == expected
        assert b.messages(conv.id) == a.messages(conv.id)
        b.delete_messages_from(conv.id, 10)
        assert len(a.messages(conv.id)) == 10
        b.delete_conversation(conv.id)
        with pytest.raises(StoreError) as e:
            a.append_message(conv.id, "user", "too late")
        assert e.value.kind == "missing"
    finally:
        a.close()
        b.close()
    assert integrity(db) == "ok"


def test_open_while_another_instance_streams_leaves_it_alone(db: Path):
    a = ConversationStore(db)
    c = a.create_conversation()
    live = a.append_message(c.id, "assistant", "so far", status="streaming")
    b = ConversationStore(db)  # another window opens while a is mid-reply
    assert b.recovered_messages == 0
    assert b.get_message(live.id).status == "streaming"
    a.update_message(live.id, "so far, so good")
    b.close()
    a.close()  # a "crashes" without finishing: the next lone opener recovers it
    with ConversationStore(db) as c2:
        assert c2.recovered_messages == 1
        got = c2.get_message(live.id)
        assert (got.status, got.content) == ("interrupted", "so far, so good")


def test_a_writer_that_holds_the_lock_too_long_gives_busy(db: Path):
    with ConversationStore(db) as s:
        c = s.create_conversation()
        s.append_message(c.id, "user", "q")
        stale = s.append_message(c.id, "assistant", "crashed here", status="streaming")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # e.g. another program stuck inside a write
    try:
        t0 = time.monotonic()
        # opening still works (crash recovery is best effort and waits for another day)
        s = ConversationStore(db, busy_timeout_s=0.2)
        assert s.recovered_messages == 0
        assert [m.content for m in s.messages(c.id)] == ["q", "crashed here"]  # reads aren't blocked
        with pytest.raises(StoreError) as e:
            s.append_message(c.id, "user", "blocked")
        assert e.value.kind == "busy" and "try again" in str(e.value)
        assert_one_line(e.value)
        assert time.monotonic() - t0 < 3
    finally:
        other.execute("ROLLBACK")
        other.close()
    s.append_message(c.id, "user", "now it fits")  # the lock is free again
    s.close()
    with ConversationStore(db) as again:
        assert again.recovered_messages == 1
        assert again.get_message(stale.id).status == "interrupted"
        assert [m.content for m in again.messages(c.id)] == ["q", "crashed here", "now it fits"]


def test_threads_share_one_store(store: ConversationStore):
    c = store.create_conversation()
    errors = []

    def work(tag):
        try:
            for i in range(40):
                store.append_message(c.id, "user", f"{tag}{i}")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in "xy"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    msgs = store.messages(c.id)
    assert [m.position for m in msgs] == list(range(80))
    assert sorted(m.content for m in msgs) == sorted(f"{t}{i}" for t in "xy" for i in range(40))


@pytest.mark.timeout(60)
def test_two_processes_write_concurrently(db: Path):
    with ConversationStore(db) as s:
        conv = s.create_conversation("shared")
    n = 60
    procs = [subprocess.Popen([sys.executable, str(CHILD), "writer", str(db), str(conv.id), tag, str(n)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=child_env(), cwd=ROOT) for tag in ("A", "B")]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "READY", p.stderr.read()
        for p in procs:  # start both at once
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=50)
            assert p.returncode == 0, err
            assert out.strip() == "DONE"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert integrity(db) == "ok"
    with ConversationStore(db) as s:
        msgs = s.messages(conv.id)
    assert [m.position for m in msgs] == list(range(len(msgs)))
    users = [m.content for m in msgs if m.role == "user"]
    for tag in "AB":  # every message of each writer, in that writer's order
        assert [u for u in users if u.startswith(tag + "-")] == [f"{tag}-{i}" for i in range(n)]
    replies = [m for m in msgs if m.role == "assistant"]
    assert len(replies) == 2 * (n // 10)
    assert all(m.status == "done" and m.content.endswith("xx") for m in replies)
    writers = [u[0] for u in users]
    switches = sum(1 for x, y in zip(writers, writers[1:]) if x != y)
    assert switches >= 2, "the two writers never interleaved"


# --------------------------------------------------------------------------- crash safety


@pytest.mark.timeout(60)
def test_sigkill_mid_reply_keeps_everything(db: Path):
    sys.path.insert(0, str(CHILD.parent))
    try:
        import store_crash_child as child
    finally:
        sys.path.remove(str(CHILD.parent))
    convs = {}
    for round_no, kill_after in enumerate((5, 40, 150)):
        p = subprocess.Popen([sys.executable, str(CHILD), "crash", str(db), str(round_no)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=child_env(), cwd=ROOT)
        try:
            line = p.stdout.readline().split()
            assert line[:1] == ["READY"], p.stderr.read() if p.poll() is not None else line
            convs[round_no] = int(line[1])
            last = 0
            while last < kill_after:
                line = p.stdout.readline()
                assert line.startswith("U "), (line, p.poll())
                last = int(line.split()[1])
            sigkill(p)
        finally:
            reap(p)
        with ConversationStore(db) as s:
            assert s.recovered_messages == 1
            for r, conv_id in convs.items():
                msgs = s.messages(conv_id)
                finished = [(m.role, m.content) for m in msgs if m.status == "done"]
                assert finished == child.finished_messages(r)
                partial = msgs[-1]
                assert len(msgs) == len(finished) + 1 and partial.role == "assistant"
                assert partial.status == "interrupted"
                if r == round_no:
                    # the last update it reported, or one it committed just before dying
                    n_tok = partial.content.count("tok")
                    assert n_tok >= last
                    assert partial.content == child.partial_reply(n_tok)
        assert integrity(db) == "ok"


# --------------------------------------------------------------------------- properties

SEARCH_TEXT = st.text(alphabet=st.sampled_from("abcABCßäÄ %_x"), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(titles=st.lists(SEARCH_TEXT, min_size=1, max_size=4),
       contents=st.lists(st.lists(SEARCH_TEXT, max_size=3), min_size=4, max_size=4),
       query=SEARCH_TEXT)
def test_search_matches_a_casefolded_model(titles, contents, query):
    with ConversationStore(":memory:") as s:
        expected = []
        for title, texts in zip(titles, contents):
            c = s.create_conversation(title)
            for t in texts:
                s.append_message(c.id, "user", t)
            needle = query.casefold().strip()
            if not needle or needle in title.casefold() or any(needle in t.casefold() for t in texts):
                expected.append(c.id)
        assert sorted(x.id for x in s.list_conversations(query)) == sorted(expected)


OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sampled_from(["user", "assistant"]), st.text(max_size=5), st.booleans()),
    st.tuples(st.just("delete_from"), st.integers(0, 8)),
    st.tuples(st.just("pin"), st.integers(0, 8), st.booleans()),
    st.tuples(st.just("update"), st.integers(0, 8), st.text(max_size=5)),
), max_size=25)


@settings(max_examples=40, deadline=None)
@given(ops=OPS)
def test_message_operations_match_a_list_model(ops):
    with ConversationStore(":memory:") as s:
        c = s.create_conversation()
        model: list[list] = []  # [role, content, pinned]
        for op in ops:
            if op[0] == "append":
                s.append_message(c.id, op[1], op[2], pinned=op[3])
                model.append([op[1], op[2], op[3]])
            elif op[0] == "delete_from":
                assert s.delete_messages_from(c.id, op[1]) == max(0, len(model) - op[1])
                del model[op[1]:]
            elif op[0] == "pin" and op[1] < len(model):
                s.set_pinned(s.messages(c.id)[op[1]].id, op[2])
                model[op[1]][2] = op[2]
            elif op[0] == "update" and op[1] < len(model):
                s.update_message(s.messages(c.id)[op[1]].id, op[2])
                model[op[1]][1] = op[2]
        got = s.messages(c.id)
        assert [[m.role, m.content, m.pinned] for m in got] == model
        assert [m.position for m in got] == list(range(len(model)))


# --------------------------------------------------------------------------- versions (schema v3)


def make_v2(path: Path) -> None:
    """A database as Pinwheel wrote it before versions: schema 2, two conversations."""
    from app.store import SCHEMAS

    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    for stmt in SCHEMAS[2]:
        conn.execute(stmt)
    conn.execute("INSERT INTO conversations VALUES (1, 'first', 100.0, 200.0, '{}')")
    conn.execute("INSERT INTO conversations VALUES (2, 'second', 110.0, 210.0, '{\"window\": 64}')")
    rows = [(1, 0, "user", "q1", "done", 0), (1, 1, "assistant", "a1", "stopped", 1), (1, 2, "user", "q2", "done", 0),
            (1, 3, "assistant", "a2", "streaming", 0), (2, 0, "user", "only", "done", 0)]
    conn.executemany("INSERT INTO messages (conversation_id, position, role, content, status, pinned, created_at, "
                     "meta_json) VALUES (?, ?, ?, ?, ?, ?, 150.0, '{\"k\": 1}')", rows)
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()


def test_a_v2_database_becomes_a_tree_without_losing_anything(tmp_path: Path):
    old = tmp_path / "v2.db"
    make_v2(old)
    with ConversationStore(old) as s:
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        msgs = s.messages(1)
        assert [(m.role, m.content, m.status, m.pinned, m.position, m.meta) for m in msgs] == [
            ("user", "q1", "done", False, 0, {"k": 1}), ("assistant", "a1", "stopped", True, 1, {"k": 1}),
            ("user", "q2", "done", False, 2, {"k": 1}), ("assistant", "a2", "interrupted", False, 3, {"k": 1})]
        assert [m.parent_id for m in msgs] == [None] + [m.id for m in msgs[:-1]]
        assert [m.content for m in s.messages(2)] == ["only"] and s.get_conversation(2).settings == {"window": 64}
        # the migrated file takes versions
        v2 = s.append_message(1, "assistant", "a2, again", parent_id=msgs[2].id)
        assert (v2.version, v2.versions, v2.position) == (2, 2, 3)
        migrated = columns(s._conn, "messages")
    with ConversationStore(tmp_path / "fresh.db") as fresh:
        assert columns(fresh._conn, "messages") == migrated
    with ConversationStore(old) as s:  # and it survives a reopen
        assert [m.content for m in s.messages(1)][-1] == "a2, again"
        assert [m.content for m in s.versions(v2.id)] == ["a2", "a2, again"]


def test_versions_fork_and_the_shown_branch(store: ConversationStore):
    c = store.create_conversation()
    q1 = store.append_message(c.id, "user", "q1")
    a1 = store.append_message(c.id, "assistant", "a1")
    store.append_message(c.id, "user", "q2")
    store.append_message(c.id, "assistant", "a2")
    q1b = store.append_message(c.id, "user", "q1 edited", parent_id=None)  # an edit of the first message
    store.append_message(c.id, "assistant", "b1")
    assert [m.content for m in store.messages(c.id)] == ["q1 edited", "b1"]
    assert [(m.version, m.versions) for m in store.messages(c.id)] == [(2, 2), (1, 1)]
    store.show_version(q1.id)  # the old branch, whole
    assert [m.content for m in store.messages(c.id)] == ["q1", "a1", "q2", "a2"]
    assert len(store.all_messages(c.id)) == 6
    assert store.delete_message(a1.id) == 3  # a reply with what follows it
    assert [m.content for m in store.messages(c.id)] == ["q1"]
    store.show_version(q1b.id)
    doc = json.loads(store.export_json(c.id, all_versions=True))
    assert [m["content"] for m in doc["messages"]] == ["q1 edited", "b1"]
    assert sorted(m["content"] for m in doc["versions"]) == ["b1", "q1", "q1 edited"]
    assert "versions" not in json.loads(store.export_json(c.id))
    with pytest.raises(StoreError):
        store.append_message(c.id, "user", "x", parent_id=10_000)
