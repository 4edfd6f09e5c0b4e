"""The About box's text and the window's icon."""
from __future__ import annotations

import html


def about_text(model: str = "") -> str:
    """The About box: the one version number (engine/version.py) and what is running."""
    from app.identity import get_version

    lines = [
        f"<h3>Pinwheel {get_version()}</h3>",
        "<p>Offline chat with a local language model on a bounded KV cache: pinned sink "
        "tokens plus a sliding window, so memory stays constant however long you chat.</p>",
    ]
    if model:
        lines.append(f"<p>Model: {html.escape(model)}</p>")
    lines.append("<p>Apache-2.0 licence.</p>")
    return "".join(lines)


def app_icon():
    """The packaged icon (every size), or Qt's default where the package has none."""
    from PySide6.QtGui import QIcon

    try:
        from .desktop_integration import app_icon as packaged_icon

        return packaged_icon()
    except (ImportError, OSError, ValueError):  # no packaged icons: Qt's default
        return QIcon()
