"""Conversation storage: one SQLite file, the only place a chat lives.

Pure Python (sqlite3 + platformdirs); never imports Qt or JAX.

Durability model
----------------
* WAL journal, ``synchronous=NORMAL``: a committed transaction survives the process
  being killed (SIGKILL, crash); a power cut may lose the last few commits but never
  corrupts the file.
* Every write is one short ``BEGIN IMMEDIATE`` transaction; any failure rolls it back,
  so the data on disk is always the state after the last successful call.
* A reply being generated is stored with status ``'streaming'`` and rewritten as it
  grows (``update_message``); ``finish_message`` gives it its final status.  When the
  database is opened and no other Pinwheel instance has it open, every ``'streaming'``
  row left behind by a crash becomes ``'interrupted'`` (kept, never deleted).
* Several instances may share the file: ``busy_timeout`` makes writers queue instead
  of failing, and a shared ``flock`` on ``<db>.lock`` tells an opening instance whether
  another one is alive (then its 'streaming' rows may be live and are left alone).

Schema versions (``PRAGMA user_version``)
-----------------------------------------
* v1: messages without ``status`` / ``pinned``.
* v2: adds ``status`` (CHECK-constrained) and ``pinned``, and a partial index on
  streaming rows.
* v3 (current): a conversation is a tree.  ``parent_id`` is the message a message answers
  or follows (NULL for the first); messages with one parent are *versions* of each other
  (Regenerate, an edit), and ``shown`` marks the version on screen, one per sibling group.
  ``position`` is a message's depth (0, 1, 2 ... along its branch).  The shown branch is
  followed from the root through the shown versions; :meth:`ConversationStore.messages`
  returns it, so a caller that knows nothing of versions sees the conversation as before.
Opening an older file migrates it in place, in one transaction (v2 -> v3 rebuilds the
messages table: each message's parent is the one before it, every message shown).

Every failure a user can cause (read-only folder, full disk, damaged or foreign file,
newer schema) is raised as :class:`StoreError`, whose ``str()`` is one line saying what
happened and what to do.  Misuse by the caller (an unknown role or status) raises
``ValueError``.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import platformdirs

from engine.errors import PinwheelError

try:  # POSIX only; elsewhere every opener recovers streaming rows
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "SCHEMA_VERSION",
    "ROLES",
    "STATUSES",
    "FINAL_STATUSES",
    "StoreError",
    "Conversation",
    "Message",
    "LAST",
    "ConversationStore",
    "default_data_dir",
    "default_db_path",
]

APP_NAME = "pinwheel"
DB_FILENAME = "conversations.db"
SCHEMA_VERSION = 3

ROLES = ("system", "user", "assistant")
STATUSES = ("done", "streaming", "interrupted", "stopped")
FINAL_STATUSES = ("done", "stopped", "interrupted")

# sqlite3 primary result codes (extended codes keep these in their low byte)
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


# --------------------------------------------------------------------------- schema

_SCHEMA_V1 = (
    """CREATE TABLE conversations (
        id            INTEGER PRIMARY KEY,
        title         TEXT    NOT NULL,
        created_at    REAL    NOT NULL,
        updated_at    REAL    NOT NULL,
        settings_json TEXT    NOT NULL DEFAULT '{}'
    )""",
    """CREATE TABLE messages (
        id              INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position        INTEGER NOT NULL,
        role            TEXT    NOT NULL,
        content         TEXT    NOT NULL,
        created_at      REAL    NOT NULL,
        meta_json       TEXT    NOT NULL DEFAULT '{}',
        UNIQUE (conversation_id, position)
    )""",
    "CREATE INDEX conversations_by_update ON conversations(updated_at)",
)

_STATUS_CHECK = "CHECK (status IN ('done', 'streaming', 'interrupted', 'stopped'))"
_ROLE_CHECK = "CHECK (role IN ('system', 'user', 'assistant'))"

_SCHEMA_V2 = (
    """CREATE TABLE conversations (
        id            INTEGER PRIMARY KEY,
        title         TEXT    NOT NULL,
        created_at    REAL    NOT NULL,
        updated_at    REAL    NOT NULL,
        settings_json TEXT    NOT NULL DEFAULT '{}'
    )""",
    f"""CREATE TABLE messages (
        id              INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position        INTEGER NOT NULL,
        role            TEXT    NOT NULL,
        content         TEXT    NOT NULL,
        status          TEXT    NOT NULL DEFAULT 'done' {_STATUS_CHECK},
        pinned          INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        created_at      REAL    NOT NULL,
        meta_json       TEXT    NOT NULL DEFAULT '{{}}',
        UNIQUE (conversation_id, position)
    )""",
    "CREATE INDEX conversations_by_update ON conversations(updated_at)",
    "CREATE INDEX messages_streaming ON messages(id) WHERE status = 'streaming'",
)


def _messages_v3(table: str) -> str:
    # parent_id has no FOREIGN KEY on purpose: a cascade down a long chain counts as trigger
    # recursion (SQLite stops at 1,000 levels); subtrees are deleted with a recursive query.
    return f"""CREATE TABLE {table} (
        id              INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id       INTEGER,
        position        INTEGER NOT NULL,
        role            TEXT    NOT NULL,
        content         TEXT    NOT NULL,
        status          TEXT    NOT NULL DEFAULT 'done' {_STATUS_CHECK},
        pinned          INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        shown           INTEGER NOT NULL DEFAULT 1 CHECK (shown IN (0, 1)),
        created_at      REAL    NOT NULL,
        meta_json       TEXT    NOT NULL DEFAULT '{{}}'
    )"""


_MESSAGE_INDEXES_V3 = (
    "CREATE INDEX messages_streaming ON messages(id) WHERE status = 'streaming'",
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, position)",
    "CREATE INDEX messages_by_parent ON messages(parent_id)",
)

_SCHEMA_V3 = (_SCHEMA_V2[0], _messages_v3("messages"), _SCHEMA_V2[2]) + _MESSAGE_INDEXES_V3


def _migrate_v1_to_v2(conn: sqlite3.Connection) -> None:
    conn.execute(f"ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT 'done' {_STATUS_CHECK}")
    conn.execute("ALTER TABLE messages ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1))")
    conn.execute("CREATE INDEX messages_streaming ON messages(id) WHERE status = 'streaming'")


def _migrate_v2_to_v3(conn: sqlite3.Connection) -> None:
    """The list becomes a chain: each message's parent is the one before it, all shown.
    SQLite can't drop v2's UNIQUE (conversation_id, position), so the table is rebuilt."""
    conn.execute(_messages_v3("messages_v3"))
    conn.execute(
        """INSERT INTO messages_v3 (id, conversation_id, parent_id, position, role, content, status, pinned,
                                    shown, created_at, meta_json)
           SELECT id, conversation_id,
                  LAG(id) OVER (PARTITION BY conversation_id ORDER BY position),
                  ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY position) - 1,
                  role, content, status, pinned, 1, created_at, meta_json
           FROM messages""")
    conn.execute("DROP TABLE messages")
    conn.execute("ALTER TABLE messages_v3 RENAME TO messages")
    for stmt in _MESSAGE_INDEXES_V3:
        conn.execute(stmt)


#: MIGRATIONS[v] upgrades a database at schema v to v + 1 (run inside one transaction).
MIGRATIONS = {1: _migrate_v1_to_v2, 2: _migrate_v2_to_v3}
#: DDL of every schema version, for tests and tools that need an old database.
SCHEMAS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}


# --------------------------------------------------------------------------- rows


class StoreError(PinwheelError):
    """The conversation database can't be used or written; ``str()`` is one line.

    ``kind`` is one of ``"full"``, ``"readonly"``, ``"corrupt"``, ``"newer"``,
    ``"busy"``, ``"io"``, ``"missing"``, ``"closed"``, ``"other"``.
    """

    def __init__(self, message: str, *, kind: str = "other", path: str | Path | None = None):
        super().__init__(" ".join(str(message).split()))
        self.kind = kind
        self.path = None if path is None else str(path)


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created_at: float  # unix seconds
    updated_at: float  # unix seconds; bumped whenever its messages change
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    position: int  # 0, 1, 2 ... within the conversation
    role: str  # 'system' | 'user' | 'assistant'
    content: str
    status: str  # 'done' | 'streaming' | 'interrupted' | 'stopped'
    pinned: bool
    created_at: float
    meta: dict[str, Any] = field(default_factory=dict)
    parent_id: int | None = None  # the message it follows (None: the first)
    version: int = 1  # which of its versions this is (1-based, oldest first) ...
    versions: int = 1  # ... of how many (messages with the same parent)


#: append_message's default parent: the last message of the shown branch
LAST = object()


def _loads_obj(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _fold(text: Any) -> str:
    return text.casefold() if isinstance(text, str) else ""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


_CONV_COLS = "id, title, created_at, updated_at, settings_json"
_MSG_COLS = "id, conversation_id, position, role, content, status, pinned, created_at, meta_json, parent_id"


def _conv(row: tuple) -> Conversation:
    return Conversation(row[0], row[1], row[2], row[3], _loads_obj(row[4]))


def _msg(row: tuple, version: int = 1, versions: int = 1) -> Message:
    return Message(row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6]), row[7], _loads_obj(row[8]),
                   row[9], version, versions)


# The shown branch: from the shown root, through the shown version of each message's children.
_BRANCH = """WITH RECURSIVE branch(id) AS (
        SELECT id FROM messages WHERE conversation_id = ?1 AND parent_id IS NULL AND shown = 1
        UNION ALL
        SELECT m.id FROM messages m JOIN branch b ON m.parent_id = b.id WHERE m.shown = 1)"""
_SUBTREE = """WITH RECURSIVE sub(id) AS (
        SELECT ?1 UNION ALL SELECT m.id FROM messages m JOIN sub s ON m.parent_id = s.id)"""


# --------------------------------------------------------------------------- paths


def default_data_dir() -> Path:
    """The per-user data folder, e.g. ``~/.local/share/pinwheel`` on Linux."""
    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def default_db_path(data_dir: str | Path | None = None) -> Path:
    """``<data_dir>/conversations.db`` (``data_dir`` defaults to :func:`default_data_dir`)."""
    return Path(data_dir if data_dir is not None else default_data_dir()) / DB_FILENAME


# --------------------------------------------------------------------------- store


class ConversationStore:
    """All conversations of one user, in one SQLite file.

    Thread-safe (one connection behind a lock); several instances, in one process or
    many, may open the same file.  ``read_only=True`` opens an existing, current-schema
    database without ever writing to it (no migration, no crash recovery); every write
    then raises :class:`StoreError` (kind ``"readonly"``).
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 5.0, read_only: bool = False):
        self._memory = str(path) == ":memory:"
        self.path = Path(path) if not self._memory else Path(":memory:")
        self.read_only = bool(read_only)
        self.busy_timeout_s = float(busy_timeout_s)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        #: how many 'streaming' rows this open turned into 'interrupted'
        self.recovered_messages = 0
        try:
            self._conn = self._connect()
            self._ensure_schema()
            if not self.read_only:
                self.recovered_messages = self._recover_streaming()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def _connect(self) -> sqlite3.Connection:
        action = "opening the conversation database"
        if self._memory:
            target, uri = ":memory:", False
        elif self.read_only:
            if not self.path.is_file():
                raise StoreError(
                    f"The conversation database {self.path} doesn't exist; "
                    "open it once with write access to create it.",
                    kind="missing", path=self.path)
            target = "file:" + urllib.parse.quote(self.path.absolute().as_posix(), safe="/:") + "?mode=ro"
            uri = True
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._os_error(exc, action) from exc
            target, uri = str(self.path), False
        try:
            conn = sqlite3.connect(target, uri=uri, timeout=self.busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._translate(exc, action) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            # the first real read: fails here for a file that isn't a database
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            conn.create_function("pw_fold", 1, _fold, deterministic=True)
        except sqlite3.Error as exc:
            conn.close()
            raise self._translate(exc, action) from exc
        return conn

    def _foreign_tables(self, conn: sqlite3.Connection) -> list[str]:
        return sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))

    def _not_ours(self, tables: list[str]) -> StoreError:
        return StoreError(
            f"{self.path} is an SQLite file but not a Pinwheel conversation database "
            f"(it has tables {', '.join(tables[:5])}); move it aside or choose another data folder.",
            kind="corrupt", path=self.path)

    def _ensure_schema(self) -> None:
        # look before writing anything: a newer or foreign file is refused byte-for-byte intact
        with self._read("reading the database version") as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = self._foreign_tables(conn) if version == 0 else []
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The conversation database {self.path} was written by a newer Pinwheel "
                f"(schema {version}, this one knows up to {SCHEMA_VERSION}); update Pinwheel "
                "or choose another data folder.", kind="newer", path=self.path)
        if tables:
            raise self._not_ours(tables)
        if not self.read_only and not self._memory:
            with self._read("switching the database to WAL mode") as conn:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                conn.execute("PRAGMA synchronous = NORMAL")
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            raise StoreError(
                f"The conversation database {self.path} uses an older format (schema {version}); "
                "open it once with write access so Pinwheel can upgrade it.",
                kind="readonly", path=self.path)
        with self._write("upgrading the conversation database") as conn:
            # re-read inside the write lock: another instance may have just done it
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            if version == 0:
                tables = self._foreign_tables(conn)
                if tables:
                    raise self._not_ours(tables)
                for stmt in SCHEMAS[SCHEMA_VERSION]:
                    conn.execute(stmt)
            else:
                for v in range(version, SCHEMA_VERSION):
                    MIGRATIONS[v](conn)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _acquire_instance_lock(self) -> bool:
        """Hold a shared flock on ``<db>.lock``; True when no other instance holds one."""
        if fcntl is None or self._memory:
            return True
        try:
            fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return True  # can't tell: behave as if alone (the pre-lock behaviour)
        self._lock_fd = fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True  # caller downgrades to shared after recovery
        except OSError:
            pass
        # another instance is alive; take a shared lock (it may be mid-recovery: wait briefly)
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return False
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)

    def _recover_streaming(self) -> int:
        alone = self._acquire_instance_lock()
        try:
            if not alone:
                return 0  # another live instance may be streaming right now
            try:
                with self._write("recovering interrupted replies") as conn:
                    cur = conn.execute("UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'")
                    return cur.rowcount
            except StoreError as exc:
                if exc.kind in ("full", "busy", "io"):
                    return 0  # best effort: still open for reading; the next open retries
                raise
        finally:
            if alone and self._lock_fd is not None and fcntl is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_SH)

    def close(self) -> None:
        """Close the database (idempotent).  Later calls raise StoreError(kind='closed')."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            fd, self._lock_fd = self._lock_fd, None
            if fd is not None:
                try:
                    os.close(fd)  # releases the flock
                except OSError:
                    pass

    def __enter__(self) -> "ConversationStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else ("read-only" if self.read_only else "open")
        return f"ConversationStore({str(self.path)!r}, {state})"

    # ------------------------------------------------------------------ plumbing

    def _require_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"The conversation database {self.path} is closed.", kind="closed", path=self.path)
        return self._conn

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._require_conn()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._translate(exc, action) from exc

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One short transaction: committed on success, rolled back on any failure."""
        with self._lock:
            conn = self._require_conn()
            if self.read_only:
                raise StoreError(
                    f"Can't save: the conversation database {self.path} was opened read-only.",
                    kind="readonly", path=self.path)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise
            except sqlite3.Error as exc:
                raise self._translate(exc, action) from exc

    def _translate(self, exc: sqlite3.Error, action: str) -> StoreError:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(exc).lower()
        where = self.path
        if primary == _SQLITE_FULL or "disk is full" in text:
            return StoreError(
                f"The disk is full: couldn't finish {action} in {where}; free some disk space and "
                "try again (your saved conversations are unchanged).", kind="full", path=where)
        if primary in (_SQLITE_READONLY, _SQLITE_PERM) or "readonly" in text or "read-only" in text:
            return StoreError(
                f"Can't write to the conversation database {where}: the file or its folder is "
                "read-only; fix its permissions or choose another data folder.",
                kind="readonly", path=where)
        if primary == _SQLITE_CANTOPEN or "unable to open" in text:
            return StoreError(
                f"Can't open the conversation database {where}: its folder is missing or not "
                "writable; fix the folder's permissions or choose another data folder.",
                kind="readonly", path=where)
        if primary in (_SQLITE_NOTADB, _SQLITE_CORRUPT) or "not a database" in text or "malformed" in text:
            return StoreError(
                f"The conversation database {where} is damaged or isn't a Pinwheel database; "
                "move it aside (Pinwheel will start a new one) or restore it from a backup.",
                kind="corrupt", path=where)
        if primary in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in text:
            return StoreError(
                f"The conversation database {where} is busy (another Pinwheel window is using it) "
                f"while {action}; try again in a moment.", kind="busy", path=where)
        if primary == _SQLITE_IOERR or "disk i/o" in text:
            return StoreError(
                f"A disk error stopped {action} in {where} ({exc}); check the disk and try again.",
                kind="io", path=where)
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in text:
            return StoreError(f"The conversation database {where} is closed.", kind="closed", path=where)
        return StoreError(f"Conversation database error while {action} ({where}): {exc}.",
                          kind="other", path=where)

    def _os_error(self, exc: OSError, action: str) -> StoreError:
        import errno

        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return StoreError(
                f"Can't create the data folder {self.path.parent}: permission denied or read-only; "
                "fix its permissions or choose another data folder.", kind="readonly", path=self.path)
        if exc.errno == errno.ENOSPC:
            return StoreError(
                f"The disk is full: can't create the data folder {self.path.parent}; free some space "
                "and try again.", kind="full", path=self.path)
        return StoreError(f"Can't prepare the data folder {self.path.parent} while {action}: "
                          f"{exc.strerror or exc}.", kind="io", path=self.path)

    def _missing(self, what: str, ident: int) -> StoreError:
        return StoreError(f"That {what} (id {ident}) no longer exists; it may have been deleted "
                          "in another Pinwheel window.", kind="missing", path=self.path)

    @staticmethod
    def _check_role(role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)} (got {role!r})")

    # ------------------------------------------------------------------ conversations

    def create_conversation(self, title: str = "New chat", settings: dict | None = None) -> Conversation:
        now = time.time()
        settings_json = json.dumps(dict(settings or {}))
        with self._write("creating a conversation") as conn:
            cur = conn.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings_json) VALUES (?, ?, ?, ?)",
                (str(title), now, now, settings_json))
            row = conn.execute(f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?", (cur.lastrowid,)).fetchone()
        return _conv(row)

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._write("renaming a conversation") as conn:
            cur = conn.execute("UPDATE conversations SET title = ? WHERE id = ?", (str(title), conversation_id))
            if cur.rowcount == 0:
                raise self._missing("conversation", conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its messages (no-op when it doesn't exist)."""
        with self._write("deleting a conversation") as conn:
            conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        with self._read("reading a conversation") as conn:
            row = conn.execute(f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?",
                               (conversation_id,)).fetchone()
        return None if row is None else _conv(row)

    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest activity first; ``search`` matches title or any message, ignoring case."""
        needle = _fold(search).strip()
        with self._read("listing conversations") as conn:
            if not needle:
                rows = conn.execute(
                    f"SELECT {_CONV_COLS} FROM conversations ORDER BY updated_at DESC, id DESC").fetchall()
            else:
                rows = conn.execute(
                    f"""SELECT {_CONV_COLS} FROM conversations c
                        WHERE instr(pw_fold(c.title), ?1) > 0
                           OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                                      AND instr(pw_fold(m.content), ?1) > 0)
                        ORDER BY updated_at DESC, id DESC""", (needle,)).fetchall()
        return [_conv(r) for r in rows]

    def set_conversation_settings(self, conversation_id: int, settings: dict) -> None:
        """Replace the conversation's settings (memory plan, sampling ...) with ``settings``."""
        settings_json = json.dumps(dict(settings))
        with self._write("saving conversation settings") as conn:
            cur = conn.execute("UPDATE conversations SET settings_json = ? WHERE id = ?",
                               (settings_json, conversation_id))
            if cur.rowcount == 0:
                raise self._missing("conversation", conversation_id)

    # ------------------------------------------------------------------ messages

    def messages(self, conversation_id: int) -> list[Message]:
        """The shown branch, first message first, each with its version number among its siblings."""
        with self._read("reading messages") as conn:
            rows = conn.execute(f"{_BRANCH} SELECT {_MSG_COLS} FROM messages WHERE id IN (SELECT id FROM branch) "
                                "ORDER BY position", (conversation_id,)).fetchall()
            siblings = self._sibling_ids(conn, conversation_id)
        return [_msg(r, *self._version_of(siblings, r[9], r[0])) for r in rows]

    def all_messages(self, conversation_id: int) -> list[Message]:
        """Every message of every branch, oldest first (each parent before its children)."""
        with self._read("reading messages") as conn:
            rows = conn.execute(f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = ? ORDER BY id",
                                (conversation_id,)).fetchall()
        siblings: dict[int | None, list[int]] = {}
        for r in rows:
            siblings.setdefault(r[9], []).append(r[0])
        return [_msg(r, *self._version_of(siblings, r[9], r[0])) for r in rows]

    def shown_ids(self, conversation_id: int) -> set[int]:
        """The ids of the versions shown in each sibling group (for an export of every version)."""
        with self._read("reading messages") as conn:
            return {r[0] for r in conn.execute("SELECT id FROM messages WHERE conversation_id = ? AND shown = 1",
                                               (conversation_id,))}

    @staticmethod
    def _sibling_ids(conn: sqlite3.Connection, conversation_id: int) -> dict[int | None, list[int]]:
        groups: dict[int | None, list[int]] = {}
        for mid, parent in conn.execute("SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY id",
                                        (conversation_id,)):
            groups.setdefault(parent, []).append(mid)
        return groups

    @staticmethod
    def _version_of(groups: dict, parent: int | None, mid: int) -> tuple[int, int]:
        group = groups.get(parent) or [mid]
        return (group.index(mid) + 1 if mid in group else 1), len(group)

    def versions(self, message_id: int) -> list[Message]:
        """The message and its siblings (its versions), oldest first."""
        with self._read("reading versions") as conn:
            row = conn.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise self._missing("message", message_id)
            rows = conn.execute(f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = ? AND parent_id IS ? "
                                "ORDER BY id", row).fetchall()
        return [_msg(r, k + 1, len(rows)) for k, r in enumerate(rows)]

    def get_message(self, message_id: int) -> Message | None:
        with self._read("reading a message") as conn:
            row = conn.execute(f"SELECT {_MSG_COLS} FROM messages WHERE id = ?", (message_id,)).fetchone()
        return None if row is None else _msg(row)

    def _leaf(self, conn: sqlite3.Connection, conversation_id: int) -> tuple[int, int] | None:
        """(id, position) of the shown branch's last message, or None for an empty conversation."""
        return conn.execute(f"{_BRANCH} SELECT m.id, m.position FROM messages m JOIN branch b ON m.id = b.id "
                            "ORDER BY m.position DESC LIMIT 1", (conversation_id,)).fetchone()

    def append_message(self, conversation_id: int, role: str, content: str, status: str = "done",
                       pinned: bool = False, meta: dict | None = None, parent_id: Any = LAST) -> Message:
        """Add a message after ``parent_id`` (default: the shown branch's last message; None: a
        first message).  Where that parent already has a child, the new message is another
        version of it (a regenerated reply, an edited question) and becomes the one shown."""
        self._check_role(role)
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)} (got {status!r})")
        meta_json = json.dumps(dict(meta or {}))
        now = time.time()
        with self._write("saving a message") as conn:
            if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
                raise self._missing("conversation", conversation_id)
            if parent_id is LAST:
                leaf = self._leaf(conn, conversation_id)
                parent_id, position = (leaf[0], leaf[1] + 1) if leaf else (None, 0)
            elif parent_id is None:
                position = 0
            else:
                prow = conn.execute("SELECT position FROM messages WHERE id = ? AND conversation_id = ?",
                                    (parent_id, conversation_id)).fetchone()
                if prow is None:
                    raise self._missing("message", parent_id)
                position = prow[0] + 1
            conn.execute("UPDATE messages SET shown = 0 WHERE conversation_id = ? AND parent_id IS ?",
                         (conversation_id, parent_id))
            cur = conn.execute(
                "INSERT INTO messages (conversation_id, parent_id, position, role, content, status, pinned, shown, "
                "created_at, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
                (conversation_id, parent_id, position, role, str(content), status, int(bool(pinned)), now,
                 meta_json))
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
            row = conn.execute(f"SELECT {_MSG_COLS} FROM messages WHERE id = ?", (cur.lastrowid,)).fetchone()
            n = conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND parent_id IS ?",
                             (conversation_id, parent_id)).fetchone()[0]
        return _msg(row, n, n)

    def show_version(self, message_id: int) -> None:
        """Make ``message_id`` the version shown among its siblings (its branch is then shown)."""
        with self._write("showing another version") as conn:
            row = conn.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?",
                               (message_id,)).fetchone()
            if row is None:
                raise self._missing("message", message_id)
            conn.execute("UPDATE messages SET shown = (id = ?) WHERE conversation_id = ? AND parent_id IS ?",
                         (message_id, *row))

    def update_message(self, message_id: int, content: str) -> None:
        """Replace a message's text (called a few times a second while a reply streams)."""
        with self._write("saving a reply") as conn:
            cur = conn.execute("UPDATE messages SET content = ? WHERE id = ?", (str(content), message_id))
            if cur.rowcount == 0:
                raise self._missing("message", message_id)
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = "
                         "(SELECT conversation_id FROM messages WHERE id = ?)", (time.time(), message_id))

    def finish_message(self, message_id: int, status: str = "done", content: str | None = None,
                       meta: dict | None = None) -> None:
        """Give a streamed reply its final status ('done', 'stopped' or 'interrupted').

        ``content`` and ``meta`` (merged into the message's), when given, are stored in the
        same transaction (the last tokens; whether the reply was cut short).
        """
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {', '.join(FINAL_STATUSES)} (got {status!r})")
        with self._write("finishing a reply") as conn:
            if content is None:
                cur = conn.execute("UPDATE messages SET status = ? WHERE id = ?", (status, message_id))
            else:
                cur = conn.execute("UPDATE messages SET status = ?, content = ? WHERE id = ?",
                                   (status, str(content), message_id))
            if cur.rowcount == 0:
                raise self._missing("message", message_id)
            if meta:
                self._merge_meta(conn, message_id, meta)
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = "
                         "(SELECT conversation_id FROM messages WHERE id = ?)", (time.time(), message_id))

    def restart_message(self, message_id: int) -> None:
        """A finished reply is being extended (Continue): it streams again, its text kept."""
        with self._write("continuing a reply") as conn:
            cur = conn.execute("UPDATE messages SET status = 'streaming' WHERE id = ?", (message_id,))
            if cur.rowcount == 0:
                raise self._missing("message", message_id)

    @staticmethod
    def _merge_meta(conn: sqlite3.Connection, message_id: int, meta: dict) -> None:
        row = conn.execute("SELECT meta_json FROM messages WHERE id = ?", (message_id,)).fetchone()
        merged = {**_loads_obj(row[0] if row else None), **dict(meta)}
        conn.execute("UPDATE messages SET meta_json = ? WHERE id = ?", (json.dumps(merged), message_id))

    def set_message_meta(self, message_id: int, meta: dict) -> None:
        """Merge ``meta`` into the message's (its model label, whether it was cut short)."""
        with self._write("saving a message's details") as conn:
            if conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is None:
                raise self._missing("message", message_id)
            self._merge_meta(conn, message_id, meta)

    def set_pinned(self, message_id: int, pinned: bool) -> None:
        with self._write("pinning a message") as conn:
            cur = conn.execute("UPDATE messages SET pinned = ? WHERE id = ?", (int(bool(pinned)), message_id))
            if cur.rowcount == 0:
                raise self._missing("message", message_id)

    def _delete_subtree(self, conn: sqlite3.Connection, message_id: int) -> int:
        """Delete a message and everything after it on every branch; a sibling left behind
        becomes the version shown (the newest)."""
        row = conn.execute("SELECT conversation_id, parent_id, shown FROM messages WHERE id = ?",
                           (message_id,)).fetchone()
        if row is None:
            return 0
        # (DELETE first: the module reports rowcount only for a statement that starts with it)
        cur = conn.execute(f"DELETE FROM messages WHERE id IN ({_SUBTREE} SELECT id FROM sub)", (message_id,))
        if row[2]:
            conn.execute("UPDATE messages SET shown = 1 WHERE id = (SELECT max(id) FROM messages "
                         "WHERE conversation_id = ? AND parent_id IS ?)", row[:2])
        conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time(), row[0]))
        return cur.rowcount

    def delete_message(self, message_id: int) -> int:
        """Delete one version of a message with what follows it; returns how many went."""
        with self._write("deleting messages") as conn:
            return self._delete_subtree(conn, message_id)

    def delete_messages_from(self, conversation_id: int, position: int) -> int:
        """Delete the shown branch's message at ``position`` with everything after it.

        Returns how many were deleted.
        """
        with self._write("deleting messages") as conn:
            row = conn.execute(f"{_BRANCH} SELECT m.id FROM messages m JOIN branch b ON m.id = b.id "
                               "WHERE m.position = ?2", (conversation_id, int(position))).fetchone()
            return self._delete_subtree(conn, row[0]) if row else 0

    def import_conversation(self, title: str, settings: dict, messages: list[dict]) -> Conversation:
        """A new conversation holding ``messages`` (checked dicts: key, parent, role, content,
        status, pinned, shown, created_at, meta), written in one transaction: an import is
        whole or absent.  ``parent`` names an earlier message's ``key`` (None: a first one)."""
        now = time.time()
        with self._write("importing a conversation") as conn:
            cur = conn.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings_json) VALUES (?, ?, ?, ?)",
                (str(title), now, now, json.dumps(dict(settings or {}))))
            cid = cur.lastrowid
            ids: dict[Any, tuple[int, int]] = {}  # key -> (id, position)
            for m in messages:
                self._check_role(m["role"])
                parent = ids[m["parent"]] if m.get("parent") is not None else None
                r = conn.execute(
                    "INSERT INTO messages (conversation_id, parent_id, position, role, content, status, pinned, shown, "
                    "created_at, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (cid, parent[0] if parent else None, parent[1] + 1 if parent else 0, m["role"], m["content"],
                     m["status"], int(bool(m["pinned"])), int(bool(m.get("shown", True))),
                     float(m.get("created_at") or now), json.dumps(dict(m.get("meta") or {}))))
                ids[m["key"]] = (r.lastrowid, parent[1] + 1 if parent else 0)
            row = conn.execute(f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?", (cid,)).fetchone()
        return _conv(row)

    # ------------------------------------------------------------------ export

    def _conversation_or_raise(self, conversation_id: int) -> Conversation:
        conv = self.get_conversation(conversation_id)
        if conv is None:
            raise self._missing("conversation", conversation_id)
        return conv

    def export_markdown(self, conversation_id: int) -> str:
        """The shown branch as Markdown (Import reads this back)."""
        with self._lock:  # one consistent snapshot even with other threads writing
            conv = self._conversation_or_raise(conversation_id)
            msgs = self.messages(conversation_id)
        lines = [f"# {conv.title}", "",
                 f"*Exported from Pinwheel; started {_iso(conv.created_at)}, {len(msgs)} messages.*", ""]
        for m in msgs:
            tags = [m.role.capitalize()]
            if m.status != "done":
                tags.append(m.status)
            if m.pinned:
                tags.append("pinned")
            lines += [f"## {' · '.join(tags)}", "", m.content if m.content else "*(empty)*", ""]
        return "\n".join(lines)

    def export_json(self, conversation_id: int, all_versions: bool = False) -> str:
        """The shown branch as ``messages``; with ``all_versions``, every version of every
        message too, as ``versions`` (each with its ``id`` and its ``parent``'s, and whether it
        is the one ``shown``)."""
        with self._lock:
            conv = self._conversation_or_raise(conversation_id)
            msgs = self.messages(conversation_id)
            every = self.all_messages(conversation_id) if all_versions else []
            shown = self.shown_ids(conversation_id) if all_versions else set()

        def row(m: Message) -> dict:
            return {"position": m.position, "role": m.role, "content": m.content, "status": m.status,
                    "pinned": m.pinned, "created_at": _iso(m.created_at), "meta": m.meta}

        doc = {
            "format": "pinwheel-conversation",
            "version": 1,
            "title": conv.title,
            "created_at": _iso(conv.created_at),
            "updated_at": _iso(conv.updated_at),
            "settings": conv.settings,
            "messages": [row(m) for m in msgs],
        }
        if all_versions:
            doc["versions"] = [{"id": m.id, "parent": m.parent_id, "shown": m.id in shown, **row(m)} for m in every]
        return json.dumps(doc, ensure_ascii=False, indent=2)
