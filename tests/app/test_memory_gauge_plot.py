"""The memory gauge's chart: its lines do not run through the values written on it."""
from __future__ import annotations

from PySide6.QtGui import QColor, QFontMetrics, QPalette

from app.memory_gauge import MemoryGauge
from app.memory_words import approx_words as words, fmt_bytes


def _near(a: QColor, b: QColor, tol: int = 60) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < tol


def test_the_lines_pass_behind_the_values_not_through_them(qtbot):
    """The speed and the text seen start at zero, the chart's bottom, where "473 MiB" and
    "fastest ~100 words/s" are written: drawn through them, line and label were hard to read."""
    g = MemoryGauge()
    qtbot.addWidget(g)
    g.resize(300, g.height())
    # a chat's first seconds: speed and text seen climbing from zero, memory level
    g.history = [(float(t), 4.7e8, min(100.0, 25.0 * t), 40.0 * t) for t in range(12)]
    img = g.grab().toImage()
    fm = QFontMetrics(g.font())
    lh = fm.height()
    line = g.palette().color(QPalette.ColorRole.Highlight)  # (the speed's colour)
    bottom = g.height() - 4  # (the plot's rect ends 4 px above the widget's bottom)
    strip = range(bottom - lh - 1, bottom - 1)  # (the values' line)
    x0, x1 = 10, g.width() - 10  # (the text's inset: 6 for the gauge, 4 for the plot)
    left = range(x0, x0 + fm.horizontalAdvance(fmt_bytes(4.7e8)))
    right = range(x1 - fm.horizontalAdvance(f"fastest {words(100)} words/s"), x1)
    hits = [(x, y) for y in strip for x in (*left, *right) if _near(img.pixelColor(x, y), line)]
    assert not hits, hits[:10]
    # the speed's line is drawn, up to the value it passes behind: the check above is not
    # passing on an empty chart
    assert any(_near(img.pixelColor(x, y), line) for y in range(strip[0] - 4, strip[0]) for x in left)


def test_a_rows_label_stops_short_of_its_value(qtbot):
    """At 1280x800 "Recent text the model sees" ran into "~1,100 of ~3,100 words": the label is
    cut short with "…", the value is whole, and a label that fits is left as it is."""
    from app.memory_gauge import fit_left

    g = MemoryGauge()
    qtbot.addWidget(g)
    fm = QFontMetrics(g.font())
    label, value = "Recent text the model sees", "~1,100 of ~3,100 words"
    width = fm.horizontalAdvance(label) + fm.horizontalAdvance(value) - 20  # (they overlap by 20 px)
    cut = fit_left(fm, label, value, width)
    assert cut.endswith("…") and label.startswith(cut[:-1])
    assert fm.horizontalAdvance(cut) + fm.horizontalAdvance(value) < width
    assert fit_left(fm, label, value, width + 40) == label
