"""A conversation to a file and back: Export (Markdown, or JSON with every version) and Import
(a Pinwheel export becomes a new conversation, checked field by field by the controller).

Both ask for a file with the platform's dialog unless given a path (tests and tools give one),
and say what happened in the window's status line, or in its banner when a file fails.
"""
from __future__ import annotations

from pathlib import Path

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtWidgets import QFileDialog

from .folders import documents_folder


def export_conversation(win, conversation_id: int, fmt: str, path: str | None = None) -> str | None:
    """Export one conversation as `fmt` ("markdown" or "json"); returns the file written."""
    ext = "md" if fmt == "markdown" else "json"
    if path is None:
        conv = win._store(win.store.get_conversation, conversation_id)
        name = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in (conv.title if conv else "chat"))
        path, _ = QFileDialog.getSaveFileName(win, "Export conversation",
                                              str(Path(documents_folder()) / f"{name.strip() or 'chat'}.{ext}"),
                                              "Markdown (*.md)" if ext == "md" else "JSON (*.json)")
        if not path:
            return None
    # JSON carries every version (its "messages" are the branch shown); Markdown the branch shown
    text = win._store(win.store.export_markdown, conversation_id) if ext == "md" else \
        win._store(win.store.export_json, conversation_id, all_versions=True)
    if text is None:
        return None
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        win.show_error(f"Couldn't write {path}: {exc.strerror or exc}", "store")
        return None
    win.stageLabel.setText(f"Exported to {path}")
    return path


def import_conversation(win, path: str | None = None) -> int | None:
    """File → Import conversation: a Pinwheel export (JSON or Markdown) becomes a new chat."""
    if path is None:
        path, _ = QFileDialog.getOpenFileName(win, "Import a conversation", documents_folder(),
                                              "Pinwheel exports (*.json *.md);;All files (*)")
        if not path:
            return None
    conversation_id = win.controller.import_file(path)
    if conversation_id is not None:
        win.open_conversation(conversation_id)
        win.stageLabel.setText(f"Imported {Path(path).name}")
    return conversation_id
