"""Where the window's file dialogs open: the user's documents, or their models folder."""
from __future__ import annotations

from pathlib import Path


def documents_folder() -> str:
    """Where a file dialog opens: the user's documents (or home), never the working folder."""
    from PySide6.QtCore import QStandardPaths

    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return docs if docs and Path(docs).is_dir() else str(Path.home())


def model_folder() -> str:
    """Open model…: the user's models folder when there is one, else the documents."""
    from engine.model_locator import user_models_dir

    d = user_models_dir()
    return str(d) if d.is_dir() else documents_folder()
