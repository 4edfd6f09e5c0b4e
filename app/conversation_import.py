"""Reading a conversation back from Pinwheel's own exports (JSON, and the Markdown export).

Pure Python, no Qt: the file is read as text and checked field by field; nothing in it is
executed, evaluated or fetched (json.loads and string matching only). Every way a file can be
wrong is an :class:`ImportProblem` whose ``str()`` is one plain sentence naming the file.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.errors import PinwheelError

from .store import ROLES, STATUSES

MAX_BYTES = 64 * 1024 * 1024  # far beyond any chat; keeps a wrong file from filling memory
MAX_MESSAGES = 100_000
TITLE_CHARS = 200
FORMAT = "pinwheel-conversation"
KNOWN_VERSION = 1


class ImportProblem(PinwheelError):
    """The file can't be imported; ``str()`` says why in one line."""


@dataclass(frozen=True)
class ImportedConversation:
    title: str
    settings: dict
    messages: list[dict]  # for ConversationStore.import_conversation, parents before children


def read_conversation(path: str | Path) -> ImportedConversation:
    """Read and check an export; raises ImportProblem for anything that is not one."""
    path = Path(path)
    name = path.name
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ImportProblem(f"Can't import {name}: at {size / 2**20:,.0f} MiB it is too large to be a "
                                "Pinwheel conversation export.")
        data = path.read_bytes()
    except OSError as exc:
        raise ImportProblem(f"Can't read {name}: {exc.strerror or exc}.") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"Can't import {name}: it is not a text file (not UTF-8), so not a Pinwheel "
                            "export.") from exc
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" or stripped.startswith("{"):
        return parse_json(text, name)
    if path.suffix.lower() in (".md", ".markdown", ".txt") or stripped.startswith("# "):
        return parse_markdown(text, name, fallback_title=path.stem)
    raise ImportProblem(f"Can't import {name}: Pinwheel imports its own exports, a .json or .md file.")


# --------------------------------------------------------------------------- JSON


def parse_json(text: str, name: str = "the file") -> ImportedConversation:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
        raise ImportProblem(f"Can't import {name}: it is not valid JSON{where}.") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ImportProblem(f"Can't import {name}: it is JSON, but not a Pinwheel conversation export "
                            f"(it lacks \"format\": \"{FORMAT}\").")
    version = doc.get("version", 1)
    if not isinstance(version, int) or version > KNOWN_VERSION:
        raise ImportProblem(f"Can't import {name}: it was written by a newer Pinwheel (export version "
                            f"{version!r}); update Pinwheel to import it.")
    title = _title(doc.get("title"), name)
    settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
    if "versions" in doc:
        messages = _tree(doc["versions"], name)
    else:
        rows = doc.get("messages")
        if not isinstance(rows, list):
            raise ImportProblem(f"Can't import {name}: its \"messages\" is missing or not a list.")
        messages = [dict(_message(r, i, name), key=i, parent=i - 1 if i else None) for i, r in enumerate(rows)]
    if not messages:
        raise ImportProblem(f"Can't import {name}: it holds no messages.")
    if len(messages) > MAX_MESSAGES:
        raise ImportProblem(f"Can't import {name}: {len(messages):,} messages is more than Pinwheel imports "
                            f"({MAX_MESSAGES:,}).")
    return ImportedConversation(title, settings, messages)


def _title(value: Any, name: str) -> str:
    title = " ".join(value.split()) if isinstance(value, str) else ""
    return (title or Path(name).stem or "Imported chat")[:TITLE_CHARS]


def _message(row: Any, i: int, name: str) -> dict:
    """One message, checked: a known role, text content, a known status, a true/false pin."""
    where = f"Can't import {name}: message {i + 1}"
    if not isinstance(row, dict):
        raise ImportProblem(f"{where} is not an object with a role and content.")
    role = row.get("role")
    if role not in ROLES:
        raise ImportProblem(f"{where} has the role {str(role)[:20]!r}; a message is from the user, the "
                            "assistant or the system.")
    content = row.get("content")
    if not isinstance(content, str):
        raise ImportProblem(f"{where} has no text (its \"content\" is not a string).")
    status = row.get("status", "done")
    if status not in STATUSES:
        raise ImportProblem(f"{where} has an unknown status {str(status)[:20]!r}.")
    pinned = row.get("pinned", False)
    if not isinstance(pinned, bool):
        raise ImportProblem(f"{where} has \"pinned\" {str(pinned)[:20]!r}, not true or false.")
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    return {"role": role, "content": content.replace("\x00", ""),
            # a reply still streaming when it was exported did not finish: kept, marked so
            "status": "interrupted" if status == "streaming" else status,
            "pinned": pinned, "meta": meta, "created_at": _time(row.get("created_at"))}


def _time(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None
    except ValueError:
        return None


def _tree(rows: Any, name: str) -> list[dict]:
    """Every version, each naming its parent by the export's ids; checked to be a tree."""
    if not isinstance(rows, list):
        raise ImportProblem(f"Can't import {name}: its \"versions\" is not a list.")
    out, seen = [], set()
    for i, row in enumerate(rows):
        m = _message(row, i, name)
        key, parent = row.get("id"), row.get("parent")
        if not isinstance(key, int) or key in seen:
            raise ImportProblem(f"Can't import {name}: version {i + 1} has a missing or repeated id.")
        if parent is not None and parent not in seen:
            raise ImportProblem(f"Can't import {name}: version {i + 1} follows a message that is not before it.")
        seen.add(key)
        out.append(dict(m, key=key, parent=parent, shown=bool(row.get("shown", True))))
    _one_shown_per_group(out)
    return out


def _one_shown_per_group(messages: list[dict]) -> None:
    """Exactly one version shown among siblings (the last marked one, else the newest)."""
    groups: dict[Any, list[dict]] = {}
    for m in messages:
        groups.setdefault(m["parent"], []).append(m)
    for group in groups.values():
        chosen = [m for m in group if m["shown"]] or group
        for m in group:
            m["shown"] = m is chosen[-1]


# --------------------------------------------------------------------------- Markdown

# the export's heading of a message: "## Assistant · stopped · pinned"
_HEADING = re.compile(r"^## (User|Assistant|System)((?: · (?:done|streaming|interrupted|stopped|pinned))*)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def parse_markdown(text: str, name: str = "the file", fallback_title: str = "") -> ImportedConversation:
    lines = text.splitlines()
    title = lines[0][2:] if lines and lines[0].startswith("# ") else fallback_title
    messages: list[dict] = []
    body: list[str] = []
    fence = None

    def close() -> None:
        if messages:
            content = "\n".join(body).strip("\n")
            messages[-1]["content"] = "" if content == "*(empty)*" else content

    for line in lines[1:]:
        opened = _FENCE.match(line)
        if fence is None and (m := _HEADING.match(line)):
            close()
            tags = m.group(2).split(" · ")[1:]
            status = next((t for t in tags if t in STATUSES), "done")
            messages.append({"role": m.group(1).lower(), "content": "",
                             "status": "interrupted" if status == "streaming" else status,
                             "pinned": "pinned" in tags, "meta": {}, "created_at": None})
            body = []
            continue
        if opened:  # headings inside a code block are the message's text, not a new message
            fence = None if fence == opened.group(1) else (fence or opened.group(1))
        body.append(line)
    close()
    if not messages:
        raise ImportProblem(f"Can't import {name}: it has no messages in the form Pinwheel exports "
                            "(\"## User\" and \"## Assistant\" headings).")
    if len(messages) > MAX_MESSAGES:
        raise ImportProblem(f"Can't import {name}: it holds more messages than Pinwheel imports ({MAX_MESSAGES:,}).")
    out = [dict(m, key=i, parent=i - 1 if i else None) for i, m in enumerate(messages)]
    return ImportedConversation(_title(title, name), {}, out)


__all__ = ["ImportProblem", "ImportedConversation", "read_conversation", "parse_json", "parse_markdown"]
