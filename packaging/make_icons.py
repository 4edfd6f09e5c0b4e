"""Render resources/icons/pinwheel.svg to the PNG sizes the app and the desktop entry use.

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icons.py

The PNGs are committed; run this again only after editing the SVG.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ICON_DIR = Path(__file__).resolve().parent.parent / "resources" / "icons"
sys.path.insert(0, str(ICON_DIR.parent.parent))

from resources import ICON_SIZES  # noqa: E402  (after the path tweak above)


def render(svg: Path, out_dir: Path, sizes=ICON_SIZES) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841  (QImage needs it)
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"invalid SVG: {svg}")
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        out = out_dir / f"pinwheel-{size}.png"
        if not image.save(str(out), "PNG"):
            raise SystemExit(f"could not write {out}")
        written.append(out)
    return written


if __name__ == "__main__":
    for path in render(ICON_DIR / "pinwheel.svg", ICON_DIR):
        print(path.relative_to(ICON_DIR.parent.parent))
