"""Pinwheel's packaged data: the app icon, the stylesheets and the desktop entry template.

Everything here ships in the wheel as package data and in the PyInstaller bundle as data
files. Read it through these helpers (``importlib.resources``), never through paths
relative to the source tree: an installed Pinwheel has no source tree.

This module imports nothing but the standard library, so the launcher and the engine can
use it without pulling in Qt.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

ICON_NAME = "pinwheel"
ICON_SIZES = (16, 32, 48, 64, 128, 256)
THEMES = ("light", "dark")


def path(name: str) -> Traversable:
    """The packaged file ``name`` ("icons/pinwheel.svg", "styles/dark.qss", ...).

    Raises FileNotFoundError when there is no such file.
    """
    target = files(__name__)
    for part in name.split("/"):
        target = target.joinpath(part)
    if not target.is_file():
        raise FileNotFoundError(f"no packaged resource {name!r}")
    return target


def read_bytes(name: str) -> bytes:
    return path(name).read_bytes()


def read_text(name: str) -> str:
    return path(name).read_text(encoding="utf-8")


def icon_png(size: int) -> Traversable:
    """The app icon rendered at ``size`` x ``size`` pixels (one of ICON_SIZES)."""
    if size not in ICON_SIZES:
        raise ValueError(f"no {size}px icon; sizes are {ICON_SIZES}")
    return path(f"icons/{ICON_NAME}-{size}.png")


def icon_svg() -> Traversable:
    return path(f"icons/{ICON_NAME}.svg")


def stylesheet(theme: str) -> str:
    """The Qt stylesheet for ``theme`` ("light" or "dark")."""
    if theme not in THEMES:
        raise ValueError(f"unknown theme {theme!r}; themes are {THEMES}")
    return read_text(f"styles/{theme}.qss")


def desktop_template() -> str:
    """The freedesktop entry template; ``@EXEC@`` and ``@VERSION@`` are filled in on install."""
    return read_text("pinwheel.desktop.in")
